import type pg from 'pg';
import { BALANCE_TOTALS_DRIFT_SQL, balanceTotalsDrift } from './balances.ts';
import type { Db } from './db.ts';
import { migrations } from './migrations.ts';
import { migratePostgres } from './pgMigrate.ts';

// `relay-node db copy`: an existing SQLite ledger moved into PostgreSQL, whole or not at all. The
// target is migrated first and must be empty; every table is copied in foreign-key order in ONE
// PostgreSQL transaction (batched multi-row inserts, the SQLite ids kept), the identity sequences
// moved past the copied ids, and before the commit the copy is verified: the same row count in every
// table, the same money sums (balance entries, app fee entries, payouts, deposits), and every wallet's app balance
// totals equal to its entries' sums. Any failure rolls everything back and names the table.

/** A copy refused or failed; `table` names where. Its message never carries the database URL. */
export class CopyError extends Error {
  constructor(
    message: string,
    readonly table?: string,
  ) {
    super(message);
    this.name = 'CopyError';
  }
}

export interface CopyReport {
  /** Rows copied per table, in the order copied. */
  tables: { table: string; rows: number }[];
  /** The money sums compared, as `table[group]: sum`. */
  sums: string[];
  migrated: number[];
}

// Parameters per INSERT statement: PostgreSQL takes at most 65535. And about this many bytes of text
// per statement: a quote (request_quotes) is up to ~70 KB, so a thousand of them would be 70 MB.
const MAX_PARAMS = 30_000;
const MAX_ROWS = 1_000;
const MAX_BYTES = 8_000_000;

// Money sums compared after the copy: per group, exact (decimal strings summed as bigint on the
// SQLite side, as NUMERIC on PostgreSQL's).
const MONEY: { table: string; group: string[]; amounts: string[] }[] = [
  { table: 'balance_entries', group: ['kind'], amounts: ['amount'] },
  { table: 'app_fee_entries', group: ['kind', 'currency'], amounts: ['amount'] },
  { table: 'payouts', group: ['kind', 'state', 'currency'], amounts: ['amount', 'native_topup'] },
  { table: 'deposits', group: ['state', 'currency'], amounts: ['amount'] },
];

// Tables a migration fills with their first rows (migration 21: the one-row leader_lease). Every migrated
// database has them, so they do not make a target "not empty"; the copy replaces them with the source's
// rows (the lease's epoch must never go back: it fences the payouts recorded under it).
const SEEDED_BY_MIGRATIONS = new Set(['leader_lease']);

