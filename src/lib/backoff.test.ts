import { describe, expect, it } from 'vitest';
import { backoffMs } from './backoff.ts';

describe('backoffMs', () => {
  const policy = { baseMs: 1000, maxMs: 3_600_000 };
  it('backs off exponentially with full jitter, capped', () => {
    expect(backoffMs(1, policy, () => 0.999)).toBe(999);
    expect(backoffMs(5, policy, () => 0.5)).toBe(8000);
    expect(backoffMs(30, policy, () => 0.5)).toBe(1_800_000);
    expect(backoffMs(3, policy, () => 0)).toBe(0);
  });
  it('treats attempt 0 as the first retry', () => {
    expect(backoffMs(0, policy, () => 0.5)).toBe(500);
  });
});
