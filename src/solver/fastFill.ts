import type { ChainPorts } from '../chains/ports.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';
import type { DepositRow, Pricing, RequestRow } from '../ledger/types.ts';
import { atRate, breakdown, rateText } from '../quote/fillAmount.ts';
import { parseDecimal, usdMicro, usdMicroCeil, type Ratio } from '../lib/money.ts';
import { marketRate } from '../quote/pricing.ts';
import type { FeeBreakdown } from '../quote/fillAmount.ts';
import type { RiskFailReason, RiskPolicy, RiskPostponeReason } from './risk.ts';
import { RelayNodeError } from '../lib/errors.ts';
import type { PriceSource } from '../quote/prices.ts';
import { debitSponsor, moneyOf, placeHold, sponsorHeld } from './appBalanceBooks.ts';

export interface FastFillInput {
  requestId: string;
  apiKeyId: string;
  /** Decimal USD: when the fill is worth more, it is not made. */
  maxFillAmountUsd?: string;
  /** The input amount to price the fill at, instead of the quoted one. */
  solverInputCurrencyAmount?: bigint;
  holdSeconds: number;
  /**
   * The operator's risk controls (deny lists, pauses, dry run, order and outflow limits): a fast fill
   * is a fill, judged by them like one made from a deposit.
   */
  risk?: RiskPolicy;
}

/** Why a fast fill is refused: the request, the caller's key or balance, or the solver's risk controls (their reasons). */
export type FastFillCode =
  | 'REQUEST_NOT_FOUND'
  | 'NOT_QUOTED_BY_KEY'
  | 'NO_APP_BALANCE'
  | 'NEGATIVE_NEW_AMOUNT_AFTER_FEES'
  | 'MAX_FILL_AMOUNT_EXCEEDED'
  | 'SOLVER_BALANCE_TOO_LOW'
  | 'ALREADY_FAST_FILLED'
  | 'ALREADY_FILLED'
  | 'SPONSOR_BALANCE_TOO_LOW'
  | 'APP_BALANCE_TOO_LOW'
  | 'ORDER_EXPIRED'
  | 'OPEN_DEPOSIT_ADDRESS'
  | 'SLIPPAGE'
  | RiskPostponeReason
  | RiskFailReason;

/** A fast fill the solver refuses; the API answers its code with a status (api/errors.ts). */
export class FastFillError extends RelayNodeError {
  override name = 'FastFillError';

  constructor(
    readonly errorCode: FastFillCode,
    message: string,
  ) {
    super(message);
  }
}

/** What a fast fill pays, and what it holds on the app balance (micro-USD). */
export interface FastFillResult {
  amount: bigint;
  valueMicro: bigint;
  holdMicro: bigint;
}

/**
 * Fills a request before its deposit is final, holding the fill's worth on the app balance of the
 * wallet linked to the caller's key. The decision and its effects (hold, payout, status) are one
 * ledger transaction that also checks nothing filled the request first, so a fast fill racing its
 * own deposit pays once.
 */
