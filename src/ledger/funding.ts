import type { Balances } from './balances.ts';
import type { SqlDb as Db } from './sqlDb.ts';

/** One thing that moved to the solver in a funding transaction (token units; logIndex -1: native value). */
export interface FundingPart {
  currency: string;
  amount: bigint;
  logIndex: number;
}

export interface FundingCredit {
  credit_ref: string;
  chain_id: number;
  tx_hash: string;
  block_number: number;
  block_hash: string;
  sender: string;
  wallet: string;
  parts: FundingPart[];
  micro: bigint;
  created_at: number;
  /** Whether a reorg removed the transfer and the credit was reversed. */
  reversed: boolean;
}

interface Row extends Omit<FundingCredit, 'parts' | 'reversed' | 'micro'> {
  parts: string;
  micro: bigint;
  reversed: bigint;
}

// reversed as 1 or 0 (a CASE, not the EXISTS itself: PostgreSQL's EXISTS is a boolean, SQLite's an integer).
const SELECT = `SELECT f.*, CASE WHEN EXISTS (SELECT 1 FROM balance_entries b WHERE b.ref = 'credit_reversal:' || f.credit_ref) THEN 1 ELSE 0 END AS reversed
  FROM funding_credits f`;

function decode(r: Row): FundingCredit {
  const parts = (JSON.parse(r.parts) as { currency: string; amount: string; logIndex: number }[]).map((p) => ({ ...p, amount: BigInt(p.amount) }));
  return {
    ...r,
    block_number: Number(r.block_number),
    chain_id: Number(r.chain_id),
    created_at: Number(r.created_at),
    parts,
    micro: BigInt(r.micro),
    reversed: r.reversed !== 0n,
  };
}

/**
 * App balance credits and the chain's evidence for each (migration 8). A credit is booked with its
 * evidence in one transaction; a reorg that removes the evidence books a reversal entry.
 */
export class FundingCredits {
  #insert;
  #ofTx;
  #from;
  #all;
  #getMark;
  #setMark;
  constructor(
    db: Db,
    private balances: Balances,
  ) {
    this.#insert = db.prepare(`INSERT INTO funding_credits (credit_ref, chain_id, tx_hash, block_number, block_hash, sender, wallet, parts, micro, created_at)
      VALUES (@credit_ref, @chain_id, @tx_hash, @block_number, @block_hash, @sender, @wallet, @parts, @micro, @created_at)`);
    this.#ofTx = db.prepare(`${SELECT} WHERE f.chain_id = ? AND f.tx_hash = ? ORDER BY f.created_at`).safeIntegers(true);
    this.#from = db.prepare(`${SELECT} WHERE f.chain_id = ? AND f.block_number >= ? ORDER BY f.block_number`).safeIntegers(true);
    this.#all = db.prepare(`${SELECT} ORDER BY f.chain_id, f.block_number`).safeIntegers(true);
    this.#getMark = db.prepare('SELECT block_number, block_hash FROM scan_marks WHERE chain_id = ? AND source = ?');
    this.#setMark = db.prepare(`INSERT INTO scan_marks (chain_id, source, block_number, block_hash) VALUES (?, ?, ?, ?)
      ON CONFLICT(chain_id, source) DO UPDATE SET block_number = excluded.block_number, block_hash = excluded.block_hash`);
  }

  /**
   * Books a credit of `micro` to `wallet` with its evidence, unless the transaction already has a
   * credit standing (one not reversed). Must run inside a ledger transaction. Returns whether it booked.
   */
  credit(c: Omit<FundingCredit, 'credit_ref' | 'reversed' | 'created_at'>, detail: string, now = Date.now()): boolean {
    const earlier = this.ofTx(c.chain_id, c.tx_hash);
    if (earlier.some((e) => !e.reversed)) return false;
    // The first credit of a transaction keeps the plain ref; one booked again after a reorg removed
    // the first (the transaction included again) is told apart by its block.
    const credit_ref = earlier.length ? `credit:${c.chain_id}:${c.tx_hash}:${c.block_hash}` : `credit:${c.chain_id}:${c.tx_hash}`;
    if (!this.balances.post({ wallet: c.wallet, kind: 'credit', amount: c.micro, request_id: null, ref: credit_ref, detail }, now)) return false;
    this.#insert.run({
      ...c,
      credit_ref,
      parts: JSON.stringify(c.parts.map((p) => ({ ...p, amount: p.amount.toString() }))),
      micro: c.micro,
      created_at: now,
    });
    return true;
  }

  /** Reverses a credit whose transfer a reorg removed: a new entry, never an edit. Inside a ledger transaction. */
  reverse(c: FundingCredit, reason: string, now = Date.now()): boolean {
    return this.balances.post(
      { wallet: c.wallet, kind: 'credit_reversal', amount: -c.micro, request_id: null, ref: `credit_reversal:${c.credit_ref}`, detail: reason },
      now,
    );
  }

  ofTx(chainId: number, txHash: string): FundingCredit[] {
    return (this.#ofTx.all(chainId, txHash) as Row[]).map(decode);
  }

  /** Credits standing (not reversed) in blocks at or above `block`. */
  standingFrom(chainId: number, block: number): FundingCredit[] {
    return (this.#from.all(chainId, block) as Row[]).map(decode).filter((c) => !c.reversed);
  }

  all(): FundingCredit[] {
    return (this.#all.all() as Row[]).map(decode);
  }

  scanMark(chainId: number, source: string): { block_number: number; block_hash: string } | undefined {
    return this.#getMark.get(chainId, source) as { block_number: number; block_hash: string } | undefined;
  }

  setScanMark(chainId: number, source: string, block: number, hash: string): void {
    this.#setMark.run(chainId, source, block, hash);
  }
}
