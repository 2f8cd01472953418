import type { Address } from 'viem';
import type { ChainConfig } from '../../config/schema.ts';
import type { Registry } from '../../config/registry.ts';
import type { Ledger, LedgerLocation } from '../../ledger/index.ts';
import { tooManyUsageRows, type UsageJob } from '../usage.ts';
import type { ListingPool } from './pool.ts';
import { encodeContinuation, parseRequestQuery, type ListingBounds } from '../requestQuery.ts';
import { requestRecord } from '../requestRecord.ts';
import { toV2Record } from '../requestRecordV2.ts';
import type { DeliveryState } from '../../ledger/events.ts';

/**
 * One listing to run: the query string's parameters as received, for whom, and in which shape.
 * It is validated where it runs: normalising a heavy filter's addresses costs milliseconds of
 * hashing, which belong to the listing worker, not to the node's event loop.
 */
export interface ListingJob {
  query: Record<string, unknown>;
  authenticatedFor: string | undefined;
  v2: boolean;
  referrer?: string;
}

/**
 * A read whose cost a backlog sets, run where listings run (off the node's event loop): a webhook's newest deliveries
 * (no index orders them: the statement sorts all of the webhook's), a key's usage counts in a span (a scan of every
 * minute row in it), or a wallet's app fees and claims (a walk of every entry of the wallet). `maxRows`: more usage
 * rows than this is a 400 naming it.
 */
export type ReadJob =
  | { kind: 'deliveries'; webhookId: string; state: DeliveryState | undefined; limit: number }
  | UsageJob
  | AppFeeBalancesJob
  | { kind: 'appFeeClaims'; wallet: string; after: { at: number; id: string } | undefined; limit: number };

/**
 * A wallet's app balance and app fees (GET /app-fees/:wallet/balances, no key needed): each is a walk of the wallet's
 * entries, one per request that paid it a fee or drew on its balance, however many a busy app's wallet has. Its rows: `[AppFeeBalances]`.
 */
export interface AppFeeBalancesJob {
  kind: 'appFeeBalances';
  wallet: string;
}
export interface AppFeeBalances {
  summary: { balance: bigint; held: bigint; available: bigint };
  fees: { chainId: number; currency: string; amount: bigint }[];
}

/** Runs a ReadJob against a ledger connection. */
export function runRead(ctx: { ledger: Ledger }, job: ReadJob): unknown[] {
  if (job.kind === 'deliveries') return ctx.ledger.events.deliveries(job.webhookId, { state: job.state, limit: job.limit });
  if (job.kind === 'appFeeBalances') {
    const read: AppFeeBalances = { summary: ctx.ledger.balances.summary(job.wallet), fees: ctx.ledger.appFees.balances(job.wallet) };
    return [read];
  }
  // The claims statement finds the wallet's claims among all its entries (no index has their kind).
  if (job.kind === 'appFeeClaims') return ctx.ledger.appFees.claimsOf(job.wallet, job.after, job.limit);
  const rows = ctx.ledger.apiUsage.buckets(job.apiKeyId, job.size, job.from, job.to);
  // Refused here: the rows past the bound are never sent to the node's thread.
  if (rows.length > job.maxRows) throw tooManyUsageRows();
  return rows;
}

/**
 * Runs a ReadJob on a listing worker, counted among the caller's listings in progress (api.listing.perCaller);
 * inline where the API has no workers.
 */
export function readOffLoop(ctx: { ledger: Ledger; listings?: ListingPool }, job: ReadJob, caller: string): Promise<unknown[]> {
  return ctx.listings ? ctx.listings.run(job, caller) : Promise.resolve().then(() => runRead(ctx, job));
}

/** A listing's page: the records (already in the endpoint's shape), the continuation, the total when asked. */
export interface ListingResult {
  records: unknown[];
  continuation: string | undefined;
  total: number | undefined;
}

/**
 * What a listing worker is started with: the chains' public metadata and where the ledger is. The one secret, a
 * PostgreSQL ledger's URL, stays in the process (a worker thread's data) and reaches only its connection.
 */
export interface ListingWorkerData {
  ledger: LedgerLocation;
  chains: ChainConfig[];
  solver: Address;
  bounds: ListingBounds;
  /** The workers' thread niceness (api.listing.workerNice). */
  nice: number;
}

/** Runs a listing against a ledger connection: validation (a 400 names the bound), the SQL search and the records of its page. */
export function runListing(ctx: { ledger: Ledger; registry: Registry; solver: Address; bounds: ListingBounds }, job: ListingJob): ListingResult {
  const privateChains = [...ctx.registry.chains.values()].filter((c) => c.private).map((c) => c.id);
  const q = parseRequestQuery(job.query, { callerKeyId: job.authenticatedFor, privateChains, bounds: ctx.bounds });
  // Within the caller's requests only (none without a key: the route refuses that with a 401).
  if (job.referrer !== undefined) q.referrer = { referrer: job.referrer, apiKeyId: job.authenticatedFor ?? '' };
  const found = ctx.ledger.requests.search(q);
  const recordCtx = {
    ledger: ctx.ledger,
    registry: ctx.registry,
    solver: ctx.solver,
    authenticatedFor: q.includeAuthenticatedData ? job.authenticatedFor : undefined,
  };
  const records = found.rows.map((r) => requestRecord(recordCtx, r));
  return {
    records: job.v2 ? records.map(toV2Record) : records,
    continuation: found.next ? encodeContinuation({ s: q.sortBy, d: q.sortDirection, k: found.next.key, i: found.next.id }) : undefined,
    total: found.total,
  };
}
