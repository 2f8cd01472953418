import { formatUnits } from 'viem';

// Exact rational arithmetic on bigints. Prices are decimal strings; no float ever holds money.

export interface Ratio {
  num: bigint;
  den: bigint;
}

export function parseDecimal(s: string): Ratio {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(s);
  if (!m) throw new Error(`not a decimal string: ${s}`);
  const frac = m[2] ?? '';
  return { num: BigInt(m[1]! + frac), den: 10n ** BigInt(frac.length) };
}

export function ceilDiv(a: bigint, b: bigint): bigint {
  return a === 0n ? 0n : (a + b - 1n) / b;
}

export function mulRatioFloor(x: bigint, r: Ratio): bigint {
  return (x * r.num) / r.den;
}

export function mulRatioCeil(x: bigint, r: Ratio): bigint {
  return ceilDiv(x * r.num, r.den);
}

/**
 * Converts an amount of one currency into another through their USD prices:
 * out = amount * priceIn * 10^decOut / (priceOut * 10^decIn).
 */
export function conversionRate(priceIn: string, decIn: number, priceOut: string, decOut: number): Ratio {
  const a = parseDecimal(priceIn);
  const b = parseDecimal(priceOut);
  if (b.num === 0n) throw new Error('price of the output currency is zero');
  return { num: a.num * b.den * 10n ** BigInt(decOut), den: b.num * a.den * 10n ** BigInt(decIn) };
}

const USD_DECIMALS = 6;

/** USD value of an amount in millionths of a dollar (truncated). */
export function usdMicro(amount: bigint, decimals: number, price: string): bigint {
  const p = parseDecimal(price);
  return (amount * p.num * 10n ** BigInt(USD_DECIMALS)) / (p.den * 10n ** BigInt(decimals));
}

/** Rounded up: what a sponsor is charged never falls short of what it pays. */
export function usdMicroCeil(amount: bigint, decimals: number, price: string): bigint {
  const p = parseDecimal(price);
  return ceilDiv(amount * p.num * 10n ** BigInt(USD_DECIMALS), p.den * 10n ** BigInt(decimals));
}

export function formatUsd(micro: bigint): string {
  return formatUnits(micro, USD_DECIMALS);
}

/** USD value of an amount as a decimal string with up to 6 places (truncated). */
export function usdValue(amount: bigint, decimals: number, price: string): string {
  return formatUsd(usdMicro(amount, decimals, price));
}

export function bpsCeil(amount: bigint, bps: number): bigint {
  return ceilDiv(amount * BigInt(bps), 10_000n);
}

/** Percentage with two decimals, as a string (e.g. "-0.35"), from exact integers. */
export function percent(part: bigint, whole: bigint): string {
  if (whole === 0n) return '0';
  const hundredths = (part * 10_000n) / whole;
  const neg = hundredths < 0n;
  const abs = neg ? -hundredths : hundredths;
  return `${neg ? '-' : ''}${abs / 100n}.${(abs % 100n).toString().padStart(2, '0')}`;
}
