import { randomBytes } from 'node:crypto';
import { formatUnits, type Hex } from 'viem';
import { addressBytes, apiAddress, canonicalAddress, describeAddressKind } from '../chains/address.ts';
import type { ChainAdapter } from '../chains/adapter.ts';
import type { Config } from '../config/load.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { ChainConfig } from '../config/schema.ts';
import type { NewRequest } from '../ledger/requests.ts';
import type { Pricing } from '../ledger/types.ts';
import { breakdown, inputFor, outputFor, type FeeBreakdown } from './fillAmount.ts';
import { conversionRate, formatUsd, mulRatioCeil, mulRatioFloor, percent, usdMicro, usdMicroCeil, usdValue } from './money.ts';
import { orderId, type OrderData } from './orderId.ts';
import type { PriceSource } from './prices.ts';

// Addresses arrive as strings and are checked against the kind of chain they belong to.
export interface QuoteInput {
  user: string;
  recipient?: string;
  refundTo?: string;
  originChainId: number;
  destinationChainId: number;
  originCurrency: string;
  destinationCurrency: string;
  amount: bigint;
  tradeType: 'EXACT_INPUT' | 'EXACT_OUTPUT';
  protocolVersion?: string;
  referrer?: string;
  // SVM origins: another account pays the deposit transaction's fees.
  depositFeePayer?: string;
  // Fees to integrators: each recipient's share of the output, in basis points.
  appFees?: { recipient: string; fee: number }[];
  subsidizeFees?: boolean;
  // micro-USD (the 6-decimal stablecoin unit): the most the sponsor pays.
  maxSubsidizationAmount?: bigint;
  sponsoredFeeComponents?: string[];
  subsidizeRent?: boolean;
  // Deliver some of the destination's native currency with an ERC-20 fill, worth this many micro-USD.
  topupGas?: boolean;
  topupGasAmount?: bigint;
}

// Who pays sponsored fees: the app balance of the wallet linked to the caller's API key.
export interface Sponsor {
  wallet: string;
  apiKeyId: string;
  // What the wallet's app balance holds now, in micro-USD.
  balance: bigint;
}

export const DEFAULT_TOPUP_MICRO_USD = 2_000_000n;
const SPONSORABLE = ['execution', 'swap', 'platform'] as const;

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
  // The solver's EVM address: the Order type's `solver` field is an address whatever the chains.
  solver: Hex;
  sponsor?: Sponsor;
  now?: number;
}

export interface Quote {
  response: Record<string, unknown>;
  request: NewRequest;
}

export function currencyObject(c: Currency) {
  return {
    chainId: c.chainId,
    address: apiAddress(c.kind, c.address),
    symbol: c.symbol,
    name: c.name,
    decimals: c.decimals,
    metadata: { logoURI: c.logoURI ?? '', verified: true },
  };
}

function amountObject(c: Currency, amount: bigint, price: string, minimum = amount) {
  return {
    currency: currencyObject(c),
    amount: amount.toString(),
    amountFormatted: formatUnits(amount, c.decimals),
    amountUsd: usdValue(amount, c.decimals, price),
    minimumAmount: minimum.toString(),
  };
}

