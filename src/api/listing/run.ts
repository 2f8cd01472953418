import type { Address } from 'viem';
import type { ChainConfig } from '../../config/schema.ts';
import type { Registry } from '../../config/registry.ts';
import type { Ledger } from '../../ledger/index.ts';
import { searchRequests } from '../../ledger/requestSearch.ts';
import { encodeContinuation, type ParsedRequestQuery } from '../requestQuery.ts';
import { requestRecord } from '../requestRecord.ts';
import { toV2Record } from '../requestRecordV2.ts';

/** One listing to run: the validated query, for whom, and in which shape. */
export interface ListingJob {
  query: ParsedRequestQuery;
  authenticatedFor: string | undefined;
  v2: boolean;
}

/** A listing's page: the records (already in the endpoint's shape), the continuation, the total when asked. */
export interface ListingResult {
  records: unknown[];
  continuation: string | undefined;
  total: number | undefined;
}

/** What a listing worker is started with (no secrets: the chains' public metadata and the ledger's path). */
export interface ListingWorkerData {
  ledgerPath: string;
  chains: ChainConfig[];
  solver: Address;
}

/** Runs a listing against a ledger connection: the SQL search and the records of its page. */
export function runListing(ctx: { ledger: Ledger; registry: Registry; solver: Address }, job: ListingJob): ListingResult {
  const q = job.query;
  const found = searchRequests(ctx.ledger.db, q);
  const recordCtx = { ledger: ctx.ledger, registry: ctx.registry, solver: ctx.solver, authenticatedFor: q.includeAuthenticatedData ? job.authenticatedFor : undefined };
  const records = found.rows.map((r) => requestRecord(recordCtx, r));
  return {
    records: job.v2 ? records.map(toV2Record) : records,
    continuation: found.next ? encodeContinuation({ s: q.sortBy, d: q.sortDirection, k: found.next.key, i: found.next.id }) : undefined,
    total: found.total,
  };
}
