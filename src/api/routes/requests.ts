import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { requireCaller } from '../caller.ts';
import type { ApiContext } from '../context.ts';
import { clientOf } from '../clientAddress.ts';
import { ApiError } from '../errors.ts';
import { runListing, type ListingResult } from '../listing/run.ts';
import { RateLimiter } from '../rateLimit.ts';

export function requestRoutes(app: FastifyInstance, ctx: ApiContext) {
  // Validated and run in a listing worker with its own read-only connection: a heavy listing, or a
  // filter with hundreds of addresses to normalise, never blocks the node's event loop.
  const bounds = ctx.config.api.listing;
  // A caller (its API key, else its address) has at most api.listing.perCaller listings in progress (the pool counts them).
  const list = (req: FastifyRequest, query: Record<string, unknown>, v2: boolean, referrer?: string): Promise<ListingResult> => {
    const job = { query, authenticatedFor: req.apiCaller?.id, v2, referrer };
    return ctx.listings ? ctx.listings.run(job, req.apiCaller?.id ?? `ip:${clientOf(req.ip)}`) : Promise.resolve(runListing({ ...ctx, bounds }, job));
  };

  app.get('/requests/v3', async (req) => {
    requireCaller(req);
    const page = await list(req, (req.query ?? {}) as Record<string, unknown>, false);
    // The last page has no continuation (omitted, as the published type has it: an optional string).
    return {
      requests: page.records,
      ...(page.continuation ? { continuation: page.continuation } : {}),
      ...(page.total !== undefined ? { total: page.total } : {}),
    };
  });

  // v2: deprecated, throttled in monthly stages, then retired. Its headers go on every answer.
  const v2 = ctx.config.requestsV2;
  const at = (d: string) => Date.parse(d.length === 10 ? `${d}T00:00:00Z` : d);
  const deprecatedAt = at(v2.deprecatedAt);
  const throttledFrom = at(v2.throttledFrom);
  const sunsetAt = at(v2.sunsetAt);
  const limiters = v2.monthlyLimits.map((n) => new RateLimiter(n));
  // Unconfigured, the links are relative to the request's own address (RFC 8288 §3.1), never built from
  // its Host header: a client could name any host, and a cache in front would serve that link to others.
  const links = { successor: v2.successor ?? '/requests/v3', migrationGuide: v2.migrationGuide ?? '/requests/v2/migration-guide' };
  const stage = (now: number) => {
    const from = new Date(throttledFrom);
    const d = new Date(now);
    const months = (d.getUTCFullYear() - from.getUTCFullYear()) * 12 + d.getUTCMonth() - from.getUTCMonth() - (d.getUTCDate() < from.getUTCDate() ? 1 : 0);
    return Math.min(Math.max(months, 0), limiters.length - 1);
  };

  app.register(async (scope) => {
    scope.addHook('onRequest', async (_req, reply) => deprecationHeaders(reply));
    scope.addHook('onSend', async (_req, reply, payload) => {
      deprecationHeaders(reply);
      return payload;
    });
    function deprecationHeaders(reply: FastifyReply) {
      const { successor, migrationGuide } = links;
      reply.header('deprecation', `@${Math.floor(deprecatedAt / 1000)}`);
      reply.header('sunset', new Date(sunsetAt).toUTCString());
      reply.header('link', [
        `<${migrationGuide}>; rel="deprecation"; type="text/html"`,
        `<${migrationGuide}>; rel="sunset"; type="text/html"`,
        `<${successor}>; rel="successor-version"`,
      ]);
      reply.header('access-control-expose-headers', 'Deprecation, Sunset, Link');
    }

    scope.get('/requests/v2/migration-guide', async (_req, reply) => {
      reply.type('text/plain; charset=utf-8');
      return MIGRATION_GUIDE;
    });

    scope.get('/requests/v2', async (req, reply) => {
      const now = ctx.now();
      const { successor, migrationGuide } = links;
      const body = (message: string) => ({ message, successor, migrationGuide });
      if (now >= sunsetAt)
        return reply.status(410).send(body(`GET /requests/v2 was retired on ${new Date(sunsetAt).toISOString().slice(0, 10)}; use GET /requests/v3`));
      if (now >= throttledFrom) {
        const limiter = limiters[stage(now)]!;
        const taken = limiter.take(req.apiCaller?.id ?? `ip:${clientOf(req.ip)}`, now);
        if (!taken.ok)
          return reply.status(429).send(body(`GET /requests/v2 is deprecated and limited to ${limiter.perMinute} calls per minute; use GET /requests/v3`));
      }
      const query = { ...(req.query as Record<string, unknown>) };
      // v2 searched by `hash` (any transaction hash) and took `referrer` as a parameter.
      if (query.hash !== undefined) {
        query.term = query.hash;
        delete query.hash;
      }
      const referrer = query.referrer;
      delete query.referrer;
      if (referrer !== undefined && (typeof referrer !== 'string' || referrer.length > 200))
        throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: referrer: must be a string');
      // The referrer is the quoting key's own data: it filters the caller's requests only.
      if (referrer !== undefined && !req.apiCaller)
        throw new ApiError(401, 'MISSING_API_KEY', "referrer: filters the requests quoted under the caller's API key: send it as x-api-key");
      const page = await list(req, query, true, referrer);
      return {
        requests: page.records,
        ...(page.continuation ? { continuation: page.continuation } : {}),
        deprecation: {
          message: 'GET /requests/v2 is deprecated; move to GET /requests/v3',
          deprecatedAt: new Date(deprecatedAt).toISOString(),
          throttledFrom: new Date(throttledFrom).toISOString(),
          sunsetAt: new Date(sunsetAt).toISOString(),
          successor,
          migrationGuide,
        },
      };
    });
  });
}

const MIGRATION_GUIDE = `GET /requests/v2 -> GET /requests/v3

1. x-api-key is required.
2. New root fields: sender, refundTo, requestType, features; supersededByRequestId is at the root.
3. moonpayId is data.externalMetadata.moonpayId; referrer is data.referrer (authenticated) and no longer a parameter.
4. depositAddress is an object.
5. failReason and refundFailReason are null instead of "N/A".
6. currency duplicates are removed: currencies are single objects.
7. data.fees holds the per-component breakdown (relay is now platform); data.feesUsd is removed.
8. data.feeSponsorship replaces subsidizedRequest and subsidizedFee.
9. data.appFees {quoted, actual, currency} replaces appFees and paidAppFees.
10. data.metadata and data.price move into data.route.{quoted,actual}.
11. inTxs/outTxs: hash is txHash.
12. Statuses: pending, waiting, depositing, submitted, success, failure, refund.
13. The hash parameter is replaced by term, depositTxHash, fillTxHash and refundTxHash.
`;
