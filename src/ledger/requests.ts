import type { Hex } from 'viem';
import type { SqlDb as Db } from './sqlDb.ts';
import { pruneUnusedQuotes } from './quotePruner.ts';
import { searchRequests, type RequestQuery, type SearchResult } from './requestSearch.ts';
import type { Events } from './events.ts';
import type { RequestRow, Status } from './types.ts';
import type { FailReason, RefundFailReason } from './reasons.ts';
import { STATUS_BY_ID, STATUSES_OF_USER, statusFromRow, type StatusRecord, type StatusRow } from './statusRecord.ts';

// A status change's UPDATE: the fields it sets (a null reason or details keeps the request's).
type StatusArgs = {
  id: string;
  status: Status;
  fail_reason: FailReason | null;
  refund_fail_reason: RefundFailReason | null;
  details: string | null;
  now: number;
};
// Set by the ledger as the request progresses, never by its creator.
type Progress =
  | 'status'
  | 'fail_reason'
  | 'refund_fail_reason'
  | 'details'
  | 'updated_at'
  | 'fast_fill_deadline'
  | 'fast_fill_input'
  | 'failed_call_data'
  | 'sender'
  | 'deposit_block'
  | 'fill_time_ms';
type Optional =
  | 'money'
  | 'features'
  | 'api_key_id'
  | 'referrer'
  | 'amount_usd'
  | 'app_fees_usd'
  | 'currency_in_symbol'
  | 'currency_out_symbol'
  | 'deposit_address';

export type NewRequest = Omit<RequestRow, Progress | Optional> & {
  [K in Exclude<Optional, 'money' | 'features'>]?: RequestRow[K];
} & {
  /** The quote given (the /quote answer, JSON), stored in request_quotes; null for a request no quote made. */
  quote: string | null;
  status?: Status;
  money?: string | null;
  features?: string;
};

/**
 * The deposit addresses a chain's watcher checks on every head (depositAddresses): through requests_watched_chain
 * (migration 39), which holds only the live addresses' rows and seeks the chain's recent ones, not every request.
 */
export const WATCHED_ADDRESSES = `SELECT id, refund_to, deposit_address, origin_currency, amount_in, money, expires_at FROM requests
  WHERE deposit_address IS NOT NULL AND parent_id IS NULL AND origin_chain_id = ? AND created_at >= ?`;

