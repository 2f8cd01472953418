/** How long to wait before retry `attempt` of a failed step (1-based). */
export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
}

/**
 * Retry n (1-based) waits a random time in [0, min(max, base · 2^(n−1))]: "full jitter", so many
 * retries of one failure (a provider down for every payout at once) spread out instead of returning
 * together.
 */
export function backoffMs(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(Math.max(attempt, 1) - 1, 52));
  return Math.floor(random() * ceiling);
}
