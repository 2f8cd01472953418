import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Hex } from 'viem';
import { ApiError, errorHandler } from '../api/errors.ts';
import { capOperatorConnections } from '../api/connectionCap.ts';
import { closeSilentConnections, receiveBounds } from '../api/server.ts';
import type { Config } from '../config/load.ts';
import type { ChainPorts } from '../chains/ports.ts';
import type { Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';
import type { AdminKeyRow } from '../ledger/operations.ts';
import type { Logger } from '../log.ts';
import { AdminRefusal, type Solver } from '../solver/solver.ts';
import { pause, reindex, resume, setDryRun, stuck, type PauseScope, type Who } from './actions.ts';
import { inventory } from './inventory.ts';
import { WithdrawalRefused } from '../solver/withdrawals.ts';

export interface AdminContext {
  ledger: Ledger;
  registry: Registry;
  /** The chains' ports the admin drives: payouts woken, the solver's wallets, re-index. */
  chains: Pick<ChainPorts, 'ids' | 'wallet' | 'payoutsQueued' | 'reindexer' | 'mayPay'>;
  solver: Solver;
  log: Logger;
  /** The widest block range one re-index reads (config admin.reindexMaxBlocks). */
  reindexMaxBlocks: number;
  /** How long receiving one request may take (the API's bounds, config api.*TimeoutMs). */
  receive: Pick<Config['api'], 'headersTimeoutMs' | 'requestTimeoutMs'>;
}

const reason = z.string().trim().min(1, 'must say why (it is recorded with the action)').max(500);
const chainId = z.number().int().positive();
const scopeBody = z.discriminatedUnion('scope', [
  z.object({ scope: z.literal('all'), reason }).strict(),
  z.object({ scope: z.literal('chain'), chainId, reason }).strict(),
  z.object({ scope: z.literal('route'), originChainId: chainId, destinationChainId: chainId, reason }).strict(),
]);
const dryRunBody = z.object({ enabled: z.boolean(), reason }).strict();
const reasonBody = z.object({ reason }).strict();
// `to`: another recipient than the one the node pays (refundTo, else the depositor), on the deposit's chain, for one
// that refuses the refund. Its spelling is checked against that chain's kind by the solver (400 naming it).
const refundBody = z
  .object({
    reason,
    to: z.string().trim().min(1, "must be an address on the deposit's chain").max(100, "must be an address on the deposit's chain").optional(),
  })
  .strict();
const requestIdParam = z.object({ id: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a request id (0x + 64 hex)') });

declare module 'fastify' {
  interface FastifyRequest {
    admin?: AdminKeyRow;
  }
}

// The admin key in `authorization: Bearer <key>` (or x-admin-key). Integrator API keys are a
// different table: they never open this API.
function presentedKey(req: FastifyRequest): string | undefined {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && auth.startsWith('Bearer ')) return auth.slice(7).trim();
  const h = req.headers['x-admin-key'];
  return typeof h === 'string' ? h : undefined;
}

function who(req: FastifyRequest, why: string): Who {
  return { actor: `${req.admin!.name} (${req.admin!.id})`, reason: why };
}

/**
 * The admin HTTP API, on its own listen address: pauses, dry run, stuck payouts, retry, manual
 * refund, re-index, inventory and the admin action log. Every request needs a live admin key; every change
 * is an admin action in the ledger with the key's name and the reason given.
 */
export function createAdminApi(ctx: AdminContext): FastifyInstance {
  const app = Fastify({ bodyLimit: 16 * 1024, logger: false, return503OnClosing: true, ...receiveBounds(ctx.receive) });
  closeSilentConnections(app, ctx.receive.headersTimeoutMs);
  capOperatorConnections(app);
  app.setErrorHandler((err, req, reply) => {
    if (err instanceof WithdrawalRefused) return reply.status(409).send({ message: err.message, errorCode: err.errorCode });
    if (err instanceof AdminRefusal)
      return reply
        .status(err.status)
        .send({ message: err.message, errorCode: err.status === 404 ? 'NOT_FOUND' : err.status === 400 ? 'INVALID_INPUT_PARAMETERS' : 'CONFLICT' });
    return errorHandler(ctx.log)(err as Error, req, reply);
  });
  app.setNotFoundHandler((req, reply) => reply.status(404).send({ message: `no route ${req.method} ${req.url.split('?')[0]}`, errorCode: 'NOT_FOUND' }));
  app.addHook('onRequest', async (req) => {
    const key = presentedKey(req);
    if (!key) throw new ApiError(401, 'UNAUTHORIZED', 'an admin key is required (authorization: Bearer <admin key>)');
    const row = ctx.ledger.operations.adminKey(key);
    if (!row) throw new ApiError(403, 'FORBIDDEN', 'the key is not a live admin key');
    req.admin = row;
  });

  app.get('/admin/switches', async () => ({ switches: ctx.ledger.operations.switches() }));
  app.post('/admin/pause', async (req) => {
    const b = scopeBody.parse(req.body ?? {});
    const changed = pause(ctx.ledger, b as PauseScope, who(req, b.reason));
    return { paused: true, changed };
  });
  app.post('/admin/resume', async (req) => {
    const b = scopeBody.parse(req.body ?? {});
    const changed = resume(ctx.ledger, b as PauseScope, who(req, b.reason));
    // What the pause held is decided (or signed) now rather than at the next timer.
    ctx.solver.wake();
    for (const id of ctx.chains.ids()) ctx.chains.payoutsQueued(id);
    return { paused: false, changed };
  });
  app.post('/admin/dry-run', async (req) => {
    const b = dryRunBody.parse(req.body ?? {});
    const changed = setDryRun(ctx.ledger, b.enabled, who(req, b.reason));
    if (!b.enabled) ctx.solver.wake();
    return { dryRun: b.enabled, changed, decisions: ctx.ledger.operations.dryRunDecisions() };
  });
  app.get('/admin/dry-run', async () => ({ dryRun: ctx.solver.risk.dryRun(), decisions: ctx.ledger.operations.dryRunDecisions() }));
  app.get('/admin/payouts', async (req) => {
    const q = z.object({ state: z.enum(['waiting', 'retrying', 'failed']).optional() }).parse(req.query);
    const items = stuck(ctx.ledger, Date.now(), new Set(ctx.registry.chains.keys()), (p) => ctx.chains.mayPay(p)).filter(
      (i) => !q.state || i.state === q.state,
    );
    return { payouts: items };
  });
  // Decide a held-back deposit again now (a limit that still holds keeps it waiting).
  app.post('/admin/deposits/:id/retry', async (req) => {
    const { id } = z.object({ id: z.string().min(1) }).parse(req.params);
    const b = reasonBody.parse(req.body ?? {});
    const held = ctx.ledger.operations.postponement(id);
    if (!held || ctx.ledger.deposits.get(id)?.state !== 'confirmed') throw new AdminRefusal(409, `deposit ${id} is not waiting`);
    ctx.ledger.tx(() => {
      ctx.ledger.operations.record({
        action: 'retry',
        target: `deposit:${id}`,
        actor: who(req, b.reason).actor,
        reason: b.reason,
        detail: { heldFor: held.reason },
      });
      ctx.ledger.operations.release(id);
    });
    ctx.solver.invalidate();
    ctx.solver.wake();
    return { retried: id };
  });
  app.post('/admin/requests/:id/refund', async (req) => {
    const { id } = requestIdParam.parse(req.params);
    const b = refundBody.parse(req.body ?? {});
    return { refund: await ctx.solver.manualRefund(id as Hex, who(req, b.reason), { to: b.to }) };
  });
  // Withdraw depository funds owed to the solver (deposits of filled orders) to the solver's wallet.
  app.post('/admin/withdrawals', async (req) => {
    const b = z
      .object({
        chainId,
        currency: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be the currency address (0x + 40 hex; the zero address for native)'),
        amount: z
          .string()
          .regex(/^[0-9]{1,78}$/, 'must be an integer in the smallest unit, as a decimal string')
          .optional(),
        depositIds: z.array(z.string().min(1)).min(1).max(1000).optional(),
        reason,
      })
      .strict()
      .parse(req.body ?? {});
    const wallet = ctx.chains.wallet(b.chainId);
    if (!wallet) throw new ApiError(400, 'INVALID_INPUT_CURRENCY', `chainId ${b.chainId} is not a chain of this node`);
    const currency = ctx.registry.currenciesOf(b.chainId).find((c) => c.address.toLowerCase() === b.currency.toLowerCase());
    if (!currency) throw new ApiError(400, 'INVALID_INPUT_CURRENCY', `currency ${b.currency} is not configured on chain ${b.chainId}`);
    const payout = ctx.solver.withdraw(
      {
        chainId: b.chainId,
        currency: currency.address,
        solver: wallet.solver,
        amount: b.amount === undefined ? undefined : BigInt(b.amount),
        depositIds: b.depositIds,
      },
      who(req, b.reason),
    );
    ctx.chains.payoutsQueued(b.chainId);
    return {
      withdrawal: {
        payoutId: payout.id,
        chainId: payout.chain_id,
        currency: payout.currency,
        amount: payout.amount,
        deposits: ctx.ledger.withdrawals.depositsOf(payout.id),
      },
    };
  });
  // Read a chain's deposits again over a block range its indexer has passed (a missed deposit).
  app.post('/admin/reindex', async (req) => {
    const block = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
    const b = z
      .object({ chainId, fromBlock: block, toBlock: block, reason })
      .strict()
      .parse(req.body ?? {});
    const r = await reindex(ctx.ledger, ctx.chains.reindexer(b.chainId), b, ctx.reindexMaxBlocks, who(req, b.reason));
    ctx.solver.wake();
    return { reindex: { chainId: b.chainId, ...r } };
  });
  app.get('/admin/inventory', async () => ({ chains: await inventory(ctx.registry, ctx.chains, ctx.ledger) }));
  app.get('/admin/actions', async (req) => {
    const q = z.object({ limit: z.coerce.number().int().min(1).max(1000).default(100), target: z.string().optional() }).parse(req.query);
    return { actions: ctx.ledger.operations.actions(q.limit, q.target) };
  });
  return app;
}
