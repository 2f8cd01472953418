import type { SqlDb as Db } from './sqlDb.ts';
import type { Store } from './ledger.ts';
import type { Requests } from './requests.ts';
import { orderRefIs } from './deposits.ts';

// Quotes nobody used: a quote is stored when it is given (its request row, and its text in
// request_quotes, ~1-70 KB with its transactions) and most are never deposited against. Past its
// expiry plus a grace period, a quote that nothing happened to is deleted. "Nothing happened" is
// strict: still 'waiting', not a deposit-address request (funds may still arrive there), and no
// deposit (one naming it by its order ref, even one not decided yet: waiting for its confirmations, or held back
// by a pause, a limit or dry run; pruned under it, the order was gone when it was decided, and it was refunded as an
// orphan to its depositor instead of filled), payout (a fill, refund or node-submitted signed deposit), exchange signature, balance or
// app fee entry, child request, or status event beyond the quote's own 'waiting'. That event goes with
// it, with its deliveries, even one still retried: a 'waiting' that no receiver took in the hours after
// the quote expired is news of nothing, and a receiver that never answers would keep every quote of
// its key for the hours of its retries.

// A batch per transaction: the write lock is held briefly, the solver's writes interleave.
const PRUNE_BATCH = 1_000;

// The candidates, soonest expired first: through requests_prunable (migration 40 leads it by status), which holds only
// waiting top-level orders; without statistics SQLite took requests_status and sorted every waiting request before the
// LIMIT. Each NOT EXISTS seeks an index by the request's id (app_fee_entries_request, migration 40, for app fees).
export const UNUSED = `
  SELECT r.id FROM requests r
  WHERE r.status = 'waiting' AND r.kind = 'order' AND r.parent_id IS NULL AND r.deposit_address IS NULL
    AND r.expires_at IS NOT NULL AND r.expires_at < @before
    AND NOT EXISTS (SELECT 1 FROM deposits d WHERE d.request_id = r.id)
    AND NOT EXISTS (SELECT 1 FROM deposits d WHERE ${orderRefIs('d.order_ref', 'r.id')})
    AND NOT EXISTS (SELECT 1 FROM payouts p WHERE p.request_id = r.id)
    AND NOT EXISTS (SELECT 1 FROM exchange_nonces x WHERE x.request_id = r.id)
    AND NOT EXISTS (SELECT 1 FROM balance_entries b WHERE b.request_id = r.id)
    AND NOT EXISTS (SELECT 1 FROM app_fee_entries a WHERE a.request_id = r.id)
    AND NOT EXISTS (SELECT 1 FROM requests c WHERE c.parent_id = r.id)
    AND NOT EXISTS (SELECT 1 FROM events e WHERE e.request_id = r.id AND e.status != 'waiting')
  ORDER BY r.expires_at
  LIMIT @limit`;

/**
 * Deletes up to `limit` unused quotes that expired before `before` (ms), with their 'waiting'
 * event and its deliveries, in one transaction. Returns the number of quotes deleted.
 */
export function pruneUnusedQuotes(db: Db, before: number, limit = PRUNE_BATCH): number {
  return db
    .transaction(() => {
      db.exec('CREATE TEMP TABLE IF NOT EXISTS prune_ids (id TEXT PRIMARY KEY)');
      db.exec('DELETE FROM prune_ids');
      const n = db.prepare(`INSERT INTO prune_ids ${UNUSED}`).run({ before, limit }).changes;
      if (n > 0) {
        db.exec('DELETE FROM event_deliveries WHERE request_id IN (SELECT id FROM prune_ids)');
        db.exec('DELETE FROM events WHERE request_id IN (SELECT id FROM prune_ids)');
        db.exec('DELETE FROM request_quotes WHERE request_id IN (SELECT id FROM prune_ids)');
        db.exec('DELETE FROM requests WHERE id IN (SELECT id FROM prune_ids)');
      }
      db.exec('DELETE FROM prune_ids');
      return n;
    })
    .immediate();
}

/** Runs pruneUnusedQuotes every interval (a full node only; a read-only replica never writes). */
export class QuotePruner {
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  constructor(
    private readonly requests: Pick<Store<Requests>, 'pruneUnusedQuotes'>,
    private readonly opts: { graceMs: number; intervalMs: number; now: () => number; onPruned?: (n: number) => void; onError?: (e: Error) => void },
  ) {}

  /**
   * One pass: deletes in batches until none is left, yielding to the event loop between batches so
   * that a large backlog never holds the solver, the submitters or the API for long.
   */
  async runOnce(): Promise<number> {
    let total = 0;
    while (!this.#stopped) {
      const n = this.requests.pruneUnusedQuotes(this.opts.now() - this.opts.graceMs);
      total += n;
      if (n < PRUNE_BATCH) break;
      await new Promise((r) => setImmediate(r));
    }
    if (total > 0) this.opts.onPruned?.(total);
    return total;
  }

  start(): this {
    const tick = async () => {
      try {
        await this.runOnce();
      } catch (e) {
        this.opts.onError?.(e as Error);
      }
      if (this.#stopped) return;
      this.#timer = setTimeout(tick, this.opts.intervalMs);
      this.#timer.unref();
    };
    this.#timer = setTimeout(tick, this.opts.intervalMs);
    this.#timer.unref();
    return this;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }
}