export async function fastFill(
  ledger: Ledger,
  registry: Registry,
  chains: Pick<ChainPorts, 'costs' | 'payoutsQueued'>,
  prices: PriceSource,
  input: FastFillInput,
  now = Date.now(),
): Promise<FastFillResult> {
  const r = ledger.requests.get(input.requestId);
  // A request no quote priced (a gasless relay's) has nothing a fill could pay: its pricing, read below, is absent.
  if (!r || r.kind !== 'order' || r.pricing === null) throw new FastFillError('REQUEST_NOT_FOUND', `no quoted request with id ${input.requestId}`);
  // A fast fill spends an app balance on a request: only the key that quoted the request, or the key
  // sponsoring it, may ask for one (any other key would charge a sponsor for a stranger's request).
  if (r.api_key_id !== input.apiKeyId && moneyOf(r)?.sponsor?.apiKeyId !== input.apiKeyId) {
    throw new FastFillError('NOT_QUOTED_BY_KEY', `request ${r.id} was not quoted or sponsored with this API key`);
  }
  // An open deposit address's quote is a template: each arrival is a request of its own, filled on its own, so no
  // deposit ever settles a fast fill of the template. Its hold became the app's debit and the user was paid twice.
  if (moneyOf(r)?.depositAddressType === 'open')
    throw new FastFillError('OPEN_DEPOSIT_ADDRESS', `request ${r.id} is an open deposit address: each arrival is filled on its own, none fast-filled`);
  const wallet = ledger.balances.sponsorOf(input.apiKeyId);
  if (!wallet) throw new FastFillError('NO_APP_BALANCE', 'this API key has no linked app balance wallet: link one first');
  // A quote kept past its life is not filled (a deposit after it is refused as ORDER_EXPIRED too).
  if (r.expires_at !== null && now > r.expires_at) throw new FastFillError('ORDER_EXPIRED', `the quote of request ${r.id} has expired; not filled`);
  const pricing = JSON.parse(r.pricing!) as Pricing;
  const cout = registry.currency(r.destination_chain_id, r.destination_currency)!;
  const cin = registry.currency(r.origin_chain_id, r.origin_currency)!;
  const [priceOut, priceIn] = await Promise.all([prices.usdPrice(cout), prices.usdPrice(cin)]);
  // What the fill is priced at: the hold covers its worth, and the app's fees are earned on it.
  const priced = input.solverInputCurrencyAmount ?? BigInt(r.amount_in);
  const quoted = breakdown(priced, pricing);
  let fees = quoted;
  let rate: Ratio | undefined;
  if (pricing.swap) {
    // A swap pays at today's rate, as a deposit's fill does (match.ts): at the quote's, a caller keeping quotes
    // until the market moved would be paid more than the input is now worth, on whichever quotes it picks.
    // Below the quote's slippage tolerance (its minimum out, as a share of its out) it is refused.
    rate = marketRate(priceIn, cin, priceOut, cout, pricing.swap.spreadBps);
    fees = breakdown(priced, atRate(pricing, rate));
    const amountOut = BigInt(r.amount_out);
    const floor = amountOut > 0n ? (quoted.out * BigInt(r.min_amount_out)) / amountOut : quoted.out;
    if (fees.out < floor)
      throw new FastFillError('SLIPPAGE', `the price moved past the quote's slippage tolerance since request ${r.id} was quoted; not filled`);
  }
  if (fees.out <= 0n) throw new FastFillError('NEGATIVE_NEW_AMOUNT_AFTER_FEES', 'solverInputCurrencyAmount does not cover the fees');
  const valueMicro = usdMicroCeil(fees.out, cout.decimals, priceOut);
  // The hold covers what the deposit is expected to bring: the input's worth (on a route moving one asset, at the
  // higher of its two readings).
  const holdMicro = inputWorth(priced, pricing, { currency: cin, price: priceIn }, { currency: cout, price: priceOut }, usdMicroCeil);
  if (input.maxFillAmountUsd !== undefined) {
    const max = parseDecimal(input.maxFillAmountUsd);
    if (valueMicro * max.den > max.num * 1_000_000n) {
      throw new FastFillError('MAX_FILL_AMOUNT_EXCEEDED', `the fill is worth more than maxFillAmountUsd (${input.maxFillAmountUsd} USD); not filled`);
    }
  }
  if ((await chains.costs(r.destination_chain_id)!.balance(r.destination_currency)) < fees.out) {
    throw new FastFillError('SOLVER_BALANCE_TOO_LOW', 'the solver cannot fill this request now');
  }

  ledger.tx(() => {
    // The key's wallet was read before the fill was priced: one that unlinked meanwhile (its unlink answered) is not
    // held for the key.
    if (ledger.balances.sponsorOf(input.apiKeyId) !== wallet)
      throw new FastFillError('NO_APP_BALANCE', `the app balance wallet ${wallet} is no longer linked to this API key: link one first`);
    const current = ledger.requests.get(r.id)!;
    if (current.fast_fill_deadline !== null) throw new FastFillError('ALREADY_FAST_FILLED', `request ${r.id} was fast-filled already`);
    if ((current.status !== 'waiting' && current.status !== 'depositing') || ledger.payouts.get(`fill:${r.id}`)) {
      throw new FastFillError('ALREADY_FILLED', `request ${r.id} is ${current.status}: it is filled or being filled already`);
    }
    // The hold and, for a sponsored request, the fees charged with it: both leave the available
    // balance in this transaction, and neither may take it below zero. What POST /execute held for
    // this request's fees is replaced by the charge, so it counts as available here.
    const sponsoredMicro = usdMicroCeil(fees.sponsored, cout.decimals, priceOut);
    const sponsor = moneyOf(current)?.sponsor?.wallet;
    if (sponsor && sponsor !== wallet && ledger.balances.summary(sponsor).available + sponsorHeld(ledger, r.id) < sponsoredMicro) {
      throw new FastFillError('SPONSOR_BALANCE_TOO_LOW', `the sponsor's app balance cannot pay the fees of request ${r.id}`);
    }
    const charged = sponsor === wallet ? sponsoredMicro : 0n;
    const available = ledger.balances.summary(wallet).available + (charged > 0n ? sponsorHeld(ledger, r.id) : 0n);
    if (available < holdMicro + charged) {
      throw new FastFillError('APP_BALANCE_TOO_LOW', `the app balance has ${available} micro-USD available; the fast fill needs ${holdMicro + charged}`);
    }
    if (input.risk)
      judgeRisk(input.risk, registry, current, fees, BigInt(pricing.topUpNative ?? 0), priced, {
        in: priceIn,
        out: priceOut,
      });
    placeHold(ledger, wallet, current, holdMicro);
    ledger.requests.markFastFilled(r.id, now + input.holdSeconds * 1000, priced, now);
    ledger.requests.setStatus(r.id, 'pending', {}, now);
    ledger.payouts.insert({
      id: `fill:${r.id}`,
      kind: 'fill',
      request_id: r.id,
      deposit_id: null,
      chain_id: r.destination_chain_id,
      recipient: r.recipient!,
      currency: r.destination_currency,
      amount: fees.out.toString(),
      native_topup: pricing.topUpNative ?? null,
      // The quote's destination calls, run by the fill as a deposit's fill runs them (without, their value was paid
      // to the recipient and nothing the user asked for ran).
      calls: moneyOf(current)?.calls ? JSON.stringify(moneyOf(current)!.calls) : null,
      max_gas: moneyOf(current)?.maxGas ?? null,
      rate: rate ? rateText(rate) : null,
      decided_at: now,
    });
    debitSponsor(ledger, current, sponsoredMicro);
  });
  chains.payoutsQueued(r.destination_chain_id);
  return { amount: fees.out, valueMicro, holdMicro };
}

