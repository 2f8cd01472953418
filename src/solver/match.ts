import type { DepositRow, Pricing, RequestRow } from '../ledger/types.ts';
import { atRate, breakdown, type FeeBreakdown } from '../quote/fillAmount.ts';
import type { Ratio } from '../lib/money.ts';
import type { FailReasonOf } from '../ledger/reasons.ts';

/** The failReasons the matcher decides (the interface's names, checked against its list). */
export type MatchFailReason = FailReasonOf<
  | 'ORPHANED_DEPOSIT_REFUND'
  | 'DOUBLE_SPEND'
  | 'DEPOSIT_CHAIN_MISMATCH'
  | 'INCORRECT_DEPOSIT_CURRENCY'
  | 'ORDER_EXPIRED'
  | 'NEGATIVE_NEW_AMOUNT_AFTER_FEES'
  | 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL'
  | 'SOLVER_BALANCE_TOO_LOW'
  | 'SPONSOR_BALANCE_TOO_LOW'
  | 'SLIPPAGE'
  | 'DEPOSIT_ADDRESS_MISMATCH'
  | 'TRANSACTION_REVERTED'
  | 'EXECUTION_REVERTED'
  // Risk limits (src/solver/risk.ts).
  | 'SOLVER_CAPACITY_EXCEEDED'
  | 'BLOCKED_WALLET'
>;

// The failures of a deposit that cannot pay its order (the wrong chain or currency, too little, too
// late), where the order itself could still be paid by another deposit naming it.
const CANNOT_PAY: ReadonlySet<MatchFailReason> = new Set<MatchFailReason>([
  'ORDER_EXPIRED',
  'DEPOSIT_CHAIN_MISMATCH',
  'INCORRECT_DEPOSIT_CURRENCY',
  'DEPOSIT_ADDRESS_MISMATCH',
  'NEGATIVE_NEW_AMOUNT_AFTER_FEES',
  'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL',
]);

export type Decision =
  // `excess`: what a deposit address received beyond the quote, returned to refundTo.
  // `rate`: a swap's, at which `fees` were priced (the quote's when absent).
  | { kind: 'fill'; request: RequestRow; amount: bigint; fees: FeeBreakdown; topUp: bigint; excess: bigint; rate?: Ratio }
  // `request` is absent when the deposit matches no order the node quoted; `extra` when the order
  // already has its deposit: both get a request of their own.
  | { kind: 'fail'; reason: MatchFailReason; request?: RequestRow; extra?: boolean }
  // The order was fast-filled before its deposit, and the fast fill paid the user: the deposit
  // settles the hold, nothing is paid again.
  | { kind: 'settle'; request: RequestRow }
  // Decided later: the order's fast fill is still in flight (decided once it is paid or failed), or this
  // deposit cannot pay the order while another deposit would (that one goes first).
  | { kind: 'wait'; request: RequestRow; reason: 'FAST_FILL_PENDING' | 'ANOTHER_DEPOSIT_PAYS' };

export interface MatchContext {
  now: number;
  /** What the solver can still pay out of a currency on a chain. */
  spendable(chainId: number, currency: string): bigint;
  /** Whether the request's sponsor can pay `sponsored` (output units) of its fees now. */
  sponsorCanPay(order: RequestRow, sponsored: bigint): boolean;
  native(chainId: number): string;
  /** A swap's rate now (prices less the spread), or undefined when no price is known. */
  currentRate(order: RequestRow, pricing: Pricing): Ratio | undefined;
  /** Whether a deposit was already assigned to the request. */
  hasDeposit(requestId: string): boolean;
  /** Where the request's fast fill payout stands (requests that were fast-filled only). */
  fastFillOutcome(requestId: string): 'paid' | 'failed' | 'pending';
  /** The order's deposits other than `depositId`, seen and not reorged (confirmed, or waiting for their confirmations). */
  otherDeposits(orderId: string, depositId: string): DepositRow[];
  /** Whether the node is submitting the order's own deposit (with the user's permit). */
  depositInFlight(orderId: string): boolean;
  /**
   * When the deposit reached the order: when it was seen, or for the solver's sweep of a deposit address, when the
   * watcher saw the funds at the address (the sweep lands whenever its queue lets it).
   */
  arrivedAt(deposit: DepositRow): number;
}

/**
 * What a deposit brought beyond its order's quoted amount, where that goes back on its own (an
 * `excess` payout): a deposit address fills the quoted amount at most. 0 for any other order.
 */
export function overpaid(deposit: Pick<DepositRow, 'amount'>, order: Pick<RequestRow, 'deposit_address' | 'amount_in'>): bigint {
  return order.deposit_address && BigInt(deposit.amount) > BigInt(order.amount_in) ? BigInt(deposit.amount) - BigInt(order.amount_in) : 0n;
}

/** Decides what a confirmed deposit leads to. Pure: the caller commits the decision. */
export function match(deposit: DepositRow, order: RequestRow | undefined, ctx: MatchContext): Decision {
  return decide(deposit, order, ctx, true);
}

