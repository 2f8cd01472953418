import type { SqlDb as Db } from './sqlDb.ts';
import type { PayoutRow } from './types.ts';

export type BalanceKind = 'credit' | 'credit_reversal' | 'sponsorship' | 'sponsorship_reversal' | 'permanent_debit' | 'claim' | 'hold' | 'hold_release';

export interface BalanceEntry {
  wallet: string;
  kind: BalanceKind;
  /** micro-USD, signed: what the entry adds to the balance (or, for holds, to what is held). */
  amount: bigint;
  request_id: string | null;
  ref: string;
  detail?: string | null;
}

/**
 * Every wallet whose balance_totals row (migration 38) differs from the sums of its balance_entries: the totals are
 * derived, the entries the truth. A walk of every entry: for the audit and db copy's verification, never the node's loop.
 * Columns: wallet, balance and held (the totals; 0 without a row), entries_balance and entries_held (the sums).
 */
export const BALANCE_TOTALS_DRIFT_SQL = `SELECT w.wallet AS wallet, COALESCE(t.balance, 0) AS balance, COALESCE(t.held, 0) AS held,
    COALESCE(e.balance, 0) AS entries_balance, COALESCE(e.held, 0) AS entries_held
  FROM (SELECT wallet FROM balance_totals UNION SELECT wallet FROM balance_entries) w
  LEFT JOIN balance_totals t ON t.wallet = w.wallet
  LEFT JOIN (SELECT wallet, SUM(CASE WHEN kind IN ('hold', 'hold_release') THEN 0 ELSE amount END) AS balance,
      SUM(CASE WHEN kind IN ('hold', 'hold_release') THEN amount ELSE 0 END) AS held
    FROM balance_entries GROUP BY wallet) e ON e.wallet = w.wallet
  WHERE COALESCE(t.balance, 0) <> COALESCE(e.balance, 0) OR COALESCE(t.held, 0) <> COALESCE(e.held, 0)
  ORDER BY w.wallet`;

/** A wallet whose totals differ from its entries (BALANCE_TOTALS_DRIFT_SQL). */
export interface BalanceTotalsDrift {
  wallet: string;
  balance: bigint;
  held: bigint;
  entriesBalance: bigint;
  entriesHeld: bigint;
}

/** The rows of BALANCE_TOTALS_DRIFT_SQL as bigints, whichever engine (integers, NUMERIC text) answered. */
export function balanceTotalsDrift(rows: Record<string, unknown>[]): BalanceTotalsDrift[] {
  const n = (v: unknown) => BigInt(String(v));
  return rows.map((r) => ({
    wallet: String(r.wallet),
    balance: n(r.balance),
    held: n(r.held),
    entriesBalance: n(r.entries_balance),
    entriesHeld: n(r.entries_held),
  }));
}

/**
 * App balances: sums of immutable entries (see migration 6). No store updates a number in place: each wallet's sums are
 * kept beside the entries (balance_totals, migration 38) by a trigger on every entry, derived and checked (totalsDrift).
 */
