import { randomBytes } from 'node:crypto';
import { formatUnits, getAddress, zeroAddress, type Address, type Hex } from 'viem';
import type { ChainAdapter } from '../chains/adapter.ts';
import type { Config } from '../config/load.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { NewRequest } from '../ledger/requests.ts';
import type { Pricing } from '../ledger/types.ts';
import { inputFor, outputFor } from './fillAmount.ts';
import { bpsCeil, conversionRate, formatUsd, mulRatioCeil, mulRatioFloor, percent, usdMicro, usdValue } from './money.ts';
import { orderId, type OrderData } from './orderId.ts';
import type { PriceSource } from './prices.ts';

export interface QuoteInput {
  user: Address;
  recipient?: Address;
  refundTo?: Address;
  originChainId: number;
  destinationChainId: number;
  originCurrency: Address;
  destinationCurrency: Address;
  amount: bigint;
  tradeType: 'EXACT_INPUT' | 'EXACT_OUTPUT';
  protocolVersion?: string;
  referrer?: string;
}

export class QuoteError extends Error {
  constructor(
    message: string,
    readonly errorCode: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

export interface QuoteContext {
  config: Config;
  registry: Registry;
  adapters: Map<number, ChainAdapter>;
  prices: PriceSource;
  solver: Address;
  now?: number;
}

// Gas of the user's own deposit transaction, for the quote's `fees.gas` (an estimate, not charged).
const DEPOSIT_GAS = { native: 45_000n, erc20: 75_000n };

function amountObject(c: Currency, amount: bigint, price: string) {
  const usd = usdValue(amount, c.decimals, price);
  return {
    currency: currencyObject(c),
    amount: amount.toString(),
    amountFormatted: formatUnits(amount, c.decimals),
    amountUsd: usd,
    minimumAmount: amount.toString(),
  };
}

export function currencyObject(c: Currency) {
  return {
    chainId: c.chainId,
    address: c.address.toLowerCase(),
    symbol: c.symbol,
    name: c.name,
    decimals: c.decimals,
    metadata: { logoURI: c.logoURI ?? '', verified: true },
  };
}

export interface Quote {
  response: Record<string, unknown>;
  request: NewRequest;
}

export async function buildQuote(q: QuoteInput, ctx: QuoteContext): Promise<Quote> {
  const { registry, config } = ctx;
  const now = ctx.now ?? Date.now();
  const origin = registry.chain(q.originChainId);
  const dest = registry.chain(q.destinationChainId);
  if (!origin) throw new QuoteError(`originChainId ${q.originChainId} is not a supported chain`, 'UNSUPPORTED_CHAIN');
  if (!dest) throw new QuoteError(`destinationChainId ${q.destinationChainId} is not a supported chain`, 'UNSUPPORTED_CHAIN');
  if (!origin.depositEnabled) throw new QuoteError(`deposits on chain ${origin.id} are disabled`, 'UNSUPPORTED_CHAIN');
  const cin = registry.currency(origin.id, q.originCurrency);
  const cout = registry.currency(dest.id, q.destinationCurrency);
  if (!cin) throw new QuoteError(`originCurrency ${q.originCurrency} is not supported on chain ${origin.id}`, 'UNSUPPORTED_CURRENCY');
  if (!cout) throw new QuoteError(`destinationCurrency ${q.destinationCurrency} is not supported on chain ${dest.id}`, 'UNSUPPORTED_CURRENCY');
  if (origin.id === dest.id) throw new QuoteError('same-chain requests are not supported: originChainId equals destinationChainId', 'UNSUPPORTED_ROUTE');
  if (cin.native !== cout.native || cin.symbol !== cout.symbol) {
    throw new QuoteError(`route ${cin.symbol} → ${cout.symbol} is not supported: only bridges of the same currency are`, 'UNSUPPORTED_ROUTE');
  }
  const originAdapter = ctx.adapters.get(origin.id)!;
  const destAdapter = ctx.adapters.get(dest.id)!;

  const [priceIn, priceOut, destNativePrice, originNativePrice, destCosts, originCosts] = await Promise.all([
    ctx.prices.usdPrice(cin),
    ctx.prices.usdPrice(cout),
    ctx.prices.usdPrice(registry.native(dest.id)),
    ctx.prices.usdPrice(registry.native(origin.id)),
    destAdapter.costs(),
    originAdapter.costs(),
  ]);
  const destNative = registry.native(dest.id);
  const rate = conversionRate(priceIn, cin.decimals, priceOut, cout.decimals);
  const gasWei = destCosts.fillGas(cout.address) * destCosts.maxFeePerGas;
  const gasFeeOut = mulRatioCeil(gasWei, conversionRate(destNativePrice, destNative.decimals, priceOut, cout.decimals));
  const pricing: Pricing = {
    rateNum: rate.num.toString(),
    rateDen: rate.den.toString(),
    serviceBps: config.fees.relayerServiceBps,
    gasFeeOut: gasFeeOut.toString(),
    gasFeeUsd: usdValue(gasWei, destNative.decimals, destNativePrice),
  };

  let amountIn: bigint;
  let amountOut: bigint;
  if (q.tradeType === 'EXACT_INPUT') {
    amountIn = q.amount;
    amountOut = outputFor(amountIn, pricing);
    if (amountOut <= 0n) {
      throw new QuoteError(`amount ${q.amount} is too low to cover the fees of ${formatUnits(gasFeeOut, cout.decimals)} ${cout.symbol}`, 'AMOUNT_TOO_LOW');
    }
  } else {
    amountOut = q.amount;
    amountIn = inputFor(amountOut, pricing);
  }
  const minAmountOut = q.tradeType === 'EXACT_INPUT' ? amountOut : q.amount;

  const available = await destAdapter.balance(cout.address);
  if (amountOut > available) {
    throw new QuoteError(`the solver cannot fill ${formatUnits(amountOut, cout.decimals)} ${cout.symbol} on chain ${dest.id} now`, 'SOLVER_CAPACITY_EXCEEDED');
  }

  // Fees, in the input currency (what the user gives up), split as the interface names them.
  const valueOut = mulRatioFloor(amountIn, rate);
  const serviceOut = bpsCeil(valueOut, pricing.serviceBps);
  const inRate = { num: rate.den, den: rate.num };
  const relayerGasIn = mulRatioCeil(gasFeeOut, inRate);
  const relayerServiceIn = mulRatioCeil(serviceOut, inRate);
  const originNative = registry.native(origin.id);
  const userGasWei = (cin.native ? DEPOSIT_GAS.native : DEPOSIT_GAS.erc20) * originCosts.maxFeePerGas;

  const recipient = q.recipient ?? q.user;
  const refundTo = q.refundTo ?? q.user;
  const deadline = Math.floor(now / 1000) + config.quote.fillDeadlineSeconds;
  const orderData: OrderData = {
    version: 'v1',
    solverChainId: String(origin.id),
    solver: ctx.solver,
    salt: BigInt(`0x${randomBytes(32).toString('hex')}`),
    inputs: [
      {
        payment: { chainId: String(origin.id), currency: cin.address.toLowerCase() as Hex, amount: amountIn, weight: 1n },
        refunds: [
          { chainId: String(origin.id), recipient: refundTo.toLowerCase() as Hex, currency: cin.address.toLowerCase() as Hex, minimumAmount: 0n, deadline, extraData: '0x' },
        ],
      },
    ],
    output: {
      chainId: String(dest.id),
      payments: [{ recipient: recipient.toLowerCase() as Hex, currency: cout.address.toLowerCase() as Hex, minimumAmount: minAmountOut, expectedAmount: amountOut }],
      deadline,
      calls: [],
      extraData: '0x',
    },
    fees: [
      {
        recipientChainId: String(origin.id),
        recipient: ctx.solver.toLowerCase() as Hex,
        currencyChainId: String(origin.id),
        currency: cin.address.toLowerCase() as Hex,
        amount: relayerGasIn + relayerServiceIn,
      },
    ],
  };
  const id = orderId(orderData);

  const txs = await originAdapter.depositTxs({ user: q.user, currency: cin.address, amount: amountIn, orderId: id });
  const userBalance = await originAdapter.balanceOf(q.user, cin.address);
  const check = { endpoint: `/intents/status/v3?requestId=${id}`, method: 'GET' };
  const txData = (t: { to: string; data: Hex; value: bigint }) => ({
    from: q.user,
    to: t.to,
    data: t.data,
    value: t.value.toString(),
    chainId: origin.id,
  });
  const steps: Record<string, unknown>[] = [];
  if (txs.approve) {
    steps.push({
      id: 'approve',
      action: 'Confirm transaction in your wallet',
      description: `Approve ${cin.symbol} for the depository`,
      kind: 'transaction',
      requestId: id,
      items: [{ status: 'incomplete', data: txData(txs.approve) }],
    });
  }
  steps.push({
    id: 'deposit',
    action: 'Confirm transaction in your wallet',
    description: `Deposit ${cin.symbol} to the relayer to receive ${cout.symbol} on chain ${dest.id}`,
    kind: 'transaction',
    requestId: id,
    depositAddress: '',
    items: [{ status: 'incomplete', data: txData(txs.deposit), check }],
  });

  const zeroIn = amountObject(cin, 0n, priceIn);
  const currencyIn = amountObject(cin, amountIn, priceIn);
  const currencyOut = { ...amountObject(cout, amountOut, priceOut), minimumAmount: minAmountOut.toString() };
  const inUsdMicro = usdMicro(amountIn, cin.decimals, priceIn);
  const impactMicro = usdMicro(amountOut, cout.decimals, priceOut) - inUsdMicro;
  const fees = {
    gas: amountObject(originNative, userGasWei, originNativePrice),
    relayer: amountObject(cin, relayerGasIn + relayerServiceIn, priceIn),
    relayerGas: amountObject(cin, relayerGasIn, priceIn),
    relayerService: amountObject(cin, relayerServiceIn, priceIn),
    app: zeroIn,
    subsidized: zeroIn,
  };
  const route = {
    origin: { inputCurrency: currencyIn, outputCurrency: currencyIn, router: 'relay-node' },
    destination: { inputCurrency: currencyOut, outputCurrency: currencyOut, router: 'relay-node' },
  };
  const slip = { usd: '0', value: '0', percent: '0' };
  const details = {
    operation: 'bridge',
    sender: q.user,
    recipient,
    currencyIn,
    currencyOut,
    refundCurrency: currencyIn,
    totalImpact: { usd: signedUsd(impactMicro), percent: percent(impactMicro, inUsdMicro) },
    swapImpact: { usd: '0', percent: '0' },
    expandedPriceImpact: {
      swap: { usd: '0' },
      execution: { usd: `-${fees.relayerGas.amountUsd}` },
      relay: { usd: `-${fees.relayerService.amountUsd}` },
      app: { usd: '0' },
    },
    // Output per unit of input, in human units.
    rate: formatUnits((rate.num * 10n ** BigInt(18 + cin.decimals)) / (rate.den * 10n ** BigInt(cout.decimals)), 18),
    slippageTolerance: { origin: slip, destination: slip },
    // Seconds: the origin's confirmations at about a block each, plus the fill's own block.
    timeEstimate: origin.confirmations + 1,
    userBalance: userBalance.toString(),
    isFixedRate: true,
    route,
  };
  const response: Record<string, unknown> = { steps, fees, details };
  if (q.protocolVersion === 'v2') {
    response.protocol = {
      v2: {
        orderId: id,
        orderData: jsonSafe(orderData),
        paymentDetails: { chainId: String(origin.id), depository: origin.depository, currency: cin.address.toLowerCase(), amount: amountIn.toString() },
      },
    };
  }

  const request: NewRequest = {
    id,
    parent_id: null,
    kind: 'order',
    request_type: 'Bridge',
    user: getAddress(q.user),
    recipient: getAddress(recipient),
    refund_to: getAddress(refundTo),
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
  };
  return { response, request };
}

function signedUsd(micro: bigint): string {
  return micro < 0n ? `-${formatUsd(-micro)}` : formatUsd(micro);
}

// bigints as decimal strings, as the interface writes amounts.
export function jsonSafe<T>(v: T): unknown {
  return JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x)));
}

export const NATIVE = zeroAddress;
