import { getAddress, zeroAddress } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';
import { usdMicro } from '../../lib/money.ts';

/**
 * Blocks a deposit of `amount` of `currency` waits on this chain before the node acts on it: the
 * chain's `confirmations`, or the highest `confirmationsByValue` row whose minUsd the deposit
 * reaches ("finalized" is the chain's finalityDepth). The value uses the currency's configured
 * usdPrice, so that the count is known at quote time and cannot move with a feed; a currency the
 * chain does not list takes the base count.
 */
export function confirmationsFor(
  chain: Pick<EvmChainConfig, 'confirmations' | 'confirmationsByValue' | 'finalityDepth' | 'nativeCurrency' | 'currencies'>,
  currency: string,
  amount: bigint,
): number {
  const table = chain.confirmationsByValue ?? [];
  if (!table.length) return chain.confirmations;
  const addr = getAddress(currency);
  const cur = addr === zeroAddress ? chain.nativeCurrency : chain.currencies.find((c) => getAddress(c.address) === addr);
  if (!cur) return chain.confirmations;
  const value = usdMicro(amount, cur.decimals, cur.usdPrice);
  let blocks = chain.confirmations;
  for (const row of table) {
    if (value < usdMicro(1_000_000n, 6, row.minUsd)) continue;
    const n = row.confirmations === 'finalized' ? chain.finalityDepth : row.confirmations;
    if (n > blocks) blocks = n;
  }
  return blocks;
}
