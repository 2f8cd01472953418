import { afterEach, describe, expect, it, vi } from 'vitest';
import { apiReads } from '../../lib/apiReads.ts';
import { ExchangeBudgetError, WeightBudget } from './requestWeight.ts';

afterEach(() => {
  vi.useRealTimers();
});

describe('WeightBudget', () => {
  // The exchange counts what an address spent over the last 60 seconds. A bucket that started full and refilled at the
  // limit a minute let twice the limit through in the first minute: a client asking for quotes as fast as they were
  // answered then had the node's own ledger read answered 429 at 30 s (found by the review of this session's commits).
  it('spends no more than the limit in any 60 seconds, as the exchange counts it', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const budget = new WeightBudget(120);
    for (let i = 0; i < 6; i++) await budget.take(20);
    vi.advanceTimersByTime(30_000);
    let taken = false;
    const next = budget.take(20).then(() => (taken = true));
    await vi.advanceTimersByTimeAsync(29_000);
    expect(taken).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    await next;
    expect(taken).toBe(true);
  });

  it("leaves the API half of it, and refuses what would wait past the API's bound", async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const budget = new WeightBudget(120);
    for (let i = 0; i < 3; i++) await apiReads.run(true, () => budget.take(20));
    // 60 spent: a fourth API read would pass half the limit, and waits a minute: refused at once.
    await expect(apiReads.run(true, () => budget.take(20))).rejects.toBeInstanceOf(ExchangeBudgetError);
    // The node's own reads still have the rest.
    for (let i = 0; i < 3; i++) await budget.take(20);
  });
});
