import { formatUnits } from 'viem';
import { apiAddress } from '../chains/address.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';
import type { DepositRow, PayoutRow, Pricing, TransactionRow } from '../ledger/types.ts';
import { currencyObject } from '../quote/currency.ts';
import { conversionRate, formatUsd, mulRatioFloor, parseDecimal, usdMicro } from '../lib/money.ts';
import type { FoundRequest } from '../ledger/requestSearch.ts';

// The interface's Request record (v3), read from the ledger as the node recorded it. Where the
// node has no value, the field is null or an empty array.

interface AmountJson {
  currency: ReturnType<typeof currencyObject>;
  amount: string;
  amountFormatted: string;
  amountUsd: string;
  minimumAmount: string;
}

interface QuoteJson {
  fees?: Record<'gas' | 'relayer' | 'relayerGas' | 'relayerService' | 'app' | 'subsidized', AmountJson>;
  details?: {
    currencyIn: AmountJson;
    currencyOut: AmountJson;
    expandedPriceImpact: { swap: { usd: string } };
    slippageTolerance: { destination: { value: string } };
    timeEstimate: number;
    rate: string;
    route: { origin: unknown; destination: unknown };
  };
}

interface MoneyJson {
  sponsor: { wallet: string; apiKeyId: string } | null;
  feeSponsorship: Record<string, unknown> | null;
  appFees: { recipient: string; bps: number }[];
}

export interface RecordContext {
  ledger: Ledger;
  registry: Registry;
  solver: string;
  /** The caller's key id: authenticated fields are shown for the requests it created. */
  authenticatedFor?: string;
}

const iso = (ms: number) => new Date(ms).toISOString();
const orNull = (reason: string | null) => (reason === null || reason === 'N/A' ? null : reason);

// USD of `amount` at the price the quote recorded for `ref` (the request's own reference price).
function scaledUsd(ref: AmountJson | undefined, amount: bigint): string | null {
  if (!ref || ref.amount === '0') return null;
  const usd = parseDecimal(ref.amountUsd);
  return formatUsd((usd.num * 10n ** 6n * amount) / (usd.den * BigInt(ref.amount)));
}

// Smallest units of `c` worth `micro` USD micro-units, at the price the quote recorded for `ref`
// (or the configured price without one).
function usdToUnits(ref: AmountJson | undefined, c: Currency | undefined, micro: bigint): bigint {
  if (ref && ref.amount !== '0') {
    const usd = parseDecimal(ref.amountUsd);
    if (usd.num > 0n) return (micro * BigInt(ref.amount) * usd.den) / (usd.num * 10n ** 6n);
  }
  if (!c) return micro;
  return mulRatioFloor(micro, conversionRate('1', 6, c.usdPrice, c.decimals));
}

function amountJson(c: Currency | undefined, chainId: number, address: string, amount: bigint, usd: string | null) {
  return {
    currency: c ? currencyObject(c) : { chainId, address, symbol: null, name: null, decimals: null, metadata: null },
    amount: amount.toString(),
    amountFormatted: c ? formatUnits(amount, c.decimals) : null,
    amountUsd: usd,
    minimumAmount: amount.toString(),
  };
}

function txStatus(t: TransactionRow): string {
  if (t.state === 'included') return 'success';
  if (t.state === 'reverted') return 'failure';
  return 'pending';
}

