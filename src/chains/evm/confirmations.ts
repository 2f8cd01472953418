import { getAddress, zeroAddress } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';
import { usdMicro } from '../../lib/money.ts';

type ByValueChain = Pick<EvmChainConfig, 'confirmations' | 'confirmationsByValue' | 'finalityDepth' | 'nativeCurrency' | 'currencies'>;

/**
 * Blocks a deposit of `amount` of `currency` waits on this chain before the node acts on it: the
 * chain's `confirmations`, or the highest `confirmationsByValue` row whose minUsd the deposit
 * reaches ("finalized" is the chain's finalityDepth). The value uses the currency's configured
 * usdPrice, or the feed's newest price where that is higher (depositWorth); a currency the
 * chain does not list takes the base count. (The indexer also sums deposits: see confirmationsForWorth.)
 */
export function confirmationsFor(chain: ByValueChain, currency: string, amount: bigint, seen?: SeenPrice): number {
  if (!chain.confirmationsByValue?.length) return chain.confirmations;
  const worth = depositWorth(chain, currency, amount, seen);
  return worth === undefined ? chain.confirmations : confirmationsForWorth(chain, worth);
}

/** The newest price the node's price source gave for a currency of this chain (its checksummed address), if any. */
export type SeenPrice = (address: string) => string | undefined;

/**
 * What a deposit is worth in micro-USD, at the higher of the currency's configured usdPrice and the newest price the
 * node's feed gave (`seen`): a configured price left behind a rising market would otherwise let a deposit through at
 * the blocks of a smaller one. Undefined for a currency the chain does not list.
 */
export function depositWorth(chain: ByValueChain, currency: string, amount: bigint, seen?: SeenPrice): bigint | undefined {
  const addr = getAddress(currency);
  const cur = addr === zeroAddress ? chain.nativeCurrency : chain.currencies.find((c) => getAddress(c.address) === addr);
  if (!cur) return undefined;
  const configured = usdMicro(amount, cur.decimals, cur.usdPrice);
  const fed = seen?.(addr);
  const live = fed === undefined ? 0n : usdMicro(amount, cur.decimals, fed);
  return live > configured ? live : configured;
}

/**
 * Blocks that deposits worth `worth` micro-USD in all wait: the chain's `confirmations`, or the highest
 * `confirmationsByValue` row whose minUsd the worth reaches. The indexer asks it of the sum of what a reorg of
 * each depth would take back, so that deposits split below a row do not pass at fewer blocks than their sum asks.
 */
export function confirmationsForWorth(chain: ByValueChain, worth: bigint): number {
  let blocks = chain.confirmations;
  for (const row of chain.confirmationsByValue ?? []) {
    if (worth < usdMicro(1_000_000n, 6, row.minUsd)) continue;
    const n = row.confirmations === 'finalized' ? chain.finalityDepth : row.confirmations;
    if (n > blocks) blocks = n;
  }
  return blocks;
}

/** The most blocks any deposit waits on this chain (its highest row, or its base count). */
export function mostConfirmations(chain: ByValueChain): number {
  let blocks = chain.confirmations;
  for (const row of chain.confirmationsByValue ?? []) {
    const n = row.confirmations === 'finalized' ? chain.finalityDepth : row.confirmations;
    if (n > blocks) blocks = n;
  }
  return blocks;
}
