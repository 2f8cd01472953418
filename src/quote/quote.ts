import { randomBytes } from 'node:crypto';
import { encodeAbiParameters, formatUnits, type Hex } from 'viem';
import type { NewRequest } from '../ledger/requests.ts';
import { amountObject } from './currency.ts';
import { QuoteError } from '../lib/quoteError.ts';
import { breakdown, inputFor, outputFor } from './fillAmount.ts';
import { ceilDiv, conversionRate, formatUsd, mulRatioCeil, mulRatioFloor, percent, usdMicro, usdMicroCeil, usdValue } from '../lib/money.ts';
import { orderId, type OrderData } from './orderId.ts';
import { callsValue, priceRoute } from './pricing.ts';
import { resolveRoute } from './route.ts';
import { feeSponsorshipQuoted } from './sponsorship.ts';
import type { QuoteContext, QuoteInput } from './types.ts';

export { currencyObject } from './currency.ts';
export { QuoteError } from '../lib/quoteError.ts';
export type { QuoteContext, QuoteInput, Sponsor } from './types.ts';

export interface Quote {
  response: Record<string, unknown>;
  request: NewRequest;
}

export async function buildQuote(q: QuoteInput, ctx: QuoteContext): Promise<Quote> {
  const { registry, config } = ctx;
  const now = ctx.now ?? Date.now();
  const route = resolveRoute(q, registry, ctx.chains);
  const { origin, dest, user, recipient, refundTo, feePayer, cin, cout } = route;
  const { codec: originCodec } = route.originProfile;
  const { codec: destCodec } = route.destProfile;
  const originCosts = ctx.chains.costs(origin.id)!;
  const originDeposits = ctx.chains.deposits(origin.id)!;
  const destCosts = ctx.chains.costs(dest.id)!;
  const originNative = registry.native(origin.id);

  if (q.useDepositAddress) {
    // What arrives at a deposit address is refunded to refundTo: the user must name it.
    if (q.refundTo === undefined) throw new QuoteError('refundTo: is required with useDepositAddress', 'INVALID_INPUT_PARAMETERS');
    if (q.sponsoredFeeComponents) throw new QuoteError('sponsoredFeeComponents: deposit addresses do not support it (rule 6)', 'INVALID_INPUT_PARAMETERS');
    // Each arrival at an open address is a fill of its own: sponsored, one quote would spend the sponsor (its fees,
    // gas and top-up) again for every arrival anyone sends.
    if (q.subsidizeFees && q.depositAddressType === 'open')
      throw new QuoteError('subsidizeFees: an open deposit address cannot be sponsored (each arrival is a fill of its own)', 'INVALID_INPUT_PARAMETERS');
    if (q.usePermit) throw new QuoteError('usePermit: a deposit address is paid by a plain transfer, not a permit', 'INVALID_INPUT_PARAMETERS');
  } else if (q.depositAddressType) {
    throw new QuoteError('depositAddressType: needs useDepositAddress', 'INVALID_INPUT_PARAMETERS');
  }
  const { pricing, prices, fillCost, depositCost, rate, fallback, originPaid, permitFeePerGas } = await priceRoute(q, route, ctx);
  const { in: priceIn, out: priceOut, originNative: originNativePrice } = prices;
  const gasFeeOut = BigInt(pricing.gasFeeOut);

  // Swaps tolerate slippage (prices move between quote and fill); bridges and wraps do not.
  const slippageBps = pricing.swap ? (q.slippageTolerance ?? config.fees.defaultSlippageBps) : 0;
  const lessSlippage = (x: bigint) => (x * BigInt(10_000 - slippageBps)) / 10_000n;
  const amountsFor = () => {
    let amountIn: bigint;
    let amountOut: bigint;
    let minAmountOut: bigint;
    if (q.tradeType === 'EXACT_INPUT') {
      amountIn = q.amount;
      amountOut = outputFor(amountIn, pricing);
      if (amountOut <= 0n) {
        throw new QuoteError(`amount ${q.amount} is too low to cover the fees of ${formatUnits(gasFeeOut, cout.decimals)} ${cout.symbol}`, 'AMOUNT_TOO_LOW');
      }
      minAmountOut = lessSlippage(amountOut);
    } else if (q.tradeType === 'EXPECTED_OUTPUT') {
      // About q.amount out, and at least that less the slippage tolerance.
      amountIn = inputFor(q.amount, pricing);
      amountOut = outputFor(amountIn, pricing);
      minAmountOut = lessSlippage(q.amount);
    } else {
      // Exactly q.amount out at least: the input carries the slippage as a margin.
      amountIn = inputFor(ceilDiv(q.amount * 10_000n, BigInt(10_000 - slippageBps)), pricing);
      amountOut = outputFor(amountIn, pricing);
      minAmountOut = q.amount;
    }
    return { amountIn, amountOut, minAmountOut };
  };
  let { amountIn, amountOut, minAmountOut } = amountsFor();
  // Rule 6: a deposit address's fees over the cap are the user's, all of them.
  if (q.useDepositAddress && pricing.sponsor) {
    const f = breakdown(amountIn, pricing);
    if (f.sponsored < f.gas + f.topUp + f.service) {
      delete pricing.sponsor;
      ({ amountIn, amountOut, minAmountOut } = amountsFor());
    }
  }
  // A sponsored quote's fees, the gas the node pays on the origin before any fill among them (a deposit address's sweep,
  // a signed deposit), are the sponsor's only once it is filled. Swept or deposited and then not filled (the quote
  // expired, the sponsor's balance gone, a price past the slippage), the deposit bears that gas as its refund, and one
  // worth less left it to the solver: an app quoting sponsored deposit addresses for 0.001 USDC and letting them expire
  // had the solver pay a sweep (about 200,000 gas) for each, up to 20,000 addresses a day per key; a sponsored usePermit
  // swap of 0.001 USDC at a slippage tolerance of 0 had it pay the signed deposit whenever the price moved, the user
  // paying no gas at all.
  if (pricing.sponsor && originPaid !== undefined) {
    const worth = mulRatioFloor(amountIn, conversionRate(priceIn, cin.decimals, originNativePrice, originNative.decimals));
    if (worth <= originPaid) {
      throw new QuoteError(
        `amount: a deposit of ${formatUnits(amountIn, cin.decimals)} ${cin.symbol} does not cover the ${formatUnits(originPaid, originNative.decimals)} ${originNative.symbol} the node pays to ${q.usePermit ? 'submit it' : 'sweep it'} should it not be filled`,
        'AMOUNT_TOO_LOW',
      );
    }
  }
  const spent = callsValue(route);
  if (spent !== undefined && minAmountOut < spent) {
    throw new QuoteError(
      `amount: the output of ${formatUnits(minAmountOut, cout.decimals)} ${cout.symbol} does not cover the ${formatUnits(spent, cout.decimals)} the txs spend`,
      'INSUFFICIENT_FUNDS_FOR_CALLS',
    );
  }
  if (amountOut < fillCost.minimumAmount) {
    throw new QuoteError(
      `the payout of ${formatUnits(amountOut, cout.decimals)} ${cout.symbol} would leave the new account of ${q.recipient ?? q.user} below the rent-exempt minimum of ${formatUnits(fillCost.minimumAmount, cout.decimals)} ${cout.symbol}`,
      'INSUFFICIENT_FUNDS_FOR_RENT',
    );
  }

  const fees = breakdown(amountIn, pricing);
  const sponsoredMicro = usdMicroCeil(fees.sponsored, cout.decimals, priceOut);
  if (ctx.sponsor && pricing.sponsor && ctx.sponsor.balance < sponsoredMicro) {
    throw new QuoteError(
      `the sponsor's app balance of ${formatUsd(ctx.sponsor.balance)} USD cannot pay ${formatUsd(sponsoredMicro)} USD of fees`,
      'SPONSOR_BALANCE_TOO_LOW',
    );
  }
  const available = await destCosts.balance(cout.address);
  if (amountOut > available) {
    throw new QuoteError(`the solver cannot fill ${formatUnits(amountOut, cout.decimals)} ${cout.symbol} on chain ${dest.id} now`, 'SOLVER_CAPACITY_EXCEEDED');
  }

  // Fees, in the input currency (what the user gives up), split as the interface names them.
  const inRate = { num: rate.den, den: rate.num };
  const toIn = (x: bigint) => mulRatioCeil(x, inRate);
  const relayerGasIn = toIn(fees.gas + fees.topUp);
  const relayerServiceIn = toIn(fees.service);
  const appIn = toIn(fees.app.reduce((t, f) => t + f.amount, 0n));
  const sponsoredIn = toIn(fees.sponsored);

  const deadline = Math.floor(now / 1000) + config.quote.fillDeadlineSeconds;
  const inBytes = originCodec.bytes(cin.address);
  const orderData: OrderData = {
    version: 'v1',
    solverChainId: String(origin.id),
    solver: ctx.solver,
    salt: BigInt(`0x${randomBytes(32).toString('hex')}`),
    inputs: [
      {
        payment: { chainId: String(origin.id), currency: inBytes, amount: amountIn, weight: 1n },
        refunds: [{ chainId: String(origin.id), recipient: originCodec.bytes(refundTo), currency: inBytes, minimumAmount: 0n, deadline, extraData: '0x' }],
      },
    ],
    output: {
      chainId: String(dest.id),
      payments: [{ recipient: destCodec.bytes(recipient), currency: destCodec.bytes(cout.address), minimumAmount: minAmountOut, expectedAmount: amountOut }],
      deadline,
      calls: (route.calls ?? []).map((c) => encodeAbiParameters(CALL_PARAMS, [c.to as Hex, c.value, c.data])),
      extraData: '0x',
    },
    fees: [
      {
        recipientChainId: String(origin.id),
        recipient: originCodec.bytes(originDeposits.solver),
        currencyChainId: String(origin.id),
        currency: inBytes,
        amount: relayerGasIn + relayerServiceIn - sponsoredIn > 0n ? relayerGasIn + relayerServiceIn - sponsoredIn : 0n,
      },
    ],
  };
  const id = orderId(orderData);

  const [deposit, userBalance] = await Promise.all([
    originDeposits.depositSteps({
      user,
      currency: cin.address,
      amount: amountIn,
      orderId: id,
      feePayer,
      protocolVersion: q.protocolVersion,
      depositAddressFor: q.useDepositAddress ? refundTo : undefined,
      permitDeadline: q.usePermit ? Math.floor(now / 1000) + config.quote.ttlSeconds : undefined,
    }),
    originCosts.balanceOf(user, cin.address),
  ]);
  const checkPath = { status: '/intents/status', 'status-v3': '/intents/status/v3' };
  const steps = deposit.map((st) => ({
    id: st.id,
    action: st.action,
    description: st.description,
    kind: st.kind,
    requestId: id,
    ...(st.id === 'deposit' ? { depositAddress: st.depositAddress ?? '' } : {}),
    items: [{ status: 'incomplete', data: st.data, ...(st.check ? { check: { endpoint: `${checkPath[st.check]}?requestId=${id}`, method: 'GET' } } : {}) }],
  }));

  const currencyIn = amountObject(cin, amountIn, priceIn);
  const currencyOut = amountObject(cout, amountOut, priceOut, minAmountOut);
  const inUsd = usdMicro(amountIn, cin.decimals, priceIn);
  const impact = usdMicro(amountOut, cout.decimals, priceOut) - inUsd;
  // What the swap's spread takes, in USD (its share of the total impact).
  const spreadMicro = pricing.swap ? (inUsd * BigInt(pricing.swap.spreadBps)) / 10_000n : 0n;
  const feesObject = {
    gas: amountObject(originNative, depositCost, originNativePrice),
    relayer: amountObject(cin, relayerGasIn + relayerServiceIn, priceIn),
    relayerGas: amountObject(cin, relayerGasIn, priceIn),
    relayerService: amountObject(cin, relayerServiceIn, priceIn),
    app: amountObject(cin, appIn, priceIn),
    subsidized: amountObject(cin, sponsoredIn, priceIn),
  };
  const router = 'relay-node';
  const slipUsd = usdValue(amountOut - minAmountOut, cout.decimals, priceOut);
  const slip = { usd: slipUsd, value: String(slippageBps), percent: percent(BigInt(slippageBps), 10_000n) };
  const noSlip = { usd: '0', value: '0', percent: '0' };
  const details = {
    operation: OPERATIONS[route.requestType],
    sender: originCodec.api(user),
    recipient: destCodec.api(recipient),
    currencyIn,
    currencyOut,
    refundCurrency: currencyIn,
    totalImpact: { usd: signedUsd(impact), percent: percent(impact, inUsd) },
    swapImpact: { usd: signedUsd(-spreadMicro), percent: percent(-spreadMicro, inUsd) },
    expandedPriceImpact: {
      swap: { usd: signedUsd(-spreadMicro) },
      execution: { usd: `-${feesObject.relayerGas.amountUsd}` },
      relay: { usd: `-${feesObject.relayerService.amountUsd}` },
      app: { usd: appIn === 0n ? '0' : `-${feesObject.app.amountUsd}` },
    },
    // Output per unit of input, in human units.
    rate: formatUnits((rate.num * 10n ** BigInt(18 + cin.decimals)) / (rate.den * 10n ** BigInt(cout.decimals)), 18),
    slippageTolerance: { origin: noSlip, destination: slip },
    // Seconds: the deposit's confirmation plus the fill's own block.
    timeEstimate: (originDeposits.confirmSecondsFor?.(cin.address, amountIn) ?? originDeposits.confirmSeconds) + 1,
    userBalance: userBalance.toString(),
    isFixedRate: true,
    route: {
      origin: { inputCurrency: currencyIn, outputCurrency: currencyIn, router },
      destination: { inputCurrency: currencyOut, outputCurrency: currencyOut, router },
    },
  };
  const response: Record<string, unknown> = { steps, fees: feesObject, details };
  if (q.protocolVersion === 'v2') {
    response.protocol = {
      v2: {
        orderId: id,
        orderData: jsonSafe(orderData),
        paymentDetails: {
          chainId: String(origin.id),
          depository: originDeposits.depositAddress,
          currency: originCodec.api(cin.address),
          amount: amountIn.toString(),
        },
      },
    };
  }

  const request: NewRequest = {
    id,
    parent_id: null,
    kind: 'order',
    request_type: route.requestType,
    user,
    recipient,
    refund_to: refundTo,
    origin_chain_id: origin.id,
    destination_chain_id: dest.id,
    origin_currency: cin.address,
    destination_currency: cout.address,
    trade_type: q.tradeType,
    amount_in: amountIn.toString(),
    amount_out: amountOut.toString(),
    min_amount_out: minAmountOut.toString(),
    pricing: JSON.stringify(pricing),
    order_data: JSON.stringify(jsonSafe(orderData)),
    quote: JSON.stringify(response),
    expires_at: now + config.quote.ttlSeconds * 1000,
    fill_deadline: deadline * 1000,
    created_at: now,
    amount_usd: Number(inUsd),
    app_fees_usd: Number(usdMicro(appIn, cin.decimals, priceIn)),
    currency_in_symbol: cin.symbol.toUpperCase(),
    deposit_address: deposit.find((st) => st.depositAddress)?.depositAddress ?? null,
    currency_out_symbol: cout.symbol.toUpperCase(),
    money: JSON.stringify({
      sponsor: pricing.sponsor && ctx.sponsor ? { wallet: ctx.sponsor.wallet, apiKeyId: ctx.sponsor.apiKeyId } : null,
      sponsorFallback: fallback ?? null,
      feeSponsorship: q.subsidizeFees ? feeSponsorshipQuoted(q.maxSubsidizationAmount, pricing, fees, cout, priceOut) : null,
      appFees: pricing.appFees ?? [],
      topUpNative: pricing.topUpNative ?? null,
      calls: route.calls?.map((c) => ({ to: c.to, value: c.value.toString(), data: c.data })) ?? null,
      maxGas: fillCost.gasLimit?.toString() ?? null,
      ...(q.useDepositAddress ? { depositAddressType: q.depositAddressType ?? 'strict' } : {}),
      // A signed deposit the node submits (POST /execute/permits or /permits, /execute): only for such quotes.
      ...(q.usePermit ? { permit: true } : {}),
      // The origin's price of gas that deposit was charged at: the most it is submitted at (recordSignedDeposit).
      ...(permitFeePerGas !== undefined ? { permitFeePerGas: permitFeePerGas.toString() } : {}),
    }),
    features: JSON.stringify([
      ...(pricing.appFees ? ['app_fees'] : []),
      ...(pricing.topUpNative ? ['gas_top_up'] : []),
      ...(q.useDepositAddress ? ['deposit_address'] : []),
    ]),
  };
  return { response, request };
}

// A destination call in orderData.output.calls: abi.encode(to, value, data).
const CALL_PARAMS = [{ type: 'address' }, { type: 'uint256' }, { type: 'bytes' }] as const;

const OPERATIONS: Record<string, string> = {
  Bridge: 'bridge',
  'Crosschain Swap': 'swap',
  'Same-chain Swap': 'swap',
  Send: 'send',
  Wrap: 'wrap',
  Unwrap: 'unwrap',
  Call: 'call',
};

function signedUsd(micro: bigint): string {
  return micro < 0n ? `-${formatUsd(-micro)}` : formatUsd(micro);
}

/** bigints as decimal strings, as the interface writes amounts. */
export function jsonSafe<T>(v: T): unknown {
  return JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x)));
}
