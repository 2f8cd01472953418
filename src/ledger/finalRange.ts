import type { BoundDeposits, Recorded } from './deposits.ts';
import type { Ledger } from './ledger.ts';

/**
 * A range of final blocks an indexer read (no reorg takes it back): its deposits, and its cursor moved past it,
 * written in one lazy transaction (TxOptions). Nothing in it decides or announces a state of an order: the solver
 * acts on its confirmed deposits only after its own durable decision.
 */
export interface FinalRange {
  chainId: number;
  /** The indexer's cursor (IndexerState's source name). */
  source: string;
  /**
   * The range's first block: the cursor must be just below it, or the range is refused. A range handed over behind
   * one that fails (or that a rewind took back) must never move the cursor past what that one held.
   */
  from: number;
  /** Where the cursor is before it was ever moved (the indexer's start block less one). */
  origin: number;
  /** The last block of the range: the cursor moves there. */
  to: number;
  /** The chain's stored blocks below this height are pruned (the unfinalized window moved up). */
  pruneBelow: number;
  /** The deposits, as the insert binds them (bindDeposits: one flat array, which crosses to a thread at half the cost of objects). */
  values: BoundDeposits;
}

/** Writes `range` through the ledger's stores, inside the caller's transaction. */
export function writeFinalRange(ledger: Pick<Ledger, 'deposits' | 'indexer'>, range: FinalRange): Recorded {
  const at = ledger.indexer.cursor(range.chainId, range.source) ?? range.origin;
  if (at !== range.from - 1)
    throw new Error(
      `chain ${range.chainId}: the range of blocks ${range.from} to ${range.to} was not written: the indexer's cursor is at block ${at}, not ${range.from - 1}`,
    );
  const recorded = ledger.deposits.recordCount(range.chainId, range.values);
  ledger.indexer.setCursor(range.chainId, range.source, range.to);
  ledger.indexer.pruneBelow(range.chainId, range.pruneBelow);
  return recorded;
}
