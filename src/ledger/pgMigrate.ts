import type pg from 'pg';
import { migrations } from './migrations.ts';
import { PG_BASELINE_VERSION, pgBaseline } from './pgBaseline.ts';

// A transaction-scoped advisory lock key of its own ('relaymig'): two nodes (or a node and
// `relay-node db migrate`) starting on one database apply each migration once, one after the other.
const MIGRATION_LOCK = 0x72656c61796d6967n;

/**
 * Brings a PostgreSQL database to the ledger's schema: on an empty database the baseline
 * (pgBaseline.ts, recorded as versions 1-20), then each later migration's `pg` text, each in one
 * transaction under an advisory lock, recorded in `schema_migrations` as SQLite records them.
 * Idempotent: what is recorded is skipped. Returns the versions it applied.
 */
export async function migratePostgres(client: pg.ClientBase, now: () => number = Date.now): Promise<number[]> {
  const later = [...migrations].filter((m) => m.version > PG_BASELINE_VERSION).sort((a, b) => a.version - b.version);
  const missing = later.find((m) => typeof m.pg !== 'string');
  if (missing) throw new Error(`migration ${missing.version} has no PostgreSQL text (pg)`);
  const ran: number[] = [];
  await inTransaction(client, async (applied) => {
    if (applied.size > 0) return;
    await client.query(pgBaseline);
    for (const m of migrations.filter((x) => x.version <= PG_BASELINE_VERSION).sort((a, b) => a.version - b.version)) {
      await record(client, m.version, m.name, now());
      ran.push(m.version);
    }
  });
  for (const m of later) {
    await inTransaction(client, async (applied) => {
      if (applied.has(m.version)) return;
      await client.query(m.pg as string);
      await record(client, m.version, m.name, now());
      ran.push(m.version);
    });
  }
  return ran;
}

/** The versions recorded as applied (none when the table does not exist yet). */
export async function appliedPostgresVersions(client: pg.ClientBase): Promise<Set<number>> {
  const t = await client.query<{ t: string | null }>(`SELECT to_regclass('schema_migrations')::text AS t`);
  if (!t.rows[0]?.t) return new Set();
  const r = await client.query<{ version: string }>('SELECT version FROM schema_migrations');
  return new Set(r.rows.map((x) => Number(x.version)));
}

async function record(client: pg.ClientBase, version: number, name: string, at: number): Promise<void> {
  await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [version, name, at]);
}

// One transaction: the lock, then the table and what it records, read under the lock.
async function inTransaction(client: pg.ClientBase, fn: (applied: Set<number>) => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK.toString()]);
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)');
    await fn(await appliedPostgresVersions(client));
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}
