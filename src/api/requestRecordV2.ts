import type { requestRecord } from './requestRecord.ts';

type V3 = ReturnType<typeof requestRecord>;

// v2 statuses: no depositing or submitted; both were still "pending" there.
const V2_STATUS: Record<string, string> = {
  waiting: 'waiting',
  depositing: 'pending',
  pending: 'pending',
  submitted: 'pending',
  success: 'success',
  failure: 'failure',
  refund: 'refund',
};

const withHash = (txs: unknown) => (txs as { txHash: string }[]).map(({ txHash, ...rest }) => ({ hash: txHash, ...rest }));

/** The v2 shape, derived from the v3 record by undoing the interface's "v2 to v3 changes". */
export function toV2Record(r: V3) {
  // biome-ignore lint/suspicious/noExplicitAny: the v3 record's data is the published open shape; each field read is checked below.
  const d = r.data as Record<string, any>;
  const quotedFees = d.fees?.quoted;
  const currency = d.fees?.currency ?? null;
  const raw = (c: { amount: string | null } | null | undefined) => c?.amount ?? '0';
  const usd = (c: { usd: string } | null | undefined) => c?.usd ?? '0';
  const sponsored = d.feeSponsorship?.actual ?? d.feeSponsorship?.quoted ?? null;
  const route = d.route?.actual ?? d.route?.quoted ?? null;
  type Fees = Record<'swap' | 'execution' | 'platform' | 'app' | 'sponsored', { usd: string } | null>;
  const impact = (f: Fees) => ({
    swap: { usd: usd(f.swap) },
    execution: { usd: usd(f.execution) },
    relay: { usd: usd(f.platform) },
    app: { usd: usd(f.app) },
    sponsored: { usd: usd(f.sponsored) },
  });
  return {
    id: r.id,
    status: V2_STATUS[r.status] ?? r.status,
    user: r.user,
    recipient: r.recipient,
    referrer: (d.referrer as string | undefined) ?? undefined,
    depositAddress: r.depositAddress?.address ?? null,
    data: {
      failReason: d.failReason ?? 'N/A',
      refundFailReason: d.refundFailReason ?? 'N/A',
      fees: { gas: raw(quotedFees?.execution), fixed: '0', price: raw(quotedFees?.platform), gateway: '0' },
      feesUsd: { gas: usd(quotedFees?.execution), fixed: '0', price: usd(quotedFees?.platform), gateway: '0' },
      currency: currency?.symbol ?? null,
      currencyObject: currency,
      feeCurrency: currency?.symbol ?? null,
      feeCurrencyObject: currency,
      appFeeCurrencyObject: d.appFees?.currency ?? null,
      appFees: d.appFees?.quoted ?? [],
      paidAppFees: d.appFees?.actual ?? [],
      subsidizedRequest: Boolean(sponsored && sponsored.sponsoredTotal?.amountUsd && sponsored.sponsoredTotal.amountUsd !== '0'),
      ...(sponsored?.sponsoredTotal ? { subsidizedFee: sponsored.sponsoredTotal } : {}),
      // v2 kept the estimate and the fill-time figures apart ({quoted, actual}); v3 calls it data.fees.
      expandedPriceImpact: quotedFees ? { quoted: impact(quotedFees), actual: d.fees?.actual ? impact(d.fees.actual) : null } : null,
      metadata: {
        sender: r.sender,
        recipient: r.recipient,
        currencyIn: route?.origin?.inputCurrency ?? null,
        currencyOut: route?.destination?.outputCurrency ?? null,
        rate: route?.rate ?? null,
      },
      price: route?.rate ?? null,
      inTxs: withHash(d.inTxs),
      outTxs: withHash(d.outTxs),
      timeEstimate: d.timeEstimate,
      slippageTolerance: d.slippageTolerance,
      usesExternalLiquidity: d.usesExternalLiquidity,
      // v2 had the reverted call as an object; without one the field is absent.
      ...(d.failedCallData ? { failedCallData: { data: d.failedCallData } } : {}),
      supersededByRequestId: r.supersededByRequestId,
      moonpayId: d.externalMetadata?.moonpayId ?? null,
    },
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}