export class Requests {
  #insert;
  #insertQuote;
  #quoteOf;
  #get;
  #feeBasis;
  #fillDeadline;
  #setStatus;
  #children;
  #fastFill;
  #failedCall;
  #watched;
  #watchedOfKey;
  #watchedAnonymous;
  #byDepositAddress;
  #features;
  // The status events outbox: every status change appends its event in the same transaction.
  #events: Events | undefined;
  #changeStatus: (args: StatusArgs) => void;
  #changeStatusTx;
  #insertRow;
  #ofUser;
  #manualRefunds;
  #status;
  #db: Db;
  constructor(db: Db, events?: Events) {
    this.#db = db;
    this.#events = events;
    this.#ofUser = db.prepare(STATUSES_OF_USER);
    this.#manualRefunds = db.prepare(`SELECT r.id, r.fail_reason, r.updated_at, d.id AS deposit_id, d.chain_id, d.amount, d.currency FROM requests r
      JOIN deposits d ON d.request_id = r.id WHERE r.status = 'failure' AND r.refund_fail_reason = 'MANUAL_REFUND_REQUIRED'
      AND NOT EXISTS (SELECT 1 FROM payouts p WHERE p.request_id = r.id AND p.kind = 'refund' AND p.state != 'failed')`);
    // A change reads the request's Status record once, before its UPDATE: the fields it compares, and the record its
    // event announces (the UPDATE's own fields applied to it: hashes live in other tables, and only a waiting order's
    // record lists the deposits seen for it, so no change that leaves 'waiting' needs them read again).
    this.#changeStatus = (args: StatusArgs) => {
      const before = this.#status.get(args.id) as StatusRow | undefined;
      if (!before || this.#setStatus.run(args).changes !== 1) throw new Error(`request ${args.id} not found`);
      const after: StatusRow = {
        ...before,
        status: args.status,
        fail_reason: args.fail_reason ?? before.fail_reason,
        refund_fail_reason: args.refund_fail_reason ?? before.refund_fail_reason,
        details: args.details ?? before.details,
        updated_at: args.now,
        seen_hashes: args.status === 'waiting' ? before.seen_hashes : null,
      };
      // A call that leaves the status (and its reasons) as they were announces nothing.
      if (after.status === before.status && after.fail_reason === before.fail_reason && after.refund_fail_reason === before.refund_fail_reason) return;
      // Nothing returns to 'waiting' from another status; were it to, its seen deposits are read after the UPDATE.
      if (after.status === 'waiting' && before.status !== 'waiting') this.#events!.record(args.id);
      else this.#events!.recordRow(args.id, after);
    };
    // A change outside a caller's transaction is one of its own (IMMEDIATE: it reads then writes); inside one, it is
    // part of it (no savepoint: a change that throws has written nothing).
    this.#changeStatusTx = db.transaction(this.#changeStatus);
    this.#insertRow = db.transaction((args: Record<string, unknown>, quote: string | null) => {
      this.#insert.run(args);
      if (quote !== null) this.#insertQuote.run(args.id, quote);
      this.#events?.record(args.id as string);
    });
    this.#features = db.prepare('UPDATE requests SET features = ?, updated_at = ? WHERE id = ?');
    this.#watched = db.prepare(WATCHED_ADDRESSES);
    // Counted up to the cap only (LIMIT), through requests_watched (migration 30).
    const live = 'deposit_address IS NOT NULL AND parent_id IS NULL AND created_at >= @since';
    this.#watchedOfKey = db.prepare(`SELECT count(*) AS n FROM (SELECT 1 FROM requests WHERE api_key_id = @key AND ${live} LIMIT @cap) AS w`);
    this.#watchedAnonymous = db.prepare(`SELECT count(*) AS n FROM (SELECT 1 FROM requests WHERE api_key_id IS NULL AND ${live} LIMIT @cap) AS w`);
    this.#byDepositAddress = db.prepare('SELECT * FROM requests WHERE deposit_address = ? AND parent_id IS NULL');
    this.#failedCall = db.prepare('UPDATE requests SET failed_call_data = ? WHERE id = ?');
    this.#fastFill = db.prepare(`UPDATE requests SET fast_fill_deadline = @deadline,
      fast_fill_input = @input, features = @features, updated_at = @now WHERE id = @id`);
    this.#insert = db.prepare(`INSERT INTO requests (id, parent_id, kind, request_type, status, "user", recipient, refund_to,
      origin_chain_id, destination_chain_id, origin_currency, destination_currency, trade_type, amount_in, amount_out,
      min_amount_out, pricing, order_data, expires_at, fill_deadline, created_at, updated_at, money, features, api_key_id, referrer, amount_usd, app_fees_usd, currency_in_symbol,
      currency_out_symbol, deposit_address)
      VALUES (@id, @parent_id, @kind, @request_type, @status, @user, @recipient, @refund_to, @origin_chain_id,
      @destination_chain_id, @origin_currency, @destination_currency, @trade_type, @amount_in, @amount_out,
      @min_amount_out, @pricing, @order_data, @expires_at, @fill_deadline, @created_at, @created_at, @money, @features, @api_key_id, @referrer, @amount_usd, @app_fees_usd,
      @currency_in_symbol, @currency_out_symbol, @deposit_address)`);
    this.#insertQuote = db.prepare('INSERT INTO request_quotes (request_id, quote) VALUES (?, ?)');
    this.#quoteOf = db.prepare('SELECT quote FROM request_quotes WHERE request_id = ?');
    this.#get = db.prepare('SELECT * FROM requests WHERE id = ?');
    this.#feeBasis = db.prepare(`SELECT id, pricing, amount_in, fast_fill_input, deposit_address, fail_reason, destination_chain_id,
      destination_currency FROM requests WHERE id = ?`);
    // An open deposit address's arrival (a request with a parent: its template) has no deadline of its own: its
    // template's window (the template's deadline less its quote time) runs from the arrival's decision.
    this.#fillDeadline = db.prepare(`SELECT CASE WHEN r.fill_deadline IS NOT NULL THEN r.fill_deadline
      WHEN t.fill_deadline IS NOT NULL THEN r.created_at + (t.fill_deadline - t.created_at) END AS deadline
      FROM requests r LEFT JOIN requests t ON t.id = r.parent_id WHERE r.id = ?`);
    this.#setStatus = db.prepare(`UPDATE requests SET status = @status, fail_reason = COALESCE(@fail_reason, fail_reason),
      refund_fail_reason = COALESCE(@refund_fail_reason, refund_fail_reason), details = COALESCE(@details, details),
      fill_time_ms = CASE WHEN @status = 'success' THEN @now - (SELECT MIN(seen_at) FROM deposits WHERE request_id = @id) ELSE fill_time_ms END,
      updated_at = @now WHERE id = @id`);
    this.#children = db.prepare('SELECT * FROM requests WHERE parent_id = ? ORDER BY created_at');
    this.#status = db.prepare(STATUS_BY_ID);
  }

  /** Records a request, its quote and (with events) its 'waiting' event, in one transaction. */
  insert(r: NewRequest): void {
    const { quote, ...row } = r;
    const args = {
      status: 'waiting',
      money: null,
      features: '[]',
      api_key_id: null,
      referrer: null,
      amount_usd: null,
      app_fees_usd: null,
      currency_in_symbol: null,
      currency_out_symbol: null,
      deposit_address: null,
      ...row,
    };
    this.#insertRow.immediate(args, quote);
    this.#events?.committed();
  }

  /** The quote the request was given (the /quote answer, JSON); undefined for a request no quote made. */
  quoteOf(id: string): string | undefined {
    return (this.#quoteOf.get(id) as { quote: string } | undefined)?.quote;
  }

  /** The request's Status record (GET /intents/status), in one statement; undefined if there is no such request. */
  status(id: string): StatusRecord | undefined {
    const row = this.#status.get(id) as StatusRow | undefined;
    return row && statusFromRow(row);
  }

  get(id: string): RequestRow | undefined {
    return this.#get.get(id) as RequestRow | undefined;
  }

  /** The fields a paid fill's fees are booked from (the solver's onPaid), without the rest of the request's ~40 columns. */
  feeBasis(id: string): FeeBasis | undefined {
    return this.#feeBasis.get(id) as FeeBasis | undefined;
  }

  /** When a fill of the request may no longer be signed (ms), in one read; undefined when it has no deadline. */
  fillDeadline(id: string): number | undefined {
    const d = (this.#fillDeadline.get(id) as { deadline: number | string | null } | undefined)?.deadline;
    return d == null ? undefined : Number(d);
  }

  children(id: string): RequestRow[] {
    return this.#children.all(id) as RequestRow[];
  }

  setStatus(
    id: string,
    status: Status,
    extra: { failReason?: FailReason; refundFailReason?: RefundFailReason; details?: string } = {},
    now = Date.now(),
  ): void {
    const args: StatusArgs = {
      id,
      status,
      fail_reason: extra.failReason ?? null,
      refund_fail_reason: extra.refundFailReason ?? null,
      details: extra.details ?? null,
      now,
    };
    if (!this.#events) {
      const res = this.#setStatus.run(args);
      if (res.changes !== 1) throw new Error(`request ${id} not found`);
      return;
    }
    if (this.#db.inTransaction) this.#changeStatus(args);
    else this.#changeStatusTx.immediate(args);
    this.#events.committed();
  }

  /** Deposit addresses on a chain quoted since `since`: what the chain's watcher checks. */
  depositAddresses(chainId: number, since: number): WatchedAddress[] {
    return this.#watched.all(chainId, since) as WatchedAddress[];
  }

  /**
   * How many deposit addresses quoted since `since` (on any chain) are of the API key `apiKeyId` (null: quoted
   * without one), counted up to `cap`.
   */
  watchedOf(apiKeyId: string | null, since: number, cap: number): number {
    const row = (apiKeyId === null ? this.#watchedAnonymous.get({ since, cap }) : this.#watchedOfKey.get({ key: apiKeyId, since, cap })) as {
      n: number | string;
    };
    return Number(row.n);
  }

  /** The request a deposit address was quoted for (an open address's arrivals copy its address: never one of them). */
  byDepositAddress(address: string): RequestRow | undefined {
    return this.#byDepositAddress.get(address) as RequestRow | undefined;
  }

  setFailedCallData(id: string, data: string): void {
    this.#failedCall.run(data, id);
  }

  /** The request was filled before its deposit: its hold runs until `deadline`. */
  markFastFilled(id: string, deadline: number, input: bigint, now = Date.now()): void {
    const r = this.get(id)!;
    const features = [...new Set([...(JSON.parse(r.features) as string[]), 'fast_fill'])];
    this.#fastFill.run({ id, deadline, input: input.toString(), features: JSON.stringify(features), now });
  }

  addFeature(id: string, feature: string, now = Date.now()): void {
    const r = this.get(id)!;
    const features = [...new Set([...(JSON.parse(r.features) as string[]), feature])];
    this.#features.run(JSON.stringify(features), now, id);
  }

  /**
   * A request id the node did not issue (orphan deposits, extra deposits) is derived from the
   * deposit's own id, so indexing the same deposit twice finds the same request.
   */
  static derivedId(depositId: string, keccak: (s: string) => Hex): Hex {
    return keccak(`deposit:${depositId}`);
  }

  /** The request listing's search (requestSearch.ts): its SQL is assembled per query from fixed fragments, so it is prepared per call. */
  search(q: RequestQuery): SearchResult {
    return searchRequests(this.#db, q);
  }
  /** The Status records of the user's latest `limit` requests, oldest first (the status stream's wallet snapshot). */
  latestStatusesOfUser(user: string, limit: number): { id: string; record: StatusRecord }[] {
    return (this.#ofUser.all(user, limit) as (StatusRow & { id: string })[]).map((row) => ({ id: row.id, record: statusFromRow(row) }));
  }
  /**
   * Failed requests left for a manual refund (a blocked depositor, a refund the chain refused)
   * that no refund payout (other than a failed one) answers, with their deposit.
   */
  manualRefundsOwed(): {
    id: string;
    fail_reason: string | null;
    updated_at: number;
    deposit_id: string;
    chain_id: number;
    amount: string;
    currency: string;
  }[] {
    return this.#manualRefunds.all() as {
      id: string;
      fail_reason: string | null;
      updated_at: number;
      deposit_id: string;
      chain_id: number;
      amount: string;
      currency: string;
    }[];
  }
  /**
   * Deletes up to `limit` unused quotes that expired before `before` (ms), in one transaction of
   * its own (quotePruner.ts says what "unused" means). Returns how many were deleted.
   */
  pruneUnusedQuotes(before: number, limit?: number): number {
    return pruneUnusedQuotes(this.#db, before, limit);
  }
}
/** A deposit address the watcher reads: its request, refundTo, address, quoted currency and amount, and its money (its type). */
export type WatchedAddress = Pick<RequestRow, 'id' | 'refund_to' | 'deposit_address' | 'origin_currency' | 'amount_in' | 'money' | 'expires_at'>;
/** What a paid fill's fees are booked from: its pricing, what it was made of, where it paid, and whether a reorg took its deposit. */
export type FeeBasis = Pick<
  RequestRow,
  'id' | 'pricing' | 'amount_in' | 'fast_fill_input' | 'deposit_address' | 'fail_reason' | 'destination_chain_id' | 'destination_currency'
>;
