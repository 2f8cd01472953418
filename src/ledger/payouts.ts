import type { SqlDb as Db } from './sqlDb.ts';
import type { Hex } from 'viem';
import type { PayoutRow, PayoutState, TransactionRow, TxState } from './types.ts';
import type { FailReason } from './reasons.ts';

export type NewPayout = Omit<PayoutRow, 'state' | 'tx_hash' | 'fail_reason' | 'updated_at' | 'native_topup' | 'calls' | 'max_gas' | 'authorization'> & {
  authorization?: string | null;
  native_topup?: string | null;
  calls?: string | null;
  max_gas?: string | null;
};
export type NewTransaction = Omit<
  TransactionRow,
  'state' | 'block_number' | 'gas_used' | 'fee' | 'error' | 'broadcast_at' | 'updated_at' | 'sent_block' | 'cancel'
> & {
  /**
   * The signed bytes. Omitted: another row of the same transaction (an earlier payout of the same batch)
   * recorded them; the row's key to transaction_bytes refuses a row whose bytes nobody recorded.
   */
  raw?: Hex;
  /** 1: a cancel at the nonce of the payout's fee-capped transaction (absent: 0). */
  cancel?: 0 | 1;
};

// A sender's transactions on a chain, the sender compared case-insensitively: read on every check of the loss breaker
// (FEES_OF_SENDER) and of the audit's difference (the other two). They seek transactions_sender (chain_id, lower(sender);
// migration 40): without statistics SQLite took transactions_nonce, which seeks by the chain alone (the sender there is
// case-sensitive): every transaction the chain ever had, of every sender, on every check.
/** One row per transaction hash (a batch has a row per payout it carries, each with the whole fee). */
export const TX_COSTS_OF_SENDER = `SELECT hash, MAX(state) AS state, MAX(fee) AS fee, MAX(gas_limit) AS gas_limit,
        MAX(max_fee_per_gas) AS max_fee_per_gas FROM transactions WHERE chain_id = ? AND lower(sender) = lower(?) GROUP BY hash`;
export const HASHES_OF_SENDER = 'SELECT DISTINCT hash FROM transactions WHERE chain_id = ? AND lower(sender) = lower(?)';
/** Per row, not per hash: a batch's rows each count (as the loss breaker always counted them). */
export const FEES_OF_SENDER = `SELECT decimal_sum(fee) AS fees,
      decimal_sum_product(CASE WHEN fee IS NULL AND state IN ('signed', 'broadcast') THEN gas_limit END, max_fee_per_gas) AS open_cost
      FROM transactions WHERE chain_id = ? AND lower(sender) = lower(?)`;
/**
 * An open withdrawal of a chain's currency (the solver's inventory check, per currency): through payouts_withdrawal_open
 * (migration 40), which holds only the open withdrawals; payouts_outflow sought the chain's withdrawals in every state.
 */
export const OPEN_WITHDRAWAL = `SELECT 1 FROM payouts WHERE kind = 'withdrawal' AND chain_id = ? AND lower(currency) = lower(?) AND state IN ('queued', 'sent')`;

