import type { FastifyInstance } from 'fastify';
import { matchedRoute } from './api/route.ts';
import type { Ledger } from './ledger/index.ts';

// Routes that commit the node to new money movements (a quote, a signed deposit, a fast fill, a
// claim): refused while draining. Reads (status, requests, chains) keep answering. Route patterns,
// so that every spelling of a path (percent-encoded) is refused alike: see matchedRoute.
const COMMITTING = new Set(['/quote', '/quote/v2', '/execute', '/permits', '/execute/permits', '/fast-fill', '/app-fees/:wallet/claim']);

/** While `draining()` says so, committing routes answer 503 with the reason. */
export function refuseWhileDraining(api: FastifyInstance, draining: () => string | undefined): void {
  api.addHook('onRequest', async (req, reply) => {
    const why = draining();
    if (!why || req.method !== 'POST') return;
    const route = matchedRoute(req);
    if (route !== undefined && COMMITTING.has(route)) {
      return reply
        .status(503)
        .header('retry-after', '30')
        .send({ message: `not quoting: ${why}`, errorCode: 'NODE_DRAINING' });
    }
  });
}

/**
 * What the ledger recorded and the submitters still have to put on a chain: payouts decided but
 * not yet signed (on chains not paused and not in dry run, which would never sign them), and
 * transactions signed but not yet broadcast. A drain waits for this to reach zero.
 */
export function unsent(ledger: Ledger): number {
  return ledger.payouts.unsent();
}
