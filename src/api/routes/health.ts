import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.ts';

/** /health, and unless opts.operator is false, /ready and /metrics (the operator's, which may live on their own listener). */
export function healthRoutes(app: FastifyInstance, ctx: ApiContext, opts: { operator: boolean } = { operator: true }) {
  // role: with active/standby nodes (config.ha), whether this one acts on chains now.
  app.get('/health', async () => (ctx.role ? { status: 'ok', role: ctx.role() } : { status: 'ok' }));
  if (!opts.operator) return;
  // Ready when every chain's indexer has caught up with its head.
  app.get('/ready', async (_req, reply) => {
    const chains = (ctx.ports?.ids() ?? []).map((chainId) => ({ chainId, ...ctx.ports!.intake(chainId)!.progress() }));
    const ready = chains.every((c) => c.ready);
    return reply.status(ready ? 200 : 503).send({ ready, chains });
  });
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });
}
