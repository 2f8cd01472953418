import type { SqlDb as Db } from './sqlDb.ts';
import { dialectOf } from './dialect.ts';
import type { DepositRow } from './types.ts';

export type NewDeposit = Omit<DepositRow, 'state' | 'request_id' | 'confirmed_at'>;
/** What a write of deposits did: how many were new to the ledger (or revived after a reorg), and how many of those it wrote confirmed. */
export interface Recorded {
  fresh: number;
  confirmed: number;
}
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
// on the new canonical chain is revived with its new block, and with what it deposits there: the same
// transaction at the same log index may deposit otherwise in another block (a contract's deposit that depends
// on the block, a swap's output). Revived with the removed block's amount, 1 wei there was filled as 0.5 ETH.
const REVIVED = `block_number = excluded.block_number, block_hash = excluded.block_hash, depositor = excluded.depositor,
      currency = excluded.currency, amount = excluded.amount, order_ref = excluded.order_ref`;
const INSERT_CONFLICT = `ON CONFLICT(id) DO UPDATE SET state = 'unconfirmed', ${REVIVED} WHERE deposits.state = 'reorged'`;
// The same for rows written confirmed already (their confirmations reached when they are written).
const INSERT_MANY_CONFLICT = `ON CONFLICT(id) DO UPDATE SET state = excluded.state, confirmed_at = COALESCE(excluded.confirmed_at, deposits.confirmed_at),
      ${REVIVED} WHERE deposits.state = 'reorged'`;

/**
 * `column` (a deposit's order_ref) equals `ref`, written so that the deposits' index by ref serves it (migration 31):
 * that index holds the ref's last 8 hex digits, not the whole 66-character random key (which made every range of a
 * backfill rewrite most of a large index: about half of its write), so a lookup names those digits beside the ref
 * itself, which keeps it exact.
 */
export function orderRefIs(column: string, ref: string): string {
  return `substr(${column}, 59) = substr(${ref}, 59) AND ${column} = ${ref}`;
}

/** Deposits as the bulk insert binds them: INSERT_VALUES values per deposit, in the order of its columns. */
export type BoundDeposits = (string | number | null)[];

/** The bulk insert's values for `count` deposits of `ds` from `from` on: one flat array (a backfill binds a dozen values per deposit). */
export function bindDeposits(ds: readonly (NewDeposit & { confirmed_at?: number })[], from = 0, count = ds.length - from): BoundDeposits {
  const values: BoundDeposits = new Array(count * INSERT_VALUES);
  for (let r = from, p = 0; r < from + count; r++) {
    const d = ds[r]!;
    values[p++] = d.id;
    values[p++] = d.chain_id;
    values[p++] = d.tx_hash;
    values[p++] = d.log_index;
    values[p++] = d.block_number;
    values[p++] = d.block_hash;
    values[p++] = d.depositor;
    values[p++] = d.currency;
    values[p++] = d.amount;
    values[p++] = d.order_ref;
    values[p++] = d.confirmed_at === undefined ? 'unconfirmed' : 'confirmed';
    values[p++] = d.seen_at;
    values[p++] = d.confirmed_at ?? null;
  }
  return values;
}

/** The deposits `values` binds (bindDeposits). */
export function unbindDeposits(values: BoundDeposits): (NewDeposit & { confirmed_at?: number })[] {
  const ds: (NewDeposit & { confirmed_at?: number })[] = [];
  for (let p = 0; p < values.length; p += INSERT_VALUES) {
    const d = {
      id: values[p],
      chain_id: values[p + 1],
      tx_hash: values[p + 2],
      log_index: values[p + 3],
      block_number: values[p + 4],
      block_hash: values[p + 5],
      depositor: values[p + 6],
      currency: values[p + 7],
      amount: values[p + 8],
      order_ref: values[p + 9],
      seen_at: values[p + 11],
    } as NewDeposit & { confirmed_at?: number };
    if (values[p + 12] !== null) d.confirmed_at = values[p + 12] as number;
    ds.push(d);
  }
  return ds;
}

