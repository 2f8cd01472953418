import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';
import { migrate, openDb } from '../src/ledger/db.ts';
import { migratePostgres } from '../src/ledger/pgMigrate.ts';
import { FILTER_FIELDS, type FieldFilter, type RequestQuery } from '../src/ledger/requestSearch.ts';
import { SqliteLedger } from '../src/ledger/sqlite.ts';
import { toPgPlaceholders } from './helpers/pgSql.ts';

// Every SQL text the ledger's stores prepare (or exec), collected from a SqliteLedger through a
// recording wrapper, must be accepted by PostgreSQL's parser and planner (PREPARE) on the migrated
// schema: a statement only SQLite accepts fails here. Completeness: every line of src/ledger that
// calls prepare( must have been seen preparing, so a new statement is checked the day it is written.

const LEDGER_DIR = join(import.meta.dirname, '../src/ledger');
// SQLite's own migration runner (db.ts; PostgreSQL has its own, pgMigrate.ts), and db copy's reads of
// the SQLite source (pgCopy.ts): SQLite only.
const NOT_STORES = new Set(['db.ts', 'pgCopy.ts']);

interface Seen {
  sql: string;
  site: string;
}

/** The file:line of the ledger source that called prepare/exec, from the stack. */
function callSite(): string {
  for (const line of (new Error().stack ?? '').split('\n').slice(2)) {
    const m = /src\/ledger\/([A-Za-z]+\.ts):(\d+)/.exec(line);
    if (m) return `${m[1]}:${m[2]}`;
  }
  return 'elsewhere';
}

// What a statement SQLite cannot prepare (PostgreSQL's own text) answers while the stores are exercised.
const STUB = {
  run: () => ({ changes: 0, lastInsertRowid: 0 }),
  get: () => ({ n: 0 }),
  all: () => [],
  safeIntegers() {
    return this;
  },
};

/**
 * A SqliteLedger whose connection records what it prepares and execs. `postgres`: the connection
 * says it is PostgreSQL, so the stores choose their PostgreSQL statements (which SQLite, unable to
 * prepare them, answers with a stub).
 */
function recordingLedger(dialect: 'sqlite' | 'postgres'): { ledger: SqliteLedger; seen: Seen[] } {
  const db = openDb(':memory:');
  migrate(db);
  if (dialect === 'postgres') Object.assign(db, { dialect });
  const seen: Seen[] = [];
  const prepare = db.prepare.bind(db);
  const exec = db.exec.bind(db);
  db.prepare = ((sql: string) => {
    seen.push({ sql, site: callSite() });
    if (dialect === 'sqlite') return prepare(sql);
    try {
      return prepare(sql);
    } catch {
      return STUB;
    }
  }) as typeof db.prepare;
  db.exec = ((sql: string) => {
    seen.push({ sql, site: callSite() });
    return exec(sql);
  }) as typeof db.exec;
  return { ledger: new SqliteLedger(db), seen };
}

/** A listing query with everything off; each case turns one thing on. */
function query(q: Partial<RequestQuery>): RequestQuery {
  return {
    where: [],
    groups: [],
    ranges: {},
    features: [],
    includeChildRequests: false,
    excludedChains: [],
    sortBy: 'createdAt',
    sortDirection: 'desc',
    limit: 20,
    includeTotal: false,
    ...q,
  };
}

// Calls every store method that prepares its statement when called (the others prepared theirs
// when the store was built), and the listing's search with each of its parts.
function exercise(l: SqliteLedger): void {
  // Every store prepared on first use (a getter anywhere on the ledger's prototype chain) is touched.
  for (let proto = Object.getPrototypeOf(l); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const [name, d] of Object.entries(Object.getOwnPropertyDescriptors(proto))) if (d.get) void (l as unknown as Record<string, unknown>)[name];
  }
  l.db.pragma('foreign_keys = OFF');
  const d = l.deposits;
  d.recentWithoutTxFee(0, 1);
  d.setTxFee(1, '0xt', 1n);
  d.handledAbove(1, 0);
  d.handledIn(1, 0, 1);
  d.handledOfTxs(1, ['0xt']);
  // What a solver pass left confirmed, in one statement for its batch.
  d.countConfirmed(['x', 'y']);
  d.relocate('x', 1, '0xb');
  d.unhandleReorged('x');
  d.insertMany([
    {
      id: 'x',
      chain_id: 1,
      tx_hash: '0xt',
      log_index: 0,
      block_number: 1,
      block_hash: '0xb',
      depositor: 'a',
      currency: 'c',
      amount: '1',
      order_ref: '0x72',
      seen_at: 0,
    },
  ]);
  const o = l.operations;
  o.actions(10);
  o.actions(10, 'target');
  o.actionsOf('a', 't');
  o.postponement('x');
  o.postponed();
  o.dryRunDecisions();
  const key = o.createAdminKey('k');
  o.adminKey(key.key);
  o.adminKeys();
  o.revokeAdminKey(key.id);
  l.payouts.forDeposit('x');
  l.payouts.linkDeposit('x', 'y');
  l.withdrawals.writeOff('x');
  // A batch's payouts, read and marked in one statement each.
  l.payouts.getMany(['x', 'y']);
  l.payouts.setStateMany(['x', 'y'], 'sent', { txHash: '0xt' });
  l.requests.pruneUnusedQuotes(Date.now());
  const search = (q: Partial<RequestQuery>) => l.requests.search(query(q));
  for (const field of FILTER_FIELDS) {
    const values = field.endsWith('ChainId') ? [1, 2] : ['a', 'b'];
    for (const negate of [false, true]) {
      search({ where: [{ field, negate, values }] });
      search({ where: [{ field, negate, values: null }] });
    }
  }
  const f: FieldFilter = { field: 'status', negate: false, values: ['success'] };
  search({ groups: [[f, { ...f, field: 'user', values: null }], []] });
  search({ ranges: { createdAt: { min: 1, max: 2 }, depositBlock: { min: 1 }, amountUsd: { max: 5 }, appFeesUsd: { min: 0 }, fillTimeMs: { max: 9 } } });
  search({
    features: ['fast_fill', 'gasless'],
    referrer: { referrer: 'ref', apiKeyId: 'k' },
    excludedChains: [1, 2],
    includeChildRequests: true,
    includeTotal: true,
  });
  for (const sortBy of ['createdAt', 'updatedAt', 'amountUsd'] as const) {
    for (const sortDirection of ['asc', 'desc'] as const) search({ sortBy, sortDirection, after: { key: 5, id: 'x' } });
  }
}

