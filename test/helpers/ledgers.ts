// The ledger test suite runs against both implementations: `describe.each(LEDGER_KINDS)` and a fresh ledger of
// the kind from `testLedgers().open(kind)` — SQLite in memory, or a fresh database on one PostgreSQL server per
// test file (started on first use, stopped after the file's tests).
import type pg from 'pg';
import { afterAll } from 'vitest';
import { startPostgres, type PostgresHandle } from '../../src/devnet/postgres.ts';
import { Ledger, type OpenedLedger } from '../../src/ledger/index.ts';
import { PostgresLedger } from '../../src/ledger/postgres/ledger.ts';
import { migrations } from '../../src/ledger/migrations.ts';
import { pgBaseline, PG_BASELINE_VERSION } from '../../src/ledger/pgBaseline.ts';

export type LedgerKind = 'sqlite' | 'postgres';
export const LEDGER_KINDS: LedgerKind[] = ['sqlite', 'postgres'];

/** The file's ledgers: `open(kind)` gives a fresh, migrated one; all are closed and the server stopped after the file. */
export function testLedgers(): { open(kind: LedgerKind): Promise<OpenedLedger>; url(): Promise<string>; server(): Promise<PostgresHandle> } {
  let server: Promise<PostgresHandle> | undefined;
  const opened: OpenedLedger[] = [];
  const pg = () => (server ??= startPostgres({ durable: false }));
  afterAll(async () => {
    for (const l of opened.splice(0)) l.close();
    if (server) await (await server).stop();
  });
  return {
    async open(kind) {
      const ledger = kind === 'sqlite' ? Ledger.open(':memory:') : PostgresLedger.open(await (await pg()).createDatabase());
      opened.push(ledger);
      return ledger;
    },
    /** A fresh, empty PostgreSQL database (not migrated). */
    url: async () => (await pg()).createDatabase(),
    server: pg,
  };
}

/**
 * Lets a store test write rows whose references are not there (SQLite: foreign keys off; PostgreSQL: the session's
 * replication role, which skips foreign key checks — and triggers — until the connection is closed).
 */
export function withoutForeignKeys(ledger: OpenedLedger): void {
  if (ledger instanceof PostgresLedger) ledger.db.exec('SET session_replication_role = replica');
  else ledger.db.pragma('foreign_keys = OFF');
}

/** Brings a fresh PostgreSQL database to schema `version` (its baseline, then each later migration's text): a ledger as it was, to migrate from. */
export async function migratePgTo(client: pg.Client, version: number): Promise<void> {
  await client.query(pgBaseline);
  for (const m of migrations.filter((x) => x.version > PG_BASELINE_VERSION && x.version <= version)) await client.query(m.pg as string);
}
