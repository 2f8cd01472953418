import type { FillCost } from '../chains/adapter.ts';
import type { Pricing } from '../ledger/types.ts';
import { QuoteError } from '../lib/quoteError.ts';
import { conversionRate, formatUsd, mulRatioCeil, mulRatioFloor, usdValue, type Ratio } from '../lib/money.ts';
import { evmCodec } from '../kinds/evm.ts';
import type { Route } from './route.ts';
import { nativeCapPassed } from './nativeCap.ts';
import { DEFAULT_TOPUP_MICRO_USD, SPONSORABLE, type QuoteContext, type QuoteInput } from './types.ts';

export interface PricedRoute {
  pricing: Pricing;
  prices: { in: string; out: string; destNative: string; originNative: string };
  fillCost: FillCost;
  /** The user's own deposit transaction, in the origin's native units (quoted, not charged). */
  depositCost: bigint;
  rate: Ratio;
  /** Why sponsorship was asked for and not given (rule 2), if it was. */
  fallback?: string;
  /**
   * What the node pays on the origin chain before any fill, in its native units: a deposit address's sweep, or the
   * signed deposit it submits (usePermit). Undefined when it pays nothing there.
   */
  originPaid?: bigint;
  /**
   * usePermit: the origin's price of gas (per gas, its native smallest unit) the signed deposit's gas was charged at,
   * where the chain has a gas market: the most the node may pay per gas when it submits that deposit.
   */
  permitFeePerGas?: bigint;
}

/** What the destination calls spend, when the order has any. */
export function callsValue(route: Route): bigint | undefined {
  return route.calls?.reduce((t, c) => t + c.value, 0n);
}

/** The price ratio less the node's spread. */
export function swapRate(r: Ratio, spreadBps: number): Ratio {
  return { num: r.num * BigInt(10_000 - spreadBps), den: r.den * 10_000n };
}

/** What a swap pays at these USD prices (output units per input unit), less the node's spread. */
export function marketRate(priceIn: string, cin: { decimals: number }, priceOut: string, cout: { decimals: number }, spreadBps: number): Ratio {
  return swapRate(conversionRate(priceIn, cin.decimals, priceOut, cout.decimals), spreadBps);
}

/**
 * What moving one asset pays (a bridge, a wrap, an unwrap, a send, a claim of fees in the same currency elsewhere): the
 * same amount in the output's decimals, or less when the input reads cheaper than the output. Never the ratio of the
 * two USD prices alone: they are two readings of one asset's price (a feed on one chain and the configured price on the
 * other, or two feeds a little apart), and at their ratio whoever moved it toward the lower reading was paid more of
 * the asset than it deposited, with no spread in the way. Never more than the price ratio either: an input that really
 * is worth less (a depeg) buys no more than its worth.
 */
export function sameAssetRate(cin: { decimals: number }, priceIn: string, cout: { decimals: number }, priceOut: string): Ratio {
  const same = conversionRate('1', cin.decimals, '1', cout.decimals);
  const priced = conversionRate(priceIn, cin.decimals, priceOut, cout.decimals);
  return priced.num * same.den < same.num * priced.den ? priced : same;
}

/**
 * Everything the quote fixes about price: the rate, the fill's cost, fees, app fees, top-up and
 * sponsorship, as a Pricing the solver applies to whatever amount the deposit brings.
 */