export class Payouts {
  #insert;
  #get;
  #queued;
  #queuedCount;
  #setState;
  #insertBytes;
  #insertTx;
  #txState;
  #openTxs;
  #stranded;
  #txsOfPayout;
  #rawOf;
  #rowsOfTx;
  #forRequest;
  #maxNonce;
  #pending;
  #ofChain;
  #txsOfChain;
  #made;
  #txCostsOfSender;
  #hashesOfSender;
  #outflowByCurrency;
  #feesOfSender;
  #openWithdrawal;
  #outflowsSince;
  #unsettled;
  #unsent;
  constructor(private db: Db) {
    this.#insert = db.prepare(`INSERT INTO payouts (id, kind, request_id, deposit_id, chain_id, recipient, currency, amount, state,
      decided_at, updated_at, native_topup, calls, max_gas, "authorization", epoch, rate, max_fee_per_gas) VALUES (@id, @kind, @request_id, @deposit_id,
      @chain_id, @recipient, @currency, @amount, 'queued', @decided_at, @decided_at, @native_topup, @calls, @max_gas, @authorization, @epoch, @rate,
      @max_fee_per_gas)`);
    this.#get = db.prepare('SELECT * FROM payouts WHERE id = ?');
    // A paused chain (or all payouts paused, by an operator or the loss breaker) hands its
    // submitter nothing new to sign (nor does dry-run mode); what is signed already is still seen through.
    // The chain id is cast: better-sqlite3 binds a JS number as REAL, and 'pause:chain:' || 10.0
    // named no switch, so a chain pause held nothing already queued (fast fills, refunds, claims).
    // BIGINT (an integer in SQLite too): PostgreSQL's INTEGER would overflow on a chain id past 2^31.
    const sendable = `chain_id = @chain AND state = 'queued'
      AND NOT EXISTS (SELECT 1 FROM switches WHERE name IN ('pause:all', 'dry-run', 'pause:chain:' || CAST(@chain AS BIGINT)))`;
    this.#queued = db.prepare(`SELECT * FROM payouts WHERE ${sendable} ORDER BY decided_at LIMIT @limit`);
    this.#queuedCount = db.prepare(`SELECT COUNT(*) AS n FROM payouts WHERE ${sendable}`);
    this.#setState = db.prepare(`UPDATE payouts SET state = @state, tx_hash = COALESCE(@tx_hash, tx_hash),
      fail_reason = COALESCE(@fail_reason, fail_reason), updated_at = @now WHERE id = @id`);
    // The signed bytes once per hash (migration 23): a batch's later rows find them there. The hash is
    // the bytes' keccak (EVM) or the signature they carry (SVM), so the same hash is the same bytes.
    this.#insertBytes = db.prepare('INSERT INTO transaction_bytes (hash, raw) VALUES (@hash, @raw) ON CONFLICT (hash) DO NOTHING');
    this.#insertTx = db.prepare(`INSERT INTO transactions (hash, payout_id, chain_id, sender, nonce, gas_limit, max_fee_per_gas,
      max_priority_fee_per_gas, state, created_at, updated_at, cancel) VALUES (@hash, @payout_id, @chain_id, @sender, @nonce,
      @gas_limit, @max_fee_per_gas, @max_priority_fee_per_gas, 'signed', @created_at, @created_at, @cancel)`);
    this.#txState = db.prepare(`UPDATE transactions SET state = @state, sent_block = COALESCE(@sent_block, sent_block),
      block_number = COALESCE(@block_number, block_number), gas_used = COALESCE(@gas_used, gas_used), fee = COALESCE(@fee, fee),
      error = COALESCE(@error, error), broadcast_at = COALESCE(@broadcast_at, broadcast_at), updated_at = @now WHERE hash = @hash`);
    // Rows are read without their bytes: the confirm pass reads every open row on every head, and a
    // batch's rows share one 5 KB byte string it needs only to rebroadcast or replace (rawOf).
    this.#openTxs = db.prepare(`SELECT * FROM transactions WHERE chain_id = ? AND state IN ('signed', 'broadcast') ORDER BY nonce, created_at`);
    this.#stranded = db.prepare(`SELECT * FROM payouts p WHERE chain_id = ? AND state = 'sent'
      AND NOT EXISTS (SELECT 1 FROM transactions t WHERE t.payout_id = p.id AND t.state IN ('signed', 'broadcast')) ORDER BY decided_at`);
    this.#txsOfPayout = db.prepare('SELECT * FROM transactions WHERE payout_id = ? ORDER BY created_at');
    this.#rawOf = db.prepare('SELECT raw FROM transaction_bytes WHERE hash = ?');
    this.#rowsOfTx = db.prepare('SELECT * FROM transactions WHERE hash = ? ORDER BY payout_id');
    this.#forRequest = db.prepare('SELECT * FROM payouts WHERE request_id = ? ORDER BY decided_at, id');
    this.#maxNonce = db.prepare('SELECT MAX(nonce) AS n FROM transactions WHERE chain_id = ? AND sender = ?');
    // Sweeps and signed deposits move the user's funds, not the solver's, and withdrawals bring funds
    // to the solver: they reserve nothing.
    this.#pending = db.prepare(
      `SELECT currency, amount FROM payouts WHERE chain_id = ? AND state IN ('queued', 'sent') AND kind NOT IN ('sweep', 'deposit', 'withdrawal')`,
    );
    this.#ofChain = db.prepare('SELECT * FROM payouts WHERE chain_id = ?');
    this.#txsOfChain = db.prepare('SELECT * FROM transactions WHERE chain_id = ?');
    this.#made = db.prepare(`SELECT id, kind, currency, amount, native_topup, CASE WHEN calls IS NULL THEN NULL ELSE '1' END AS calls, state FROM payouts
        WHERE chain_id = ? AND state IN ('success', 'sent')`);
    this.#txCostsOfSender = db.prepare(TX_COSTS_OF_SENDER);
    this.#hashesOfSender = db.prepare(HASHES_OF_SENDER);
    registerDecimalSums(db);
    this.#outflowByCurrency = db.prepare(`SELECT currency, state, decimal_sum(amount) AS amount, decimal_sum(native_topup) AS native_topup FROM payouts
      WHERE chain_id = ? AND kind IN ('fill', 'claim') AND state IN ('success', 'sent') GROUP BY currency, state`);
    this.#feesOfSender = db.prepare(FEES_OF_SENDER);
    this.#openWithdrawal = db.prepare(OPEN_WITHDRAWAL);
    this.#unsettled = db.prepare(`SELECT p.*, (SELECT COUNT(*) FROM transactions t WHERE t.payout_id = p.id) AS txs FROM payouts p
      WHERE p.state IN ('queued', 'sent', 'failed') ORDER BY p.decided_at`);
    this.#unsent = db.prepare(`SELECT
      (SELECT COUNT(*) FROM payouts p WHERE p.state = 'queued'
        AND NOT EXISTS (SELECT 1 FROM switches WHERE name IN ('pause:all', 'dry-run', 'pause:chain:' || p.chain_id)))
      + (SELECT COUNT(*) FROM transactions WHERE state = 'signed') AS n`);
    // What leaves the solver's own inventory: fills (and their native top-ups), app fee claims and sponsored relays'
    // value. Refunds, excesses, sweeps and signed deposits move a depositor's own funds; withdrawals bring funds in.
    // payouts_outflow (migration 37) seeks the three kinds' last hour: payouts_queue could only seek the chain
    // (state != 'failed' is no range), and read every payout the chain ever had on every decision.
    this.#outflowsSince = db.prepare(`SELECT currency, amount, native_topup, decided_at FROM payouts
      WHERE chain_id = ? AND kind IN ('fill', 'claim', 'relay') AND state != 'failed' AND decided_at > ?`);
  }

  insert(p: NewPayout): void {
    this.#insert.run({
      native_topup: null,
      calls: null,
      max_gas: null,
      authorization: null,
      ...p,
      epoch: p.epoch ?? null,
      rate: p.rate ?? null,
      max_fee_per_gas: p.max_fee_per_gas ?? null,
    });
  }
  get(id: string): PayoutRow | undefined {
    return this.#get.get(id) as PayoutRow | undefined;
  }
  /** Several payouts in one statement (a batch's, when it is recorded), in no particular order; ids not found are absent. */
  getMany(ids: string[]): PayoutRow[] {
    if (ids.length <= 1) return ids.flatMap((id) => this.get(id) ?? []);
    // One statement per batch size (at most the batch's bound): prepared again on each call, which costs
    // less than a statement per payout.
    return this.db.prepare(`SELECT * FROM payouts WHERE id IN (${ids.map(() => '?').join(', ')})`).all(...ids) as PayoutRow[];
  }
  queued(chainId: number, limit = 50): PayoutRow[] {
    return this.#queued.all({ chain: chainId, limit }) as PayoutRow[];
  }

  /** How many payouts `queued` would hand the chain's submitter, counted without reading them. */
  queuedCount(chainId: number): number {
    return Number((this.#queuedCount.get({ chain: chainId }) as { n: number | string }).n);
  }
  /**
   * Names the deposit a payout made before any deposit is paid for by (a fast fill, once its deposit
   * settles it): the deposit is then owed to the solver like any filled one. A payout already tied to
   * a deposit keeps it.
   */
  linkDeposit(id: string, depositId: string): void {
    this.db.prepare('UPDATE payouts SET deposit_id = ? WHERE id = ? AND deposit_id IS NULL').run(depositId, id);
  }
  forDeposit(depositId: string): PayoutRow[] {
    return this.db.prepare('SELECT * FROM payouts WHERE deposit_id = ? ORDER BY decided_at').all(depositId) as PayoutRow[];
  }
  forRequest(requestId: string): PayoutRow[] {
    return this.#forRequest.all(requestId) as PayoutRow[];
  }
  setState(id: string, state: PayoutState, extra: { txHash?: string; failReason?: FailReason } = {}, now = Date.now()): void {
    this.#setState.run({ id, state, tx_hash: extra.txHash ?? null, fail_reason: extra.failReason ?? null, now });
  }
  /** setState of several payouts in one statement (a batch's payouts, sent by one transaction). */
  setStateMany(ids: string[], state: PayoutState, extra: { txHash?: string } = {}, now = Date.now()): void {
    if (ids.length <= 1) return ids.forEach((id) => this.setState(id, state, extra, now));
    this.db
      .prepare(`UPDATE payouts SET state = ?, tx_hash = COALESCE(?, tx_hash), updated_at = ? WHERE id IN (${ids.map(() => '?').join(', ')})`)
      .run(state, extra.txHash ?? null, now, ...ids);
  }
  /**
   * Amounts promised but not yet paid, per currency (canonical address): the solver's inventory
   * must cover them too.
   */
  reservedOn(chainId: number): Map<string, bigint> {
    const out = new Map<string, bigint>();
    for (const r of this.#pending.all(chainId) as { currency: string; amount: string }[]) {
      out.set(r.currency, (out.get(r.currency) ?? 0n) + BigInt(r.amount));
    }
    return out;
  }

  /**
   * Records a signed transaction for one payout: its row, and its bytes when given (stored once per
   * hash: a second row of the same hash given them writes nothing more).
   */
  insertTx(t: NewTransaction): void {
    const { raw, ...row } = t;
    if (raw !== undefined) this.#insertBytes.run({ hash: t.hash, raw });
    this.#insertTx.run({ ...row, cancel: t.cancel ?? 0 });
  }
  setTxState(
    hash: string,
    state: TxState,
    extra: { sentBlock?: number; blockNumber?: number; gasUsed?: bigint; fee?: bigint; error?: string; broadcastAt?: number } = {},
    now = Date.now(),
  ): void {
    this.#txState.run({
      hash,
      state,
      sent_block: extra.sentBlock ?? null,
      block_number: extra.blockNumber ?? null,
      gas_used: extra.gasUsed?.toString() ?? null,
      fee: extra.fee?.toString() ?? null,
      error: extra.error ?? null,
      broadcast_at: extra.broadcastAt ?? null,
      now,
    });
  }
  /** A chain's transactions signed or broadcast, by nonce. */
  openTxs(chainId: number): TransactionRow[] {
    return this.#openTxs.all(chainId) as TransactionRow[];
  }
  /** A chain's payouts marked sent with none of their transactions signed or broadcast: none of them can land any more. */
  stranded(chainId: number): PayoutRow[] {
    return this.#stranded.all(chainId) as PayoutRow[];
  }
  /** A payout's transactions, oldest first. */
  txsOf(payoutId: string): TransactionRow[] {
    return this.#txsOfPayout.all(payoutId) as TransactionRow[];
  }
  /** A recorded transaction's signed bytes (stored once per hash; every transaction row has them, by foreign key). */
  rawOf(hash: string): Hex {
    const row = this.#rawOf.get(hash) as { raw: Hex } | undefined;
    if (!row) throw new Error(`transaction ${hash} has no recorded bytes`);
    return row.raw;
  }
  /** The rows of one transaction: one per payout it carries (several for a batched fill). */
  rowsOfTx(hash: string): TransactionRow[] {
    return this.#rowsOfTx.all(hash) as TransactionRow[];
  }
  maxNonce(chainId: number, sender: string): number | null {
    return (this.#maxNonce.get(chainId, sender) as { n: number | null }).n;
  }
  /** Every payout of a chain, in any state (the audits compare them with what the chain shows). */
  ofChain(chainId: number): PayoutRow[] {
    return this.#ofChain.all(chainId) as PayoutRow[];
  }
  /** Every transaction row of a chain, in any state (one per payout a transaction carries). */
  txsOfChain(chainId: number): TransactionRow[] {
    return this.#txsOfChain.all(chainId) as TransactionRow[];
  }
  /** A chain's payouts made or sent (`calls` is '1' when the payout had calls, else null): what left the solver's wallet or may have. */
  made(chainId: number): Pick<PayoutRow, 'id' | 'kind' | 'currency' | 'amount' | 'native_topup' | 'calls' | 'state'>[] {
    return this.#made.all(chainId) as Pick<PayoutRow, 'id' | 'kind' | 'currency' | 'amount' | 'native_topup' | 'calls' | 'state'>[];
  }
  /**
   * The transactions a sender signed on a chain, one per hash (a batch's rows folded): its state,
   * its fee once known, and its gas limit and fee cap (what it may still cost).
   */
  txCostsOfSender(chainId: number, sender: string): { hash: string; state: string; fee: string | null; gas_limit: string; max_fee_per_gas: string }[] {
    return this.#txCostsOfSender.all(chainId, sender) as { hash: string; state: string; fee: string | null; gas_limit: string; max_fee_per_gas: string }[];
  }
  /** The hashes of every transaction a sender signed on a chain (the sender compared case-insensitively). */
  hashesOfSender(chainId: number, sender: string): string[] {
    return (this.#hashesOfSender.all(chainId, sender) as { hash: string }[]).map((r) => r.hash);
  }
  /**
   * What the ledger says left a solver's wallet on a chain, or may have, summed in SQL (the loss
   * breaker reads it every few seconds: one row per currency and state, not one per payout):
   * - `payouts`: per currency and state ('success': made; 'sent': may have left), the amounts and
   *   native top-ups of its fills and app fee claims;
   * - `fees`: the fees of its transactions (those whose fee is known);
   * - `openCost`: what its transactions signed or broadcast, fee not yet known, may still cost
   *   (gas limit × fee cap each).
   * The sender is compared case-insensitively.
   */
  outflowSums(
    chainId: number,
    sender: string,
  ): { payouts: { currency: string; state: 'success' | 'sent'; amount: bigint; nativeTopup: bigint }[]; fees: bigint; openCost: bigint } {
    const payouts = (this.#outflowByCurrency.all(chainId) as { currency: string; state: 'success' | 'sent'; amount: string; native_topup: string }[]).map(
      (r) => ({
        currency: r.currency,
        state: r.state,
        amount: BigInt(r.amount),
        nativeTopup: BigInt(r.native_topup),
      }),
    );
    const t = this.#feesOfSender.get(chainId, sender) as { fees: string; open_cost: string };
    return { payouts, fees: BigInt(t.fees), openCost: BigInt(t.open_cost) };
  }
  /** Whether a withdrawal of the currency (compared case-insensitively) is queued or sent on the chain. */
  hasOpenWithdrawal(chainId: number, currency: string): boolean {
    return this.#openWithdrawal.get(chainId, currency) !== undefined;
  }
  /**
   * What a chain's payouts decided after `since` (ms) and not failed take out of the solver's inventory there (the
   * hourly outflow budget's rows): fills, app fee claims and sponsored relays, each with its currency, amount, native
   * top-up (a fill's) and when it was decided, in no particular order.
   */
  outflowsSince(chainId: number, since: number): { currency: string; amount: string; native_topup: string | null; decided_at: number }[] {
    return this.#outflowsSince.all(chainId, since) as { currency: string; amount: string; native_topup: string | null; decided_at: number }[];
  }
  /** Payouts queued, sent or failed, oldest decided first, each with how many transactions were signed for it. */
  unsettled(): (PayoutRow & { txs: number })[] {
    return this.#unsettled.all() as (PayoutRow & { txs: number })[];
  }
  /**
   * How many payouts are queued (on chains not paused and not in dry run, which would never sign
   * them) plus how many transactions are signed but not yet broadcast.
   */
  unsent(): number {
    return (this.#unsent.get() as { n: number }).n;
  }
}

/**
 * Registers exact decimal sums on the connection: amounts are decimal strings of up to 78 digits
 * (uint256), which SQLite's SUM would overflow (an error past 2^63) or round (TOTAL, a float).
 * decimal_sum(x) sums a column, decimal_sum_product(a, b) sums a × b, each skipping NULLs and
 * giving '0' over no rows. (PostgreSQL's SUM over NUMERIC is exact: a second implementation needs none of this.)
 */
function registerDecimalSums(db: Db): void {
  const big = (v: unknown) => BigInt(v as string | number | bigint);
  db.aggregate('decimal_sum', {
    start: () => 0n,
    step: (total: bigint, x: unknown) => (x === null ? total : total + big(x)),
    result: (total: bigint) => total.toString(),
    safeIntegers: true,
    deterministic: true,
  });
  db.aggregate('decimal_sum_product', {
    start: () => 0n,
    // Two arguments, spread (the typings know one-argument steps only), so registered as varargs.
    step: (total: bigint, ...ab: unknown[]) => (ab[0] === null || ab[1] === null ? total : total + big(ab[0]) * big(ab[1])),
    result: (total: bigint) => total.toString(),
    varargs: true,
    safeIntegers: true,
    deterministic: true,
  });
}
