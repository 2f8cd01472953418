import type { StatusRecord } from '../statusRecord.ts';

/** How many records are kept (the oldest kept goes first); a record is about half a kilobyte. */
const MAX_ENTRIES = 10_000;
/**
 * The oldest a kept record is served. Every change the node writes notifies (migration 26), and a connection that
 * fails stops the keeping; this bounds what a change missed otherwise would leave: a write that skips the triggers
 * (a session with session_replication_role = replica), or a connection cut without a word (no reset: TCP keepalive
 * finds it only after hours).
 */
const MAX_AGE_MS = 5_000;

export interface StatusCacheOptions {
  /** The oldest a kept record is served (5 s by default). */
  maxAgeMs?: number;
}

interface Entry {
  record: StatusRecord;
  at: number;
}

// A read in flight: marked stale when its request changes (or the notifications stop) before it returns.
interface Pending {
  stale: boolean;
}

/**
 * Status records kept in memory between their changes, for an API replica on PostgreSQL: a record read is kept
 * until PostgreSQL notifies a change of its request (`invalidate`), and served from memory until then.
 *
 * A record is kept only while the notifications are known to arrive (`live`): it is dropped when they stop
 * (`stopped`: the listening connection is lost, a change may go unnoticed) and nothing is kept until they arrive
 * again. A read that a notification of its request overtakes is not kept: the change it announces committed
 * after the read began, and may be after its snapshot. A change that commits after a read's snapshot notifies after
 * the read began, so it either overtakes the read or drops the record the read kept: a kept record is never older
 * than the notifications received. An unknown id is not kept (an id an attacker invents costs one read, not a place).
 */
export class StatusCache {
  readonly #entries = new Map<string, Entry>();
  readonly #pending = new Map<string, Set<Pending>>();
  #live = false;
  readonly #maxAgeMs: number;

  constructor(opts: StatusCacheOptions = {}) {
    this.#maxAgeMs = opts.maxAgeMs ?? MAX_AGE_MS;
  }

  /** The record of `id`: from memory if kept and fresh, else from `load`, kept if nothing changed meanwhile. */
  async get(id: string, load: () => Promise<StatusRecord | undefined>): Promise<StatusRecord | undefined> {
    const now = Date.now();
    const kept = this.#entries.get(id);
    if (kept && now - kept.at < this.#maxAgeMs) return kept.record;
    if (!this.#live) return load();
    const mine: Pending = { stale: false };
    let set = this.#pending.get(id);
    if (!set) this.#pending.set(id, (set = new Set()));
    set.add(mine);
    try {
      const record = await load();
      if (record && !mine.stale) this.#keep(id, { record, at: now });
      return record;
    } finally {
      set.delete(mine);
      if (set.size === 0 && this.#pending.get(id) === set) this.#pending.delete(id);
    }
  }

  /** A change of `id`'s record committed: it is dropped, and a read of it in flight is not kept. */
  invalidate(id: string): void {
    this.#entries.delete(id);
    for (const p of this.#pending.get(id) ?? []) p.stale = true;
  }

  /** Notifications arrive from now on (the listening connection is up): records read from now on may be kept. */
  live(): void {
    this.#dropAll();
    this.#live = true;
  }

  /** Notifications may be missed from now on: nothing kept is served, and nothing is kept until `live`. */
  stopped(): void {
    this.#live = false;
    this.#dropAll();
  }

  /** How many records are kept. */
  get size(): number {
    return this.#entries.size;
  }

  #keep(id: string, entry: Entry): void {
    this.#entries.delete(id);
    this.#entries.set(id, entry);
    if (this.#entries.size > MAX_ENTRIES) this.#entries.delete(this.#entries.keys().next().value!);
  }

  #dropAll(): void {
    this.#entries.clear();
    for (const set of this.#pending.values()) for (const p of set) p.stale = true;
  }
}
