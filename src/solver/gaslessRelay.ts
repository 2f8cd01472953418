// Gasless relays (POST /execute with executionKind rawCalls): a user's call, EIP-7702 authorizations
// included, sent by the node from its own key and paid for out of the sponsoring API key's app balance.
//
// Life of a relay, each step one ledger transaction written before the effect it announces:
//   admitRelay    the request (status waiting, feature gasless_execution), its relay payout, each
//                 authorization marked relayed, and a hold of the most the gas may cost, after
//                 checking what the sponsor has available;
//   onRelaySigned the transaction is signed and recorded: pending;
//   onRelayPaid   it succeeded: the hold is released and the gas it used (and any value sent) is
//                 charged, as an entry naming the transaction: success;
//   onRelayFailed nothing was sent (hold released, nothing charged: its call reverts before it is signed, or
//                 it was not signed within its chain's relayMaxWaitMs: chains/evm/relayTerms.ts, relayExpiry), it reverted on chain,
//                 or a cancel took its nonce while its own fee cap held it (the gas that transaction burned
//                 is charged, up to the hold, naming the transaction): failure.

import { keccak256, toHex, zeroAddress, type Hex } from 'viem';
import type { RelaySimulation } from '../chains/adapter.ts';
import { serializeRelayTerms, type RelayTerms } from '../chains/evm/relayTerms.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow, RequestRow } from '../ledger/types.ts';
import { switchName } from '../ledger/operations.ts';
import { bpsCeil, formatUsd, usdMicroCeil } from '../lib/money.ts';
import { nativeCapPassed, type NativeCaps } from '../quote/nativeCap.ts';
import { spendableAfter, type HeldRead } from '../chains/spendable.ts';
import { RelayNodeError } from '../lib/errors.ts';
import { debitSponsor, holdSponsorship, moneyOf, releaseSponsorHold, sponsorHeld, type RequestMoney } from './appBalanceBooks.ts';
import type { FailReason } from '../ledger/reasons.ts';

/** Why a relay is not admitted: the operator's switches, a replay, the sponsor's balance, or the solver's native balance. */
export type GaslessRelayCode =
  | 'DRY_RUN'
  | 'PAUSED'
  | 'ALREADY_SUBMITTED'
  | 'AUTHORIZATION_USED'
  | 'NO_SPONSOR_WALLET'
  | 'INSUFFICIENT_APP_BALANCE'
  | 'SOLVER_BALANCE_TOO_LOW'
  | 'OUTFLOW_BUDGET';

/** A relay the solver does not admit; the API answers its code with a status (api/errors.ts). */
export class GaslessRelayError extends RelayNodeError {
  override name = 'GaslessRelayError';

  constructor(
    readonly errorCode: GaslessRelayCode,
    message: string,
  ) {
    super(message);
  }
}

/** What the request's money record keeps of a relay: who pays, and the price the gas is charged at. */
export interface RelayMoney extends RequestMoney {
  /** valueSpreadBps: the spread the value is charged with (absent on relays admitted before it: none). */
  relay: { subsidizeFees: boolean; nativeUsdPrice: string; nativeDecimals: number; valueSpreadBps?: number };
}

export interface RelayAdmission {
  chainId: number;
  terms: RelayTerms;
  simulation: RelaySimulation;
  sponsor: { wallet: string; apiKeyId: string };
  referrer: string | null;
  subsidizeFees: boolean;
  /** The chain's native currency: its USD price now (the gas is charged at it) and decimals. */
  nativeUsdPrice: string;
  nativeDecimals: number;
  /** The node's swap spread (fees.swapSpreadBps): the value is native currency bought with the app balance. */
  valueSpreadBps: number;
  /** The solver's native balance on the chain, read just before (chains/spendable.ts): the relay may not take what its payouts need. */
  solverNative: HeldRead;
  now: number;
}

/**
 * Why a relay's value is above the chain's cap, or undefined when it is not: the gas top-up caps
 * bound it (quote/nativeCap.ts), as a relay's value is native currency the solver hands out against
 * the sponsor's app balance.
 */
export function relayValueAboveCap(value: bigint, chainId: number, caps: NativeCaps, nativeDecimals: number, nativeUsdPrice: string): string | undefined {
  const micro = usdMicroCeil(value, nativeDecimals, nativeUsdPrice);
  const passed = nativeCapPassed(caps, value, micro);
  if (!passed) return undefined;
  return passed.key === 'maxTopupGasUsd'
    ? `data.value: ${value} wei (${formatUsd(micro)} USD) is above the relay value cap of ${passed.cap} USD on chain ${chainId} (maxTopupGasUsd)`
    : `data.value: ${value} wei is above the relay value cap of ${passed.cap} wei on chain ${chainId} (maxTopupGasAmount)`;
}

