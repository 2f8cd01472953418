import { formatUnits } from 'viem';
import type { Currency } from '../config/registry.ts';
import type { Pricing } from '../ledger/types.ts';
import type { FeeBreakdown } from './fillAmount.ts';
import { usdValue } from '../lib/money.ts';
import { currencyObject } from './currency.ts';

/** data.feeSponsorship.quoted of the request record, in the interface's shape. */
export function feeSponsorshipQuoted(maxSubsidizationAmount: bigint | undefined, pricing: Pricing, f: FeeBreakdown, cout: Currency, price: string) {
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
  const comp = (on: boolean, total: bigint, sponsored: bigint) => ({
    selected: on,
    total: { ...usdAmt(total), amountFormatted: formatUnits(total, cout.decimals), minimumAmount: total.toString() },
    sponsored: usdAmt(sponsored),
    userPays: usdAmt(total - sponsored),
  });
  const appTotal = f.app.reduce((t, a) => t + a.amount, 0n);
  const all = execution + f.service;
  return {
    selectedComponents: selected,
    maxSubsidizationAmount: maxSubsidizationAmount?.toString() ?? null,
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
