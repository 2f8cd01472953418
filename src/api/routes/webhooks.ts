import type { FastifyInstance, FastifyRequest } from 'fastify';
import { webhookUrlProblem } from '../../events/webhookUrl.ts';
import { redactUrl } from '../../events/deliverer.ts';
import { ipLiteralHost, isNonPublicAddress } from '../../events/targetGuard.ts';
import type { WebhookRow } from '../../ledger/events.ts';
import { requireCaller, type ApiCaller } from '../caller.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { RateLimiter } from '../rateLimit.ts';
import { readOffLoop } from '../listing/run.ts';

// Webhook endpoints of the caller's API key. Every route needs a key (401 without); another key's
// webhook answers 404, as an unknown one does. The secret is returned once, by POST /webhooks.
//
//   POST   /webhooks                    {url}                       → 201 {id, url, secret, createdAt}
//   GET    /webhooks                                                → {webhooks: [{id, url, createdAt}]}
//   DELETE /webhooks/:id                                            → {id, removed: true}
//   GET    /webhooks/:id/deliveries     ?state=pending|delivered|dead → {deliveries: [...]}
//   POST   /webhooks/:id/redeliver      {eventId} | {dead: true}    → {redelivered: n} (dead: and more: boolean)

/** Pending deliveries of a removed webhook ended in one write. */
const END_CHUNK = 1_000;

function invalid(field: string, problem: string): ApiError {
  return new ApiError(400, 'INVALID_INPUT_PARAMETERS', `invalid request: ${field}: ${problem}`);
}

function object(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw invalid('(body)', 'must be a JSON object');
  return body as Record<string, unknown>;
}

function publicWebhook(w: WebhookRow) {
  return { id: w.id, url: w.url, createdAt: w.created_at };
}

export function webhookRoutes(app: FastifyInstance, ctx: ApiContext) {
  const writable = () => {
    if (!ctx.ports) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
  };
  const redeliveries = new RateLimiter(ctx.config.events.redeliverPerMinute);
  const own = (req: FastifyRequest, caller: ApiCaller): WebhookRow => {
    const id = (req.params as { id?: string }).id ?? '';
    const w = id.length <= 100 ? ctx.ledger.events.webhook(id) : undefined;
    if (!w || w.removed_at !== null || w.api_key_id !== caller.id)
      throw new ApiError(404, 'WEBHOOK_NOT_FOUND', `no webhook ${id.slice(0, 100)} for this API key`);
    return w;
  };

  app.post('/webhooks', async (req, reply) => {
    const caller = requireCaller(req);
    writable();
    const b = object(req.body);
    const problem = webhookUrlProblem(b.url);
    if (problem) throw invalid('url', problem);
    const url = b.url as string;
    // An address literal is refused here already; names are checked on every connection (targetGuard.ts).
    const literal = ipLiteralHost(new URL(url).hostname);
    if (literal !== undefined && !ctx.config.events.allowPrivateTargets && isNonPublicAddress(literal)) {
      throw invalid('url', 'must point to a public address (loopback, private, link-local and metadata addresses are refused)');
    }
    const max = ctx.config.events.maxWebhooksPerKey;
    if (ctx.ledger.events.webhooks(caller.id).length >= max)
      throw new ApiError(409, 'TOO_MANY_WEBHOOKS', `at most ${max} webhooks per API key: delete one first`);
    const created = ctx.ledger.events.addWebhook(caller.id, url, ctx.now());
    ctx.log.info({ webhook: created.id, apiKey: caller.id, url: redactUrl(url) }, 'webhook added');
    return reply.status(201).send({ id: created.id, url, secret: created.secret, createdAt: created.created_at });
  });

  app.get('/webhooks', async (req) => {
    const caller = requireCaller(req);
    return { webhooks: ctx.ledger.events.webhooks(caller.id).map(publicWebhook) };
  });

  app.delete('/webhooks/:id', async (req) => {
    const caller = requireCaller(req);
    writable();
    const w = own(req, caller);
    ctx.ledger.events.removeWebhook(w.id, ctx.now());
    // Its pending deliveries end a chunk per turn of the event loop, the node's own work running between.
    while (ctx.ledger.events.endPending(w.id, END_CHUNK) === END_CHUNK) await new Promise((r) => setImmediate(r));
    ctx.log.info({ webhook: w.id, apiKey: caller.id }, 'webhook removed');
    return { id: w.id, removed: true };
  });

  app.get('/webhooks/:id/deliveries', async (req) => {
    const caller = requireCaller(req);
    const w = own(req, caller);
    const state = (req.query as { state?: unknown }).state;
    if (state !== undefined && state !== 'pending' && state !== 'delivered' && state !== 'dead') throw invalid('state', 'must be pending, delivered or dead');
    // Off the event loop: no index orders a webhook's deliveries, so the read sorts its whole backlog (runRead).
    const rows = (await readOffLoop(ctx, { kind: 'deliveries', webhookId: w.id, state, limit: 100 }, caller.id)) as ReturnType<
      typeof ctx.ledger.events.deliveries
    >;
    return {
      deliveries: rows.map((d) => ({
        eventId: d.event_id,
        requestId: d.request_id,
        type: d.type,
        status: d.status,
        state: d.state,
        attempts: d.attempts,
        nextAttemptAt: d.state === 'pending' ? d.next_attempt_at : null,
        lastStatus: d.last_status,
        lastError: d.last_error,
        deliveredAt: d.delivered_at,
      })),
    };
  });

  app.post('/webhooks/:id/redeliver', async (req, reply) => {
    const caller = requireCaller(req);
    writable();
    const w = own(req, caller);
    const taken = redeliveries.take(caller.id);
    if (!taken.ok) {
      reply.header('retry-after', String(Math.ceil(taken.retryAfterMs / 1000)));
      throw new ApiError(429, 'RATE_LIMITED', `at most ${redeliveries.perMinute} redelivery requests per minute per API key`);
    }
    const b = object(req.body);
    let answer: { redelivered: number; more?: boolean };
    if (b.eventId !== undefined) {
      if (typeof b.eventId !== 'string' || !/^evt_[0-9a-f]{24}$/.test(b.eventId)) throw invalid('eventId', 'must be an event id (evt_ and 24 hex digits)');
      answer = { redelivered: ctx.ledger.events.redeliver({ eventId: b.eventId, webhookId: w.id, apiKeyId: caller.id }, Date.now()) };
      if (answer.redelivered === 0) throw new ApiError(404, 'EVENT_NOT_FOUND', `no delivery of event ${b.eventId} to webhook ${w.id}`);
    } else if (b.dead === true) {
      // A chunk per call: `more` says to call again (within the per-minute limit).
      answer = ctx.ledger.events.redeliverDead(w.id, { apiKeyId: caller.id, limit: ctx.config.events.redeliverDeadChunk });
    } else {
      throw invalid('eventId', 'is required (or send {"dead": true} to redeliver dead deliveries)');
    }
    ctx.log.info({ webhook: w.id, apiKey: caller.id, redelivered: answer.redelivered }, 'webhook redelivery requested');
    return answer;
  });
}