/** The lines of the ledger's stores that call prepare( (a call spread over lines: the line of `.prepare(`). */
function prepareSites(): string[] {
  const sites: string[] = [];
  for (const file of readdirSync(LEDGER_DIR)) {
    if (!file.endsWith('.ts') || file.endsWith('.test.ts') || NOT_STORES.has(file)) continue;
    readFileSync(join(LEDGER_DIR, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (/\.prepare\(/.test(line) && !/^\s*(\/\/|\*)/.test(line)) sites.push(`${file}:${i + 1}`);
      });
  }
  return sites.sort();
}

// Outside quoted strings and identifiers: `user` and `authorization` are reserved in PostgreSQL (a
// bare `user` is CURRENT_USER, which PREPARE accepts), so every statement quotes them.
function bareReserved(sql: string): string[] {
  const unquoted = sql.replace(/'[^']*'|"[^"]*"/g, "''");
  return [...unquoted.matchAll(/(?<![@$\w])(user|authorization)\b/gi)].map((m) => m[1]!);
}

describe("the stores' SQL on PostgreSQL", () => {
  let server: PostgresHandle;
  let client: pg.Client;
  let seen: Seen[];
  let sqliteSeen: Seen[];
  let paramTypes: { sql: string; types: string[] }[] = [];
  beforeAll(async () => {
    server = await startPostgres({ durable: false });
    client = new pg.Client({ connectionString: await server.createDatabase() });
    await client.connect();
    await migratePostgres(client);
    const lite = recordingLedger('sqlite');
    exercise(lite.ledger);
    sqliteSeen = lite.seen;
    lite.ledger.close();
    const r = recordingLedger('postgres');
    exercise(r.ledger);
    seen = r.seen;
    r.ledger.close();
  }, 60_000);
  afterAll(async () => {
    await client?.end();
    await server?.stop();
  });

  it('sees every prepare( of the stores prepare its statement', () => {
    for (const run of [seen, sqliteSeen]) {
      const sites = new Set(run.map((s) => s.site));
      expect(prepareSites().filter((s) => !sites.has(s))).toEqual([]);
      expect(new Set(run.map((s) => s.sql)).size).toBeGreaterThan(150);
    }
  });

  it("differs from SQLite's only where a store chose PostgreSQL's statement (reading a JSON array, the lease on the database's clock, a lateral join)", () => {
    const lite = new Set(sqliteSeen.map((s) => s.sql));
    const own = [...new Set(seen.map((s) => s.sql))].filter((sql) => !lite.has(sql));
    expect(own.length).toBeGreaterThanOrEqual(2);
    for (const sql of own) expect(sql).toMatch(/jsonb_array_elements_text|clock_timestamp\(\)|CROSS JOIN LATERAL/);
  });

  it('quotes the columns named with words PostgreSQL reserves', () => {
    const bare = [...new Set(seen.map((s) => s.sql))].filter((sql) => bareReserved(sql).length > 0);
    expect(bare).toEqual([]);
  });

  it('has every statement accepted by PostgreSQL (PREPARE on the migrated schema)', async () => {
    const refused: string[] = [];
    // The quote pruner's scratch table, as its own exec makes it on the connection.
    await client.query('CREATE TEMP TABLE IF NOT EXISTS prune_ids (id TEXT PRIMARY KEY)');
    let n = 0;
    paramTypes = [];
    for (const sql of new Set(seen.map((s) => s.sql))) {
      const { text } = toPgPlaceholders(sql);
      const name = `s${n++}`;
      try {
        if (/^\s*(CREATE|DROP|BEGIN|COMMIT)\b/i.test(text)) await client.query(text);
        else {
          await client.query(`PREPARE ${name} AS ${text}`);
          const [{ types }] = (await client.query(`SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = $1`, [name])).rows;
          paramTypes.push({ sql, types });
          await client.query(`DEALLOCATE ${name}`);
        }
      } catch (e) {
        refused.push(`${(e as Error).message}\n    ${sql.replace(/\s+/g, ' ').trim().slice(0, 400)}`);
      }
    }
    expect(refused).toEqual([]);
  });

  it('types every parameter as PostgreSQL reads it at run time: 64-bit integers, text (never a 32-bit integer a timestamp overflows)', () => {
    expect(paramTypes.length).toBeGreaterThan(150);
    const narrow = paramTypes.filter((p) => p.types.some((t) => !['bigint', 'text', 'jsonb'].includes(t)));
    expect(narrow.map((p) => `${p.types.join(',')}: ${p.sql.replace(/\s+/g, ' ').slice(0, 200)}`)).toEqual([]);
  });
});
