import type { SqlDb as Db } from './sqlDb.ts';
import { dialectOf } from './dialect.ts';
import type { DepositRow } from './types.ts';

export type NewDeposit = Omit<DepositRow, 'state' | 'request_id' | 'confirmed_at'>;
/** A deposit as a chain's indexer reads it, before the ledger names it. */
export type ChainDeposit = Omit<NewDeposit, 'id' | 'chain_id' | 'seen_at'>;

// Rows per multi-row insert: one statement per hundred deposits rather than one each (a backfill
// writes tens of thousands per range; the per-statement cost was most of the write).
const INSERT_CHUNK = 100;
// Values bound per row of the multi-row insert.
const INSERT_VALUES = 13;
const INSERT_COLUMNS = `INSERT INTO deposits (id, chain_id, tx_hash, log_index, block_number, block_hash, depositor,
      currency, amount, order_ref, state, seen_at) VALUES`;
// Re-indexing the same log is a no-op; a log that a reorg had removed and that comes back
// on the new canonical chain is revived with its new block.
const INSERT_CONFLICT = `ON CONFLICT(id) DO UPDATE SET state = 'unconfirmed', block_number = excluded.block_number,
      block_hash = excluded.block_hash WHERE deposits.state = 'reorged'`;
// The same for rows written confirmed already (their confirmations reached when they are written).
const INSERT_MANY_CONFLICT = `ON CONFLICT(id) DO UPDATE SET state = excluded.state, confirmed_at = COALESCE(excluded.confirmed_at, deposits.confirmed_at),
      block_number = excluded.block_number, block_hash = excluded.block_hash WHERE deposits.state = 'reorged'`;