const q = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** The ledger's tables (not SQLite's own, not schema_migrations), parents before the tables that reference them. */
export function tablesInForeignKeyOrder(db: Db): string[] {
  const tables = (
    db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'schema_migrations' ORDER BY name`).all() as {
      name: string;
    }[]
  ).map((t) => t.name);
  const parents = new Map(
    tables.map((t) => [
      t,
      (db.prepare('SELECT DISTINCT "table" AS p FROM pragma_foreign_key_list(?)').all(t) as { p: string }[]).map((r) => r.p).filter((p) => p !== t),
    ]),
  );
  const ordered: string[] = [];
  const visit = (t: string, path: Set<string>) => {
    if (ordered.includes(t)) return;
    if (path.has(t)) throw new CopyError(`foreign keys form a cycle through ${t}`, t);
    path.add(t);
    for (const p of parents.get(t) ?? []) visit(p, path);
    path.delete(t);
    ordered.push(t);
  };
  for (const t of tables) visit(t, new Set());
  return ordered;
}

/**
 * Copies the SQLite ledger `source` into the PostgreSQL database `client` is connected to (see the
 * module comment). `log` hears one line per table.
 */
export async function copySqliteToPostgres(source: Db, client: pg.ClientBase, log: (line: string) => void = () => {}): Promise<CopyReport> {
  // One SQLite read transaction: every table, and the verification, read the same snapshot.
  source.exec('BEGIN');
  try {
    return await copyFromSnapshot(source, client, log);
  } finally {
    source.exec('ROLLBACK');
  }
}

async function copyFromSnapshot(source: Db, client: pg.ClientBase, log: (line: string) => void): Promise<CopyReport> {
  const applied = new Set((source.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map((r) => r.version));
  const behind = migrations.filter((m) => !applied.has(m.version)).map((m) => m.version);
  if (behind.length) throw new CopyError(`the SQLite ledger lacks migrations ${behind.join(', ')}: run relay-node db migrate on it first`);

  const migrated = await migratePostgres(client);
  const tables = tablesInForeignKeyOrder(source);

  const report: CopyReport = { tables: [], sums: [], migrated };
  await client.query('BEGIN');
  let table: string | undefined;
  try {
    // References are checked once all rows are in (the keys are DEFERRABLE); the triggers that keep
    // depository_owed stay off while rows arrive: their tables are copied as they are.
    await client.query('SET CONSTRAINTS ALL DEFERRED');
    // Switching the triggers off locks every table against writers until the commit: the emptiness
    // checked next stays true while the rows arrive.
    for (const t of tables) await client.query(`ALTER TABLE ${q(t)} DISABLE TRIGGER USER`);
    for (const t of tables.filter((x) => !SEEDED_BY_MIGRATIONS.has(x))) {
      const r = await client.query(`SELECT EXISTS (SELECT 1 FROM ${q(t)}) AS any`);
      if (r.rows[0].any) throw new CopyError(`the PostgreSQL ledger is not empty (table ${t} has rows): copy only into an empty database`, t);
    }
    for (const t of tables) {
      table = t;
      if (SEEDED_BY_MIGRATIONS.has(t)) await client.query(`DELETE FROM ${q(t)}`);
      const rows = await copyTable(source, client, t);
      report.tables.push({ table: t, rows });
      log(`${t}: ${rows} rows`);
    }
    // Every reference checked now (a dangling one fails here), then the triggers back on (PostgreSQL
    // alters no table with checks pending).
    table = 'foreign keys';
    await client.query('SET CONSTRAINTS ALL IMMEDIATE');
    table = undefined;
    for (const t of tables) await client.query(`ALTER TABLE ${q(t)} ENABLE TRIGGER USER`);
    await resetIdentities(source, client);
    await verify(source, client, tables, report);
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    if (e instanceof CopyError) throw e;
    const at = table ? ` (table ${table})` : '';
    throw new CopyError(`copy failed${at}, nothing was written: ${(e as Error).message}`, table);
  }
  return report;
}

async function copyTable(source: Db, client: pg.ClientBase, table: string): Promise<number> {
  const cols = (source.prepare('SELECT name FROM pragma_table_info(?) ORDER BY cid').all(table) as { name: string }[]).map((c) => c.name);
  const perInsert = Math.max(1, Math.min(MAX_ROWS, Math.floor(MAX_PARAMS / cols.length)));
  // rowid order: the order rows were written in, so a parent row comes before its children.
  const read = source
    .prepare(`SELECT ${cols.map(q).join(', ')} FROM ${q(table)} ORDER BY rowid`)
    .raw(true)
    .safeIntegers(true);
  const head = `INSERT INTO ${q(table)} (${cols.map(q).join(', ')}) VALUES `;
  let batch: unknown[][] = [];
  let bytes = 0;
  let n = 0;
  const flush = async () => {
    if (!batch.length) return;
    const values: unknown[] = [];
    const tuples = batch.map((row) => `(${row.map((v) => `$${values.push(typeof v === 'bigint' ? v.toString() : v)}`).join(', ')})`);
    await client.query(head + tuples.join(', '), values);
    n += batch.length;
    batch = [];
    bytes = 0;
  };
  for (const row of read.iterate() as Iterable<unknown[]>) {
    batch.push(row);
    for (const v of row) if (typeof v === 'string') bytes += v.length;
    if (batch.length >= perInsert || bytes >= MAX_BYTES) await flush();
  }
  await flush();
  return n;
}

// Each identity column's sequence moves past the highest id SQLite ever gave (sqlite_sequence keeps
// it even when the row is gone), so PostgreSQL never reuses one.
async function resetIdentities(source: Db, client: pg.ClientBase): Promise<void> {
  const identities = (
    await client.query<{ t: string; c: string }>(
      `SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = 'public' AND is_identity = 'YES'`,
    )
  ).rows;
  const hasSequence = source.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'`).get() !== undefined;
  for (const { t, c } of identities) {
    const seq = hasSequence
      ? ((source.prepare('SELECT seq FROM sqlite_sequence WHERE name = ?').safeIntegers(true).get(t) as { seq: bigint } | undefined)?.seq ?? 0n)
      : 0n;
    const max = BigInt((await client.query(`SELECT COALESCE(MAX(${q(c)}), 0)::text AS m FROM ${q(t)}`)).rows[0].m as string);
    const last = seq > max ? seq : max;
    if (last > 0n) await client.query(`SELECT setval(pg_get_serial_sequence($1, $2), $3, true)`, [t, c, last.toString()]);
  }
}