/**
 * The request id of a relay: derived from the chain and the call (authorizations included), so the
 * same body posted twice is the same request, refused the second time.
 */
export function relayRequestId(chainId: number, terms: RelayTerms): Hex {
  return keccak256(toHex(`gasless:${chainId}:${serializeRelayTerms(terms)}`));
}

/** The payout that carries a relay's transaction. */
export const relayPayoutId = (requestId: string) => `relay:${requestId}`;

/**
 * Records a relay for the submitter, in one ledger transaction that checks what the sponsor has
 * available and holds the most the relay can cost (simulated gas at the current fee cap, plus the
 * value sent). The payout records that gas and that fee cap: the submitter signs it within both. Returns the request id and the hold. Throws GaslessRelayError (402 when the balance
 * cannot cover it, 409 for a replay or, with `outflowRefusal`, a value past the chain's hourly outflow budget).
 */
export function admitRelay(ledger: Ledger, a: RelayAdmission, outflowRefusal?: (value: bigint) => string | undefined): { requestId: Hex; holdMicro: bigint } {
  const id = relayRequestId(a.chainId, a.terms);
  const gasWei = a.simulation.gas * a.simulation.maxFeePerGas + a.simulation.l1Native;
  const maxCost = gasWei + a.terms.value;
  const relay = { subsidizeFees: a.subsidizeFees, nativeUsdPrice: a.nativeUsdPrice, nativeDecimals: a.nativeDecimals, valueSpreadBps: a.valueSpreadBps };
  const holdMicro = chargeFor(relay, gasWei, a.terms.value);
  const money: RelayMoney = { sponsor: a.sponsor, appFees: [], topUpNative: null, relay };
  ledger.tx(() => {
    // The operator's switches stop relays as they stop fills: the node sends nothing from its key.
    const on = new Set(ledger.operations.switches().map((x) => x.name));
    const stop = [switchName.all, switchName.chain(a.chainId), switchName.dryRun].find((n) => on.has(n));
    if (stop)
      throw new GaslessRelayError(
        stop === switchName.dryRun ? 'DRY_RUN' : 'PAUSED',
        `the node is not relaying on chain ${a.chainId} now (${stop}); try again later`,
      );
    if (ledger.requests.get(id)) throw new GaslessRelayError('ALREADY_SUBMITTED', `this call was relayed already (request ${id}); a replay is refused`);
    // The key's wallet was read before the relay was priced and simulated: one that unlinked meanwhile (its unlink
    // answered) is not charged for the key.
    if (ledger.balances.sponsorOf(a.sponsor.apiKeyId) !== a.sponsor.wallet)
      throw new GaslessRelayError(
        'NO_SPONSOR_WALLET',
        `the app balance wallet ${a.sponsor.wallet} no longer sponsors this API key; link a sponsor wallet first`,
      );
    for (const [i, auth] of a.simulation.authorities.entries()) {
      const by = ledger.relayedAuthorizations.relayedBy(a.chainId, auth.address, auth.nonce);
      if (by)
        throw new GaslessRelayError(
          'AUTHORIZATION_USED',
          `authorizationList[${i}]: ${auth.address}'s authorization of nonce ${auth.nonce} was relayed already (request ${by})`,
        );
    }
    // The value leaves the solver's inventory on the chain: it counts in the chain's hourly outflow budget (risk
    // outflowUsdPerHour), read in this transaction as the fills and claims that count in it are.
    const over = a.terms.value > 0n ? outflowRefusal?.(a.terms.value) : undefined;
    if (over) throw new GaslessRelayError('OUTFLOW_BUDGET', `data.value: ${over}; try again later`);
    // The solver pays the value and the gas from the native balance its queued and sent payouts
    // (fills, refunds, other relays) are promised: a relay may not take it. Read again here, in the
    // transaction that records this relay's payout: two relays racing cannot both take it.
    const solverSpendable = spendableAfter(ledger, a.chainId, zeroAddress, a.solverNative);
    if (maxCost > solverSpendable) {
      throw new GaslessRelayError(
        'SOLVER_BALANCE_TOO_LOW',
        `data.value: the solver's native balance on chain ${a.chainId} not promised to its payouts is ${solverSpendable > 0n ? solverSpendable : 0n} wei; this relay may take up to ${maxCost} wei (value and gas)`,
      );
    }
    // What is available (less every hold), not the balance: another relay's or a fast fill's hold is
    // money already promised. Checked in the transaction that writes the hold: two posts racing
    // cannot both spend it.
    const available = ledger.balances.summary(a.sponsor.wallet).available;
    if (available < holdMicro) {
      throw new GaslessRelayError(
        'INSUFFICIENT_APP_BALANCE',
        `the sponsoring app balance has ${formatUsd(available > 0n ? available : 0n)} USD available; relaying this call may cost up to ${formatUsd(holdMicro)} USD`,
      );
    }
    const user = a.simulation.authorities[0]?.address ?? a.terms.to;
    ledger.requests.insert({
      id,
      parent_id: null,
      kind: 'order',
      request_type: 'gasless',
      status: 'waiting',
      user,
      recipient: a.terms.to,
      refund_to: null,
      origin_chain_id: a.chainId,
      destination_chain_id: a.chainId,
      origin_currency: zeroAddress,
      destination_currency: zeroAddress,
      trade_type: null,
      amount_in: a.terms.value.toString(),
      amount_out: a.terms.value.toString(),
      min_amount_out: a.terms.value.toString(),
      pricing: null,
      order_data: null,
      quote: null,
      expires_at: null,
      fill_deadline: null,
      created_at: a.now,
      money: JSON.stringify(money),
      features: JSON.stringify(['gasless_execution']),
      api_key_id: a.sponsor.apiKeyId,
      referrer: a.referrer,
    });
    for (const auth of a.simulation.authorities) ledger.relayedAuthorizations.claim(a.chainId, auth.address, auth.nonce, id);
    holdSponsorship(ledger, a.sponsor.wallet, id, holdMicro);
    ledger.payouts.insert({
      id: relayPayoutId(id),
      kind: 'relay',
      request_id: id,
      deposit_id: null,
      chain_id: a.chainId,
      recipient: a.terms.to,
      currency: zeroAddress,
      amount: a.terms.value.toString(),
      // The gas the hold covers: a relay that needs more when sent is not sent.
      max_gas: a.simulation.gas.toString(),
      // And the price per gas it covers: the relay is never signed nor bumped above it (it waits while the market
      // asks more), so the gas charged to the sponsor stays within the hold.
      max_fee_per_gas: a.simulation.maxFeePerGas.toString(),
      authorization: serializeRelayTerms(a.terms),
      decided_at: a.now,
    });
  });
  return { requestId: id, holdMicro };
}

