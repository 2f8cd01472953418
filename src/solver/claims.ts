import { randomUUID } from 'node:crypto';
import type { Currency, Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow } from '../ledger/types.ts';
import { conversionRate, mulRatioCeil, mulRatioFloor } from '../lib/money.ts';
import { sameAssetRate } from '../quote/pricing.ts';
import { RelayNodeError } from '../lib/errors.ts';
import type { RiskPolicy, UsdOf } from './risk.ts';

export interface ClaimRequest {
  wallet: string;
  /** Where the recipient wants the fees paid: a chain, a currency on it, an address. */
  target: Currency;
  recipient: string;
}

export class ClaimError extends RelayNodeError {
  override name = 'ClaimError';
  constructor(
    // NOTHING_TO_CLAIM: no fees of the currency are owed; CLAIM_BELOW_GAS: what is owed does not pay the claim's own gas;
    // OUTFLOW_BUDGET: the payout would take its chain's outflow of the last hour past the operator's budget.
    readonly errorCode: 'NOTHING_TO_CLAIM' | 'CLAIM_BELOW_GAS' | 'OUTFLOW_BUDGET',
    message: string,
  ) {
    super(message);
  }
}

/** The hourly outflow budget a claim is held to: the solver's risk limits and the prices it is valued at. */
export interface ClaimOutflow {
  risk: RiskPolicy;
  usd: UsdOf;
}

/**
 * Pays a wallet's accrued app fees out on the chain and currency of its choice: every balance of
 * the same currency (same symbol, any chain) is booked as claimed and one payout is queued, all in
 * one ledger transaction. The payout is what is owed less `gas`, the claim's own gas in the target
 * currency (a refund's, as a deposit's refund is charged). Fees of a fill whose deposit is not final
 * yet (pendingAppFees) are not claimed: they stay owed until it is. A balance below zero (a fee taken
 * back after it was claimed) is a debt: a debt in the same currency is repaid out of the claim, and one
 * in another currency refuses it until later fees repay it. With `outflow`, the payout counts in its chain's hourly
 * outflow budget (risk outflowUsdPerHour), as fills do: one that would take the last hour's outflow past it is
 * refused in this transaction, nothing booked as claimed. Returns the payout, or throws ClaimError when nothing is
 * owed, it does not pay the gas or it does not fit in the budget.
 */