export class Balances {
  #post;
  #totals;
  #drift;
  #byRef;
  #ofRequest;
  #link;
  #linkOf;
  #linkedKeys;
  #unlink;
  #expired;
  #credits;
  constructor(db: Db) {
    // Walks requests_fast_fill_deadline (migration 14) over [since, now) only: the node checks every
    // few seconds, and a scan of every request would block its event loop on a large ledger.
    this.#expired = db.prepare(`SELECT r.id FROM requests r JOIN balance_entries h ON h.ref = 'hold:' || r.id
      WHERE r.fast_fill_deadline IS NOT NULL AND r.fast_fill_deadline >= @since AND r.fast_fill_deadline < @now
        AND NOT EXISTS (SELECT 1 FROM balance_entries x WHERE x.ref = 'hold_release:' || r.id)`);
    this.#post = db.prepare(`INSERT INTO balance_entries (wallet, kind, amount, request_id, ref, detail, created_at)
      VALUES (@wallet, @kind, @amount, @request_id, @ref, @detail, @now) ON CONFLICT(ref) DO NOTHING`);
    // One row by its key (migration 38), kept by a trigger with each entry: what the summary costs stays the same
    // however many entries the wallet has (it summed them all before, on the node's loop).
    this.#totals = db.prepare('SELECT balance, held FROM balance_totals WHERE wallet = ?').safeIntegers(true);
    this.#drift = db.prepare(BALANCE_TOTALS_DRIFT_SQL).safeIntegers(true);
    this.#byRef = db.prepare('SELECT * FROM balance_entries WHERE ref = ?').safeIntegers(true);
    this.#ofRequest = db.prepare('SELECT * FROM balance_entries WHERE request_id = ? ORDER BY id').safeIntegers(true);
    this.#link = db.prepare(`INSERT INTO sponsor_links (api_key_id, wallet, message, signature, linked_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT(api_key_id) DO UPDATE SET wallet = excluded.wallet, message = excluded.message, signature = excluded.signature, linked_at = excluded.linked_at`);
    this.#linkOf = db.prepare('SELECT wallet FROM sponsor_links WHERE api_key_id = ?');
    this.#linkedKeys = db.prepare('SELECT api_key_id FROM sponsor_links WHERE wallet = ? ORDER BY api_key_id');
    this.#unlink = db.prepare('DELETE FROM sponsor_links WHERE wallet = ? AND api_key_id = ?');
    this.#credits = db.prepare(`SELECT ref, wallet, amount FROM balance_entries WHERE kind = 'credit'`);
  }

  /** Every credit entry (its ref names its on-chain evidence), for the audit. */
  credits(): { ref: string; wallet: string; amount: number }[] {
    return this.#credits.all() as { ref: string; wallet: string; amount: number }[];
  }

  /** Books an entry once: returns false when an entry with the same ref exists already. */
  post(e: BalanceEntry, now = Date.now()): boolean {
    return this.#post.run({ ...e, detail: e.detail ?? null, now }).changes === 1;
  }

  get(ref: string): BalanceEntry | undefined {
    return this.#byRef.get(ref) as BalanceEntry | undefined;
  }

  ofRequest(requestId: string): BalanceEntry[] {
    return this.#ofRequest.all(requestId) as BalanceEntry[];
  }

  /** balance: what the wallet has; held: what active fast-fill holds set aside of it. */
  summary(wallet: string): { balance: bigint; held: bigint; available: bigint } {
    const r = this.#totals.get(wallet) as { balance: bigint | string; held: bigint | string } | undefined;
    const balance = r ? BigInt(r.balance) : 0n;
    const held = r ? BigInt(r.held) : 0n;
    return { balance, held, available: balance - held };
  }

  /** Every wallet whose totals differ from its entries' sums (none on a sound ledger): a walk of every entry, for the audit. */
  totalsDrift(): BalanceTotalsDrift[] {
    return balanceTotalsDrift(this.#drift.all() as Record<string, unknown>[]);
  }

  /** Requests whose fast-fill hold is still active past its deadline, for deadlines from `since` (ms). */
  expiredHolds(now: number, since = 0): string[] {
    return (this.#expired.all({ now, since }) as { id: string }[]).map((r) => r.id);
  }

  link(apiKeyId: string, wallet: string, message: string, signature: string, now = Date.now()): void {
    this.#link.run(apiKeyId, wallet, message, signature, now);
  }

  /**
   * Ends the wallet's sponsorship of one API key, or of every key it sponsors when none is given.
   * Returns the keys it no longer sponsors.
   */
  unlink(wallet: string, apiKeyId?: string): string[] {
    const keys = (this.#linkedKeys.all(wallet) as { api_key_id: string }[]).map((r) => r.api_key_id).filter((k) => apiKeyId === undefined || k === apiKeyId);
    for (const k of keys) this.#unlink.run(wallet, k);
    return keys;
  }

  sponsorOf(apiKeyId: string): string | undefined {
    return (this.#linkOf.get(apiKeyId) as { wallet: string } | undefined)?.wallet;
  }
}

export interface AppFeeEntry {
  recipient: string;
  chain_id: number;
  currency: string;
  amount: bigint;
  /** accrual_reversal: the accrual taken back (a reorg took back the deposit of the fill that accrued it). */
  kind: 'accrual' | 'accrual_reversal' | 'claim' | 'claim_reversal';
  request_id: string | null;
  ref: string;
}

/** App fees owed to their recipients, per chain and currency: sums of immutable entries. */
export class AppFees {
  #post;
  #ofRecipient;
  #ofRequest;
  #claimedBy;
  #claims;
  #entriesOf;
  #fillsAbove;
  constructor(db: Db) {
    this.#claims = db.prepare(
      `SELECT p.* FROM payouts p WHERE p.kind = 'claim' AND p.id IN (SELECT request_id FROM app_fee_entries WHERE recipient = @wallet AND kind = 'claim')
         AND (CAST(@at AS BIGINT) IS NULL OR p.decided_at < @at OR (p.decided_at = @at AND p.id < @id)) ORDER BY p.decided_at DESC, p.id DESC LIMIT @limit`,
    );
    this.#claimedBy = db.prepare(`SELECT recipient, chain_id, currency, amount FROM app_fee_entries WHERE request_id = ? AND kind = 'claim'`);
    this.#post = db.prepare(`INSERT INTO app_fee_entries (recipient, chain_id, currency, amount, kind, request_id, ref, created_at)
      VALUES (@recipient, @chain_id, @currency, @amount, @kind, @request_id, @ref, @now) ON CONFLICT(ref) DO NOTHING`);
    this.#ofRecipient = db.prepare('SELECT chain_id, currency, amount FROM app_fee_entries WHERE recipient = ?');
    this.#ofRequest = db.prepare(`SELECT * FROM app_fee_entries WHERE request_id = ? AND kind = 'accrual' ORDER BY id`);
    this.#entriesOf = db.prepare('SELECT chain_id, currency, amount, kind, request_id, ref FROM app_fee_entries WHERE recipient = ?');
    // Walks deposits_state over the blocks above `above` only (the chain's finality window): few rows however old the ledger.
    this.#fillsAbove = db.prepare(`SELECT p.request_id FROM deposits d JOIN payouts p ON p.deposit_id = d.id AND p.kind = 'fill'
      JOIN requests r ON r.id = p.request_id
      WHERE d.state = 'handled' AND d.chain_id = ? AND d.block_number > ? AND r.fast_fill_deadline IS NULL`);
  }

  /**
   * Requests filled from a deposit on `chainId` in a block above `above`: a reorg the indexer still watches for may take
   * their deposit back, and their app fees with it (reverseAppFees). Fast fills are left out: their fees are kept on a
   * reorg, the app that held for the fill bears it.
   */
  fillsAbove(chainId: number, above: number): string[] {
    return (this.#fillsAbove.all(chainId, above) as { request_id: string }[]).map((r) => r.request_id);
  }

  /**
   * What of `recipient`'s balances was accrued by fills of `requests` and is not taken back yet, per
   * `${chainId}:${currency}` (a walk of the recipient's entries, as balances() is).
   */
  pending(recipient: string, requests: ReadonlySet<string>): Map<string, bigint> {
    const accrued: { key: string; ref: string; amount: bigint }[] = [];
    const reversed = new Set<string>();
    type Entry = { chain_id: number; currency: string; amount: string; kind: string; request_id: string | null; ref: string };
    for (const e of this.#entriesOf.all(recipient) as Entry[]) {
      if (e.kind === 'accrual_reversal') reversed.add(e.ref);
      else if (e.kind === 'accrual' && e.request_id !== null && requests.has(e.request_id))
        accrued.push({ key: `${e.chain_id}:${e.currency}`, ref: e.ref, amount: BigInt(e.amount) });
    }
    const out = new Map<string, bigint>();
    for (const a of accrued) if (!reversed.has(`${a.ref}:reorged`)) out.set(a.key, (out.get(a.key) ?? 0n) + a.amount);
    return out;
  }

  post(e: AppFeeEntry, now = Date.now()): boolean {
    return this.#post.run({ ...e, amount: e.amount.toString(), now }).changes === 1;
  }

  /** Amounts are token units (up to uint256), summed exactly here rather than by SQLite. */
  balances(recipient: string): { chainId: number; currency: string; amount: bigint }[] {
    const out = new Map<string, { chainId: number; currency: string; amount: bigint }>();
    for (const r of this.#ofRecipient.all(recipient) as { chain_id: number; currency: string; amount: string }[]) {
      const k = `${r.chain_id}:${r.currency}`;
      const cur = out.get(k) ?? { chainId: r.chain_id, currency: r.currency, amount: 0n };
      cur.amount += BigInt(r.amount);
      out.set(k, cur);
    }
    return [...out.values()];
  }

  /** The entries a claim payout booked (their request_id is the payout's id). */
  claimedBy(payoutId: string): { recipient: string; chain_id: number; currency: string; amount: string }[] {
    return this.#claimedBy.all(payoutId) as { recipient: string; chain_id: number; currency: string; amount: string }[];
  }

  accruedFor(requestId: string): (AppFeeEntry & { amount: string })[] {
    return this.#ofRequest.all(requestId) as (AppFeeEntry & { amount: string })[];
  }

  /** A wallet's claim payouts, newest first, after the cursor (decided_at, id) when given, at most `limit`. */
  claimsOf(wallet: string, after: { at: number; id: string } | undefined, limit: number): PayoutRow[] {
    return this.#claims.all({ wallet, at: after?.at ?? null, id: after?.id ?? null, limit }) as PayoutRow[];
  }
}