// A deposit that cannot pay its order does not fail the order while another deposit would pay it: one
// naming it, seen and not reorged, or the one the node itself submits with the user's permit. That one
// goes first, and this one is then a DOUBLE_SPEND of its own. Otherwise anyone who saw an order's deposit
// (in the mempool, or mined and waiting for more confirmations than a small deposit needs) could send a
// few wei naming the order and fail it: the user's deposit came back, less the gas.
function anotherPays(deposit: DepositRow, order: RequestRow, ctx: MatchContext): boolean {
  return ctx.depositInFlight(order.id) || ctx.otherDeposits(order.id, deposit.id).some((o) => decide(o, order, ctx, false).kind === 'fill');
}

// `othersFirst`: whether a deposit that cannot pay waits for one that can (not when judging that other one).
function decide(deposit: DepositRow, order: RequestRow | undefined, ctx: MatchContext, othersFirst: boolean): Decision {
  // A request no quote priced (a gasless relay's) is paid by its sponsor, never by a deposit: a deposit
  // naming it is an orphan, and must not fail it (that released the sponsor's hold while it was queued).
  if (!order || order.kind !== 'order' || order.pricing === null) return { kind: 'fail', reason: 'ORPHANED_DEPOSIT_REFUND' };
  const fastFilled = order.fast_fill_deadline !== null && !ctx.hasDeposit(order.id);
  if (fastFilled && deposit.chain_id === order.origin_chain_id && deposit.currency === order.origin_currency) {
    // Only a fast fill that paid the user is settled by the deposit. One whose payout failed paid
    // nothing: the deposit goes back to the user, under the fill's own failReason.
    const outcome = ctx.fastFillOutcome(order.id);
    // A deposit short of the input the fast fill was priced at does not settle it (the app would bear the
    // shortfall, and the user's full deposit after it would come back as a DOUBLE_SPEND): it is a request
    // of its own, and the fast fill waits for its deposit as before.
    if (outcome !== 'failed' && BigInt(deposit.amount) < BigInt(order.fast_fill_input ?? order.amount_in))
      return { kind: 'fail', reason: 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL', request: order, extra: true };
    if (outcome === 'paid') return { kind: 'settle', request: order };
    if (outcome === 'pending') return { kind: 'wait', request: order, reason: 'FAST_FILL_PENDING' };
    return { kind: 'fail', reason: (order.fail_reason as MatchFailReason | null) ?? 'EXECUTION_REVERTED', request: order };
  }
  if (order.status !== 'waiting' && order.status !== 'depositing') return { kind: 'fail', reason: 'DOUBLE_SPEND', request: order, extra: true };
  const fail = (reason: MatchFailReason): Decision =>
    othersFirst && CANNOT_PAY.has(reason) && anotherPays(deposit, order, ctx)
      ? { kind: 'wait', request: order, reason: 'ANOTHER_DEPOSIT_PAYS' }
      : { kind: 'fail', reason, request: order };
  if (deposit.chain_id !== order.origin_chain_id) return fail('DEPOSIT_CHAIN_MISMATCH');
  // Both are canonical addresses (chains/address.ts), so equality is exact.
  if (deposit.currency !== order.origin_currency) return fail(order.deposit_address ? 'DEPOSIT_ADDRESS_MISMATCH' : 'INCORRECT_DEPOSIT_CURRENCY');
  // (Seen in time, it arrived in time: arrivedAt is asked only past the expiry, where it costs a ledger read.)
  if (order.expires_at !== null && deposit.seen_at > order.expires_at && ctx.arrivedAt(deposit) > order.expires_at) return fail('ORDER_EXPIRED');
  const pricing = JSON.parse(order.pricing!) as Pricing;
  const excess = overpaid(deposit, order);
  const used = BigInt(deposit.amount) - excess;
  let fees = breakdown(used, pricing);
  const topUp = BigInt(pricing.topUpNative ?? 0);
  if (fees.out <= 0n) return fail('NEGATIVE_NEW_AMOUNT_AFTER_FEES');
  if (fees.out < BigInt(order.min_amount_out)) return fail('DEPOSITED_AMOUNT_TOO_LOW_TO_FILL');
  // A swap pays at today's price; below the order's minimum, the user is refunded instead.
  const now = pricing.swap ? ctx.currentRate(order, pricing) : undefined;
  if (now) {
    fees = breakdown(used, atRate(pricing, now));
    if (fees.out < BigInt(order.min_amount_out)) return fail('SLIPPAGE');
  }
  const amount = fees.out;
  if (ctx.spendable(order.destination_chain_id, order.destination_currency) < amount) return fail('SOLVER_BALANCE_TOO_LOW');
  if (topUp > 0n && ctx.spendable(order.destination_chain_id, ctx.native(order.destination_chain_id)) < topUp) return fail('SOLVER_BALANCE_TOO_LOW');
  if (fees.sponsored > 0n && !ctx.sponsorCanPay(order, fees.sponsored)) return fail('SPONSOR_BALANCE_TOO_LOW');
  return { kind: 'fill', request: order, amount, fees, topUp, excess, ...(now ? { rate: now } : {}) };
}
