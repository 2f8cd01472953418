import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import './caller.ts';
import { clientOf, networkOf } from './clientAddress.ts';
import type { ApiContext } from './context.ts';
import { ApiError } from './errors.ts';
import type { ApiLimits } from './limits.ts';
import { matchedRoute } from './route.ts';
import { STREAM_PATH } from './statusStream.ts';

// Probes and metrics have their own per-IP bucket (a load balancer probes from few addresses).
// Route patterns, not raw paths: see matchedRoute.
const PROBES = new Set(['/health', '/ready', '/metrics']);
// Routes that price a route or read chains over RPC share the anonymous-quote bucket, whatever
// their method: /price is a quote without a request, /config/v2 prices its fee through /price and
// reads balances, /chains/liquidity reads the solver's balance of every currency of a chain, the
// /transactions routes read a transaction (on SVM, polling it for seconds), and a permit post reads
// the token before its signature is checked, and so does /execute (a permit, or a gasless call simulated). Each costs
// the node RPC calls (the budget its solver shares), however little it stores.
const PRICED = new Set([
  '/quote',
  '/quote/v2',
  '/price',
  '/config/v2',
  '/chains/liquidity',
  '/transactions/index',
  '/transactions/single',
  '/permits',
  '/execute/permits',
  '/execute',
]);

// A permit's post without a key (the quote's `authorize` step): within the signature budgets, not the quotes' total.
const PERMIT_POSTS = new Set(['/permits', '/execute/permits']);

/** The key from `x-api-key`, or from `Authorization: Bearer <key>`. */
export function presentedKey(req: FastifyRequest): string | undefined {
  const header = req.headers['x-api-key'];
  const key = Array.isArray(header) ? header[0] : header;
  if (key) return key.trim();
  const auth = req.headers.authorization;
  const m = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return m?.[1];
}

function limited(reply: FastifyReply, retryAfterMs: number, message: string): ApiError {
  reply.header('retry-after', String(Math.ceil(retryAfterMs / 1000)));
  return new ApiError(429, 'RATE_LIMITED', message);
}

/**
 * Resolves the caller's key on every request (a presented key that is unknown or revoked is
 * refused everywhere, so a typo never silently downgrades a caller to anonymous), then applies
 * the caller's rate limit: per key, or per IP without one. A failed key lookup is charged to the
 * caller's IP bucket first, so guessing keys runs into 429 like any other anonymous traffic.
 */
export function authHooks(app: FastifyInstance, ctx: ApiContext, limits: ApiLimits): void {
  app.addHook('onRequest', async (req, reply) => {
    if (req.method === 'OPTIONS') return;
    const route = matchedRoute(req);
    // Every per-IP bucket counts the client by the same address (an IPv6 client by its /64).
    const client = clientOf(req.ip);
    if (route !== undefined && PROBES.has(route)) {
      const taken = limits.probes.take(client);
      if (!taken.ok) throw limited(reply, taken.retryAfterMs, 'too many probe requests from this address');
      return;
    }
    const key = presentedKey(req);
    if (key !== undefined) {
      const found = key.length > 200 ? ({ state: 'unknown' } as const) : ctx.ledger.apiKeys.lookup(key);
      if (found.state !== 'valid') {
        const taken = limits.perIp.take(client);
        if (!taken.ok) throw limited(reply, taken.retryAfterMs, 'too many requests from this address');
        throw new ApiError(403, 'INVALID_API_KEY', found.state === 'revoked' ? 'the API key has been revoked' : 'the API key is not valid');
      }
      req.apiCaller = { id: found.key.id, name: found.key.name };
    }
    const taken = req.apiCaller ? limits.perKey.take(req.apiCaller.id) : limits.perIp.take(client);
    if (!taken.ok)
      throw limited(
        reply,
        taken.retryAfterMs,
        req.apiCaller ? 'too many requests for this API key' : 'too many requests from this address; an API key has a higher limit',
      );
    if (!req.apiCaller) {
      const net = limits.perNetwork.take(networkOf(req.ip));
      if (!net.ok) throw limited(reply, net.retryAfterMs, "too many requests from this address's network; an API key has a higher limit");
    }
    if (req.apiCaller && route !== undefined && PRICED.has(route)) {
      const q = limits.pricedPerKey.take(req.apiCaller.id);
      if (!q.ok) throw limited(reply, q.retryAfterMs, `at most ${limits.config.pricedPerKeyPerMinute} quotes and prices per minute for this API key`);
    }
    if (!req.apiCaller && route !== undefined && PRICED.has(route)) {
      const q = limits.anonymousQuotes.take(client);
      if (!q.ok)
        throw limited(
          reply,
          q.retryAfterMs,
          `at most ${limits.config.anonymousQuotesPerMinute} quotes and prices per minute without an API key; an API key has a higher limit`,
        );
      // Not a permit's post: its reads run within the signature budgets (routes/permits.ts, signatureChecks.ts), which
      // give a request waiting for its permit a check of its own. Held to this node-wide total too, it was refused
      // to its user whenever others (ten addresses asking prices) kept the total empty, until the permit expired.
      const all = PERMIT_POSTS.has(route) ? { ok: true as const } : limits.anonymousQuotesTotal.take('');
      if (!all.ok) throw limited(reply, all.retryAfterMs, 'quotes and prices without an API key are busy; an API key has its own limit');
    }
    if (route === STREAM_PATH && !limits.wsConnectionAllowed(client)) {
      throw limited(reply, 1000, `at most ${limits.config.wsConnectionsPerIp} status stream connections per address`);
    }
  });
}
