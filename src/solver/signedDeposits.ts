import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow, RequestRow } from '../ledger/types.ts';
import type { FailReason } from '../ledger/reasons.ts';
import type { PermitNonce } from '../ledger/usedPermits.ts';
import { RelayNodeError } from '../lib/errors.ts';
import { formatUsd, usdMicroCeil } from '../lib/money.ts';
import { holdSponsorship, moneyOf, releaseSponsorHold } from './appBalanceBooks.ts';

/** Why a signed deposit (usePermit) is not recorded; the API names each one's status (api/errors.ts). */
export type SignedDepositRefusal = 'ALREADY_SUBMITTED' | 'PERMIT_ALREADY_USED' | 'SPONSOR_BALANCE_TOO_LOW' | 'ORDER_EXPIRED';

/**
 * A signed deposit the node will not submit: another post recorded it first, its permit funds another request (or
 * another deposit of its nonce is in flight), its quote expired, or its sponsor cannot pay.
 */
export class SignedDepositRefusedError extends RelayNodeError {
  override name = 'SignedDepositRefusedError';

  constructor(
    readonly errorCode: SignedDepositRefusal,
    message: string,
  ) {
    super(message);
  }
}

/** A depositor's signed deposit, checked against its request by the origin chain (DepositSteps.verifySignedDeposit). */
export interface SignedDeposit {
  request: RequestRow;
  /** What authorizes the node to submit it (the chain's encoding of the permit). */
  authorization: string;
  /** The permit's nonce: it funds one request, whatever the token does with it. */
  permit: PermitNonce;
  /** The sponsor whose app balance pays the request's fees, and how much of them (micro-USD). */
  sponsor?: { wallet: string; micro: bigint };
  /** Posted by an integrator's backend with its API key (POST /execute): the gasless flow. */
  gasless: boolean;
}

// The origin's price of gas a usePermit quote charged its deposit at (its money's permitFeePerGas), if it recorded one.
function permitFeePerGas(r: RequestRow): string | null {
  const fee = r.money ? (JSON.parse(r.money) as { permitFeePerGas?: unknown }).permitFeePerGas : undefined;
  return typeof fee === 'string' && /^[0-9]+$/.test(fee) ? fee : null;
}

/** The payout id of a request's signed deposit: one per request. */
export const signedDepositPayoutId = (requestId: string) => `deposit:${requestId}`;

/**
 * Records a signed deposit the node will submit: its payout (the submitter sends it), the sponsor's
 * hold on the request's fees, the permit's nonce used, and the request's status `depositing`, in one
 * ledger transaction that checks again that nothing recorded it first (two posts racing record one
 * deposit) and that the permit funds no other request. Throws SignedDepositRefusedError.
 */