export class Deposits {
  #insert;
  #insertMany = new Map<number, ReturnType<Db['prepare']>>();
  #handledOfTxs;
  #get;
  #confirmedAt;
  #amountOf;
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
  #actedAbove;
  #unconfirmedChains;
  #unconfirmedOf;
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
    // One column each, where a fill's path needs no more of the row (a row of every column is an object of 16 properties).
    this.#confirmedAt = db.prepare('SELECT confirmed_at FROM deposits WHERE id = ?');
    this.#amountOf = db.prepare('SELECT amount FROM deposits WHERE id = ?');
    this.#unconfirmed = db.prepare(
      `SELECT * FROM deposits WHERE chain_id = ? AND state = 'unconfirmed' AND block_number <= ? ORDER BY block_number, log_index`,
    );
    this.#confirmOne = db.prepare(`UPDATE deposits SET state = 'confirmed', confirmed_at = @now WHERE id = @id AND state = 'unconfirmed'`);
    this.#confirm = db.prepare(`UPDATE deposits SET state = 'confirmed', confirmed_at = @now
      WHERE chain_id = @chain AND state = 'unconfirmed' AND block_number <= @upTo`);
    this.#nextConfirmed = db.prepare(`SELECT * FROM deposits WHERE state = 'confirmed' ORDER BY confirmed_at, block_number, log_index LIMIT ? OFFSET ?`);
    this.#byRef = db.prepare(`SELECT * FROM deposits WHERE ${orderRefIs('order_ref', '@ref')} AND state != 'reorged' ORDER BY block_number, log_index`);
    this.#forRequest = db.prepare(`SELECT * FROM deposits WHERE request_id = ? ORDER BY block_number, log_index`);
    this.#reorgAbove = db.prepare(`UPDATE deposits SET state = 'reorged' WHERE chain_id = ? AND block_number > ?
      AND state IN ('unconfirmed', 'confirmed') RETURNING *`);
    this.#handle = db.prepare(`UPDATE deposits SET state = 'handled', request_id = @request_id WHERE id = @id AND state = 'confirmed'`);
    // The first deposit of a request names its sender and block (searchable on the request row).
    this.#sender = db.prepare(`UPDATE requests SET sender = COALESCE(sender, d.depositor), deposit_block = COALESCE(deposit_block, d.block_number)
      FROM (SELECT depositor, block_number FROM deposits WHERE id = @id) AS d WHERE requests.id = @request_id`);
    this.#liveOfChain = db.prepare(`SELECT id, tx_hash, currency, amount FROM deposits WHERE chain_id = ? AND state != 'reorged'`);
    this.#unconfirmedChains = db.prepare(`SELECT DISTINCT chain_id FROM deposits WHERE state = 'unconfirmed'`);
    this.#unconfirmedOf = db.prepare(`SELECT * FROM deposits WHERE chain_id = ? AND state = 'unconfirmed' ORDER BY seen_at LIMIT ?`);
    this.#actedAbove = db.prepare(
      `SELECT block_number, currency, amount FROM deposits WHERE chain_id = ? AND block_number > ? AND state IN ('confirmed', 'handled')`,
    );
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
    // Each id once (its first listing): PostgreSQL refuses an upsert that touches a row twice in one statement,
    // and on SQLite the second listing of a row just written changes nothing.
    const seen = new Set<string>();
    const once = ds.filter((d) => !seen.has(d.id) && seen.add(d.id));
    const written = new Set<string>();
    for (let i = 0; i < once.length; i += INSERT_CHUNK) {
      const rows = Math.min(INSERT_CHUNK, once.length - i);
      for (const id of this.#insertStatement(rows, true).all(bindDeposits(once, i, rows)) as string[]) written.add(id);
    }
    if (written.size === ds.length) return ds.map((d) => d.id);
    return ds.filter((d) => written.delete(d.id)).map((d) => d.id);
  }
  /**
   * {@link insertMany} of deposits given as the insert binds them ({@link bindDeposits}), each listed once, counting
   * the rows new (or revived) rather than naming them: no RETURNING, a tenth less work for a backfill.
   */
  insertBound(values: BoundDeposits): number {
    const n = values.length / INSERT_VALUES;
    let fresh = 0;
    for (let i = 0; i < n; i += INSERT_CHUNK) {
      const rows = Math.min(INSERT_CHUNK, n - i);
      fresh += this.#insertStatement(rows, false).run(values.slice(i * INSERT_VALUES, (i + rows) * INSERT_VALUES)).changes;
    }
    return fresh;
  }
  /**
   * Writes deposits read from canonical blocks, all of chain `chainId`; returns the ids of those new to the ledger (or
   * revived after a reorg), as {@link insertMany}. A deposit already recorded is not written again; one acted on that
   * a log repeats from another fork (the same transaction, included again after a reorg, possibly at another log
   * index: the same money) follows its block instead. Runs inside the caller's transaction.
   */
  record(chainId: number, ds: (NewDeposit & { confirmed_at?: number })[]): string[] {
    return this.insertMany(this.#relocate(ds, this.handledOfTxs(chainId, [...new Set(ds.map((d) => d.tx_hash))])));
  }
  /**
   * {@link record} of deposits given as the insert binds them ({@link bindDeposits}: SQLite's writer thread receives
   * them so), counting the deposits new to the ledger, and those of them written confirmed, rather than naming them.
   * In the common case (all of them confirmed or none, each listed once, none repeating a deposit acted on) they are
   * bound as they are, without a row object each.
   */
  recordCount(chainId: number, values: BoundDeposits): Recorded {
    const n = values.length / INSERT_VALUES;
    const ids = new Set<unknown>();
    const txs = new Set<string>();
    let confirmed = 0;
    for (let p = 0; p < values.length; p += INSERT_VALUES) {
      ids.add(values[p]);
      txs.add(values[p + 2] as string);
      if (values[p + 10] === 'confirmed') confirmed++;
    }
    const handled = this.handledOfTxs(chainId, [...txs]);
    if (ids.size === n && (confirmed === 0 || confirmed === n) && handled.length === 0) {
      const fresh = this.insertBound(values);
      return { fresh, confirmed: confirmed ? fresh : 0 };
    }
    const rows = this.#relocate(unbindDeposits(values), handled);
    const written = this.insertMany(rows);
    const confirmedIds = new Set(rows.filter((r) => r.confirmed_at !== undefined).map((r) => r.id));
    return { fresh: written.length, confirmed: written.filter((id) => confirmedIds.has(id)).length };
  }
  // The deposits of `ds` to insert: those that repeat a deposit already acted on from another fork move it to their
  // block instead (see record). `handledOfTxs`: the deposits acted on in their transactions, read in one query (a
  // backfill writes thousands of logs per range; a query per log was most of its cost).
  #relocate<D extends NewDeposit>(ds: D[], handledOfTxs: DepositRow[]): D[] {
    if (handledOfTxs.length === 0) return ds;
    const handled = new Map<string, DepositRow[]>();
    for (const h of handledOfTxs) {
      const rows = handled.get(h.tx_hash);
      if (rows) rows.push(h);
      else handled.set(h.tx_hash, [h]);
    }
    return ds.filter((d) => {
      const earlier = handled
        .get(d.tx_hash)
        ?.find(
          (h) =>
            h.order_ref === d.order_ref && h.amount === d.amount && h.currency === d.currency && h.depositor === d.depositor && h.block_hash !== d.block_hash,
        );
      if (!earlier) return true;
      this.relocate(earlier.id, d.block_number, d.block_hash);
      earlier.block_number = d.block_number;
      earlier.block_hash = d.block_hash;
      return false;
    });
  }
  #insertStatement(rows: number, named: boolean) {
    const key = named ? rows : -rows;
    let st = this.#insertMany.get(key);
    if (!st) {
      // RETURNING the ids as plain strings (pluck): no row object per deposit written.
      const sql = `${INSERT_COLUMNS.replace('seen_at)', 'seen_at, confirmed_at)')} ${Array(rows).fill('(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')} ${INSERT_MANY_CONFLICT}`;
      st = named ? this.db.prepare(`${sql} RETURNING id`).pluck() : this.db.prepare(sql);
      this.#insertMany.set(key, st);
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
  /** How many of the deposits `ids` are still confirmed (what a solver pass left undecided), in one statement. */
  countConfirmed(ids: string[]): number {
    if (ids.length === 0) return 0;
    const row = this.db.prepare(`SELECT COUNT(*) AS n FROM deposits WHERE state = 'confirmed' AND id IN (${ids.map(() => '?').join(', ')})`).get(...ids) as {
      n: number | string;
    };
    return Number(row.n);
  }
  /** When the deposit reached its confirmations (null: not yet, or no such deposit). */
  confirmedAt(id: string): number | null {
    return (this.#confirmedAt.get(id) as { confirmed_at: number | null } | undefined)?.confirmed_at ?? null;
  }
  /** The deposit's amount (a base-10 integer), undefined for no such deposit. */
  amountOf(id: string): string | undefined {
    return (this.#amountOf.get(id) as { amount: string } | undefined)?.amount;
  }
  byOrderRef(ref: string): DepositRow[] {
    return this.#byRef.all({ ref }) as DepositRow[];
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
  /**
   * A chain's deposits confirmed or acted on (refunded or filled alike) in blocks above `above`: what the solver may
   * have paid out against, that a reorg that deep would take back (confirmations by value sum them).
   */
  actedAbove(chainId: number, above: number): { block_number: number; currency: string; amount: string }[] {
    return this.#actedAbove.all(chainId, above) as { block_number: number; currency: string; amount: string }[];
  }
  /** The oldest `limit` unconfirmed deposits of each chain outside `chains` (a chain taken out of the config). */
  unconfirmedOutside(chains: ReadonlySet<number>, limit: number): DepositRow[] {
    const gone = (this.#unconfirmedChains.all() as { chain_id: number | string }[]).map((r) => Number(r.chain_id)).filter((c) => !chains.has(c));
    return gone.flatMap((c) => this.#unconfirmedOf.all(c, limit) as DepositRow[]);
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
