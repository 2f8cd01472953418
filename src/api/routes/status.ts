import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { statusRecord } from '../statusRecord.ts';
import { hashParam } from '../validate.ts';

const query = z.object({ requestId: hashParam });

export function statusRoutes(app: FastifyInstance, ctx: ApiContext) {
  const handler = async (req: { query: unknown }) => {
    const { requestId } = query.parse(req.query ?? {});
    const r = ctx.ledger.requests.get(requestId);
    if (!r) throw new ApiError(404, 'REQUEST_NOT_FOUND', `no request with id ${requestId}`);
    return statusRecord(ctx.ledger, r);
  };
  app.get('/intents/status/v3', handler);
  app.get('/intents/status', handler);
}