export function recordSignedDeposit(ledger: Ledger, s: SignedDeposit, now = Date.now()): void {
  const r = s.request;
  const id = signedDepositPayoutId(r.id);
  ledger.tx(() => {
    // What is available (less every hold), not the balance: a fast fill's or another execute's hold
    // is money already promised.
    if (s.sponsor && ledger.balances.summary(s.sponsor.wallet).available < s.sponsor.micro) {
      const fees = formatUsd(s.sponsor.micro);
      throw new SignedDepositRefusedError(
        'SPONSOR_BALANCE_TOO_LOW',
        `the sponsor's app balance cannot pay the ${fees} USD of fees of request ${r.id} any more`,
      );
    }
    // Checked again inside the transaction: two posts racing record one deposit.
    const current = ledger.requests.get(r.id)!;
    if (current.status !== 'waiting' || ledger.payouts.get(id)) {
      throw new SignedDepositRefusedError('ALREADY_SUBMITTED', `request ${r.id} is ${current.status}: its deposit was submitted already`);
    }
    if (current.expires_at !== null && now > current.expires_at) {
      throw new SignedDepositRefusedError('ORDER_EXPIRED', `the quote of request ${r.id} has expired`);
    }
    // The token does not tie a permit to one request: with an allowance covering the amount the
    // depository skips `permit` and the nonce stays current, so the public signature would pass for
    // any other request of the same owner, token and amount (to another recipient). Never released,
    // not even if this deposit fails: the signature is public from now on.
    const p = s.permit;
    const pending = ledger.usedPermits.inFlight(p);
    if (pending !== undefined) {
      throw new SignedDepositRefusedError(
        'PERMIT_ALREADY_USED',
        `the deposit of request ${pending} under a permit of ${p.owner} on token ${p.token} of chain ${p.chainId} with nonce ${p.nonce} is in flight; it uses the nonce, so a permit of the same nonce would revert: post again once it has landed (with a permit of the token's next nonce)`,
      );
    }
    if (!ledger.usedPermits.use(p, r.id, now)) {
      const by = ledger.usedPermits.usedBy(p);
      throw new SignedDepositRefusedError(
        'PERMIT_ALREADY_USED',
        `the permit of ${p.owner} on token ${p.token} of chain ${p.chainId} with nonce ${p.nonce} and deadline ${p.deadline} funds request ${by} already; a permit funds one request: request ${r.id} needs a permit of its own (its quote's deadline), or a deposit without usePermit`,
      );
    }
    ledger.payouts.insert({
      id,
      kind: 'deposit',
      request_id: r.id,
      deposit_id: null,
      chain_id: r.origin_chain_id,
      recipient: r.user!,
      currency: r.origin_currency,
      amount: r.amount_in,
      authorization: s.authorization,
      decided_at: now,
      // The price of gas its quote charged the deposit at is the most it is signed (or bumped) at: above it, it waits
      // unsigned, as a sponsored relay does. Without it (an older quote), the chain's cap alone.
      max_fee_per_gas: permitFeePerGas(r),
    });
    // Held in this transaction with the check above: a second post racing this one sees it.
    if (s.sponsor) holdSponsorship(ledger, s.sponsor.wallet, r.id, s.sponsor.micro);
    ledger.requests.setStatus(r.id, 'depositing');
    if (s.gasless) ledger.requests.addFeature(r.id, 'gasless_execution');
  });
}

/**
 * A signed deposit failed (PayoutHooks.onFailed; inside its ledger transaction): nothing was taken from the user.
 * Reverted on chain (its owner moved the tokens away, or used the permit's nonce, after the node's simulation), the
 * gas it burned was the solver's on the sponsor's word, so a sponsored request's sponsor is charged it, naming the
 * transaction, as a reverted relay's sponsor is; released whole, the key that posted it could have the solver burn
 * a deposit's gas as often as it liked. Never sent: the hold is released and nothing is charged.
 * `native`: the chain's native currency's decimals and USD price, to price the gas.
 */
export function onSignedDepositFailed(
  ledger: Ledger,
  payout: PayoutRow,
  reason: FailReason,
  txHash: string | undefined,
  native: { decimals: number; usdPrice: string },
  now = Date.now(),
): void {
  const r = ledger.requests.get(payout.request_id!)!;
  // Failed only while the request still waits for this deposit: one a fast fill (or another deposit's fill) paid or is
  // paying keeps its course, where it read 'failure' though its recipient was paid (an integrator would have the user
  // deposit again, refunded less its costs as a DOUBLE_SPEND).
  if (r.status === 'depositing' || r.status === 'waiting') ledger.requests.setStatus(r.id, 'failure', { failReason: reason }, now);
  const tx = txHash ? ledger.payouts.txsOf(payout.id).find((t) => t.hash === txHash && !t.cancel) : undefined;
  const burned = tx?.fee ? usdMicroCeil(BigInt(tx.fee), native.decimals, native.usdPrice) : 0n;
  const sponsor = moneyOf(r)?.sponsor?.wallet;
  // The charge replaces what POST /execute held for the request's fees.
  releaseSponsorHold(ledger, r.id, burned > 0n && sponsor ? 'charged' : reason);
  if (burned <= 0n || !sponsor) return;
  // An entry of its own, never the request's sponsorship one: a fast fill of the request (or a fill by another deposit)
  // books that first, and under its ref this charge was a duplicate, dropped, the burned gas the solver's.
  ledger.balances.post({
    wallet: sponsor,
    kind: 'sponsorship',
    amount: -burned,
    request_id: r.id,
    ref: `sponsorship_deposit_gas:${r.id}`,
    detail: txHash ?? null,
  });
}
