import { type Dialect, dialectOf } from './dialect.ts';
import type { SqlDb as Db } from './sqlDb.ts';

/** The leader lease as the ledger holds it (migration 21). */
export interface LeaseRow {
  /** The node acting on the chains; null when nobody holds the lease. */
  holder: string | null;
  /** Raised by one at every takeover; 0 before the first. */
  epoch: number;
  /** Until when the holder may act (ms since the Unix epoch: on PostgreSQL the database's clock, on SQLite the host's). */
  expires_at: number;
}

/** Who acts, under which epoch: what a fenced ledger checks in every transaction it writes. */
export interface Fence {
  holder: string;
  epoch: number;
}

/** Thrown by a fenced ledger (or a broadcast gate) once its node no longer holds the lease it acted under. */
export class LeaseLostError extends Error {
  constructor(
    readonly fence: Fence | undefined,
    why: string,
  ) {
    super(`leader lease lost: ${why}`);
    this.name = 'LeaseLostError';
  }
}

// "Now" as the lease's statements read it, in ms since the Unix epoch. PostgreSQL: the database's clock, one clock
// for every node of the ledger, whatever their hosts' clocks say (`@now`, the caller's, is not used). SQLite: the
// caller's wall clock (`@now`); every node of a SQLite ledger is on its one host, with one clock.
const NOW: Record<Dialect, string> = { postgres: '(extract(epoch from clock_timestamp()) * 1000)::bigint', sqlite: '@now' };

/**
 * The renewal (`@holder`, `@epoch`, `@now`, `@ttl`): the expiry moved to now + ttl, one row changed while the lease is
 * still this holder's at this epoch. Exported for the leader's renewer thread (src/lease/renewer.ts), which runs it on
 * a connection of its own.
 */
export function renewSql(dialect: Dialect): string {
  return `UPDATE leader_lease SET expires_at = ${NOW[dialect]} + @ttl WHERE id = 1 AND holder = @holder AND epoch = @epoch`;
}

/**
 * The leader lease (the one-row table leader_lease): which of several nodes on one ledger acts on
 * the chains, under which epoch. Each method is one statement (atomic on its own), in plain SQL.
 *
 * Expiries are on the database's clock on PostgreSQL (`now` is ignored there): nodes on several hosts
 * compare one clock, and a host whose clock runs ahead cannot take a lease early. On SQLite (one host)
 * `now` is the calling node's wall clock. The holder itself never trusts a wall clock to stop acting:
 * it keeps its own deadline on its monotonic clock (src/lease/).
 */
export class Leases {
  #acquire;
  #renew;
  #release;
  #current;
  #holds;
  constructor(db: Db) {
    const dialect = dialectOf(db);
    const now = NOW[dialect];
    this.#acquire = db.prepare(`UPDATE leader_lease SET holder = @holder, epoch = epoch + 1, expires_at = ${now} + @ttl
      WHERE id = 1 AND (holder IS NULL OR expires_at <= ${now}) RETURNING epoch`);
    this.#renew = db.prepare(renewSql(dialect));
    this.#release = db.prepare('UPDATE leader_lease SET holder = NULL, expires_at = 0 WHERE id = 1 AND holder = @holder AND epoch = @epoch');
    this.#current = db.prepare('SELECT holder, epoch, expires_at FROM leader_lease WHERE id = 1');
    this.#holds = db.prepare('SELECT 1 AS yes FROM leader_lease WHERE id = 1 AND holder = @holder AND epoch = @epoch');
  }

  /**
   * Takes the lease when nobody holds it or its holder let it expire (by `now`; on PostgreSQL by the database's clock), raising the epoch
   * by one; returns the new epoch, or undefined when another holder's lease still runs. A holder
   * whose own lease still runs does not take it again (it renews): two nodes given the same id by
   * mistake never both act.
   */
  acquire(holder: string, now: number, ttlMs: number): number | undefined {
    const row = this.#acquire.get({ holder, now, ttl: ttlMs }) as { epoch: number } | undefined;
    return row ? Number(row.epoch) : undefined;
  }

  /** Extends the lease to now + ttlMs (on PostgreSQL the database's now); true only while it is still this holder's at this epoch. */
  renew(holder: string, epoch: number, now: number, ttlMs: number): boolean {
    return this.#renew.run({ holder, epoch, now, ttl: ttlMs }).changes === 1;
  }

  /** A clean stop: frees the lease at once (the epoch stays, the next holder raises it). */
  release(holder: string, epoch: number): boolean {
    return this.#release.run({ holder, epoch }).changes === 1;
  }

  current(): LeaseRow {
    const r = this.#current.get() as LeaseRow;
    return { holder: r.holder, epoch: Number(r.epoch), expires_at: Number(r.expires_at) };
  }

  /**
   * Whether the lease still names this holder and epoch: the fence's check, run first inside a write
   * transaction, so that no takeover commits between it and the writes it guards. SQLite gives that
   * by taking the write lock when the transaction begins (IMMEDIATE); on PostgreSQL the check must
   * lock the row until commit (`… FOR SHARE`), so a takeover's UPDATE waits for the transaction.
   */
  holds(fence: Fence): boolean {
    return this.#holds.get({ holder: fence.holder, epoch: fence.epoch }) !== undefined;
  }
}
