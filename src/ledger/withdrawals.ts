import type { SqlDb as Db } from './sqlDb.ts';

/** A deposit the depository holds for the solver: its order was filled, and no user is owed any of it. */
export interface OwedDeposit {
  id: string;
  chain_id: number;
  currency: string;
  /** What of the deposit is the solver's: the deposit, less an excess already returned to the user. */
  owed: bigint;
}

/**
 * The ledger's side of withdrawals: which deposits are owed to the solver, and which a withdrawal took.
 * The owed deposits are kept by the ledger's triggers (depository_owed, migration 16) in the
 * transaction of each change; the per-currency totals follow its immutable entries, reading only
 * those after the last one read.
 */
export class Withdrawals {
  #owed;
  #entries;
  #take;
  #release;
  #ofPayout;
  #takenBy;
  #writeOffEntry;
  #writeOffRow;
  #withdrawnOwed;
  #debtRow;
  #debtEntry;
  #debts;
  #heldByFailed;
  // Per chain, per currency (lower-cased): the sum of the entries up to #seq.
  readonly #totals = new Map<number, Map<string, bigint>>();
  #seq = 0;
  constructor(db: Db) {
    // A deposit whose request records DEPOSIT_REORGED is left out: a reorg took it back after the solver
    // paid, so the depository does not hold it, and withdrawing it would take other deposits' money.
    this.#owed = db.prepare(`SELECT o.deposit_id AS id, o.chain_id, o.currency, o.amount, o.excess FROM depository_owed o
      JOIN deposits d ON d.id = o.deposit_id WHERE o.chain_id = ?
        AND NOT EXISTS (SELECT 1 FROM requests r WHERE r.id = d.request_id AND r.fail_reason = 'DEPOSIT_REORGED')
      ORDER BY d.confirmed_at, d.id`);
    this.#entries = db.prepare('SELECT seq, chain_id, currency, sign, amount, excess FROM depository_owed_entries WHERE seq > ? ORDER BY seq LIMIT 10000');
    this.#take = db.prepare('INSERT INTO withdrawn_deposits (deposit_id, payout_id) VALUES (?, ?)');
    this.#release = db.prepare('DELETE FROM withdrawn_deposits WHERE payout_id = ?');
    this.#ofPayout = db.prepare('SELECT deposit_id FROM withdrawn_deposits WHERE payout_id = ? ORDER BY deposit_id');
    this.#takenBy = db.prepare('SELECT payout_id FROM withdrawn_deposits WHERE deposit_id = ?');
    this.#writeOffEntry = db.prepare(`INSERT INTO depository_owed_entries (deposit_id, chain_id, currency, sign, amount, excess)
      SELECT deposit_id, chain_id, currency, -1, amount, excess FROM depository_owed WHERE deposit_id = ?`);
    this.#writeOffRow = db.prepare('DELETE FROM depository_owed WHERE deposit_id = ?');
    // What a withdrawal that may still pay (not failed) took of the deposit: the deposit less its excess returned.
    this.#withdrawnOwed = db.prepare(`SELECT d.chain_id, d.currency, d.amount,
        (SELECT x.amount FROM payouts x WHERE x.deposit_id = d.id AND x.kind = 'excess' AND x.state = 'success') AS excess
      FROM withdrawn_deposits w JOIN payouts p ON p.id = w.payout_id JOIN deposits d ON d.id = w.deposit_id
      WHERE w.deposit_id = ? AND p.state != 'failed'`);
    this.#debtRow = db.prepare('INSERT INTO depository_owed (deposit_id, chain_id, currency, amount, excess) VALUES (?, ?, ?, ?, NULL)');
    this.#debtEntry = db.prepare(`INSERT INTO depository_owed_entries (deposit_id, chain_id, currency, sign, amount, excess)
      SELECT deposit_id, chain_id, currency, 1, amount, excess FROM depository_owed WHERE deposit_id = ?`);
    this.#heldByFailed = db.prepare(`SELECT p.id FROM payouts p WHERE p.kind = 'withdrawal' AND p.state = 'failed'
      AND EXISTS (SELECT 1 FROM withdrawn_deposits w WHERE w.payout_id = p.id)`);
    this.#debts = db.prepare(`SELECT currency, amount FROM depository_owed WHERE chain_id = ? AND amount LIKE '-%'`);
  }

  /**
   * A deposit the depository no longer holds though the solver paid for it (a reorg took it back after
   * the payout): it stops being owed, with a -1 entry like any change of what is owed. Inside the
   * caller's transaction. (owed() also leaves out every request that records DEPOSIT_REORGED.)
   */
  writeOff(depositId: string): void {
    this.#writeOffEntry.run(depositId);
    this.#writeOffRow.run(depositId);
    // Withdrawn already: the withdrawal (the solver's own transaction, back in the mempool after the reorg) took it out
    // of other deposits. The depository owes the solver that much less: a row of a negative amount (a debt) that
    // every later withdrawal leaves in the depository (shortfall) and the owed totals subtract. A failed withdrawal
    // releasing the deposit recomputes its row: the debt goes with it.
    const w = this.#withdrawnOwed.get(depositId) as { chain_id: number; currency: string; amount: string; excess: string | null } | undefined;
    const took = w ? BigInt(w.amount) - BigInt(w.excess ?? 0) : 0n;
    if (w && took > 0n) {
      this.#debtRow.run(depositId, w.chain_id, w.currency, (-took).toString());
      this.#debtEntry.run(depositId);
    }
  }

  /**
   * What withdrawals took of deposits a reorg then took back, on a chain in a currency: the depository holds that
   * much less than its users' deposits and what it owes the solver, so that much of what it owes stays there.
   */
  shortfall(chainId: number, currency: string): bigint {
    const rows = this.#debts.all(chainId) as { currency: string; amount: string }[];
    return rows.filter((r) => r.currency.toLowerCase() === currency.toLowerCase()).reduce((s, r) => s - BigInt(r.amount), 0n);
  }

  /** Deposits on a chain the depository holds for the solver (all currencies, or one). */
  owed(chainId: number, currency?: string): OwedDeposit[] {
    const rows = this.#owed.all(chainId) as { id: string; chain_id: number; currency: string; amount: string; excess: string | null }[];
    return rows
      .filter((r) => currency === undefined || r.currency.toLowerCase() === currency.toLowerCase())
      .map((r) => ({ id: r.id, chain_id: r.chain_id, currency: r.currency, owed: BigInt(r.amount) - BigInt(r.excess ?? 0) }))
      .filter((r) => r.owed > 0n);
  }

  /** What the depository owes the solver on a chain, per currency (lower-cased address). */
  owedByCurrency(chainId: number): Map<string, bigint> {
    for (;;) {
      const rows = this.#entries.all(this.#seq) as { seq: number; chain_id: number; currency: string; sign: number; amount: string; excess: string | null }[];
      for (const e of rows) {
        const totals = this.#totals.get(e.chain_id) ?? this.#totals.set(e.chain_id, new Map()).get(e.chain_id)!;
        const k = e.currency.toLowerCase();
        // A deposit owed nothing (its excess took all of it) is not counted, as in owed(); a debt (a withdrawn deposit a
        // reorg took back: a negative amount) is.
        const owed = BigInt(e.amount) - BigInt(e.excess ?? 0);
        if (owed > 0n || BigInt(e.amount) < 0n) totals.set(k, (totals.get(k) ?? 0n) + BigInt(e.sign) * owed);
        this.#seq = e.seq;
      }
      if (rows.length < 10_000) break;
    }
    return new Map([...(this.#totals.get(chainId) ?? [])].filter(([, v]) => v !== 0n));
  }

  /** Marks deposits as taken by a withdrawal payout; throws (primary key) if one was taken already. */
  take(depositIds: string[], payoutId: string): void {
    for (const id of depositIds) this.#take.run(id, payoutId);
  }

  /** A failed withdrawal: its deposits are owed to the solver again. */
  release(payoutId: string): void {
    this.#release.run(payoutId);
  }

  /** Failed withdrawals still holding deposits (their signed call went out: see Solver#releaseDeadWithdrawals). */
  heldByFailed(): string[] {
    return (this.#heldByFailed.all() as { id: string }[]).map((r) => r.id);
  }

  /**
   * The withdrawal that took a deposit (paid, on its way, or failed with its signed call still executable), or
   * undefined: the depository no longer holds such a deposit for anyone.
   */
  takenBy(depositId: string): string | undefined {
    return (this.#takenBy.get(depositId) as { payout_id: string } | undefined)?.payout_id;
  }

  depositsOf(payoutId: string): string[] {
    return (this.#ofPayout.all(payoutId) as { deposit_id: string }[]).map((r) => r.deposit_id);
  }
}
