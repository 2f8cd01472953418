import type { FastifyInstance } from 'fastify';
import type { Hex } from 'viem';
import { z } from 'zod';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { hashParam } from '../validate.ts';

const query = z.object({ requestId: hashParam });
const HASH = /^0x[0-9a-fA-F]{64}$/;

/**
 * The `requestId` of a status query. A well-formed id (the hot path: every poll of every client) is taken with
 * one regular expression; anything else goes through the schema, which names what is wrong (400).
 */
export function statusRequestId(q: unknown): Hex {
  const id = (q as { requestId?: unknown } | undefined)?.requestId;
  if (typeof id === 'string' && HASH.test(id)) return id.toLowerCase() as Hex;
  return query.parse(q ?? {}).requestId;
}

export function statusRoutes(app: FastifyInstance, ctx: ApiContext) {
  const handler = async (req: { query: unknown }) => {
    const requestId = statusRequestId(req.query);
    // One statement: the request's shown fields and its hashes (Requests.status), off the event loop on PostgreSQL.
    const s = await ctx.ledger.statusOf(requestId);
    if (!s) throw new ApiError(404, 'REQUEST_NOT_FOUND', `no request with id ${requestId}`);
    return s;
  };
  app.get('/intents/status/v3', handler);
  app.get('/intents/status', handler);
}
