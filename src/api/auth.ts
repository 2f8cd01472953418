import type { FastifyInstance, FastifyRequest } from 'fastify';
import './caller.ts';
import type { ApiContext } from './context.ts';
import { ApiError } from './errors.ts';
import { RateLimiter } from './rateLimit.ts';

// Probes and metrics are for the operator's own infrastructure, never limited.
const UNLIMITED = new Set(['/health', '/ready', '/metrics']);

// The key from `x-api-key`, or from `Authorization: Bearer <key>`.
export function presentedKey(req: FastifyRequest): string | undefined {
  const header = req.headers['x-api-key'];
  const key = Array.isArray(header) ? header[0] : header;
  if (key) return key.trim();
  const auth = req.headers.authorization;
  const m = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return m?.[1];
}

// Resolves the caller's key on every request (a presented key that is unknown or revoked is
// refused everywhere, so a typo never silently downgrades a caller to anonymous), then applies
// the caller's rate limit: per key, or per IP without one.
export function authHooks(app: FastifyInstance, ctx: ApiContext): void {
  const perKey = new RateLimiter(ctx.config.api.rateLimit.perKeyPerMinute);
  const perIp = new RateLimiter(ctx.config.api.rateLimit.unauthenticatedPerMinute);
  app.addHook('onRequest', async (req, reply) => {
    if (req.method === 'OPTIONS') return;
    const key = presentedKey(req);
    if (key !== undefined) {
      if (key.length > 200) throw new ApiError(403, 'INVALID_API_KEY', 'the API key is not valid');
      const found = ctx.ledger.apiKeys.lookup(key);
      if (found.state !== 'valid') throw new ApiError(403, 'INVALID_API_KEY', found.state === 'revoked' ? 'the API key has been revoked' : 'the API key is not valid');
      req.apiCaller = { id: found.key.id, name: found.key.name };
    }
    const path = req.url.split('?')[0];
    if (UNLIMITED.has(path) || path.startsWith('/requests/v2')) return;
    const taken = req.apiCaller ? perKey.take(req.apiCaller.id) : perIp.take(req.ip);
    if (!taken.ok) {
      reply.header('retry-after', String(Math.ceil(taken.retryAfterMs / 1000)));
      throw new ApiError(429, 'RATE_LIMITED', req.apiCaller ? 'too many requests for this API key' : 'too many requests from this address; an API key has a higher limit');
    }
  });
}
