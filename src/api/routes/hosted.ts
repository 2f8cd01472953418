import type { FastifyInstance } from 'fastify';
import { getAddress, isAddress } from 'viem';
import { z } from 'zod';
import { requireCaller } from '../caller.ts';
import type { ApiContext } from '../context.ts';
import { clientOf } from '../clientAddress.ts';
import type { DepositAddressReindex } from '../depositReindex.ts';
import { ApiError } from '../errors.ts';
import { readOffLoop } from '../listing/run.ts';
import { MAX_UNIX_SECONDS, UsageRecorder, usageHooks, usageWindow } from '../usage.ts';
import { chainIdParam, hashParam } from '../validate.ts';
import { currencyId } from './reference.ts';
import { statusRequestId } from './status.ts';
import { amountObject } from '../../quote/currency.ts';
import type { PayoutRow } from '../../ledger/types.ts';

// Operations the interface lists at the hosted service's paths and in its published shapes, each
// read from (or written to) the ledger like the node's own routes.

const singleBody = z
  .object({
    requestId: hashParam,
    chainId: chainIdParam,
    // The public SDK sends the step item's data with the hash it got, as a JSON string.
    tx: z.string().max(100_000),
    referrer: z.string().max(200).optional(),
  })
  .strict();

const reindexBody = z
  .object({
    chainId: chainIdParam,
    depositAddress: z.string().min(1).max(128),
    sweep: z.boolean().optional(),
    targetChainId: chainIdParam.optional(),
    currency: z.string().max(128).optional(),
  })
  .strict();

const claimsQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20), continuation: z.string().max(200).optional() }).strict();
// An EVM wallet as the ledger spells it (checksummed), whatever case the path has: claims are booked under that
// spelling, and the lower-case one (the interface's) found none. Anything else is looked up as given.
const walletParams = z.object({
  wallet: z
    .string()
    .min(1)
    .max(128)
    .transform((s) => (isAddress(s, { strict: false }) ? getAddress(s) : s)),
});
const depositAddressQuery = z.object({ address: z.string().min(1).max(128).optional(), requestId: hashParam.optional() }).strict();
const swapSourcesQuery = z.object({ chainId: chainIdParam.optional() }).strict();
const livesQuery = z
  .object({ withReport: z.string().max(10).optional(), skipPostgres: z.string().max(10).optional(), skipRedis: z.string().max(10).optional() })
  .strict();
// Safe integers within a calendar's range: a larger one overflowed PostgreSQL's BIGINT (a 500).
const unixSeconds = z.coerce
  .number()
  .refine((n) => Number.isSafeInteger(n) && n >= 0 && n <= MAX_UNIX_SECONDS, `must be a Unix time in seconds from 0 to ${MAX_UNIX_SECONDS}`);
const usageQuery = z
  .object({
    granularity: z.enum(['minutely', 'hourly', 'daily']).default('hourly'),
    startTimestamp: unixSeconds.optional(),
    endTimestamp: unixSeconds.optional(),
    apiKey: z.string().max(200).optional(),
  })
  .strict();

// v2 statuses had no `submitted`: a submitted fill was still pending.
const V2_STATUS: Record<string, string> = { submitted: 'pending' };

