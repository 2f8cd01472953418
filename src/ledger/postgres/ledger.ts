import type { StatusRecord } from '../statusRecord.ts';
import { StoreLedger } from '../storeLedger.ts';
import { PgAsyncReads } from './asyncReads.ts';
import { LISTENER_NAME } from './statusListener.ts';
import { PgDb } from './pgDb.ts';

/** Bound of a migration run at open (the baseline on an empty database takes well under this). */
const MIGRATE_TIMEOUT_MS = 120_000;

/** How a PostgreSQL ledger is reached (config `ledger`). */
export interface PostgresLedgerOptions {
  /** Opened for an API replica: no migration, nothing written of its own; Status records kept between their changes (PgAsyncReads). */
  readonly?: boolean;
  /** Bound of one database call before it throws LedgerUnavailable (config `ledger.timeoutMs`). */
  timeoutMs?: number;
  /** Read-only: the oldest a kept Status record is served, 0 to keep none (config `ledger.statusCacheMaxAgeMs`; 5 s by default). */
  statusCacheMaxAgeMs?: number;
}

/**
 * The ledger in PostgreSQL: the same stores as SQLite's over `PgDb` (better-sqlite3's API on one synchronous
 * connection), so every state change is still one transaction, taken under the one writer's lock, with the
 * events outbox in it. `read` is one REPEATABLE READ snapshot.
 */
export class PostgresLedger extends StoreLedger<PgDb> {
  /**
   * Connects to `url` (a secret: never logged) and, unless read-only, brings the schema up to date
   * (migratePostgres, under its own advisory lock, so nodes starting together migrate once).
   */
  static open(url: string, opts: PostgresLedgerOptions = {}): PostgresLedger {
    const db = new PgDb(url, { timeoutMs: opts.timeoutMs, readonly: opts.readonly });
    try {
      if (!opts.readonly) db.client.callModule(new URL('../pgMigrate.ts', import.meta.url).href, 'migratePostgres', MIGRATE_TIMEOUT_MS);
      const ledger = new PostgresLedger(db);
      ledger.#asyncReads = () =>
        new PgAsyncReads(url, {
          timeoutMs: opts.timeoutMs,
          readonly: opts.readonly,
          cache: opts.readonly && opts.statusCacheMaxAgeMs !== 0 ? { maxAgeMs: opts.statusCacheMaxAgeMs } : undefined,
        });
      return ledger;
    } catch (e) {
      db.close();
      throw e;
    }
  }

  #asyncReads: (() => PgAsyncReads) | undefined;
  #reads: PgAsyncReads | undefined;

  /**
   * As `requests.status`, on a pooled connection of its own (PgAsyncReads, opened on first use): the synchronous
   * bridge would hold the process's event loop for the round trip, and with it every other request. Inside a
   * transaction of this connection (nothing of the API's), it reads there, to see what the transaction wrote.
   */
  override async statusOf(id: string): Promise<StatusRecord | undefined> {
    if (this.db.inTransaction || !this.#asyncReads) return this.requests.status(id);
    this.#reads ??= this.#asyncReads();
    return this.#reads.status(id);
  }

  /** The share of PostgreSQL's notification queue in use, 0 to 1 (a listener that stops reading holds it back). */
  notifyQueueUsage(): number {
    return Number((this.db.prepare('SELECT pg_notification_queue_usage() AS u').get() as { u: number | string }).u);
  }

  /** Ends the connection of every API replica's status listener on this database (each listens again); returns how many. */
  endStatusListeners(): number {
    return this.db
      .prepare('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ? AND datname = current_database()')
      .all(LISTENER_NAME).length;
  }

  override close(): void {
    void this.#reads?.close();
    super.close();
  }

  /** Runs fn's reads in one snapshot (REPEATABLE READ READ ONLY); nested in tx, it joins it. */
  read<T>(fn: () => T): T {
    return this.db.snapshot(fn);
  }
}
