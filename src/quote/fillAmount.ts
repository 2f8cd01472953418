import type { Pricing } from '../ledger/types.ts';
import { QuoteError } from '../lib/quoteError.ts';
import { bpsCeil, mulRatioFloor, type Ratio } from '../lib/money.ts';

export interface FeeBreakdown {
  /** The deposit's worth in the output currency, before fees. */
  value: bigint;
  service: bigint;
  gas: bigint;
  topUp: bigint;
  app: { recipient: string; bps: number; amount: bigint }[];
  /** What the sponsor pays of service, gas and top-up (never more than they come to). */
  sponsored: bigint;
  /** What the recipient receives. */
  out: bigint;
}

/**
 * The quote's pricing at another rate: a swap is filled at today's (a deposit's fill, a fast fill), not at the
 * quote's, or whoever keeps quotes until the market moves is paid more than the input is worth.
 */
export function atRate(pricing: Pricing, rate: Ratio): Pricing {
  return { ...pricing, rateNum: rate.num.toString(), rateDen: rate.den.toString() };
}

/** A rate as a fill's payout records it ("num/den"). */
export function rateText(rate: Ratio): string {
  return `${rate.num}/${rate.den}`;
}

/**
 * The pricing a fill was made at: the quote's, or the rate its payout recorded (a swap's, filled at its moment's
 * rate). What a paid fill earns (its app fees) is of this pricing: at the quote's, after the input's price fell, the
 * user's output and the app's fees together came to more than the deposit was worth.
 */
export function pricedAt(pricing: Pricing, rate: string | null | undefined): Pricing {
  if (!rate) return pricing;
  const [num, den] = rate.split('/');
  return atRate(pricing, { num: BigInt(num!), den: BigInt(den!) });
}

/**
 * How a deposit of `amount` is paid out, priced as the quote fixed it. The quote and the solver
 * both use this, so a deposit of exactly the quoted amount pays exactly the quote.
 */
export function breakdown(amount: bigint, p: Pricing): FeeBreakdown {
  const value = mulRatioFloor(amount, { num: BigInt(p.rateNum), den: BigInt(p.rateDen) });
  const service = bpsCeil(value, p.serviceBps);
  const gas = BigInt(p.gasFeeOut);
  const topUp = BigInt(p.topUpOut ?? 0);
  // Each app fee rounds down: a recipient never takes a unit the user did not owe.
  const app = (p.appFees ?? []).map((f) => ({ ...f, amount: (value * BigInt(f.bps)) / 10_000n }));
  let sponsored = 0n;
  if (p.sponsor) {
    const c = p.sponsor.components;
    const sponsorable = (c.includes('execution') ? gas + topUp : 0n) + (c.includes('platform') ? service : 0n);
    const cap = BigInt(p.sponsor.capOut);
    sponsored = sponsorable < cap ? sponsorable : cap;
  }
  const out = value - service - gas - topUp - app.reduce((s, f) => s + f.amount, 0n) + sponsored;
  return { value, service, gas, topUp, app, sponsored, out };
}

export function outputFor(amount: bigint, p: Pricing): bigint {
  return breakdown(amount, p).out;
}

// No deposit is larger than a uint256 (what the depository's amount can hold).
const MAX_INPUT = 2n ** 256n - 1n;

/**
 * The smallest deposit whose output is at least `wanted` (for EXACT_OUTPUT quotes). Output grows
 * with the deposit, so a binary search over an upper bound found by doubling finds it exactly.
 * Throws a QuoteError when no deposit up to a uint256 pays it (a zero or vanishing rate): the
 * doubling is bounded, never a loop for ever.
 */
export function inputFor(wanted: bigint, p: Pricing): bigint {
  let hi = 1n;
  while (outputFor(hi, p) < wanted) {
    if (hi > MAX_INPUT) throw new QuoteError(`amount: no deposit up to 2^256 pays an output of ${wanted} at this rate`, 'AMOUNT_TOO_LOW');
    hi *= 2n;
  }
  let lo = hi / 2n;
  while (lo + 1n < hi) {
    const mid = (lo + hi) / 2n;
    if (outputFor(mid, p) >= wanted) hi = mid;
    else lo = mid;
  }
  return outputFor(lo, p) >= wanted && lo > 0n ? lo : hi;
}
