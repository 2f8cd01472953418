// The ledger test suite runs against both implementations: `describe.each(LEDGER_KINDS)` and a fresh ledger of
// the kind from `testLedgers().open(kind)` — SQLite in memory, or a fresh database on one PostgreSQL server per
// test file (started on first use, stopped after the file's tests).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, expect } from 'vitest';
import { migrate, openDb } from '../../src/ledger/db.ts';
import type { SqlDb as Db } from '../../src/ledger/sqlDb.ts';
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

/**
 * A ledger file (in a temporary directory of its own, removed after) as it was at schema `version`, with `seed`
 * written into it, then migrated to the newest schema (every later migration applied, asserted; foreign keys
 * checked): `check` reads the migrated database, then the node's ledger is opened on the file for `read`.
 */
export function sqliteMigratedFrom(version: number, seed: string, check: (db: Db) => void, read: (ledger: OpenedLedger) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'relay-migrated-'));
  const path = join(dir, 'ledger.db');
  try {
    const db = openDb(path);
    try {
      migrate(db, version);
      db.exec(seed);
      expect(migrate(db)).toEqual(migrations.filter((m) => m.version > version).map((m) => m.version));
      check(db);
      expect(db.pragma('foreign_key_check')).toEqual([]);
    } finally {
      db.close();
    }
    const ledger = Ledger.open(path);
    try {
      read(ledger);
    } finally {
      ledger.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A fresh PostgreSQL database (at `url`) brought to schema `version` (its baseline, then each later migration's text),
 * `seed` written into it, then migration `version + 1` applied; `check` reads the result on the same connection.
 */
export async function pgMigratedFrom(url: string, version: number, seed: string, check: (client: pg.Client) => Promise<void>): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(pgBaseline);
    for (const m of migrations.filter((x) => x.version > PG_BASELINE_VERSION && x.version <= version)) await client.query(m.pg as string);
    await client.query(seed);
    await client.query(migrations.find((m) => m.version === version + 1)!.pg as string);
    await check(client);
  } finally {
    await client.end();
  }
}
