import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow, Pricing } from '../ledger/types.ts';

/**
 * Whether a payout's quote recorded that it charged no account rent (SVM: a token account; the exchange: the
 * activation fee of an account it does not know). A fill must not create an account its quote did not charge for:
 * one closed or emptied after the quote would be created again at the solver's expense. A request priced before the
 * rent was recorded (or a payout with no request) says nothing, and keeps the old course.
 */
export function quotedNoRent(ledger: Ledger, p: PayoutRow): boolean {
  const pricing = p.request_id ? ledger.requests.get(p.request_id)?.pricing : null;
  if (!pricing) return false;
  const { rent } = JSON.parse(pricing) as Pricing;
  return rent !== undefined && BigInt(rent) === 0n;
}