export function hostedRoutes(app: FastifyInstance, ctx: ApiContext, reindex: DepositAddressReindex) {
  const { ledger, registry } = ctx;
  const usage = new UsageRecorder(ledger.apiUsage);
  usageHooks(app, usage);

  // The SDK reports a same-chain transaction here right after sending it: index it at once, as
  // POST /transactions/index does.
  app.post('/transactions/single', async (req) => {
    const b = singleBody.parse(req.body ?? {});
    const chains = ctx.ports;
    if (!chains) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    const r = ledger.requests.get(b.requestId);
    if (!r) throw new ApiError(404, 'REQUEST_NOT_FOUND', `no request with id ${b.requestId}`);
    if (r.origin_chain_id !== b.chainId)
      throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `invalid request: chainId: request ${r.id} starts on chain ${r.origin_chain_id}`);
    let tx: { txHash?: unknown; replacementTxHash?: unknown };
    try {
      tx = JSON.parse(b.tx);
    } catch {
      throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: tx: must be the JSON of the sent transaction with its txHash');
    }
    const intake = chains.intake(b.chainId)!;
    const hash = typeof tx?.replacementTxHash === 'string' ? tx.replacementTxHash : tx?.txHash;
    const txId = typeof hash === 'string' ? ctx.chains.profile(b.chainId)!.codec.parseTxId(hash) : undefined;
    if (!txId) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `invalid request: tx: carries no transaction hash of chain ${b.chainId}`);
    try {
      await intake.indexTransaction(txId);
    } catch (e) {
      if ((e as Error).name === 'TransactionReceiptNotFoundError')
        throw new ApiError(404, 'TRANSACTION_NOT_FOUND', `transaction ${hash} is not included on chain ${b.chainId} yet`);
      throw e;
    }
    return { message: 'Success' };
  });

  // The hosted body of the deposit-address reindex (POST /deposit-address/reindex takes the node's).
  app.post('/transactions/deposit-address/reindex', async (req) => {
    const b = reindexBody.parse(req.body ?? {});
    if (!ctx.ports) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    const chain = registry.chain(b.chainId);
    if (!chain) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `chainId ${b.chainId} is not a supported chain`);
    const { codec } = ctx.chains.profile(chain.id)!;
    const address = codec.canonical(b.depositAddress);
    const r = address ? ledger.requests.byDepositAddress(address) : undefined;
    if (!r || r.origin_chain_id !== b.chainId)
      throw new ApiError(404, 'DEPOSIT_ADDRESS_NOT_FOUND', `no deposit address ${b.depositAddress} on chain ${b.chainId}`);
    const c = registry.currency(r.origin_chain_id, r.origin_currency);
    // The node path's guards and buckets, before any chain read (see DepositAddressReindex).
    const { sweeps, held = 0n } = await reindex.reindex(r, { client: clientOf(req.ip), readBalance: true });
    return {
      message: 'Success',
      triggeredCurrencies: sweeps > 0 ? [{ currency: codec.api(r.origin_currency), symbol: c?.symbol ?? '', balance: held.toString() }] : [],
      checkedCurrencies: 1,
      failedCurrencies: 0,
    };
  });

  // The claims a wallet made of its app fees, newest first.
  app.get('/app-fees/:wallet/claims', async (req) => {
    const { wallet } = walletParams.parse(req.params);
    const q = claimsQuery.parse(req.query ?? {});
    const after = q.continuation ? decodeCursor(q.continuation) : undefined;
    // Off the node's event loop: the statement finds the wallet's claims among all its entries (a busy app's wallet has
    // one per request that paid it a fee), and this read takes no key.
    const rows = (await readOffLoop(
      ctx,
      { kind: 'appFeeClaims', wallet, after, limit: q.limit + 1 },
      req.apiCaller?.id ?? `ip:${clientOf(req.ip)}`,
    )) as PayoutRow[];
    const page = rows.slice(0, q.limit);
    const last = page.at(-1);
    return {
      claims: page.map((p) => {
        const c = registry.currency(p.chain_id, p.currency);
        const amount = BigInt(p.amount);
        return {
          claimId: p.id,
          wallet,
          recipient: p.recipient,
          currency: c ? amountObject(c, amount, c.usdPrice) : { amount: p.amount, minimumAmount: p.amount },
          txHash: p.tx_hash,
          status: p.state,
          createdAt: new Date(p.decided_at).toISOString(),
        };
      }),
      ...(rows.length > q.limit && last ? { continuation: encodeCursor({ at: last.decided_at, id: last.id }) } : {}),
    };
  });

  // A deposit address and the request it was made for.
  app.get('/deposit-addresses/v1', async (req) => {
    requireCaller(req);
    const q = depositAddressQuery.parse(req.query ?? {});
    if (!q.address && !q.requestId) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: give address or requestId');
    let r = q.requestId ? ledger.requests.get(q.requestId) : undefined;
    if (!r && q.address) {
      for (const chain of registry.chains.values()) {
        const a = ctx.chains.profile(chain.id)!.codec.canonical(q.address);
        r = a ? ledger.requests.byDepositAddress(a) : undefined;
        if (r) break;
      }
    }
    // An open address's later arrivals are child requests: the address belongs to the first.
    while (r?.parent_id) r = ledger.requests.get(r.parent_id);
    if (!r || !r.deposit_address) throw new ApiError(404, 'DEPOSIT_ADDRESS_NOT_FOUND', 'no deposit address matches');
    const money = r.money ? (JSON.parse(r.money) as { depositAddressType?: 'open' | 'strict' }) : {};
    const c = registry.currency(r.origin_chain_id, r.origin_currency);
    return {
      depositAddress: r.deposit_address,
      type: money.depositAddressType ?? 'strict',
      requestId: r.id,
      chainId: r.origin_chain_id,
      createdAt: new Date(r.created_at).toISOString(),
      currency: c ? currencyId(c) : null,
      refundTo: r.refund_to,
    };
  });

  // The node prices swaps itself, from its own inventory: one source, on every chain it serves.
  app.get('/swap-sources', async (req) => {
    const q = swapSourcesQuery.parse(req.query ?? {});
    if (q.chainId !== undefined && !registry.chain(q.chainId)) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `chainId ${q.chainId} is not a supported chain`);
    return { sources: ['relay-node'] };
  });

  // Liveness, in the hosted shape: the ledger answers, and (withReport) each chain's indexer.
  app.get('/lives', async (req, reply) => {
    const q = livesQuery.parse(req.query ?? {});
    let ledgerOk = true;
    try {
      ledger.ping();
    } catch {
      ledgerOk = false;
    }
    const body: Record<string, unknown> = { status: ledgerOk ? 'ok' : 'error' };
    if (q.withReport === 'true') {
      const report: Record<string, unknown> = {
        version: VERSION,
        ledger: { status: ledgerOk ? 'ok' : 'error', reason: ledgerOk ? null : 'the ledger does not answer' },
      };
      for (const chainId of ctx.ports?.ids() ?? []) {
        const p = ctx.ports!.intake(chainId)!.progress();
        report[`chain-${chainId}`] = { status: p.ready ? 'ok' : 'syncing', reason: p.ready ? null : `indexed ${p.indexed} of ${p.head}` };
      }
      body.report = report;
    }
    return reply.status(ledgerOk ? 200 : 503).send(body);
  });

  app.get('/intents/status/v2', async (req) => {
    const requestId = statusRequestId(req.query);
    const s = await ledger.statusOf(requestId);
    if (!s) throw new ApiError(404, 'REQUEST_NOT_FOUND', `no request with id ${requestId}`);
    return {
      status: V2_STATUS[s.status] ?? s.status,
      details: s.details,
      inTxHashes: s.inTxHashes,
      txHashes: s.txHashes,
      time: s.updatedAt,
      originChainId: s.originChainId,
      destinationChainId: s.destinationChainId,
      quoteCreatedAt: s.quoteCreatedAt,
    };
  });

  // The caller's own calls, per endpoint and status. A key sees its own usage only.
  app.get('/metrics/usage', async (req) => {
    const caller = requireCaller(req);
    const q = usageQuery.parse(req.query ?? {});
    const named = q.apiKey !== undefined ? ledger.apiKeys.lookup(q.apiKey) : undefined;
    if (named && (named.state !== 'valid' || named.key.id !== caller.id)) {
      throw new ApiError(403, 'FORBIDDEN', 'a key reads its own usage only');
    }
    const { from, to } = usageWindow(q.granularity, q.startTimestamp, q.endTimestamp, ctx.now());
    // Off the event loop: the read scans every minute row of the span.
    return { metrics: await usage.read(caller.id, q.granularity, from, to, (job) => readOffLoop(ctx, job, caller.id)) };
  });
}

const VERSION = '0.1.0';

const encodeCursor = (c: { at: number; id: string }) => Buffer.from(JSON.stringify([c.at, c.id])).toString('base64url');
function decodeCursor(s: string): { at: number; id: string } {
  try {
    const [at, id] = JSON.parse(Buffer.from(s, 'base64url').toString()) as [unknown, unknown];
    if (Number.isSafeInteger(at) && typeof id === 'string') return { at: at as number, id };
  } catch {}
  throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: continuation: is not one this endpoint gave');
}