export async function priceRoute(q: QuoteInput, route: Route, ctx: QuoteContext): Promise<PricedRoute> {
  const { registry, config } = ctx;
  const { origin, dest, recipient, cin, cout } = route;
  const originCosts = ctx.chains.costs(origin.id)!;
  const destCosts = ctx.chains.costs(dest.id)!;
  const originNative = registry.native(origin.id);
  const destNative = registry.native(dest.id);
  // The fill's cost is priced for the quoted amount; it does not depend on the amount for bridges.
  const [priceIn, priceOut, destNativePrice, originNativePrice, fillCost, depositCost] = await Promise.all([
    ctx.prices.usdPrice(cin),
    ctx.prices.usdPrice(cout),
    ctx.prices.usdPrice(destNative),
    ctx.prices.usdPrice(originNative),
    destCosts.fillCost({ currency: cout.address, recipient, amount: callsValue(route) ?? q.amount, calls: route.calls, topUp: !!q.topupGas }),
    originCosts.depositCost(cin.address),
  ]);
  const spreadBps = route.swap ? config.fees.swapSpreadBps : 0;
  const rate = route.swap ? marketRate(priceIn, cin, priceOut, cout, spreadBps) : sameAssetRate(cin, priceIn, cout, priceOut);
  const nativeToOut = conversionRate(destNativePrice, destNative.decimals, priceOut, cout.decimals);
  let gasFeeOut = mulRatioCeil(fillCost.native, nativeToOut);
  let userDepositCost = depositCost;
  let originPaid: bigint | undefined;
  let permitFeePerGas: bigint | undefined;
  if (q.usePermit) {
    // The node submits the signed deposit and pays its gas: it is the relayer's, and the user's is none.
    if (!originCosts.relayedDepositCost) throw new QuoteError(`usePermit: chain ${origin.id} has no signed deposits`, 'INVALID_INPUT_PARAMETERS');
    // The price of gas the deposit's cost is computed at (both read the chain's price at the node's head), recorded as
    // the most the node pays per gas when it submits the deposit: past it, the deposit's gas is more than was charged.
    permitFeePerGas = await originCosts.feePerGas?.();
    const relayed = await originCosts.relayedDepositCost(cin.address);
    gasFeeOut += mulRatioCeil(relayed, conversionRate(originNativePrice, originNative.decimals, priceOut, cout.decimals));
    userDepositCost = 0n;
    originPaid = relayed;
  }
  let openGas: Pricing['openGas'];
  if (q.useDepositAddress) {
    // The solver deploys the address and sweeps what reaches it into the depository: the fill pays that gas too.
    if (!originCosts.sweepCost) throw new QuoteError(`useDepositAddress: chain ${origin.id} offers no deposit addresses`, 'INVALID_INPUT_PARAMETERS');
    const sweep = await originCosts.sweepCost();
    gasFeeOut += mulRatioCeil(sweep, conversionRate(originNativePrice, originNative.decimals, priceOut, cout.decimals));
    originPaid = sweep;
    if (q.depositAddressType === 'open') {
      openGas = { fillNative: fillCost.native.toString(), sweepNative: sweep.toString() };
      if (fillCost.feePerGas !== undefined) openGas.feePerGas = fillCost.feePerGas.toString();
      if (fillCost.l1Native) {
        openGas.l1Native = fillCost.l1Native.toString();
        openGas.l1Reference = (fillCost.l1Reference ?? 0n).toString();
      }
    }
  }
  const pricing: Pricing = {
    rateNum: rate.num.toString(),
    rateDen: rate.den.toString(),
    serviceBps: config.fees.relayerServiceBps,
    gasFeeOut: gasFeeOut.toString(),
    gasFeeUsd: usdValue(fillCost.native, destNative.decimals, destNativePrice),
    // Recorded so the payout knows what it may create: an account made missing after the quote
    // (closed by its owner) would otherwise be created at the solver's expense.
    rent: fillCost.rent.toString(),
    ...(route.swap ? { swap: { spreadBps } } : {}),
    ...(openGas ? { openGas } : {}),
  };
  if (q.appFees?.length) {
    pricing.appFees = q.appFees.map((f, i) => {
      // App fees are claimed by an EVM wallet, whatever the route's chains.
      const recipient = evmCodec.canonical(f.recipient);
      if (!recipient) throw new QuoteError(`appFees.${i}.recipient: must be a 0x-prefixed 20-byte hex address`, 'INVALID_INPUT_PARAMETERS');
      return { recipient, bps: f.fee };
    });
    const total = pricing.appFees.reduce((t, f) => t + f.bps, 0);
    if (total + pricing.serviceBps >= 10_000) throw new QuoteError('appFees: the fees add up to the whole amount', 'INVALID_INPUT_PARAMETERS');
  }
  if (q.topupGas) {
    if (!route.destProfile.nativeIsGas) throw new QuoteError(`topupGas: the exchange (chain ${dest.id}) has no gas`, 'INVALID_INPUT_PARAMETERS');
    if (cout.native) throw new QuoteError('topupGas: the destination currency is already native', 'INVALID_INPUT_PARAMETERS');
    const micro = q.topupGasAmount ?? DEFAULT_TOPUP_MICRO_USD;
    const native = mulRatioFloor(micro, conversionRate('1', 6, destNativePrice, destNative.decimals));
    // Capped per chain: a top-up is gas for the recipient, not a way to take the sponsor's
    // balance (or the solver's inventory) as native currency.
    const passed = nativeCapPassed(dest, native, micro);
    if (passed?.key === 'maxTopupGasUsd') {
      throw new QuoteError(
        `topupGasAmount: ${formatUsd(micro)} USD is above the top-up cap of ${passed.cap} USD on chain ${dest.id} (maxTopupGasUsd)`,
        'INVALID_INPUT_PARAMETERS',
      );
    }
    if (passed?.key === 'maxTopupGasAmount') {
      throw new QuoteError(
        `topupGasAmount: ${native} of ${destNative.symbol}'s smallest unit is above the top-up cap of ${passed.cap} on chain ${dest.id} (maxTopupGasAmount)`,
        'INVALID_INPUT_PARAMETERS',
      );
    }
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
      const capOut =
        q.maxSubsidizationAmount === undefined ? 2n ** 255n : mulRatioFloor(q.maxSubsidizationAmount, conversionRate('1', 6, priceOut, cout.decimals));
      pricing.sponsor = {
        components: components.filter((c): c is 'execution' | 'platform' => c === 'execution' || c === 'platform'),
        capOut: capOut.toString(),
      };
    }
  }

  return {
    pricing,
    prices: { in: priceIn, out: priceOut, destNative: destNativePrice, originNative: originNativePrice },
    fillCost,
    depositCost: userDepositCost,
    rate,
    fallback,
    originPaid,
    permitFeePerGas,
  };
}
