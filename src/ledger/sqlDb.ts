/**
 * The part of better-sqlite3's API the stores use: both ledgers' connections implement it (better-sqlite3's
 * `Database` as it is, PostgreSQL's through `PgDb`), so the stores (src/ledger/*.ts) hold the same prepared
 * statements on either.
 */

/** What a write reports: rows changed, and the id a RETURNING (PostgreSQL) or the rowid (SQLite) gave. */
export interface SqlRunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

/** A prepared statement: positional values, arrays of them, or one object of named values (`@name`). */
export interface SqlStatement {
  run(...params: unknown[]): SqlRunResult;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
  /** Rows as their first column's value. */
  pluck(toggle?: boolean): this;
  /** Integers as bigint (and exact integer sums). */
  safeIntegers(toggle?: boolean): this;
  /** Rows as arrays. */
  raw(toggle?: boolean): this;
}

// biome-ignore lint/suspicious/noExplicitAny: any function may run in a transaction (better-sqlite3's typing)
type AnyFunction = (...args: any[]) => unknown;
type Args<F extends AnyFunction> = F extends (...args: infer A) => unknown ? A : never;

/** A function wrapped in a transaction; the variants say how SQLite takes its lock (PostgreSQL: always the writer's lock). */
export interface SqlTransaction<F extends AnyFunction> {
  (...args: Args<F>): ReturnType<F>;
  deferred(...args: Args<F>): ReturnType<F>;
  immediate(...args: Args<F>): ReturnType<F>;
  exclusive(...args: Args<F>): ReturnType<F>;
}

/** An aggregate's definition (better-sqlite3's `aggregate` options); PostgreSQL's schema defines its own. */
export interface SqlAggregate {
  start?: unknown;
  // biome-ignore lint/suspicious/noExplicitAny: better-sqlite3's own typing of an aggregate's step
  step: (total: any, next: any) => any;
  // biome-ignore lint/suspicious/noExplicitAny: as above
  result?: (total: any) => unknown;
  varargs?: boolean;
  safeIntegers?: boolean;
  deterministic?: boolean;
}

/** A ledger connection: better-sqlite3's `Database`, or `PgDb` on PostgreSQL. */
export interface SqlDb {
  prepare(sql: string): SqlStatement;
  exec(sql: string): this;
  transaction<F extends AnyFunction>(fn: F): SqlTransaction<F>;
  /** Opened read-only (an API replica): it writes nothing. */
  readonly readonly: boolean;
  /** A transaction is open on this connection. */
  readonly inTransaction: boolean;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  aggregate(name: string, options: SqlAggregate): this;
  close(): unknown;
}