// data.feeSponsorship.quoted of the request record, in the interface's shape.
export function feeSponsorshipQuoted(q: QuoteInput, pricing: Pricing, f: FeeBreakdown, cout: Currency, price: string) {
  const selected = pricing.sponsor?.components ?? [];
  const usdAmt = (x: bigint) => ({ amount: x.toString(), amountUsd: usdValue(x, cout.decimals, price) });
  const execution = f.gas + f.topUp;
  // The sponsor covers execution first, then platform, up to the cap.
  let left = f.sponsored;
  const take = (on: boolean, total: bigint) => {
    const s = on ? (total < left ? total : left) : 0n;
    left -= s;
    return s;
  };
  const execSponsored = take(selected.includes('execution'), execution);
  const platSponsored = take(selected.includes('platform'), f.service);
  const comp = (on: boolean, total: bigint, sponsored: bigint) => ({ selected: on, total: { ...usdAmt(total), amountFormatted: formatUnits(total, cout.decimals), minimumAmount: total.toString() }, sponsored: usdAmt(sponsored), userPays: usdAmt(total - sponsored) });
  const appTotal = f.app.reduce((t, a) => t + a.amount, 0n);
  const all = execution + f.service;
  return {
    selectedComponents: selected,
    maxSubsidizationAmount: q.maxSubsidizationAmount?.toString() ?? null,
    capHit: pricing.sponsor ? f.sponsored < (selected.includes('execution') ? execution : 0n) + (selected.includes('platform') ? f.service : 0n) : false,
    components: {
      execution: comp(selected.includes('execution'), execution, execSponsored),
      swap: comp(false, 0n, 0n),
      platform: comp(selected.includes('platform'), f.service, platSponsored),
      app: comp(false, appTotal, 0n),
    },
    sponsoredTotal: usdAmt(f.sponsored),
    userPaysTotal: usdAmt(all + appTotal - f.sponsored),
    currency: currencyObject(cout),
  };
}

function signedUsd(micro: bigint): string {
  return micro < 0n ? `-${formatUsd(-micro)}` : formatUsd(micro);
}

function address(chain: ChainConfig, field: string, value: string): string {
  const a = canonicalAddress(chain.kind, value);
  if (a === undefined) throw new QuoteError(`${field}: must be ${describeAddressKind(chain.kind)} on chain ${chain.id}`, 'INVALID_INPUT_PARAMETERS');
  return a;
}

