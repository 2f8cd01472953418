/**
 * Token buckets in memory, one per API key or client IP: up to `perMinute` calls in a burst,
 * refilled continuously at perMinute per minute. Per process: each API replica limits on its own.
 */
export class RateLimiter {
  #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #perMs: number;
  constructor(
    readonly perMinute: number,
    private readonly maxTracked = 100_000,
  ) {
    this.#perMs = perMinute / 60_000;
  }

  /**
   * Takes `cost` tokens (at most a full bucket, so any cost can be paid once the bucket is full); when
   * there are not that many, takes none and returns the milliseconds until there are.
   */
  take(id: string, now = Date.now(), cost = 1): { ok: true } | { ok: false; retryAfterMs: number } {
    const need = Math.min(cost, this.perMinute);
    let b = this.#buckets.get(id);
    if (!b) {
      if (this.#buckets.size >= this.maxTracked) this.#prune(now);
      b = { tokens: this.perMinute, at: now };
      this.#buckets.set(id, b);
    } else {
      b.tokens = Math.min(this.perMinute, b.tokens + (now - b.at) * this.#perMs);
      b.at = now;
    }
    if (b.tokens >= need) {
      b.tokens -= need;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.ceil((need - b.tokens) / this.#perMs) };
  }

  // Forgets buckets that have refilled (they behave exactly like new ones), and when that is not
  // enough, the oldest: an attacker cycling addresses cannot grow memory without bound.
  #prune(now: number): void {
    for (const [id, b] of this.#buckets) {
      if (b.tokens + (now - b.at) * this.#perMs >= this.perMinute) this.#buckets.delete(id);
    }
    for (const id of this.#buckets.keys()) {
      if (this.#buckets.size < this.maxTracked * 0.9) break;
      this.#buckets.delete(id);
    }
  }
}
