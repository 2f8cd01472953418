import type { Db } from './db.ts';

/** A deposit the depository holds for the solver: its order was filled, and no user is owed any of it. */
export interface OwedDeposit {
  id: string;
  chain_id: number;
  currency: string;
  // What of the deposit is the solver's: the deposit, less an excess already returned to the user.
  owed: bigint;
}

// What the ledger says the depository owes the solver, deposit by deposit. Only a handled deposit whose
// fill succeeded counts; a deposit still owed to a user (pending, refundable, refunded, an excess not yet
// returned) never does, nor one a withdrawal took already (withdrawn_deposits).
const OWED_SQL = `SELECT d.id, d.chain_id, d.currency, d.amount,
    (SELECT x.amount FROM payouts x WHERE x.deposit_id = d.id AND x.kind = 'excess' AND x.state = 'success') AS excess
  FROM deposits d
  JOIN payouts f ON f.deposit_id = d.id AND f.kind = 'fill' AND f.state = 'success'
  WHERE d.chain_id = @chain AND d.state = 'handled'
    AND NOT EXISTS (SELECT 1 FROM withdrawn_deposits w WHERE w.deposit_id = d.id)
    AND NOT EXISTS (SELECT 1 FROM payouts r WHERE r.deposit_id = d.id AND r.kind = 'refund')
    AND NOT EXISTS (SELECT 1 FROM payouts x WHERE x.deposit_id = d.id AND x.kind = 'excess' AND x.state != 'success')`;

/** The ledger's side of withdrawals: which deposits are owed to the solver, and which a withdrawal took. */
export class Withdrawals {
  #owed;
  #take;
  #release;
  #ofPayout;
  constructor(db: Db) {
    this.#owed = db.prepare(`${OWED_SQL} ORDER BY d.confirmed_at, d.id`);
    this.#take = db.prepare('INSERT INTO withdrawn_deposits (deposit_id, payout_id) VALUES (?, ?)');
    this.#release = db.prepare('DELETE FROM withdrawn_deposits WHERE payout_id = ?');
    this.#ofPayout = db.prepare('SELECT deposit_id FROM withdrawn_deposits WHERE payout_id = ? ORDER BY deposit_id');
  }

  /** Deposits on a chain the depository holds for the solver (all currencies, or one). */
  owed(chainId: number, currency?: string): OwedDeposit[] {
    const rows = this.#owed.all({ chain: chainId }) as { id: string; chain_id: number; currency: string; amount: string; excess: string | null }[];
    return rows
      .filter((r) => currency === undefined || r.currency.toLowerCase() === currency.toLowerCase())
      .map((r) => ({ id: r.id, chain_id: r.chain_id, currency: r.currency, owed: BigInt(r.amount) - BigInt(r.excess ?? 0) }))
      .filter((r) => r.owed > 0n);
  }

  /** What the depository owes the solver on a chain, per currency (lower-cased address). */
  owedByCurrency(chainId: number): Map<string, bigint> {
    const out = new Map<string, bigint>();
    for (const d of this.owed(chainId)) out.set(d.currency.toLowerCase(), (out.get(d.currency.toLowerCase()) ?? 0n) + d.owed);
    return out;
  }

  /** Marks deposits as taken by a withdrawal payout; throws (primary key) if one was taken already. */
  take(depositIds: string[], payoutId: string): void {
    for (const id of depositIds) this.#take.run(id, payoutId);
  }

  /** A failed withdrawal: its deposits are owed to the solver again. */
  release(payoutId: string): void {
    this.#release.run(payoutId);
  }

  depositsOf(payoutId: string): string[] {
    return (this.#ofPayout.all(payoutId) as { deposit_id: string }[]).map((r) => r.deposit_id);
  }
}
