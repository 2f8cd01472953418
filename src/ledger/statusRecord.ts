import { orderRefIs } from './deposits.ts';
import type { RequestRow } from './types.ts';

/** The request's fields the Status record shows (a few of its ~40 columns). */
type StatusFields = Pick<
  RequestRow,
  'status' | 'details' | 'fail_reason' | 'refund_fail_reason' | 'updated_at' | 'origin_chain_id' | 'destination_chain_id' | 'created_at'
>;

export type StatusRecord = ReturnType<typeof shapeStatus>;

// The record's columns over a request row `r`.
const STATUS_COLUMNS = `r.api_key_id, r.status, r.details, r.fail_reason, r.refund_fail_reason, r.updated_at, r.origin_chain_id,
  r.destination_chain_id, r.created_at,
  (SELECT string_agg(d.tx_hash, ',' ORDER BY d.block_number, d.log_index) FROM deposits d WHERE d.request_id = r.id) AS in_hashes,
  CASE WHEN r.kind = 'order' AND r.status = 'waiting' THEN
    (SELECT string_agg(d.tx_hash, ',' ORDER BY d.block_number, d.log_index) FROM deposits d WHERE ${orderRefIs('d.order_ref', 'r.id')} AND d.state != 'reorged')
  END AS seen_hashes,
  (SELECT string_agg(p.tx_hash, ',' ORDER BY p.decided_at, p.id) FROM payouts p
    WHERE p.request_id = r.id AND p.tx_hash IS NOT NULL AND p.kind NOT IN ('sweep', 'deposit')) AS out_hashes`;

/**
 * The Status record of the interface (GET /intents/status by id, and every status event of the outbox,
 * src/ledger/events.ts) in ONE statement (one read lock on SQLite, one round trip on PostgreSQL, one
 * snapshot on both): the request's shown fields, and its hashes each aggregated in order (deposits by
 * block and log index, then those seen for a waiting order, outgoing payouts by decision time, then id: a deposit
 * address's sweep and a permit's deposit, sent by the node, carry the deposit in, and their hash is the deposit's); with the
 * request's API key, whose webhooks an event goes to. Aggregates take ORDER BY on both ledgers (SQLite
 * 3.44+); hashes are hex or base58, so a comma separates them unambiguously.
 */
export const STATUS_BY_ID = `SELECT ${STATUS_COLUMNS}
  FROM requests r WHERE r.id = ?`;

/**
 * The Status records of a user's latest requests (at most the limit), oldest first, each with its request id: the
 * wallet snapshot of the status stream in one statement (one round trip on PostgreSQL, not one per request).
 */
export const STATUSES_OF_USER = `SELECT r.id, ${STATUS_COLUMNS}
  FROM (SELECT * FROM requests WHERE "user" = ? ORDER BY created_at DESC, id DESC LIMIT ?) AS r ORDER BY r.created_at, r.id`;

/** A row of STATUS_BY_ID. */
export type StatusRow = StatusFields & { api_key_id: string | null; in_hashes: string | null; seen_hashes: string | null; out_hashes: string | null };

/** The Status record from a row of STATUS_BY_ID. */
export function statusFromRow(row: StatusRow): StatusRecord {
  const list = (s: string | null) => (s ? s.split(',') : []);
  return shapeStatus(row, [...list(row.in_hashes), ...list(row.seen_hashes)], list(row.out_hashes));
}

function shapeStatus(r: StatusFields, inHashes: string[], txHashes: string[]) {
  return {
    status: r.status,
    details: r.details ?? detailsFor(r),
    inTxHashes: [...new Set(inHashes)],
    txHashes,
    updatedAt: r.updated_at,
    originChainId: r.origin_chain_id,
    destinationChainId: r.destination_chain_id,
    quoteCreatedAt: r.created_at,
    failReason: r.fail_reason,
    refundFailReason: r.refund_fail_reason,
  };
}

function detailsFor(r: Pick<RequestRow, 'status' | 'fail_reason' | 'refund_fail_reason'>): string {
  switch (r.status) {
    case 'waiting':
      return 'Waiting for the deposit to be confirmed';
    case 'depositing':
      return 'Deposit in flight';
    case 'pending':
      return 'Deposit confirmed; fill queued';
    case 'submitted':
      return 'Fill submitted on the destination chain';
    case 'success':
      return 'Filled';
    case 'refund':
      return `Refunded after ${r.fail_reason ?? 'failure'}`;
    case 'failure':
      return r.refund_fail_reason ? `Failed (${r.fail_reason}); refund not possible: ${r.refund_fail_reason}` : `Failed (${r.fail_reason}); refund pending`;
  }
}
