import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';
import { migrate, openDb, type Db } from '../src/ledger/db.ts';
import { migrations } from '../src/ledger/migrations.ts';
import { PG_BASELINE_VERSION } from '../src/ledger/pgBaseline.ts';
import { migratePostgres } from '../src/ledger/pgMigrate.ts';
import { Payouts } from '../src/ledger/payouts.ts';
import { pgArgs, toPgPlaceholders } from './helpers/pgSql.ts';

// The PostgreSQL schema (src/ledger/pgBaseline.ts + each later migration's `pg`) against SQLite's
// after its migrations, read from both catalogs: a column, index, key, CHECK or trigger on one side
// only fails here. Then the triggers' and the decimal aggregates' behaviour, run on both.

interface Catalog {
  tables: string[];
  /** table.column → type, nullable */
  columns: Record<string, string>;
  primaryKeys: Record<string, string[]>;
  uniques: string[];
  foreignKeys: string[];
  /** name → table, unique, key columns (an expression as <expr>), partial */
  indexes: Record<string, string>;
  /** table.column → sorted allowed values */
  checks: Record<string, string>;
  triggers: string[];
}

const TYPE: Record<string, string> = { INTEGER: 'bigint', TEXT: 'text', bigint: 'bigint', text: 'text' };

function sqliteCatalog(db: Db): Catalog {
  const tables = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`).all() as {
    name: string;
    sql: string;
  }[];
  const c: Catalog = { tables: tables.map((t) => t.name), columns: {}, primaryKeys: {}, uniques: [], foreignKeys: [], indexes: {}, checks: {}, triggers: [] };
  for (const t of tables) {
    const cols = db.prepare('SELECT name, type, "notnull" AS nn, pk FROM pragma_table_info(?)').all(t.name) as {
      name: string;
      type: string;
      nn: number;
      pk: number;
    }[];
    // A primary key column is NOT NULL (PostgreSQL's rule; SQLite's TEXT PRIMARY KEY only by the node's own writes).
    for (const col of cols) c.columns[`${t.name}.${col.name}`] = `${TYPE[col.type] ?? col.type} ${col.nn || col.pk ? 'not null' : 'null'}`;
    const pk = cols.filter((x) => x.pk > 0).sort((a, b) => a.pk - b.pk);
    if (pk.length) c.primaryKeys[t.name] = pk.map((x) => x.name);
    for (const ix of db.prepare(`SELECT name, "unique" AS u, origin, partial FROM pragma_index_list(?)`).all(t.name) as {
      name: string;
      u: number;
      origin: string;
      partial: number;
    }[]) {
      const keys = (db.prepare('SELECT name FROM pragma_index_xinfo(?) WHERE key = 1 ORDER BY seqno').all(ix.name) as { name: string | null }[]).map(
        (k) => k.name ?? '<expr>',
      );
      if (ix.origin === 'u') c.uniques.push(`${t.name}(${keys.join(',')})`);
      else if (ix.origin === 'c') c.indexes[ix.name] = `${t.name} ${ix.u ? 'unique' : ''}(${keys.join(',')})${ix.partial ? ' partial' : ''}`;
    }
    for (const fk of db.prepare('SELECT "from" AS f, "table" AS t, "to" AS o FROM pragma_foreign_key_list(?)').all(t.name) as {
      f: string;
      t: string;
      o: string;
    }[]) {
      c.foreignKeys.push(`${t.name}.${fk.f} -> ${fk.t}.${fk.o}`);
    }
    for (const m of t.sql.matchAll(/CHECK \((\w+) IN \(([^)]*)\)\)/g)) c.checks[`${t.name}.${m[1]}`] = values(m[2]!);
    for (const m of t.sql.matchAll(/CHECK \((\w+) = ([^)]*)\)/g)) c.checks[`${t.name}.${m[1]}`] = values(m[2]!);
  }
  c.triggers = (db.prepare(`SELECT tbl_name || '.' || name AS t FROM sqlite_master WHERE type = 'trigger' ORDER BY 1`).all() as { t: string }[]).map(
    (r) => r.t,
  );
  for (const k of ['uniques', 'foreignKeys'] as const) c[k].sort();
  return c;
}

// The literals of a CHECK's list: quoted strings and integers, sorted.
function values(list: string): string {
  return [...list.matchAll(/'([^']*)'|(-?\d+)/g)]
    .map((m) => m[1] ?? m[2]!)
    .sort()
    .join(',');
}

async function pgCatalog(client: pg.Client): Promise<Catalog> {
  const q = async <T>(sql: string) => (await client.query(sql)).rows as T[];
  const tables = (
    await q<{ t: string }>(`SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`)
  ).map((r) => r.t);
  const c: Catalog = { tables, columns: {}, primaryKeys: {}, uniques: [], foreignKeys: [], indexes: {}, checks: {}, triggers: [] };
  for (const r of await q<{ t: string; c: string; type: string; nullable: string }>(
    `SELECT table_name AS t, column_name AS c, data_type AS type, is_nullable AS nullable FROM information_schema.columns WHERE table_schema = 'public'`,
  )) {
    c.columns[`${r.t}.${r.c}`] = `${TYPE[r.type] ?? r.type} ${r.nullable === 'YES' ? 'null' : 'not null'}`;
  }
  // Constraints: their columns in key order.
  const cols = `(SELECT array_agg(a.attname::text ORDER BY k.n) FROM unnest(con.conkey) WITH ORDINALITY k(num, n) JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num)`;
  for (const r of await q<{ t: string; type: string; cols: string[]; ft: string | null; fcols: string[] | null; def: string }>(
    `SELECT con.conrelid::regclass::text AS t, con.contype AS type, ${cols} AS cols, con.confrelid::regclass::text AS ft,
       (SELECT array_agg(a.attname::text ORDER BY k.n) FROM unnest(con.confkey) WITH ORDINALITY k(num, n) JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num) AS fcols,
       pg_get_constraintdef(con.oid) AS def
     FROM pg_constraint con JOIN pg_namespace ns ON ns.oid = con.connamespace WHERE ns.nspname = 'public' AND con.contype IN ('p', 'u', 'f', 'c')`,
  )) {
    if (r.type === 'p') c.primaryKeys[r.t] = r.cols;
    else if (r.type === 'u') c.uniques.push(`${r.t}(${r.cols.join(',')})`);
    else if (r.type === 'f') c.foreignKeys.push(`${r.t}.${r.cols[0]} -> ${r.ft}.${r.fcols![0]}`);
    else c.checks[`${r.t}.${r.cols[0]}`] = values(r.def.replace(/::[a-z ]+/g, ''));
  }
  // Indexes that back no constraint (those are the keys above).
  for (const r of await q<{ name: string; t: string; u: boolean; keys: string[]; partial: boolean }>(
    `SELECT ic.relname AS name, tc.relname AS t, i.indisunique AS u, i.indpred IS NOT NULL AS partial,
       (SELECT array_agg(CASE WHEN k.num = 0 THEN '<expr>' ELSE a.attname::text END ORDER BY k.n)
          FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(num, n) LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.num) AS keys
     FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class tc ON tc.oid = i.indrelid JOIN pg_namespace ns ON ns.oid = tc.relnamespace
     WHERE ns.nspname = 'public' AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid)`,
  )) {
    c.indexes[r.name] = `${r.t} ${r.u ? 'unique' : ''}(${r.keys.join(',')})${r.partial ? ' partial' : ''}`;
  }
  c.triggers = (
    await q<{ t: string }>(
      `SELECT DISTINCT event_object_table || '.' || trigger_name AS t FROM information_schema.triggers WHERE trigger_schema = 'public' ORDER BY 1`,
    )
  ).map((r) => r.t);
  for (const k of ['uniques', 'foreignKeys'] as const) c[k].sort();
  return c;
}

/** Runs one statement written for SQLite (`?` placeholders) on both ledgers; the outcome (rows, or the error's kind) of each. */
function both(lite: Db, client: pg.Client) {
  return async (sql: string, ...args: unknown[]): Promise<{ sqlite: string; pg: string }> => {
    let sqlite: string;
    try {
      lite.prepare(sql).run(...args);
      sqlite = 'ok';
    } catch (e) {
      sqlite = constraintKind((e as { code?: string }).code ?? (e as Error).message);
    }
    let pgResult: string;
    const { text, params } = toPgPlaceholders(sql);
    try {
      await client.query('SAVEPOINT s');
      await client.query(text, pgArgs(params, args));
      await client.query('RELEASE SAVEPOINT s');
      pgResult = 'ok';
    } catch (e) {
      await client.query('ROLLBACK TO SAVEPOINT s');
      pgResult = constraintKind((e as { code?: string }).code ?? (e as Error).message);
    }
    return { sqlite, pg: pgResult };
  };
}

// SQLite's and PostgreSQL's codes for the same refusal, named alike.
function constraintKind(code: string): string {
  const kinds: Record<string, string> = {
    SQLITE_CONSTRAINT_CHECK: 'check',
    '23514': 'check',
    SQLITE_CONSTRAINT_FOREIGNKEY: 'foreign key',
    '23503': 'foreign key',
    SQLITE_CONSTRAINT_PRIMARYKEY: 'unique',
    SQLITE_CONSTRAINT_UNIQUE: 'unique',
    '23505': 'unique',
    SQLITE_CONSTRAINT_NOTNULL: 'not null',
    '23502': 'not null',
  };
  return kinds[code] ?? code;
}

const rowsOf = async (lite: Db, client: pg.Client, sql: string) => ({
  sqlite: lite.prepare(sql).all(),
  pg: (await client.query(sql)).rows.map((r: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'string' && /^-?\d+$/.test(v) && k !== 'amount' && k !== 'excess' ? Number(v) : v])),
  ),
});

describe('the PostgreSQL schema', () => {
  let server: PostgresHandle;
  let client: pg.Client;
  let lite: Db;
  let firstRun: number[];
  beforeAll(async () => {
    server = await startPostgres({ durable: false });
    client = new pg.Client({ connectionString: await server.createDatabase() });
    await client.connect();
    firstRun = await migratePostgres(client);
    lite = openDb(':memory:');
    migrate(lite);
  }, 60_000);
  afterAll(async () => {
    await client?.end();
    lite?.close();
    await server?.stop();
  });

  it('migrates an empty database: the baseline records versions 1-20, then each later migration', async () => {
    const versions = migrations.map((m) => m.version).sort((a, b) => a - b);
    expect(firstRun).toEqual(versions);
    expect(firstRun.filter((v) => v <= PG_BASELINE_VERSION)).toEqual(Array.from({ length: PG_BASELINE_VERSION }, (_, i) => i + 1));
    const recorded = (await client.query('SELECT version, name FROM schema_migrations ORDER BY version')).rows.map((r) => [Number(r.version), r.name]);
    expect(recorded).toEqual(lite.prepare('SELECT version, name FROM schema_migrations ORDER BY version').raw().all());
  });

  it('has the same tables, columns (type, nullability), keys, foreign keys, indexes, CHECKs and triggers as SQLite', async () => {
    const a = sqliteCatalog(lite);
    const b = await pgCatalog(client);
    expect(Object.keys(a.columns).length).toBeGreaterThan(200);
    expect(b.tables).toEqual(a.tables);
    expect(b.columns).toEqual(a.columns);
    expect(b.primaryKeys).toEqual(a.primaryKeys);
    expect(b.uniques).toEqual(a.uniques);
    expect(b.foreignKeys).toEqual(a.foreignKeys);
    expect(b.indexes).toEqual(a.indexes);
    expect(b.checks).toEqual(a.checks);
    // PostgreSQL's own: the notifications of status changes to the API replicas (migration 26); SQLite has no replica that keeps records.
    const notify = b.triggers.filter((t) => t.split('.')[1]!.startsWith('relay_status_'));
    expect(notify).toHaveLength(8);
    expect(b.triggers.filter((t) => !notify.includes(t))).toEqual(a.triggers);
  });

  it('names no column with a word PostgreSQL reserves, except the two every statement quotes', async () => {
    const reserved = new Set((await client.query(`SELECT word FROM pg_get_keywords() WHERE catcode IN ('R', 'T')`)).rows.map((r) => r.word as string));
    const clashes = Object.keys(sqliteCatalog(lite).columns)
      .map((k) => k.split('.')[1]!)
      .filter((c) => reserved.has(c));
    expect([...new Set(clashes)].sort()).toEqual(['authorization', 'user']);
  });

  it('runs again as a no-op', async () => {
    expect(await migratePostgres(client)).toEqual([]);
    const n = (await client.query('SELECT COUNT(*)::int AS n FROM schema_migrations')).rows[0].n;
    expect(n).toBe(migrations.length);
  });

  it('two processes migrating one empty database at once apply each migration once', async () => {
    const url = await server.createDatabase();
    const clients = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })];
    await Promise.all(clients.map((c) => c.connect()));
    try {
      const runs = await Promise.all(clients.map((c) => migratePostgres(c)));
      expect(runs.flat().sort((a, b) => a - b)).toEqual(migrations.map((m) => m.version).sort((a, b) => a - b));
      expect((await clients[0]!.query('SELECT COUNT(*)::int AS n FROM schema_migrations')).rows[0].n).toBe(migrations.length);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });

  it('refuses the same rows as SQLite (CHECKs, foreign keys, unique refs, NOT NULL)', async () => {
    const run = both(lite, client);
    lite.exec('BEGIN');
    await client.query('BEGIN');
    try {
      const now = 1_700_000_000_000;
      const request = `INSERT INTO requests (id, kind, request_type, status, origin_chain_id, destination_chain_id, origin_currency,
        destination_currency, amount_in, amount_out, min_amount_out, created_at, updated_at) VALUES (?, ?, 'bridge', 'waiting', 1, 2, 'a', 'b', '1', '1', '1', ?, ?)`;
      expect(await run(request, 'r1', 'order', now, now)).toEqual({ sqlite: 'ok', pg: 'ok' });
      expect(await run(request, 'r2', 'bogus', now, now)).toEqual({ sqlite: 'check', pg: 'check' });
      expect(await run(request, 'r1', 'order', now, now)).toEqual({ sqlite: 'unique', pg: 'unique' });
      const payout = `INSERT INTO payouts (id, kind, request_id, chain_id, recipient, currency, amount, state, decided_at, updated_at) VALUES (?, ?, ?, 1, 'x', 'c', '5', ?, 0, 0)`;
      expect(await run(payout, 'p1', 'fill', 'r1', 'queued')).toEqual({ sqlite: 'ok', pg: 'ok' });
      expect(await run(payout, 'p2', 'fill', 'nope', 'queued')).toEqual({ sqlite: 'foreign key', pg: 'foreign key' });
      expect(await run(payout, 'p3', 'fill', 'r1', 'lost')).toEqual({ sqlite: 'check', pg: 'check' });
      expect(await run(payout, 'p4', 'theft', 'r1', 'queued')).toEqual({ sqlite: 'check', pg: 'check' });
      const entry = `INSERT INTO balance_entries (wallet, kind, amount, ref, created_at) VALUES ('w', ?, ?, ?, 0)`;
      expect(await run(entry, 'credit', 5, 'ref1')).toEqual({ sqlite: 'ok', pg: 'ok' });
      expect(await run(entry, 'credit', 5, 'ref1')).toEqual({ sqlite: 'unique', pg: 'unique' });
      expect(await run(entry, 'gift', 5, 'ref2')).toEqual({ sqlite: 'check', pg: 'check' });
      expect(await run(entry, 'credit', null, 'ref3')).toEqual({ sqlite: 'not null', pg: 'not null' });
      const tx = `INSERT INTO transactions (hash, payout_id, chain_id, sender, nonce, gas_limit, max_fee_per_gas, max_priority_fee_per_gas, state, created_at, updated_at, cancel)
        VALUES (?, 'p1', 1, 's', 0, '1', '1', '1', 'signed', 0, 0, ?)`;
      // A transaction row without its signed bytes is refused (migration 23: the bytes are stored once per hash).
      expect(await run(tx, 'h', 1)).toEqual({ sqlite: 'foreign key', pg: 'foreign key' });
      expect(await run(`INSERT INTO transaction_bytes (hash, raw) VALUES ('h', 'r')`)).toEqual({ sqlite: 'ok', pg: 'ok' });
      expect(await run(tx, 'h', 2)).toEqual({ sqlite: 'check', pg: 'check' });
      expect(await run(tx, 'h', 1)).toEqual({ sqlite: 'ok', pg: 'ok' });
      expect(await run(`INSERT INTO depository_owed_entries (deposit_id, chain_id, currency, sign, amount) VALUES ('d', 1, 'c', 0, '1')`)).toEqual({
        sqlite: 'check',
        pg: 'check',
      });
    } finally {
      lite.exec('ROLLBACK');
      await client.query('ROLLBACK');
    }
  });

  it("keeps depository_owed as SQLite's triggers do, row for row and entry for entry", async () => {
    const run = both(lite, client);
    const sqliteBefore = lite.prepare('SELECT COUNT(*) AS n FROM depository_owed_entries').get() as { n: number };
    lite.exec('BEGIN');
    await client.query('BEGIN');
    try {
      const owed = async () => {
        const r = await rowsOf(lite, client, 'SELECT deposit_id, chain_id, currency, amount, excess FROM depository_owed ORDER BY deposit_id');
        expect(r.pg).toEqual(r.sqlite);
        return r.sqlite;
      };
      const entries = async () => {
        const r = await rowsOf(lite, client, `SELECT deposit_id, sign, amount, excess FROM depository_owed_entries WHERE seq > ${sqliteBefore.n} ORDER BY seq`);
        expect(r.pg).toEqual(r.sqlite);
        return r.sqlite;
      };
      const ok = { sqlite: 'ok', pg: 'ok' };
      for (const id of ['r1', 'r2', 'r3']) {
        expect(
          await run(
            `INSERT INTO requests (id, kind, request_type, status, origin_chain_id, destination_chain_id, origin_currency, destination_currency, amount_in, amount_out,
             min_amount_out, created_at, updated_at) VALUES (?, 'order', 'bridge', 'waiting', 1, 2, 'a', 'b', '1', '1', '1', 0, 0)`,
            id,
          ),
        ).toEqual(ok);
        expect(
          await run(
            `INSERT INTO deposits (id, chain_id, tx_hash, log_index, block_number, block_hash, depositor, currency, amount, order_ref, state, request_id, seen_at)
             VALUES (?, 1, 'tx', 0, 1, 'bh', 'dep', 'usdc', ?, 'ref', 'confirmed', ?, 0)`,
            `d${id}`,
            id === 'r3' ? '115792089237316195423570985008687907853269984665640564039457584007913129639935' : '1000',
            id,
          ),
        ).toEqual(ok);
      }
      const payout = `INSERT INTO payouts (id, kind, request_id, deposit_id, chain_id, recipient, currency, amount, state, decided_at, updated_at)
        VALUES (?, ?, ?, ?, 1, 'x', 'usdc', ?, ?, 0, 0)`;
      const setPayout = `UPDATE payouts SET state = ? WHERE id = ?`;
      const setDeposit = `UPDATE deposits SET state = ? WHERE id = ?`;
      // Handled, filled: owed. (The fill queued first: the insert trigger sees no success yet.)
      expect(await run(setDeposit, 'handled', 'dr1')).toEqual(ok);
      expect(await run(payout, 'f1', 'fill', 'r1', 'dr1', '990', 'queued')).toEqual(ok);
      expect(await owed()).toEqual([]);
      expect(await run(setPayout, 'success', 'f1')).toEqual(ok);
      expect((await owed()).map((r) => (r as { deposit_id: string }).deposit_id)).toEqual(['dr1']);
      // An excess not yet paid takes it out; paid, it is back with its excess.
      expect(await run(payout, 'x1', 'excess', 'r1', 'dr1', '10', 'queued')).toEqual(ok);
      expect(await owed()).toEqual([]);
      expect(await run(setPayout, 'success', 'x1')).toEqual(ok);
      expect(await owed()).toEqual([{ deposit_id: 'dr1', chain_id: 1, currency: 'usdc', amount: '1000', excess: '10' }]);
      // A uint256 deposit, filled, then withdrawn (taken out), the withdrawal failed (back).
      expect(await run(setDeposit, 'handled', 'dr3')).toEqual(ok);
      expect(await run(payout, 'f3', 'fill', 'r3', 'dr3', '1', 'success')).toEqual(ok);
      expect(await run(payout, 'w1', 'withdrawal', null, null, '1', 'queued')).toEqual(ok);
      expect(await run('INSERT INTO withdrawn_deposits (deposit_id, payout_id) VALUES (?, ?)', 'dr3', 'w1')).toEqual(ok);
      expect((await owed()).map((r) => (r as { deposit_id: string }).deposit_id)).toEqual(['dr1']);
      expect(await run('DELETE FROM withdrawn_deposits WHERE payout_id = ?', 'w1')).toEqual(ok);
      expect((await owed()).map((r) => (r as { deposit_id: string }).deposit_id)).toEqual(['dr1', 'dr3']);
      // A refund of it: no longer owed. A deposit leaving handled (reorged): no longer owed.
      expect(await run(payout, 'rf3', 'refund', 'r3', 'dr3', '1', 'queued')).toEqual(ok);
      expect(await run(setDeposit, 'reorged', 'dr1')).toEqual(ok);
      expect(await owed()).toEqual([]);
      // A state change that neither enters nor leaves handled runs no trigger; back to handled, owed again.
      expect(await run(setDeposit, 'confirmed', 'dr2')).toEqual(ok);
      expect(await run(setDeposit, 'handled', 'dr1')).toEqual(ok);
      expect((await owed()).map((r) => (r as { deposit_id: string }).deposit_id)).toEqual(['dr1']);
      // The entries: each change of a row as -1 the old, +1 the new, the same on both.
      const e = await entries();
      expect(e.length).toBeGreaterThan(8);
      expect(e.filter((x) => (x as { deposit_id: string }).deposit_id === 'dr2')).toEqual([]);
    } finally {
      lite.exec('ROLLBACK');
      await client.query('ROLLBACK');
    }
  });

  it('sums base-10 amounts exactly with decimal_sum and decimal_sum_product, as SQLite does', async () => {
    // SQLite's are registered by the payouts store.
    new Payouts(lite);
    const big = '115792089237316195423570985008687907853269984665640564039457584007913129639935';
    const vals = `(VALUES ('${big}', '3'), (NULL, '5'), ('18446744073709551616', NULL), ('7', '11'))`;
    for (const sql of [
      `SELECT decimal_sum(a) AS s FROM ${vals} AS v(a, b)`,
      `SELECT decimal_sum_product(a, b) AS s FROM ${vals} AS v(a, b)`,
      `SELECT decimal_sum(a) AS s FROM ${vals} AS v(a, b) WHERE a = 'none'`,
      `SELECT decimal_sum_product(a, b) AS s FROM ${vals} AS v(a, b) WHERE a = 'none'`,
    ]) {
      // SQLite names VALUES' columns column1, column2.
      const s = (lite.prepare(sql.replace('AS v(a, b)', 'AS v').replace(/\ba\b/g, 'column1').replace(/\bb\b/g, 'column2')).get() as { s: string }).s;
      const p = (await client.query(sql)).rows[0].s as string;
      expect(p).toBe(s);
    }
    expect((await client.query(`SELECT decimal_sum(a) AS s FROM ${vals} AS v(a, b)`)).rows[0].s).toBe((BigInt(big) + 2n ** 64n + 7n).toString());
  });
});
