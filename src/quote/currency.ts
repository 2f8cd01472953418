import { formatUnits } from 'viem';
import { apiAddress } from '../kinds/address.ts';
import type { Currency } from '../config/registry.ts';
import { usdValue } from '../lib/money.ts';

/** The interface's Currency and Amount objects. */
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

export function amountObject(c: Currency, amount: bigint, price: string, minimum = amount) {
  return {
    currency: currencyObject(c),
    amount: amount.toString(),
    amountFormatted: formatUnits(amount, c.decimals),
    amountUsd: usdValue(amount, c.decimals, price),
    minimumAmount: minimum.toString(),
  };
}
