import { randomUUID } from 'node:crypto';
import type { Currency, Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow } from '../ledger/types.ts';
import { conversionRate, mulRatioCeil, mulRatioFloor } from '../lib/money.ts';
import { sameAssetRate } from '../quote/pricing.ts';
import { RelayNodeError } from '../lib/errors.ts';

export interface ClaimRequest {
  wallet: string;
  /** Where the recipient wants the fees paid: a chain, a currency on it, an address. */
  target: Currency;
  recipient: string;
}

export class ClaimError extends RelayNodeError {
  override name = 'ClaimError';
  constructor(
    // NOTHING_TO_CLAIM: no fees of the currency are owed; CLAIM_BELOW_GAS: what is owed does not pay the claim's own gas.
    readonly errorCode: 'NOTHING_TO_CLAIM' | 'CLAIM_BELOW_GAS',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Pays a wallet's accrued app fees out on the chain and currency of its choice: every balance of
 * the same currency (same symbol, any chain) is booked as claimed and one payout is queued, all in
 * one ledger transaction. The payout is what is owed less `gas`, the claim's own gas in the target
 * currency (a refund's, as a deposit's refund is charged). A balance below zero (a fee taken back
 * after it was claimed: a reorg took back the deposit of its fill) is a debt: a debt in the same
 * currency is repaid out of the claim, and one in another currency refuses it until later fees
 * repay it. Returns the payout, or throws ClaimError when nothing is owed or it does not pay the gas.
 */
export function claimAppFees(ledger: Ledger, registry: Registry, req: ClaimRequest, gas: bigint, now = Date.now()): PayoutRow {
  return ledger.tx(() => {
    const payoutId = `claim:${randomUUID()}`;
    let total = 0n;
    for (const owed of ledger.appFees.balances(req.wallet)) {
      if (owed.amount === 0n) continue;
      const from = registry.currency(owed.chainId, owed.currency);
      if (!from || from.symbol !== req.target.symbol || from.native !== req.target.native) {
        if (owed.amount < 0n)
          throw new ClaimError(
            'NOTHING_TO_CLAIM',
            `${req.wallet} owes ${-owed.amount} of ${owed.currency} on chain ${owed.chainId} (app fees taken back): no claim until later fees repay it`,
          );
        continue;
      }
      // Same currency on another chain: only the decimals may differ. Not more than the same amount, whatever the two
      // entries' configured USD prices say: nothing keeps them equal (with a feed they are a fallback), and the
      // claimant picks the target. A debt is repaid one for one, rounded up.
      total +=
        owed.amount > 0n
          ? mulRatioFloor(owed.amount, sameAssetRate(from, from.usdPrice, req.target, req.target.usdPrice))
          : -mulRatioCeil(-owed.amount, conversionRate('1', from.decimals, '1', req.target.decimals));
      ledger.appFees.post({
        recipient: req.wallet,
        chain_id: owed.chainId,
        currency: owed.currency,
        amount: -owed.amount,
        kind: 'claim',
        request_id: payoutId,
        ref: `${payoutId}:${owed.chainId}:${owed.currency}`,
      });
    }
    if (total <= 0n) throw new ClaimError('NOTHING_TO_CLAIM', `no ${req.target.symbol} app fees are owed to ${req.wallet}`);
    // Thrown inside the transaction: what was booked as claimed above is not.
    if (total <= gas) {
      throw new ClaimError(
        'CLAIM_BELOW_GAS',
        `the ${total} ${req.target.symbol} (smallest unit) owed to ${req.wallet} does not pay the claim's gas on chain ${req.target.chainId} (${gas}); claim later or on another chain`,
      );
    }
    ledger.payouts.insert({
      id: payoutId,
      kind: 'claim',
      request_id: null,
      deposit_id: null,
      chain_id: req.target.chainId,
      recipient: req.recipient,
      currency: req.target.address,
      amount: (total - gas).toString(),
      decided_at: now,
    });
    return ledger.payouts.get(payoutId)!;
  });
}

/**
 * The claim's payout failed: what it booked as claimed is owed again. Runs inside the submitter's
 * ledger transaction.
 */
export function reverseClaim(ledger: Ledger, payout: PayoutRow): void {
  for (const e of ledger.appFees.claimedBy(payout.id)) {
    ledger.appFees.post({
      recipient: e.recipient,
      chain_id: e.chain_id,
      currency: e.currency,
      amount: -BigInt(e.amount),
      kind: 'claim_reversal',
      request_id: payout.id,
      ref: `${payout.id}:${e.chain_id}:${e.currency}:reversal`,
    });
  }
}
