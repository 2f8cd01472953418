import type { Address } from 'viem';
import type { ChainConfig } from '../../config/schema.ts';
import type { Registry } from '../../config/registry.ts';
import type { Ledger, LedgerLocation } from '../../ledger/index.ts';
import { encodeContinuation, parseRequestQuery, type ListingBounds } from '../requestQuery.ts';
import { requestRecord } from '../requestRecord.ts';
import { toV2Record } from '../requestRecordV2.ts';

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
