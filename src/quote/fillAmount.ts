import type { Pricing } from '../ledger/types.ts';
import { bpsCeil, mulRatioFloor } from './money.ts';

// What the recipient receives for a deposit of `amount`, priced as the quote fixed it. The quote
// and the solver both use this, so a deposit of exactly the quoted amount pays exactly the quote.
export function outputFor(amount: bigint, p: Pricing): bigint {
  const value = mulRatioFloor(amount, { num: BigInt(p.rateNum), den: BigInt(p.rateDen) });
  return value - bpsCeil(value, p.serviceBps) - BigInt(p.gasFeeOut);
}

// The smallest deposit whose output is at least `wanted` (for EXACT_OUTPUT quotes).
export function inputFor(wanted: bigint, p: Pricing): bigint {
  const num = BigInt(p.rateNum);
  const den = BigInt(p.rateDen);
  // Invert the fee and the rate, rounding up, then step down/up to the exact boundary.
  const value = ((wanted + BigInt(p.gasFeeOut)) * 10_000n + BigInt(10_000 - p.serviceBps) - 1n) / BigInt(10_000 - p.serviceBps);
  let amount = (value * den + num - 1n) / num;
  while (amount > 0n && outputFor(amount - 1n, p) >= wanted) amount--;
  while (outputFor(amount, p) < wanted) amount++;
  return amount;
}