export async function buildQuote(q: QuoteInput, ctx: QuoteContext): Promise<Quote> {
  const { registry, config } = ctx;
  const now = ctx.now ?? Date.now();
  const origin = registry.chain(q.originChainId);
  const dest = registry.chain(q.destinationChainId);
  if (!origin) throw new QuoteError(`originChainId ${q.originChainId} is not a supported chain`, 'UNSUPPORTED_CHAIN');
  if (!dest) throw new QuoteError(`destinationChainId ${q.destinationChainId} is not a supported chain`, 'UNSUPPORTED_CHAIN');
  if (!origin.depositEnabled) throw new QuoteError(`deposits on chain ${origin.id} are disabled`, 'UNSUPPORTED_CHAIN');
  const user = address(origin, 'user', q.user);
  const recipient = q.recipient === undefined ? (origin.kind === dest.kind ? user : undefined) : address(dest, 'recipient', q.recipient);
  if (recipient === undefined) throw new QuoteError(`recipient: is required when the destination chain ${dest.id} is of another kind than the origin`, 'INVALID_INPUT_PARAMETERS');
  const refundTo = q.refundTo === undefined ? user : address(origin, 'refundTo', q.refundTo);
  const feePayer = q.depositFeePayer === undefined ? undefined : address(origin, 'depositFeePayer', q.depositFeePayer);
  if (feePayer !== undefined && feePayer === user) throw new QuoteError('depositFeePayer: must differ from user', 'INVALID_INPUT_PARAMETERS');
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
  const originNative = registry.native(origin.id);
  const destNative = registry.native(dest.id);

  // The fill's cost is priced for the quoted amount; it does not depend on the amount for bridges.
  const [priceIn, priceOut, destNativePrice, originNativePrice, fillCost, depositCost] = await Promise.all([
    ctx.prices.usdPrice(cin),
    ctx.prices.usdPrice(cout),
    ctx.prices.usdPrice(destNative),
    ctx.prices.usdPrice(originNative),
    destAdapter.fillCost({ currency: cout.address, recipient, amount: q.amount }),
    originAdapter.depositCost(cin.address),
  ]);
  const rate = conversionRate(priceIn, cin.decimals, priceOut, cout.decimals);
  const nativeToOut = conversionRate(destNativePrice, destNative.decimals, priceOut, cout.decimals);
  const gasFeeOut = mulRatioCeil(fillCost.native, nativeToOut);
  const pricing: Pricing = {
    rateNum: rate.num.toString(),
    rateDen: rate.den.toString(),
    serviceBps: config.fees.relayerServiceBps,
    gasFeeOut: gasFeeOut.toString(),
    gasFeeUsd: usdValue(fillCost.native, destNative.decimals, destNativePrice),
  };
  if (q.appFees?.length) {
    pricing.appFees = q.appFees.map((f, i) => ({ recipient: address({ id: dest.id, kind: 'evm' } as ChainConfig, `appFees.${i}.recipient`, f.recipient), bps: f.fee }));
    const total = pricing.appFees.reduce((t, f) => t + f.bps, 0);
    if (total + pricing.serviceBps >= 10_000) throw new QuoteError('appFees: the fees add up to the whole amount', 'INVALID_INPUT_PARAMETERS');
  }
  if (q.topupGas) {
    if (cout.native) throw new QuoteError('topupGas: the destination currency is already native', 'INVALID_INPUT_PARAMETERS');
    const micro = q.topupGasAmount ?? DEFAULT_TOPUP_MICRO_USD;
    const native = mulRatioFloor(micro, conversionRate('1', 6, destNativePrice, destNative.decimals));
    pricing.topUpNative = native.toString();
    pricing.topUpOut = mulRatioCeil(native, nativeToOut).toString();
  }
  // Sponsorship (the interface's rules): rule 3, subsidizeRent alone sponsors nothing; rule 2, an
  // account the fill must create falls back to user-paid fees unless subsidizeRent; rule 7, app
  // fees are never sponsored; rule 1, the sponsor pays up to maxSubsidizationAmount.
  let fallback: string | undefined;
  if (q.subsidizeFees) {
    if (!ctx.sponsor) throw new QuoteError('subsidizeFees: needs an API key linked to a sponsor wallet (x-api-key)', 'SPONSOR_NOT_LINKED', 401);
    const components = q.sponsoredFeeComponents ?? [...SPONSORABLE];
    for (const c of components) {
      if (c === 'app') throw new QuoteError('sponsoredFeeComponents: app fees cannot be sponsored', 'INVALID_INPUT_PARAMETERS');
      if (!(SPONSORABLE as readonly string[]).includes(c)) throw new QuoteError(`sponsoredFeeComponents: unknown component ${c}`, 'INVALID_INPUT_PARAMETERS');
    }
    if (fillCost.rent > 0n && !q.subsidizeRent) {
      fallback = 'the fill creates an account and subsidizeRent is not set';
    } else {
      const capOut = q.maxSubsidizationAmount === undefined ? 2n ** 255n : mulRatioFloor(q.maxSubsidizationAmount, conversionRate('1', 6, priceOut, cout.decimals));
      pricing.sponsor = { components: components.filter((c): c is 'execution' | 'platform' => c === 'execution' || c === 'platform'), capOut: capOut.toString() };
    }
  }

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
  const available = await destAdapter.balance(cout.address);
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
  const inBytes = addressBytes(origin.kind, cin.address);
  const orderData: OrderData = {
    version: 'v1',
    solverChainId: String(origin.id),
    solver: ctx.solver,
    salt: BigInt(`0x${randomBytes(32).toString('hex')}`),
    inputs: [
      {
        payment: { chainId: String(origin.id), currency: inBytes, amount: amountIn, weight: 1n },
        refunds: [
          { chainId: String(origin.id), recipient: addressBytes(origin.kind, refundTo), currency: inBytes, minimumAmount: 0n, deadline, extraData: '0x' },
        ],
      },
    ],
    output: {
      chainId: String(dest.id),
      payments: [
        { recipient: addressBytes(dest.kind, recipient), currency: addressBytes(dest.kind, cout.address), minimumAmount: minAmountOut, expectedAmount: amountOut },
      ],
      deadline,
      calls: [],
      extraData: '0x',
    },
    fees: [
      {
        recipientChainId: String(origin.id),
        recipient: addressBytes(origin.kind, originAdapter.solver),
        currencyChainId: String(origin.id),
        currency: inBytes,
        amount: relayerGasIn + relayerServiceIn - sponsoredIn > 0n ? relayerGasIn + relayerServiceIn - sponsoredIn : 0n,
      },
    ],
  };
  const id = orderId(orderData);

  const [deposit, userBalance] = await Promise.all([
    originAdapter.depositSteps({ user, currency: cin.address, amount: amountIn, orderId: id, feePayer, protocolVersion: q.protocolVersion }),
    originAdapter.balanceOf(user, cin.address),
  ]);
  const checkPath = { status: '/intents/status', 'status-v3': '/intents/status/v3' };
  const steps = deposit.map((st) => ({
    id: st.id,
    action: st.action,
    description: st.description,
    kind: st.kind,
    requestId: id,
    ...(st.id === 'deposit' ? { depositAddress: '' } : {}),
    items: [{ status: 'incomplete', data: st.data, ...(st.check ? { check: { endpoint: `${checkPath[st.check]}?requestId=${id}`, method: 'GET' } } : {}) }],
  }));

  const currencyIn = amountObject(cin, amountIn, priceIn);
  const currencyOut = amountObject(cout, amountOut, priceOut, minAmountOut);
  const inUsd = usdMicro(amountIn, cin.decimals, priceIn);
  const impact = usdMicro(amountOut, cout.decimals, priceOut) - inUsd;
  const feesObject = {
    gas: amountObject(originNative, depositCost, originNativePrice),
    relayer: amountObject(cin, relayerGasIn + relayerServiceIn, priceIn),
    relayerGas: amountObject(cin, relayerGasIn, priceIn),
    relayerService: amountObject(cin, relayerServiceIn, priceIn),
    app: amountObject(cin, appIn, priceIn),
    subsidized: amountObject(cin, sponsoredIn, priceIn),
  };
  const router = 'relay-node';
  const slip = { usd: '0', value: '0', percent: '0' };
  const details = {
    operation: 'bridge',
    sender: apiAddress(origin.kind, user),
    recipient: apiAddress(dest.kind, recipient),
    currencyIn,
    currencyOut,
    refundCurrency: currencyIn,
    totalImpact: { usd: signedUsd(impact), percent: percent(impact, inUsd) },
    swapImpact: { usd: '0', percent: '0' },
    expandedPriceImpact: {
      swap: { usd: '0' },
      execution: { usd: `-${feesObject.relayerGas.amountUsd}` },
      relay: { usd: `-${feesObject.relayerService.amountUsd}` },
      app: { usd: appIn === 0n ? '0' : `-${feesObject.app.amountUsd}` },
    },
    // Output per unit of input, in human units.
    rate: formatUnits((rate.num * 10n ** BigInt(18 + cin.decimals)) / (rate.den * 10n ** BigInt(cout.decimals)), 18),
    slippageTolerance: { origin: slip, destination: slip },
    // Seconds: the deposit's confirmation plus the fill's own block.
    timeEstimate: originAdapter.confirmSeconds + 1,
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
        paymentDetails: { chainId: String(origin.id), depository: originAdapter.depositAddress, currency: apiAddress(cin.kind, cin.address), amount: amountIn.toString() },
      },
    };
  }

  const request: NewRequest = {
    id,
    parent_id: null,
    kind: 'order',
    request_type: 'Bridge',
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
    money: JSON.stringify({
      sponsor: pricing.sponsor && ctx.sponsor ? { wallet: ctx.sponsor.wallet, apiKeyId: ctx.sponsor.apiKeyId } : null,
      sponsorFallback: fallback ?? null,
      feeSponsorship: q.subsidizeFees ? feeSponsorshipQuoted(q, pricing, fees, cout, priceOut) : null,
      appFees: pricing.appFees ?? [],
      topUpNative: pricing.topUpNative ?? null,
    }),
    features: JSON.stringify([...(pricing.appFees ? ['app_fees'] : []), ...(pricing.topUpNative ? ['gas_top_up'] : [])]),
  };
  return { response, request };
}

// bigints as decimal strings, as the interface writes amounts.
export function jsonSafe<T>(v: T): unknown {
  return JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x)));
}
