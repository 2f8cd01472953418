import { isApiRead } from './apiReads.ts';

/**
 * Reads shared among their concurrent callers (one per key), except that the node's own work never waits on a read
 * the public API started: the API's reads yield to the node's at each provider (lib/apiReads.ts), behind as many as a
 * client keeps in flight, so a fill that joined a quote's read of the same fee waited behind the API's traffic. Such a
 * caller starts its own read, which then serves every later caller, the API's included.
 */
export class SharedReads<K, T> {
  readonly #reads = new Map<K, { value: Promise<T>; api: boolean }>();

  constructor(
    // Whether a read that succeeded is kept for later callers (until cleared) or forgotten once settled.
    private readonly keep: boolean,
  ) {}

  /** The read of `key` under way (or kept) that the caller may join, else `read()` started now. */
  get(key: K, read: () => Promise<T>): Promise<T> {
    const api = isApiRead();
    const hit = this.#reads.get(key);
    if (hit && (api || !hit.api)) return hit.value;
    const entry = { value: read(), api };
    this.#reads.set(key, entry);
    const forget = () => {
      if (this.#reads.get(key) === entry) this.#reads.delete(key);
    };
    // A failed read is never kept: the next caller reads again.
    entry.value.then(() => this.keep || forget(), forget);
    return entry.value;
  }

  /** Forgets every read (those under way still answer their callers). */
  clear(): void {
    this.#reads.clear();
  }
}
