// The app balance books the solver keeps for a request: sponsor debits and their reversal, app fees
// accrued, and the holds that reserve a balance until a fill charges or releases it.
import type { Ledger } from '../ledger/index.ts';
import type { DepositRow, RequestRow } from '../ledger/types.ts';
import type { FeeBreakdown } from '../quote/fillAmount.ts';
import type { FailReason } from '../ledger/reasons.ts';

/** What the quote fixed about money (requests.money, written by the quote). */
export interface RequestMoney {
  sponsor: { wallet: string; apiKeyId: string } | null;
  appFees: { recipient: string; bps: number }[];
  topUpNative: string | null;
  feeSponsorship?: unknown;
  calls?: { to: string; value: string; data: string }[] | null;
  maxGas?: string | null;
  /** An open deposit address: every arrival becomes a request of its own, priced at its amount. */
  depositAddressType?: 'strict' | 'open';
}

export function moneyOf(r: RequestRow): RequestMoney | undefined {
  return r.money ? (JSON.parse(r.money) as RequestMoney) : undefined;
}

// Each function below books ledger entries and must run inside a ledger transaction. Every entry
// has a ref derived from the request, so a decision replayed after a crash books nothing twice.

/** txHash: the transaction the charge pays for, when it is one (a gasless relay's). */
export function debitSponsor(ledger: Ledger, r: RequestRow, micro: bigint, txHash?: string): void {
  // The charge replaces what POST /execute held for it.
  releaseSponsorHold(ledger, r.id, 'charged');
  const wallet = moneyOf(r)?.sponsor?.wallet;
  if (!wallet || micro <= 0n) return;
  ledger.balances.post({ wallet, kind: 'sponsorship', amount: -micro, request_id: r.id, ref: `sponsorship:${r.id}`, detail: txHash ?? null });
}

/**
 * The sponsored fill did not happen: the sponsor gets its money back, less `keep` (micro-USD, at most what it was
 * charged): what the failed fill cost the solver that its deposit could not bear.
 */
export function reverseSponsor(ledger: Ledger, requestId: string, keep = 0n): void {
  const debit = ledger.balances.get(`sponsorship:${requestId}`);
  if (!debit) return;
  const back = -debit.amount - (keep > 0n ? keep : 0n);
  if (back <= 0n) return;
  ledger.balances.post({
    wallet: debit.wallet,
    kind: 'sponsorship_reversal',
    amount: back,
    request_id: requestId,
    ref: `sponsorship_reversal:${requestId}`,
  });
}

/** App fees stay with the solver when it fills; they are owed to their recipients from then on. */
export function accrueAppFees(ledger: Ledger, r: Pick<RequestRow, 'id' | 'destination_chain_id' | 'destination_currency'>, fees: FeeBreakdown): void {
  fees.app.forEach((f, i) => {
    if (f.amount <= 0n) return;
    ledger.appFees.post({
      recipient: f.recipient,
      chain_id: r.destination_chain_id,
      currency: r.destination_currency,
      amount: f.amount,
      kind: 'accrual',
      request_id: r.id,
      ref: `app_fee:${r.id}:${i}`,
    });
  });
}

/**
 * A reorg took back the deposit of a paid (or signed) fill: the solver lost the fill, and the app fees it accrued were
 * never earned. Each accrual of the request is taken back by an entry of its own, once (its ref is the accrual's), so a
 * fee already claimed leaves its recipient's balance negative until later fees repay it. An accrual booked after this
 * (the signed fill landing after the reorg was recorded) is taken back by calling this again.
 */
export function reverseAppFees(ledger: Ledger, requestId: string): void {
  for (const a of ledger.appFees.accruedFor(requestId)) {
    ledger.appFees.post({
      recipient: a.recipient,
      chain_id: a.chain_id,
      currency: a.currency,
      amount: -BigInt(a.amount),
      kind: 'accrual_reversal',
      request_id: requestId,
      ref: `${a.ref}:reorged`,
    });
  }
}

/** A fast fill's hold, set aside of the sponsor's app balance until the deposit lands. */
export function placeHold(ledger: Ledger, wallet: string, r: RequestRow, micro: bigint): void {
  ledger.balances.post({ wallet, kind: 'hold', amount: micro, request_id: r.id, ref: `hold:${r.id}` });
}

/**
 * The deposit of a fast-filled request landed: the hold is released; what the deposit is worth
 * less than the fill it paid for is a permanent debit (the sponsoring app bears the shortfall).
 */
export function settleHold(ledger: Ledger, r: RequestRow, d: DepositRow | undefined, depositMicro: bigint): void {
  const hold = ledger.balances.get(`hold:${r.id}`);
  if (!hold) return;
  if (ledger.balances.get(`hold_release:${r.id}`)) {
    // The deposit came after the hold expired: it brings the value the expiry charged the app for.
    if (d) undoExpiryDebit(ledger, r.id, depositMicro, `deposit ${d.id} landed after the hold expired`);
    return;
  }
  ledger.balances.post({
    wallet: hold.wallet,
    kind: 'hold_release',
    amount: -hold.amount,
    request_id: r.id,
    ref: `hold_release:${r.id}`,
    detail: d?.id ?? 'expired',
  });
  const shortfall = hold.amount - depositMicro;
  if (shortfall > 0n) {
    ledger.balances.post({
      wallet: hold.wallet,
      kind: 'permanent_debit',
      amount: -shortfall,
      request_id: r.id,
      ref: `permanent_debit:${r.id}`,
      detail: d ? 'deposit short of the fill' : 'deposit never landed',
    });
  }
}