// What a native amount (wei) costs the sponsor, at the price the relay was admitted at.
// What the sponsor is charged for a relay's gas and value (wei), in micro-USD, rounded up. The value is native
// currency bought with the app balance, a swap: at the mid price, any sponsor had a swap and a bridge (to any chain
// it relays on) with no spread.
function chargeFor(relay: RelayMoney['relay'], gasWei: bigint, valueWei: bigint): bigint {
  const micro = (wei: bigint) => usdMicroCeil(wei, relay.nativeDecimals, relay.nativeUsdPrice);
  const value = micro(valueWei);
  return micro(gasWei) + value + bpsCeil(value, relay.valueSpreadBps ?? 0);
}

function chargeOf(r: RequestRow, gasWei: bigint, valueWei = 0n): bigint {
  const relay = (moneyOf(r) as RelayMoney | undefined)?.relay;
  if (!relay) throw new Error(`request ${r.id} has no relay terms`);
  return chargeFor(relay, gasWei, valueWei);
}

/** The relay's transaction is signed and recorded (PayoutHooks.onSigned; inside its ledger transaction). */
export function onRelaySigned(ledger: Ledger, payout: PayoutRow): void {
  ledger.requests.setStatus(payout.request_id!, 'pending');
}

/**
 * The relay's transaction succeeded (PayoutHooks.onPaid; inside its ledger transaction): the hold
 * ends and the sponsor is charged the gas it used and the value it sent, in an entry naming the tx.
 */
export function onRelayPaid(ledger: Ledger, payout: PayoutRow, txHash: string, fee: bigint): void {
  const r = ledger.requests.get(payout.request_id!)!;
  debitSponsor(ledger, r, chargeOf(r, fee, BigInt(payout.amount)), txHash);
  ledger.requests.setStatus(r.id, 'success');
}

/**
 * The relay failed (PayoutHooks.onFailed; inside its ledger transaction). Reverted on chain, or its nonce taken by
 * the node's cancel while the relay's own fee cap held it (txHash: that transaction): the gas it burned was the
 * node's on the sponsor's word, so that is charged (naming the tx), never more than the hold (a cancel is priced at
 * the market, above the relay's cap: the rest is the solver's). Never sent: the hold is released and nothing is charged.
 */
export function onRelayFailed(ledger: Ledger, payout: PayoutRow, reason: FailReason, txHash?: string): void {
  const r = ledger.requests.get(payout.request_id!)!;
  const tx = txHash ? ledger.payouts.txsOf(payout.id).find((t) => t.hash === txHash) : undefined;
  if (tx?.fee) {
    // Read before debitSponsor releases it.
    const held = sponsorHeld(ledger, r.id);
    const charge = chargeOf(r, BigInt(tx.fee));
    debitSponsor(ledger, r, charge < held ? charge : held, txHash);
  } else releaseSponsorHold(ledger, r.id, reason);
  ledger.requests.setStatus(r.id, 'failure', { failReason: reason });
}
