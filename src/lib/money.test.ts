// Rounding on the node's side: what the node pays rounds down, what it charges rounds up, and no
// float ever holds an amount. (Parsing, conversion and USD strings: test/unit/pricing.test.ts.)
import { describe, expect, it } from 'vitest';
import { bpsCeil, ceilDiv, mulRatioCeil, mulRatioFloor, parseDecimal, usdMicro, usdMicroCeil } from './money.ts';

describe('rounding', () => {
  it('ceilDiv rounds up only what does not divide', () => {
    expect(ceilDiv(0n, 7n)).toBe(0n);
    expect(ceilDiv(14n, 7n)).toBe(2n);
    expect(ceilDiv(15n, 7n)).toBe(3n);
  });

  it('a ratio applied rounds down to pay and up to charge, one unit apart at most', () => {
    const third = { num: 1n, den: 3n };
    expect(mulRatioFloor(10n, third)).toBe(3n);
    expect(mulRatioCeil(10n, third)).toBe(4n);
    expect(mulRatioCeil(9n, third)).toBe(mulRatioFloor(9n, third));
  });

  it('USD worth: truncated for a value, rounded up for a charge (a sponsor never pays short)', () => {
    // 1 wei of a 18-decimal currency at $3,000 is worth less than a micro-dollar.
    expect(usdMicro(1n, 18, '3000')).toBe(0n);
    expect(usdMicroCeil(1n, 18, '3000')).toBe(1n);
    // 1.5 USDC at $1: exactly 1,500,000 micro-USD both ways.
    expect(usdMicro(1_500_000n, 6, '1')).toBe(1_500_000n);
    expect(usdMicroCeil(1_500_000n, 6, '1')).toBe(1_500_000n);
  });

  it('basis points round up', () => {
    expect(bpsCeil(10_000n, 10)).toBe(10n);
    expect(bpsCeil(10_001n, 10)).toBe(11n);
    expect(bpsCeil(1n, 1)).toBe(1n);
  });

  it('refuses what is not a plain non-negative decimal string', () => {
    for (const bad of ['-1', '1e3', '.5', '1.', '1,5', ' 1', '']) expect(() => parseDecimal(bad)).toThrow(/not a decimal string/);
  });
});