/**
 * A reorg took back the deposit that settled a paid fast fill's hold: the app bears the fill as if
 * the deposit had never landed (what the hold was for), charged the whole hold in all. Once.
 */
export function unsettleHold(ledger: Ledger, requestId: string): void {
  const hold = ledger.balances.get(`hold:${requestId}`);
  if (!hold || !ledger.balances.get(`hold_release:${requestId}`) || ledger.balances.get(`permanent_debit_reorged:${requestId}`)) return;
  // What the app is charged now: the deposit's shortfall, or the expiry's debit less what the late deposit took back.
  const charged = -ledger.balances
    .ofRequest(requestId)
    .filter((e) => e.kind === 'permanent_debit')
    .reduce((sum, e) => sum + BigInt(e.amount), 0n);
  const owed = BigInt(hold.amount) - charged;
  if (owed <= 0n) return;
  ledger.balances.post({
    wallet: hold.wallet,
    kind: 'permanent_debit',
    amount: -owed,
    request_id: requestId,
    ref: `permanent_debit_reorged:${requestId}`,
    detail: 'the deposit that settled the fast fill was removed by a reorg',
  });
}

/** A fast fill whose payout failed paid nothing: its hold is released whole, nothing is debited. */
export function releaseHold(ledger: Ledger, requestId: string, reason: FailReason): void {
  const hold = ledger.balances.get(`hold:${requestId}`);
  if (!hold) return;
  if (ledger.balances.get(`hold_release:${requestId}`)) {
    // The hold expired while the payout was still in flight, charging the app for a fill that then
    // failed: nothing was paid, so nothing is charged.
    undoExpiryDebit(ledger, requestId, BigInt(hold.amount), `fast fill failed after its hold expired: ${reason}`);
    return;
  }
  ledger.balances.post({
    wallet: hold.wallet,
    kind: 'hold_release',
    amount: -hold.amount,
    request_id: requestId,
    ref: `hold_release:${requestId}`,
    detail: `fast fill failed: ${reason}`,
  });
}

/**
 * A fast fill whose transactions reached the chain and did not pay there (its recipient refused on chain, a batch
 * skipped it) burned the solver's gas on the app's word: the app bears it (up to its hold), as a deposit's refund
 * bears a failed fill's. Once.
 */
export function chargeFastFillGas(ledger: Ledger, requestId: string, micro: bigint, reason: FailReason): void {
  const hold = ledger.balances.get(`hold:${requestId}`);
  if (!hold || micro <= 0n) return;
  const amount = micro < BigInt(hold.amount) ? micro : BigInt(hold.amount);
  ledger.balances.post({
    wallet: hold.wallet,
    kind: 'permanent_debit',
    amount: -amount,
    request_id: requestId,
    ref: `permanent_debit_gas:${requestId}`,
    detail: `fast fill failed on chain (${reason}): the gas its transactions burned`,
  });
}

/**
 * POST /execute: the node pays a gasless deposit's gas on the sponsor's word, so the sponsored fees
 * are set aside of the sponsor's available balance when the deposit is recorded (in the same ledger
 * transaction as the check), and two posts racing cannot both spend the same balance. The hold ends
 * when the request is charged (debitSponsor) or fails (releaseSponsorHold).
 */
export function holdSponsorship(ledger: Ledger, wallet: string, requestId: string, micro: bigint): void {
  if (micro <= 0n) return;
  ledger.balances.post({ wallet, kind: 'hold', amount: micro, request_id: requestId, ref: `sponsor_hold:${requestId}` });
}

/** What POST /execute still holds for a request's sponsored fees (0n when none or released). */
export function sponsorHeld(ledger: Ledger, requestId: string): bigint {
  const hold = ledger.balances.get(`sponsor_hold:${requestId}`);
  if (!hold || ledger.balances.get(`sponsor_hold_release:${requestId}`)) return 0n;
  return BigInt(hold.amount);
}

/** Ends POST /execute's hold of a request's sponsored fees, once (it was charged, or nothing will be). */
export function releaseSponsorHold(ledger: Ledger, requestId: string, reason: FailReason | 'charged'): void {
  const hold = ledger.balances.get(`sponsor_hold:${requestId}`);
  if (!hold || ledger.balances.get(`sponsor_hold_release:${requestId}`)) return;
  ledger.balances.post({
    wallet: hold.wallet,
    kind: 'hold_release',
    amount: -hold.amount,
    request_id: requestId,
    ref: `sponsor_hold_release:${requestId}`,
    detail: reason,
  });
}

// An expired hold's permanent debit, taken back (up to `micro`) by a new entry, once: the deposit
// it assumed would never come landed (worth `micro`), or the fast fill it paid for failed. Only a
// debit booked by the expiry ('deposit never landed') is taken back; one booked at a short deposit
// is the app's real loss.
function undoExpiryDebit(ledger: Ledger, requestId: string, micro: bigint, reason: string): void {
  const release = ledger.balances.get(`hold_release:${requestId}`);
  const debit = ledger.balances.get(`permanent_debit:${requestId}`);
  if (release?.detail !== 'expired' || !debit || micro <= 0n) return;
  const charged = -BigInt(debit.amount);
  const back = micro < charged ? micro : charged;
  ledger.balances.post({
    wallet: debit.wallet,
    kind: 'permanent_debit',
    amount: back,
    request_id: requestId,
    ref: `permanent_debit_reversal:${requestId}`,
    detail: reason,
  });
}
