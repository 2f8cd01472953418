import type { Ledger as LedgerInterface } from './ledger.ts';
import { PostgresLedger } from './postgres/ledger.ts';
import { SqliteLedger, type SqliteOpenOptions } from './sqlite.ts';

export * from './types.ts';
export type { ApiKeyRow } from './apiKeys.ts';
export type { Store } from './ledger.ts';

/** The ledger the node depends on (ledger.ts): consumers import this type only. */
export type Ledger = LedgerInterface;

/** Where a ledger is: the SQLite file at `path`, unless `url` names a PostgreSQL database (a secret). */
export interface LedgerLocation {
  path: string;
  url?: string;
  /** PostgreSQL: bound of one call (config ledger.timeoutMs). */
  timeoutMs?: number;
  /** PostgreSQL, an API replica: the oldest a kept Status record is served (config ledger.statusCacheMaxAgeMs). */
  statusCacheMaxAgeMs?: number;
}

/** A ledger as opened: SQLite's or PostgreSQL's (tests and benchmarks reach its connection, `db`, for set-up). */
export type OpenedLedger = SqliteLedger | PostgresLedger;

/** Where the ledger's implementation is chosen: PostgreSQL when a URL is configured, else the SQLite file. */
export const Ledger = {
  /**
   * Opens (and unless read-only, migrates) the SQLite ledger file at `path`. Typed as the SQLite
   * implementation (a `Ledger`) so that tests and benchmarks can reach its connection for set-up;
   * the node hands its stages the `Ledger` interface only.
   */
  open(path: string, opts: SqliteOpenOptions = {}): SqliteLedger {
    return SqliteLedger.open(path, opts);
  },

  /**
   * Opens the configured ledger: PostgreSQL at `url` when given (config `ledger.url`, a secret), else the SQLite file
   * at `path` (its threads as SqliteOpenOptions says); unless read-only, it is migrated.
   */
  connect(where: LedgerLocation, opts: SqliteOpenOptions = {}): OpenedLedger {
    if (where.url)
      return PostgresLedger.open(where.url, { readonly: opts.readonly, timeoutMs: where.timeoutMs, statusCacheMaxAgeMs: where.statusCacheMaxAgeMs });
    return SqliteLedger.open(where.path, opts);
  },
};
