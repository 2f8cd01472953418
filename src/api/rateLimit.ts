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

  /** Takes one token; when there is none, returns the milliseconds until there is. */
  take(id: string, now = Date.now()): { ok: true } | { ok: false; retryAfterMs: number } {
    let b = this.#buckets.get(id);
    if (!b) {
      if (this.#buckets.size >= this.maxTracked) this.#prune(now);
      b = { tokens: this.perMinute, at: now };
      this.#buckets.set(id, b);
    } else {
      b.tokens = Math.min(this.perMinute, b.tokens + (now - b.at) * this.#perMs);
      b.at = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.ceil((1 - b.tokens) / this.#perMs) };
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
