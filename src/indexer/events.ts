import type { DepositRow } from '../ledger/types.ts';

/** What the indexer driver tells the rest of its chain's adapter: the head it read and deposits that reached their confirmations. */
export interface IndexerEvents<H> {
  /** The head block read at the start of a pass. */
  onHead(head: H): void;
  /** Deposits reached their confirmation depth (committed): the solver has work. */
  onConfirmed(): void;
  /** The first pass since the start found the recorded blocks on the chain, or rewound those it did not (checked). */
  onChecked?(): void;
}

/**
 * The port the solver implements to decide what a reorg means (src/solver/reorgs.ts). The indexer
 * only reports which deposits already acted on are no longer canonical; the solver writes what follows.
 */
export interface ReorgDecider {
  /** Whether the solver has already decided this deposit's removal (the indexer stops looking at it). */
  reorgDecided(d: DepositRow): boolean;
  /**
   * A deposit acted on that a reorg removed and the new chain does not hold. Runs inside the
   * indexer's ledger transaction that commits the range where this was found.
   */
  onDepositReorged(d: DepositRow, now: number): void;
}
