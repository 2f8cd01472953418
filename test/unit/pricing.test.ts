import { describe, expect, it } from 'vitest';
import type { Pricing } from '../../src/ledger/types.ts';
import { inputFor, outputFor } from '../../src/quote/fillAmount.ts';
import { conversionRate, parseDecimal, percent, usdValue } from '../../src/lib/money.ts';

describe('money', () => {
  it('parses decimal strings exactly', () => {
    expect(parseDecimal('3000.25')).toEqual({ num: 300025n, den: 100n });
    expect(parseDecimal('1')).toEqual({ num: 1n, den: 1n });
    expect(() => parseDecimal('1e3')).toThrow(/not a decimal/);
    expect(() => parseDecimal('-1')).toThrow(/not a decimal/);
  });

  it('converts across decimals through USD prices without rounding drift', () => {
    // 1 ETH at 3000 into a 6-decimal dollar: exactly 3000.000000
    const r = conversionRate('3000', 18, '1', 6);
    expect((10n ** 18n * r.num) / r.den).toBe(3_000_000_000n);
    // 1 wei is worth less than a micro-dollar: rounds to zero, never up
    expect((1n * r.num) / r.den).toBe(0n);
  });

  it('values amounts in USD as decimal strings', () => {
    expect(usdValue(1_500_000n, 6, '1')).toBe('1.5');
    expect(usdValue(10n ** 18n, 18, '3000.123456789')).toBe('3000.123456');
    expect(percent(-35n, 10_000n)).toBe('-0.35');
  });
});

describe('fill amount', () => {
  const p: Pricing = { rateNum: '1', rateDen: '1', serviceBps: 10, gasFeeOut: '50000', gasFeeUsd: '0.05' };
  const eth: Pricing = { rateNum: '1', rateDen: '1', serviceBps: 25, gasFeeOut: '21000000000000', gasFeeUsd: '0.06' };

  it('charges the service fee (rounded up) and the gas fee', () => {
    expect(outputFor(10_000_000n, p)).toBe(10_000_000n - 10_000n - 50_000n);
    expect(outputFor(1_001n + 50_000n, p)).toBe(1_001n + 50_000n - 52n - 50_000n);
  });

  it('finds the smallest input for an exact output', () => {
    for (const want of [1n, 999_999n, 10_000_000n, 123_456_789n]) {
      for (const pr of [p, eth]) {
        const a = inputFor(want, pr);
        expect(outputFor(a, pr)).toBeGreaterThanOrEqual(want);
        expect(outputFor(a - 1n, pr)).toBeLessThan(want);
      }
    }
  });
});