export class Deposits {
  #insert;
  #insertMany = new Map<number, ReturnType<Db['prepare']>>();
  #handledOfTxs;
  #get;
  #confirm;
  #nextConfirmed;
  #byRef;
  #forRequest;
  #reorgAbove;
  #handle;
  #sender;
  #unconfirmed;
  #confirmOne;
  #liveOfChain;
  #amountsInBlocks;
  #inBlocks;
  #inFlight;
  constructor(private db: Db) {
    this.#insert = db.prepare(`${INSERT_COLUMNS} (@id, @chain_id, @tx_hash, @log_index, @block_number, @block_hash,
      @depositor, @currency, @amount, @order_ref, 'unconfirmed', @seen_at) ${INSERT_CONFLICT}`);
    // By transaction, the hashes bound as one JSON array (read by each dialect's own function). In
    // SQLite the unary + keeps the planner off deposits_state, which would walk every handled deposit
    // of the chain; PostgreSQL's planner picks deposits_tx by its statistics.
    this.#handledOfTxs = db.prepare(
      dialectOf(db) === 'postgres'
        ? `SELECT * FROM deposits WHERE chain_id = ? AND state = 'handled' AND tx_hash IN (SELECT jsonb_array_elements_text(CAST(? AS JSONB)))
          ORDER BY block_number, log_index`
        : `SELECT * FROM deposits WHERE +chain_id = ? AND +state = 'handled' AND tx_hash IN (SELECT value FROM json_each(?))
          ORDER BY block_number, log_index`,
    );
    this.#get = db.prepare('SELECT * FROM deposits WHERE id = ?');
    this.#unconfirmed = db.prepare(
      `SELECT * FROM deposits WHERE chain_id = ? AND state = 'unconfirmed' AND block_number <= ? ORDER BY block_number, log_index`,
    );
    this.#confirmOne = db.prepare(`UPDATE deposits SET state = 'confirmed', confirmed_at = @now WHERE id = @id AND state = 'unconfirmed'`);
    this.#confirm = db.prepare(`UPDATE deposits SET state = 'confirmed', confirmed_at = @now
      WHERE chain_id = @chain AND state = 'unconfirmed' AND block_number <= @upTo`);
    this.#nextConfirmed = db.prepare(`SELECT * FROM deposits WHERE state = 'confirmed' ORDER BY confirmed_at, block_number, log_index LIMIT ? OFFSET ?`);
    this.#byRef = db.prepare(`SELECT * FROM deposits WHERE order_ref = ? AND state != 'reorged' ORDER BY block_number, log_index`);
    this.#forRequest = db.prepare(`SELECT * FROM deposits WHERE request_id = ? ORDER BY block_number, log_index`);
    this.#reorgAbove = db.prepare(`UPDATE deposits SET state = 'reorged' WHERE chain_id = ? AND block_number > ?
      AND state IN ('unconfirmed', 'confirmed') RETURNING *`);
    this.#handle = db.prepare(`UPDATE deposits SET state = 'handled', request_id = @request_id WHERE id = @id AND state = 'confirmed'`);
    // The first deposit of a request names its sender and block (searchable on the request row).
    this.#sender = db.prepare(`UPDATE requests SET sender = COALESCE(sender, d.depositor), deposit_block = COALESCE(deposit_block, d.block_number)
      FROM (SELECT depositor, block_number FROM deposits WHERE id = @id) AS d WHERE requests.id = @request_id`);
    this.#liveOfChain = db.prepare(`SELECT id, tx_hash, currency, amount FROM deposits WHERE chain_id = ? AND state != 'reorged'`);
    this.#amountsInBlocks = db.prepare(
      `SELECT currency, amount FROM deposits WHERE chain_id = ? AND state != 'reorged' AND block_number > ? AND block_number <= ?`,
    );
    // Deposits acted on (a fill decided, not failed) that are not final: the fill not yet made,
    // or the deposit's block not yet below the chain's finality depth.
    this.#inFlight = db.prepare(`SELECT d.currency, d.amount FROM deposits d JOIN payouts p ON p.deposit_id = d.id AND p.kind = 'fill'
      WHERE d.chain_id = @chain AND d.state = 'handled' AND p.state != 'failed' AND (p.state IN ('queued', 'sent') OR d.block_number > @final)`);
    this.#inBlocks = db.prepare(
      `SELECT d.id, d.tx_hash, d.order_ref, d.currency, d.amount, d.state, r.fail_reason FROM deposits d LEFT JOIN requests r ON r.id = d.request_id
       WHERE d.chain_id = ? AND d.state != 'reorged' AND d.block_number > ? AND d.block_number <= ?`,
    );
  }

  /** Returns true when the row is new (or revived after a reorg). */
  insert(d: NewDeposit): boolean {
    return this.#insert.run(d).changes === 1;
  }
  /**
   * {@link insert} for many deposits, a hundred rows per statement; returns the ids of the rows new
   * (or revived after a reorg), in the order given. A deposit listed twice is written once. A row
   * with `confirmed_at` is written (or revived) confirmed at that time, as {@link confirmUpTo} would
   * have confirmed it right after, in the same transaction.
   */
  insertMany(ds: (NewDeposit & { confirmed_at?: number })[]): string[] {
    const written = new Set<string>();
    // Each id once (its first listing): PostgreSQL refuses an upsert that touches a row twice in one statement,
    // and on SQLite the second listing of a row just written changes nothing.
    const seen = new Set<string>();
    const once = ds.filter((d) => !seen.has(d.id) && seen.add(d.id));
    for (let i = 0; i < once.length; i += INSERT_CHUNK) {
      const rows = Math.min(INSERT_CHUNK, once.length - i);
      // The values in one preallocated array, column by column (a backfill binds a dozen per deposit).
      const params: (string | number | null)[] = new Array(rows * INSERT_VALUES);
      for (let r = 0, p = 0; r < rows; r++) {
        const d = once[i + r]!;
        params[p++] = d.id;
        params[p++] = d.chain_id;
        params[p++] = d.tx_hash;
        params[p++] = d.log_index;
        params[p++] = d.block_number;
        params[p++] = d.block_hash;
        params[p++] = d.depositor;
        params[p++] = d.currency;
        params[p++] = d.amount;
        params[p++] = d.order_ref;
        params[p++] = d.confirmed_at === undefined ? 'unconfirmed' : 'confirmed';
        params[p++] = d.seen_at;
        params[p++] = d.confirmed_at ?? null;
      }
      for (const id of this.#insertStatement(rows).all(params) as string[]) written.add(id);
    }
    if (written.size === ds.length) return ds.map((d) => d.id);
    return ds.filter((d) => written.delete(d.id)).map((d) => d.id);
  }
  #insertStatement(rows: number) {
    let st = this.#insertMany.get(rows);
    if (!st) {
      // RETURNING the ids as plain strings (pluck): no row object per deposit written.
      st = this.db
        .prepare(
          `${INSERT_COLUMNS.replace('seen_at)', 'seen_at, confirmed_at)')} ${Array(rows).fill('(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')} ${INSERT_MANY_CONFLICT} RETURNING id`,
        )
        .pluck();
      this.#insertMany.set(rows, st);
    }
    return st;
  }
  get(id: string): DepositRow | undefined {
    return this.#get.get(id) as DepositRow | undefined;
  }
  confirmUpTo(chainId: number, blockNumber: number, now = Date.now()): number {
    return this.#confirm.run({ chain: chainId, upTo: blockNumber, now }).changes;
  }
  /** Deposits of a chain still waiting for confirmations, in blocks up to `upTo`. */
  unconfirmed(chainId: number, upTo: number): DepositRow[] {
    return this.#unconfirmed.all(chainId, upTo) as DepositRow[];
  }
  /** Confirms one deposit (a deposit whose own count of confirmations is reached); returns whether it changed. */
  confirmOne(id: string, now = Date.now()): boolean {
    return this.#confirmOne.run({ id, now }).changes === 1;
  }
  /** skip: the first deposits of the queue the caller left confirmed (held back) and passes over. */
  nextConfirmed(limit = 100, skip = 0): DepositRow[] {
    return this.#nextConfirmed.all(limit, skip) as DepositRow[];
  }
  byOrderRef(ref: string): DepositRow[] {
    return this.#byRef.all(ref) as DepositRow[];
  }
  /** Deposits seen since `since` (ms) whose transaction fee is not read yet (for the request records). */
  recentWithoutTxFee(since: number, limit: number): DepositRow[] {
    return this.db
      .prepare(`SELECT * FROM deposits WHERE tx_fee IS NULL AND seen_at >= ? AND state != 'reorged' ORDER BY seen_at LIMIT ?`)
      .all(since, limit) as DepositRow[];
  }
  /** Every log of the transaction shares its fee. */
  setTxFee(chainId: number, txHash: string, fee: bigint): void {
    this.db.prepare('UPDATE deposits SET tx_fee = ? WHERE chain_id = ? AND tx_hash = ? AND tx_fee IS NULL').run(fee.toString(), chainId, txHash);
  }
  forRequest(requestId: string): DepositRow[] {
    return this.#forRequest.all(requestId) as DepositRow[];
  }
  /**
   * Deposits not yet acted on that sit in blocks a reorg removed. Handled deposits are left for
   * the caller to look at: they were acted on and cannot be taken back.
   */
  reorgAbove(chainId: number, ancestor: number): DepositRow[] {
    return this.#reorgAbove.all(chainId, ancestor) as DepositRow[];
  }
  handledAbove(chainId: number, ancestor: number): DepositRow[] {
    return this.db.prepare(`SELECT * FROM deposits WHERE chain_id = ? AND block_number > ? AND state = 'handled'`).all(chainId, ancestor) as DepositRow[];
  }
  /** Deposits acted on whose blocks lie in [from, to]: a re-read of that range checks they are still there. */
  handledIn(chainId: number, from: number, to: number): DepositRow[] {
    return this.db
      .prepare(`SELECT * FROM deposits WHERE chain_id = ? AND state = 'handled' AND block_number BETWEEN ? AND ? ORDER BY block_number, log_index`)
      .all(chainId, from, to) as DepositRow[];
  }
  /**
   * The deposits acted on of a chain's transactions (one query for a whole range of logs): a log
   * that repeats one of them from another fork (the same transaction included again after a reorg,
   * possibly at another log index) is the same money, not a new deposit (the indexer relocates it).
   */
  handledOfTxs(chainId: number, txHashes: string[]): DepositRow[] {
    if (txHashes.length === 0) return [];
    return this.#handledOfTxs.all(chainId, JSON.stringify(txHashes)) as DepositRow[];
  }
  /** A deposit acted on, found again on the new canonical chain: it follows its block. */
  relocate(id: string, blockNumber: number, blockHash: string): void {
    this.db.prepare(`UPDATE deposits SET block_number = ?, block_hash = ? WHERE id = ?`).run(blockNumber, blockHash, id);
  }
  /**
   * A deposit acted on that a reorg removed, none of whose payouts was signed: as if never seen
   * (it is revived, and decided afresh, if its transaction is included again).
   */
  unhandleReorged(id: string): void {
    this.db.prepare(`UPDATE deposits SET state = 'reorged' WHERE id = ? AND state = 'handled'`).run(id);
  }
  markHandled(id: string, requestId: string): void {
    if (this.#handle.run({ id, request_id: requestId }).changes !== 1) throw new Error(`deposit ${id} is not confirmed and unhandled`);
    this.#sender.run({ id, request_id: requestId });
  }
  /** A chain's deposits not removed by a reorg, in any other state (the audits look for each on chain). */
  liveOfChain(chainId: number): { id: string; tx_hash: string; currency: string; amount: string }[] {
    return this.#liveOfChain.all(chainId) as { id: string; tx_hash: string; currency: string; amount: string }[];
  }
  /** The currency and amount of a chain's deposits not removed by a reorg, in blocks (from, to]. */
  amountsInBlocks(chainId: number, from: number, to: number): { currency: string; amount: string }[] {
    return this.#amountsInBlocks.all(chainId, from, to) as { currency: string; amount: string }[];
  }
  /** A chain's deposits not removed by a reorg in blocks (from, to], each with its request's fail reason (null without a request). */
  inBlocks(
    chainId: number,
    from: number,
    to: number,
  ): { id: string; tx_hash: string; order_ref: string; currency: string; amount: string; state: string; fail_reason: string | null }[] {
    return this.#inBlocks.all(chainId, from, to) as {
      id: string;
      tx_hash: string;
      order_ref: string;
      currency: string;
      amount: string;
      state: string;
      fail_reason: string | null;
    }[];
  }
  /**
   * A chain's deposits acted on (a fill decided, not failed) that are not final: the fill not yet
   * made, or the deposit's block above `final` (the chain's tip less its finality depth).
   */
  inFlight(chainId: number, final: number): { currency: string; amount: string }[] {
    return this.#inFlight.all({ chain: chainId, final }) as { currency: string; amount: string }[];
  }
}