export function requestRecord(ctx: RecordContext, r: FoundRequest) {
  const { ledger, registry } = ctx;
  const quote: QuoteJson = r.quote ? JSON.parse(r.quote) : {};
  const money: MoneyJson | null = r.money ? JSON.parse(r.money) : null;
  const pricing: Pricing | null = r.pricing ? JSON.parse(r.pricing) : null;
  const cin = registry.currency(r.origin_chain_id, r.origin_currency);
  const cout = registry.currency(r.destination_chain_id, r.destination_currency);
  const originKind = registry.chain(r.origin_chain_id)?.kind ?? 'evm';
  const destKind = registry.chain(r.destination_chain_id)?.kind ?? 'evm';
  const features = JSON.parse(r.features) as string[];

  const deposits: DepositRow[] = ledger.deposits.forRequest(r.id);
  if (!deposits.length && r.kind === 'order') deposits.push(...ledger.deposits.byOrderRef(r.id));
  const payouts = ledger.payouts.forRequest(r.id).filter((p) => p.kind !== 'claim');
  // A cancel of a fee-capped transaction is not a transaction of the request's payout (it pays nothing).
  const txs = new Map<string, TransactionRow[]>(payouts.map((p) => [p.id, ledger.payouts.txsOf(p.id).filter((t) => !t.cancel)]));
  const fill = payouts.find((p) => p.kind === 'fill');
  const refund = payouts.find((p) => p.kind === 'refund');
  const landed = (p: PayoutRow | undefined) => (p ? (txs.get(p.id) ?? []).find((t) => t.state === 'included' || t.state === 'reverted') : undefined);
  const failedTx = payouts.flatMap((p) => txs.get(p.id) ?? []).find((t) => t.state === 'reverted');
  const depository = registry.chain(r.origin_chain_id);

  const inTxs = deposits.map((d) => ({
    txHash: d.tx_hash,
    // The depositor paid it: read from the deposit's receipt once, shortly after the deposit is
    // recorded. Until then it is left out (the published type has an optional string, not null).
    ...(d.tx_fee !== null ? { fee: d.tx_fee } : {}),
    block: d.block_number,
    type: 'onchain',
    chainId: d.chain_id,
    timestamp: Math.floor(d.seen_at / 1000),
    status: d.state === 'reorged' ? 'reorged' : d.state === 'unconfirmed' ? 'pending' : 'success',
    data: { from: d.depositor, amount: d.amount, currency: apiAddress(originKind, d.currency) },
    stateChanges: [],
  }));
  const outTxs = payouts.flatMap((p) =>
    (txs.get(p.id) ?? [])
      .filter((t) => t.state !== 'replaced' && t.state !== 'dropped')
      .map((t) => ({
        txHash: t.hash,
        // Known once the transaction is included.
        ...(t.fee !== null ? { fee: t.fee } : {}),
        block: t.block_number,
        type: 'onchain',
        chainId: t.chain_id,
        timestamp: Math.floor((t.broadcast_at ?? t.created_at) / 1000),
        status: txStatus(t),
        data: {
          kind: p.kind,
          from: t.sender,
          to: p.recipient,
          amount: p.amount,
          currency: apiAddress(registry.chain(p.chain_id)?.kind ?? 'evm', p.currency),
          gasUsed: t.gas_used,
        },
        stateChanges: [],
      })),
  );

  // Fees: the quote's components in the input currency; the actual execution is the fill's gas.
  const f = quote.fees;
  const component = (a: AmountJson | undefined, usd?: string) => (a ? { usd: usd ?? a.amountUsd, amount: a.amount, amountFormatted: a.amountFormatted } : null);
  const swapUsd = quote.details?.expandedPriceImpact.swap.usd.replace(/^-/, '') ?? '0';
  const quotedFees = f
    ? {
        // The node's routes carry no separate swap fee: the swap's cost is in the rate.
        swap: { usd: swapUsd, amount: '0', amountFormatted: '0' },
        execution: component(f.relayerGas),
        platform: component(f.relayerService),
        app: component(f.app),
        sponsored: component(f.subsidized),
      }
    : null;
  const fillTx = landed(fill);
  const destNative = registry.chain(r.destination_chain_id) ? registry.native(r.destination_chain_id) : undefined;
  // The fill's gas was paid in the destination's native currency; the record states every fee in
  // the fee currency (the input currency), converted at the configured prices.
  const actualFees = (() => {
    if (!quotedFees || !fillTx?.fee || !destNative || !cin) return null;
    const gas = BigInt(fillTx.fee);
    const inFeeCurrency = mulRatioFloor(gas, conversionRate(destNative.usdPrice, destNative.decimals, cin.usdPrice, cin.decimals));
    return {
      ...quotedFees,
      execution: {
        usd: formatUsd(usdMicro(gas, destNative.decimals, destNative.usdPrice)),
        amount: inFeeCurrency.toString(),
        amountFormatted: formatUnits(inFeeCurrency, cin.decimals),
      },
    };
  })();

  // App fees: quoted shares of the quote's app fee, accrued in the output currency at the fill.
  const appTotal = f ? BigInt(f.app.amount) : 0n;
  const bpsSum = (money?.appFees ?? []).reduce((t, a) => t + a.bps, 0);
  const appQuoted = (money?.appFees ?? []).map((a) => {
    const amount = bpsSum ? (appTotal * BigInt(a.bps)) / BigInt(bpsSum) : 0n;
    return { recipient: a.recipient, bps: String(a.bps), amount: amount.toString(), amountFormatted: cin ? formatUnits(amount, cin.decimals) : null };
  });
  const appActual = ledger.appFees.accruedFor(r.id).map((e) => {
    const bps = money?.appFees.find((a) => a.recipient === e.recipient)?.bps ?? null;
    const amount = BigInt(e.amount);
    return {
      recipient: e.recipient,
      bps: bps === null ? null : String(bps),
      amount: e.amount,
      amountFormatted: cout ? formatUnits(amount, cout.decimals) : null,
      amountUsd: scaledUsd(quote.details?.currencyOut, amount),
    };
  });

  // Sponsorship: what the quote fixed, and what the sponsor's balance actually paid.
  const sponsorEntries = ledger.balances.ofRequest(r.id).filter((e) => e.kind === 'sponsorship' || e.kind === 'sponsorship_reversal');
  // Sponsorship entries are debits (negative), reversals give them back.
  const sponsorPaid = -sponsorEntries.reduce((t, e) => t + BigInt(e.amount), 0n);
  const fs = money?.feeSponsorship ?? null;
  const feeSponsorship = fs
    ? (() => {
        const { currency, maxSubsidizationAmount, ...stored } = fs as Record<string, unknown> & {
          currency: { chainId: number; address: string; decimals: number };
        };
        // Rent (SVM account rent) is never sponsored here; the published type lists it always.
        const zero = { amount: '0', amountUsd: '0' };
        const components = stored.components as Record<string, unknown> | undefined;
        const quoted = components
          ? {
              ...stored,
              components: {
                rent: { selected: false, total: { ...zero, amountFormatted: '0', minimumAmount: '0' }, sponsored: zero, userPays: zero },
                ...components,
              },
            }
          : stored;
        return {
          quoted: { ...quoted, maxSubsidizationAmount },
          actual: sponsorEntries.length
            ? {
                ...quoted,
                // In the sponsorship currency's smallest unit, like every other amount: the app
                // balance paid USD micro-units, converted back at the price the quote recorded.
                sponsorPayment: {
                  amount: usdToUnits(quote.details?.currencyOut, cout, sponsorPaid).toString(),
                  address: currency.address,
                  chainId: currency.chainId,
                },
              }
            : null,
          currency,
        };
      })()
    : null;

  // Route: quoted from the quote; actual from what was deposited and paid.
  const quotedRoute = quote.details?.route ?? null;
  const deposited = deposits.find((d) => d.state === 'handled');
  const paidOut = fill && fill.state === 'success' ? BigInt(fill.amount) : undefined;
  const actualRoute =
    deposited && paidOut !== undefined && quote.details
      ? {
          rate:
            BigInt(deposited.amount) > 0n && cin && cout
              ? formatUnits((paidOut * 10n ** BigInt(18 + cin.decimals)) / (BigInt(deposited.amount) * 10n ** BigInt(cout.decimals)), 18)
              : null,
          origin: {
            inputCurrency: amountJson(
              cin,
              r.origin_chain_id,
              apiAddress(originKind, r.origin_currency),
              BigInt(deposited.amount),
              scaledUsd(quote.details.currencyIn, BigInt(deposited.amount)),
            ),
            outputCurrency: amountJson(
              cin,
              r.origin_chain_id,
              apiAddress(originKind, r.origin_currency),
              BigInt(deposited.amount),
              scaledUsd(quote.details.currencyIn, BigInt(deposited.amount)),
            ),
            router: 'relay-node',
          },
          destination: {
            inputCurrency: quote.details.currencyOut,
            outputCurrency: amountJson(
              cout,
              r.destination_chain_id,
              apiAddress(destKind, r.destination_currency),
              paidOut,
              scaledUsd(quote.details.currencyOut, paidOut),
            ),
            router: 'relay-node',
          },
        }
      : quotedRoute && { rate: quote.details?.rate ?? null, ...quotedRoute };

  const refundTx = landed(refund);
  const data: Record<string, unknown> = {
    slippageTolerance: quote.details?.slippageTolerance.destination.value ?? null,
    failReason: orNull(r.fail_reason),
    refundFailReason: orNull(r.refund_fail_reason),
    failedTxHash: failedTx?.hash ?? null,
    failedTxBlockNumber: failedTx?.block_number ?? null,
    failedCallData: r.failed_call_data,
    usesExternalLiquidity: false,
    timeEstimate: quote.details?.timeEstimate ?? null,
    triggeredByFastFill: features.includes('fast_fill') ? true : null,
    inTxs,
    outTxs,
    appFees: { quoted: appQuoted, actual: appActual, currency: cout ? currencyObject(cout) : null },
    fees: { quoted: quotedFees, actual: actualFees, currency: cin ? currencyObject(cin) : null },
    feeSponsorship,
    route: { includedSwapSources: [], includedOriginSwapSources: [], includedDestinationSwapSources: [], quoted: quotedRoute, actual: actualRoute },
    quoteOraclePrice: null,
    refundCurrencyData: refund
      ? amountJson(
          registry.currency(refund.chain_id, refund.currency),
          refund.chain_id,
          refund.currency,
          BigInt(refund.amount),
          scaledUsd(quote.details?.currencyIn, BigInt(refund.amount)),
        )
      : null,
    externalMetadata: { moonpayId: null },
  };
  if (ctx.authenticatedFor && r.api_key_id === ctx.authenticatedFor) {
    data.referrer = r.referrer;
    data.platformFee = pricing ? { bps: pricing.serviceBps, usd: f?.relayerService.amountUsd ?? null } : null;
    data.apiKeyName = ledger.apiKeys.get(r.api_key_id)?.name ?? null;
  }

  return {
    id: r.id,
    status: r.status,
    user: r.user,
    sender: r.sender ?? deposits[0]?.depositor ?? r.user,
    recipient: r.recipient,
    refundTo: r.refund_to,
    depositAddress: r.deposit_address
      ? {
          address: r.deposit_address,
          type: (money as { depositAddressType?: string } | null)?.depositAddressType ?? 'strict',
          depositor: r.refund_to ?? r.user,
          depositTxHash: deposits[0]?.tx_hash ?? null,
          recoveryAddress: null,
        }
      : null,
    requestType: r.request_type,
    supersededByRequestId: null,
    data,
    protocol: {
      orderId: r.kind === 'order' ? r.id : null,
      hubType: 'onchain',
      isWithdrawable: false,
      solver: { address: ctx.solver, protocolChainId: String(r.origin_chain_id), chainId: r.origin_chain_id },
      deposit: {
        origin: deposited
          ? {
              amount: deposited.amount,
              chainId: deposited.chain_id,
              currency: apiAddress(originKind, deposited.currency),
              depositor: deposited.depositor,
              depository: depository && 'depository' in depository ? depository.depository : null,
              onchainId: deposited.order_ref,
              transactionId: deposited.tx_hash,
            }
          : null,
      },
      settlement: {
        destination: {
          fills: fillTx ? [{ chainId: fill!.chain_id, transactionId: fillTx.hash }] : [],
          refunds: refundTx ? [{ chainId: refund!.chain_id, transactionId: refundTx.hash, amount: refund!.amount, recipient: refund!.recipient }] : [],
        },
      },
    },
    features,
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  };
}