/**
 * What an input of `amount` is worth to a fast fill's hold, in micro-USD (`round`: usdMicro or usdMicroCeil): its worth
 * at the input currency's price, and on a route that moves one asset (a bridge, wrap or send: no swap) never less than
 * what the quote's pricing pays out of it before fees, at the output currency's price. Such a route pays at the rate its
 * quote fixed (one for one when both readings of the asset agreed then), and its two prices are two readings of one
 * asset (a feed on one chain, the configured price on another): held at the input's reading alone, once that reading
 * fell after the quote, an app balance credited 0.1 ETH at chain 8453's 3000 USD held 300 USD for a quoted 0.15 ETH
 * read at 2000 USD on chain 10, and was paid 0.1497 ETH on 8453 with no deposit ever. The hold and the deposit that
 * settles it are weighed alike, so an honest deposit releases its hold whole whatever the readings.
 */
export function inputWorth(
  amount: bigint,
  pricing: Pricing,
  input: { currency: Pick<Currency, 'decimals'>; price: string },
  output: { currency: Pick<Currency, 'decimals'>; price: string },
  round: (amount: bigint, decimals: number, price: string) => bigint,
): bigint {
  const atInput = round(amount, input.currency.decimals, input.price);
  if (pricing.swap) return atInput;
  const atOutput = round(breakdown(amount, pricing).value, output.currency.decimals, output.price);
  return atOutput > atInput ? atOutput : atInput;
}

// The risk policy's verdict on a fast fill, as the fill a deposit of the input would make: a blocked
// recipient (or user) is refused, a pause, dry run or limit that would hold the fill back refuses it
// now (the caller may try again), an order above the limit is refused. Runs inside the fast fill's
// ledger transaction, so the in-flight and outflow limits count what committed before it.
function judgeRisk(
  risk: RiskPolicy,
  registry: Registry,
  r: RequestRow,
  fees: FeeBreakdown,
  topUp: bigint,
  input: bigint,
  prices: { in: string; out: string },
): void {
  const deposit = {
    id: `fast-fill:${r.id}`,
    chain_id: r.origin_chain_id,
    currency: r.origin_currency,
    amount: input.toString(),
    depositor: r.user,
    order_ref: r.id,
  } as unknown as DepositRow;
  const usd = (chainId: number, currency: string, amount: bigint): bigint => {
    if (amount === 0n) return 0n;
    const cur = registry.currency(chainId, currency);
    if (!cur) return 0n;
    const price =
      chainId === r.origin_chain_id && currency === r.origin_currency
        ? prices.in
        : chainId === r.destination_chain_id && currency === r.destination_currency
          ? prices.out
          : cur.usdPrice;
    return usdMicro(amount, cur.decimals, price);
  };
  const verdict = risk.judge(deposit, { kind: 'fill', request: r, amount: fees.out, fees, topUp, excess: 0n }, usd);
  if (verdict.kind === 'go') return;
  if (verdict.kind === 'postpone') throw new FastFillError(verdict.reason, `the fast fill is held back now (${verdict.reason}); not filled`);
  if (verdict.reason === 'BLOCKED_WALLET') throw new FastFillError('BLOCKED_WALLET', 'the recipient or user of this request may not be paid by this solver');
  throw new FastFillError(verdict.reason, `the fast fill exceeds the solver's limits (${verdict.reason}); not filled`);
}
