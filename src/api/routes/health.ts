import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.ts';

export function healthRoutes(app: FastifyInstance, ctx: ApiContext) {
  app.get('/health', async () => ({ status: 'ok' }));
  // Ready when every chain's indexer has caught up with its head.
  app.get('/ready', async (_req, reply) => {
    const chains = [...(ctx.adapters?.values() ?? [])].map((a) => ({ chainId: a.chainId, ...a.progress() }));
    const ready = chains.every((c) => c.ready);
    return reply.status(ready ? 200 : 503).send({ ready, chains });
  });
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });
}