async function verify(source: Db, client: pg.ClientBase, tables: string[], report: CopyReport): Promise<void> {
  for (const t of tables) {
    const lite = (source.prepare(`SELECT COUNT(*) AS n FROM ${q(t)}`).get() as { n: number }).n;
    const copied = Number((await client.query(`SELECT COUNT(*) AS n FROM ${q(t)}`)).rows[0].n);
    if (lite !== copied) throw new CopyError(`verification failed, nothing was written: table ${t} has ${lite} rows in SQLite and ${copied} in PostgreSQL`, t);
  }
  for (const m of MONEY) {
    const keyOf = (r: Record<string, unknown>) => m.group.map((g) => String(r[g])).join('/');
    const lite = new Map<string, bigint[]>();
    for (const r of source
      .prepare(`SELECT ${[...m.group, ...m.amounts].map(q).join(', ')} FROM ${q(m.table)}`)
      .safeIntegers(true)
      .iterate() as Iterable<Record<string, unknown>>) {
      const sums = lite.get(keyOf(r)) ?? m.amounts.map(() => 0n);
      m.amounts.forEach((a, i) => {
        if (r[a] !== null) sums[i]! += BigInt(r[a] as string | bigint);
      });
      lite.set(keyOf(r), sums);
    }
    const sql = `SELECT ${m.group.map(q).join(', ')}, ${m.amounts.map((a) => `COALESCE(SUM(CAST(${q(a)} AS NUMERIC)), 0)::text AS ${q(a)}`).join(', ')}
      FROM ${q(m.table)} GROUP BY ${m.group.map(q).join(', ')}`;
    const copied = new Map((await client.query(sql)).rows.map((r: Record<string, unknown>) => [keyOf(r), m.amounts.map((a) => BigInt(r[a] as string))]));
    for (const key of new Set([...lite.keys(), ...copied.keys()])) {
      const a = lite.get(key) ?? [];
      const b = copied.get(key) ?? [];
      m.amounts.forEach((col, i) => {
        if ((a[i] ?? 0n) !== (b[i] ?? 0n)) {
          throw new CopyError(
            `verification failed, nothing was written: ${m.table}.${col} [${key}] sums to ${a[i] ?? 0n} in SQLite and ${b[i] ?? 0n} in PostgreSQL`,
            m.table,
          );
        }
        report.sums.push(`${m.table}.${col}[${key}]: ${a[i] ?? 0n}`);
      });
    }
  }
  // The app balance totals are copied as they are (triggers off): derived from the entries, they must still be their
  // sums on the target, or every summary the node reads would answer a balance its entries do not hold.
  const drift = balanceTotalsDrift((await client.query(BALANCE_TOTALS_DRIFT_SQL)).rows);
  if (drift.length) {
    const d = drift[0]!;
    throw new CopyError(
      `verification failed, nothing was written: balance_totals of ${d.wallet} (balance ${d.balance}, held ${d.held}) differ from its entries (balance ${d.entriesBalance}, held ${d.entriesHeld})${drift.length > 1 ? `, and ${drift.length - 1} more wallet(s)` : ''}`,
      'balance_totals',
    );
  }
}
