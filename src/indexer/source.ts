import type { ChainDeposit } from '../ledger/deposits.ts';

/** A block as the indexer keeps it in its unfinalized list: its height, its hash and its parent's. */
export interface SourceBlock {
  number: number;
  hash: string;
  parentHash: string;
}

/** What one read of a block range found: the deposits in it, and how many entries the answer held in all (its size). */
export interface RangeRead {
  /** seen_at: when the chain says the deposit happened, where it says so (a log's blockTimestamp, the exchange); the read's time otherwise. */
  deposits: (ChainDeposit & { seen_at?: number })[];
  /** Every entry the provider returned (deposits and other events alike): the range stops widening on dense answers. */
  entries: number;
  /** The block hash of every entry's block, by height ('' where two entries disagreed): the driver checks them against the headers it links. */
  blockHashes: Map<number, string>;
  /**
   * Set when the source could read the range completely only up to this block (an entry not served
   * yet): the driver commits that far and reads the rest again on a later pass.
   */
  upTo?: number;
}

/** Where a transaction sits on the canonical chain now, as its receipt says. */
export interface Inclusion {
  success: boolean;
  blockNumber: number;
  /** The hash of the block it is in (a slot's name on SVM, as its SourceBlock). */
  blockHash: string;
}

/**
 * The per-chain-kind port the indexer driver reads deposits through (src/indexer/driver.ts).
 *
 * A source only reads: the head, a block by height, the deposits of a range, a transaction's
 * inclusion. The driver owns the cursor, the ranges, the unfinalized block list and every ledger write.
 * `H` is the source's head block, handed as is to the driver's `onHead` event (an EVM head carries its base fee).
 */
export interface DepositSource<H extends SourceBlock = SourceBlock> {
  /** The name of the range read in metrics (`relay_rpc_errors_total{method}`), e.g. `eth_getLogs`. */
  readonly rangeMethod: string;
  /**
   * Set where head() is the node's clock rather than a block the chain made (the exchange): a head then says nothing of
   * when a deposit above it was made (see the driver's #existedAfter).
   */
  readonly clockHeads?: boolean;
  /** The newest block. */
  head(): Promise<H>;
  /** The canonical block at height `n`; throws when the chain has none (or cannot be read). */
  block(n: number): Promise<SourceBlock>;
  /** The deposits in blocks [from, to]; throws when the provider refuses the range (the driver narrows it). */
  deposits(from: number, to: number): Promise<RangeRead>;
  /** Where `txHash` is included now; undefined when the chain does not hold it. Throws when it cannot be read. */
  inclusion(txHash: string): Promise<Inclusion | undefined>;
}