export function claimAppFees(ledger: Ledger, registry: Registry, req: ClaimRequest, gas: bigint, now = Date.now(), outflow?: ClaimOutflow): PayoutRow {
  return ledger.tx(() => {
    const payoutId = `claim:${randomUUID()}`;
    let total = 0n;
    const pending = pendingAppFees(ledger, registry, req.wallet);
    let waiting = 0n;
    for (const owed of ledger.appFees.balances(req.wallet)) {
      // What a reorg can no longer take back: the rest waits, owed, for its deposits' finality.
      const held = pending.get(`${owed.chainId}:${owed.currency}`) ?? 0n;
      const amount = owed.amount - held;
      const from = registry.currency(owed.chainId, owed.currency);
      const same = !!from && from.symbol === req.target.symbol && from.native === req.target.native;
      if (same && held > 0n) waiting += held;
      if (amount === 0n) continue;
      if (!from || !same) {
        if (amount < 0n)
          throw new ClaimError(
            'NOTHING_TO_CLAIM',
            `${req.wallet} owes ${-amount} of ${owed.currency} on chain ${owed.chainId} (app fees taken back): no claim until later fees repay it`,
          );
        continue;
      }
      // Same currency on another chain: only the decimals may differ. Not more than the same amount, whatever the two
      // entries' configured USD prices say: nothing keeps them equal (with a feed they are a fallback), and the
      // claimant picks the target. A debt is repaid one for one, rounded up.
      total +=
        amount > 0n
          ? mulRatioFloor(amount, sameAssetRate(from, from.usdPrice, req.target, req.target.usdPrice))
          : -mulRatioCeil(-amount, conversionRate('1', from.decimals, '1', req.target.decimals));
      ledger.appFees.post({
        recipient: req.wallet,
        chain_id: owed.chainId,
        currency: owed.currency,
        amount: -amount,
        kind: 'claim',
        request_id: payoutId,
        ref: `${payoutId}:${owed.chainId}:${owed.currency}`,
      });
    }
    if (total <= 0n) {
      const later = waiting > 0n ? ` (${waiting} more, in smallest units, is owed from fills whose deposits are not final yet: claim it once they are)` : '';
      throw new ClaimError('NOTHING_TO_CLAIM', `no ${req.target.symbol} app fees are claimable by ${req.wallet} now${later}`);
    }
    // Thrown inside the transaction: what was booked as claimed above is not.
    if (total <= gas) {
      throw new ClaimError(
        'CLAIM_BELOW_GAS',
        `the ${total} ${req.target.symbol} (smallest unit) owed to ${req.wallet} does not pay the claim's gas on chain ${req.target.chainId} (${gas}); claim later or on another chain`,
      );
    }
    // Counted where the payout would be booked: what earlier claims and fills committed is in the sum, and a
    // refusal takes back what was booked as claimed above (the fees stay owed).
    const refusal = outflow?.risk.outflowRefusal(req.target.chainId, req.target.address, total - gas, outflow.usd, now);
    if (refusal) {
      throw new ClaimError(
        'OUTFLOW_BUDGET',
        `the claim of ${req.wallet}'s ${req.target.symbol} app fees is not paid now: ${refusal}; nothing is claimed and the fees stay owed: claim later or on another chain`,
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
 * App fees of `wallet` that a reorg may still take back, per `${chainId}:${currency}`: those of fills whose deposit lies
 * in an EVM chain's block above its finality depth (the indexer's last block read, less finalityDepth), where the
 * indexer still looks for reorgs and reverseAppFees takes a removed deposit's fees back. Claimed before then, a fee
 * taken back was a debt of its recipient alone, and an app naming a fresh recipient per order never repaid one. A
 * chain with no block read yet has no deposit known final. SVM and exchange deposits are read final; fast fills keep
 * their fees on a reorg (the app bears the hold): neither waits.
 */
export function pendingAppFees(ledger: Ledger, registry: Registry, wallet: string): Map<string, bigint> {
  const requests = new Set<string>();
  for (const c of registry.chains.values()) {
    // A chain read final (no finalityDepth: its indexer keeps no reorg window) has no fee a reorg takes back.
    if (!('finalityDepth' in c)) continue;
    const tip = ledger.indexer.tip(c.id)?.number;
    for (const id of ledger.appFees.fillsAbove(c.id, tip === undefined ? -1 : tip - c.finalityDepth)) requests.add(id);
  }
  return requests.size ? ledger.appFees.pending(wallet, requests) : new Map();
}

/**
 * The claim's payout failed: what it booked as claimed is owed again, less `keep` (in the payout's currency, at most
 * its amount): the gas its transactions burned on chain, which its recipient bears as a deposit's refund bears a
 * failed fill's. Reversed whole, a recipient taking the payment in a simulation only (a contract whose receive
 * reverts at a real gas price) had the solver pay a reverted transfer's gas on every claim of the same fees. Runs
 * inside the submitter's ledger transaction.
 */
export function reverseClaim(ledger: Ledger, payout: PayoutRow, keep = 0n): void {
  const claimed = ledger.appFees.claimedBy(payout.id);
  const cap = BigInt(payout.amount);
  const charge = keep < cap ? keep : cap;
  if (charge > 0n && claimed.length) {
    // Under an id of its own: claimedBy (what a failure takes back) and the wallet's claim listing never see it.
    ledger.appFees.post({
      recipient: claimed[0]!.recipient,
      chain_id: payout.chain_id,
      currency: payout.currency,
      amount: -charge,
      kind: 'claim',
      request_id: `${payout.id}:gas`,
      ref: `${payout.id}:gas`,
    });
  }
  for (const e of claimed) {
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
