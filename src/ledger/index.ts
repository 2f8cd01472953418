import type { Ledger as LedgerInterface } from './ledger.ts';
import { SqliteLedger } from './sqlite.ts';

export * from './types.ts';
export type { ApiKeyRow } from './apiKeys.ts';
export type { Store } from './ledger.ts';

/** The ledger the node depends on (ledger.ts): consumers import this type only. */
export type Ledger = LedgerInterface;

/** Where the ledger's implementation is chosen: SQLite today. */
export const Ledger = {
  /**
   * Opens (and unless read-only, migrates) the SQLite ledger file at `path`. Typed as the SQLite
   * implementation (a `Ledger`) so that tests and benchmarks can reach its connection for set-up;
   * the node hands its stages the `Ledger` interface only.
   */
  open(path: string, opts: { readonly?: boolean } = {}): SqliteLedger {
    return SqliteLedger.open(path, opts);
  },
};
