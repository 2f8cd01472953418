// EIP-1559 fees for one chain: base fee from the latest head (pushed by the head tracker, or fetched when
// stale), priority fee from eth_maxPriorityFeePerGas cached per block. The hot path pays no RPC round trip
// while the cache is fresh.

import { hexToBigInt, type Hex, type PublicClient } from 'viem';
import { RelayNodeError } from '../../lib/errors.ts';
import { SharedReads } from '../../lib/sharedReads.ts';
import { TX_GAS_CAP } from './gas.ts';

export interface Eip1559Fees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** A head block as fees need it: its number, base fee and gas limit (absent: the last one seen). */
export interface FeeHead {
  number: bigint;
  baseFeePerGas: bigint;
  gasLimit?: bigint;
}

interface Head extends FeeHead {
  seenAt: number;
}

/** Replacement rule: each fee at least 12.5% above the replaced transaction's (rounded up, plus one wei). */
export function bumped(fee: bigint): bigint {
  return (fee * 1125n + 999n) / 1000n + 1n;
}

/** Fees for a same-nonce replacement: both bumped by 12.5% and at least what the market asks now. */
export function replacementFees(old: Eip1559Fees, market: Eip1559Fees): Eip1559Fees {
  const maxPriorityFeePerGas = max(bumped(old.maxPriorityFeePerGas), market.maxPriorityFeePerGas);
  const maxFeePerGas = max(bumped(old.maxFeePerGas), market.maxFeePerGas, maxPriorityFeePerGas);
  return { maxFeePerGas, maxPriorityFeePerGas };
}

/** A payout the chain's fee cap keeps from being sent now (it waits; nothing is signed). */
export class FeeCapError extends RelayNodeError {
  override name = 'FeeCapError';
}

/**
 * Fees within a cap on max fee per gas: the market's when under it; else the cap itself while it
 * still clears the base fee (the transaction is included, with a smaller tip); undefined when the
 * base fee alone is at or above the cap (the payout waits).
 */
export function withinCap(fees: Eip1559Fees, cap: bigint | undefined): Eip1559Fees | undefined {
  if (cap === undefined || fees.maxFeePerGas <= cap) return fees;
  const baseFee = (fees.maxFeePerGas - fees.maxPriorityFeePerGas) / 2n;
  if (cap <= baseFee) return undefined;
  return { maxFeePerGas: cap, maxPriorityFeePerGas: fees.maxPriorityFeePerGas < cap ? fees.maxPriorityFeePerGas : cap };
}

/**
 * A same-nonce replacement within the cap: the bumped fees, lowered to the cap when the bump still
 * fits under it; undefined when even the minimum bump is above the cap (the transaction waits).
 */
export function replacementWithinCap(old: Eip1559Fees, market: Eip1559Fees, cap: bigint | undefined): Eip1559Fees | undefined {
  const fees = replacementFees(old, market);
  if (cap === undefined || fees.maxFeePerGas <= cap) return fees;
  if (bumped(old.maxFeePerGas) > cap || bumped(old.maxPriorityFeePerGas) > cap) return undefined;
  const prio = fees.maxPriorityFeePerGas < cap ? fees.maxPriorityFeePerGas : cap;
  return { maxFeePerGas: cap, maxPriorityFeePerGas: prio };
}

export function max(...xs: bigint[]): bigint {
  return xs.reduce((a, b) => (b > a ? b : a));
}

export class FeeOracle {
  #head: Head | undefined;
  #priority: { block: bigint; value: bigint } | undefined;
  // Reads under way, shared by their callers (never a read the API started with the node's own: lib/sharedReads.ts).
  readonly #headFetch = new SharedReads<'latest', Head>(false);
  readonly #priorityFetch = new SharedReads<bigint, bigint>(false);

  constructor(
    private readonly client: PublicClient,
    // A head older than this is refetched before pricing (when no head tracker pushes heads).
    private readonly maxHeadAgeMs: number,
  ) {}

  /** Latest head block number as known (undefined before the first head). */
  headNumber(): bigint | undefined {
    return this.#head?.number;
  }

  onHead({ number, baseFeePerGas, gasLimit }: FeeHead): void {
    if (this.#head && number < this.#head.number) return;
    this.#head = { number, baseFeePerGas, gasLimit: gasLimit ?? this.#head?.gasLimit, seenAt: Date.now() };
    // Warm the priority fee for this block so the next payout does not wait for it.
    if (this.#priority?.block !== number) this.#priorityFor(number).catch(() => undefined);
  }

  /** Fetches the latest block now (deduplicated among concurrent callers). */
  async refreshHead(): Promise<bigint> {
    const head = await this.#headFetch.get('latest', async () => {
      const block = await this.client.getBlock({ blockTag: 'latest' });
      this.onHead({ number: block.number, baseFeePerGas: block.baseFeePerGas ?? 0n, gasLimit: block.gasLimit });
      return this.#head!;
    });
    return head.number;
  }

  /** The head block number, read from the chain when the last known head is stale. */
  async head(maxAgeMs = this.maxHeadAgeMs): Promise<bigint> {
    if (!this.#head || Date.now() - this.#head.seenAt > maxAgeMs) return this.refreshHead();
    return this.#head.number;
  }

  /**
   * The most gas one transaction may carry now: the head block's gas limit, and never over EIP-7825's
   * cap. Read after {@link current}, which brings the head up to date.
   */
  txGasCap(): bigint {
    const limit = this.#head?.gasLimit;
    return limit !== undefined && limit < TX_GAS_CAP ? limit : TX_GAS_CAP;
  }

  /** Market fees for a transaction sent now: maxFee = 2 * baseFee + priority. */
  async current(): Promise<Eip1559Fees> {
    if (!this.#head || Date.now() - this.#head.seenAt > this.maxHeadAgeMs) await this.refreshHead();
    const head = this.#head!;
    const maxPriorityFeePerGas = await this.#priorityFor(head.number);
    return { maxFeePerGas: 2n * head.baseFeePerGas + maxPriorityFeePerGas, maxPriorityFeePerGas };
  }

  async #priorityFor(block: bigint): Promise<bigint> {
    if (this.#priority?.block === block) return this.#priority.value;
    return this.#priorityFetch.get(block, async () => {
      const hex = await this.client.request({ method: 'eth_maxPriorityFeePerGas' });
      const value = hexToBigInt(hex as Hex);
      if (!this.#priority || this.#priority.block <= block) this.#priority = { block, value };
      return value;
    });
  }
}
