import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';
import { openDb } from '../src/ledger/db.ts';
import { Ledger } from '../src/ledger/index.ts';
import { migrations } from '../src/ledger/migrations.ts';
import { tablesInForeignKeyOrder } from '../src/ledger/pgCopy.ts';
import { anvilKey } from './helpers/anvilKeys.ts';
import { MINIMAL_CONFIG } from './helpers/minimalConfig.ts';
import { seedRequests } from './helpers/seedRequests.ts';
import { pgQuery } from './helpers/pgSql.ts';

// relay-node db migrate and db copy as CLI processes against a real PostgreSQL: the copy of a ledger
// with rows in every kind of table, refused into a non-empty database, and rolled back whole when its
// verification finds a table that does not match. The URL (its password) never shows.

function run(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, ['bin/relay-node.js', ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: r.stdout + r.stderr };
}

// Every value as text (or null): SQLite integers and PostgreSQL BIGINT strings compare alike.
const norm = (rows: Record<string, unknown>[]) => rows.map((r) => JSON.stringify(Object.entries(r).map(([k, v]) => [k, v === null ? null : String(v)]))).sort();

const UINT256_MAX = (2n ** 256n - 1n).toString();

/** A SQLite ledger with rows in every kind of table: seeded requests, deposits, fills and transactions, and money and events through the stores. */
function seedLedger(file: string): void {
  const l = Ledger.open(file);
  seedRequests(l.db, 120);
  const requests = l.db.prepare(`SELECT id FROM requests ORDER BY created_at LIMIT 5`).all() as { id: string }[];
  const key = l.apiKeys.create('integrator');
  l.events.addWebhook(key.id, 'https://example.com/hook');
  l.tx(() => {
    l.db.prepare('UPDATE requests SET api_key_id = ? WHERE id = ?').run(key.id, requests[0]!.id);
    for (const r of requests) l.events.record(r.id);
    l.balances.post({ wallet: '0xa', kind: 'credit', amount: 9_000_000_000_000n, request_id: null, ref: 'credit:1' });
    l.balances.post({ wallet: '0xa', kind: 'hold', amount: 5_000_000n, request_id: requests[1]!.id, ref: `hold:${requests[1]!.id}` });
    l.balances.post({ wallet: '0xa', kind: 'sponsorship', amount: -1_250_000n, request_id: requests[2]!.id, ref: `sponsorship:${requests[2]!.id}` });
    l.appFees.post({ recipient: '0xb', chain_id: 8453, currency: '0xc', amount: 10n ** 30n, kind: 'accrual', request_id: requests[3]!.id, ref: 'fee:1' });
    l.payouts.insert({
      id: 'claim:big',
      kind: 'claim',
      request_id: null,
      deposit_id: null,
      chain_id: 8453,
      recipient: '0xb',
      currency: '0xc',
      amount: UINT256_MAX,
      decided_at: 1,
    });
    // A withdrawal takes one owed deposit (the owed triggers write depository_owed and its entries).
    const owed = l.withdrawals.owed(8453)[0] ?? l.withdrawals.owed(10)[0];
    l.payouts.insert({
      id: 'withdrawal:1',
      kind: 'withdrawal',
      request_id: null,
      deposit_id: null,
      chain_id: owed!.chain_id,
      recipient: '0xs',
      currency: owed!.currency,
      amount: owed!.owed.toString(),
      decided_at: 2,
    });
    l.withdrawals.take([owed!.id], 'withdrawal:1');
    l.operations.record({ action: 'pause', target: 'all', actor: 'ops', reason: 'test' });
    l.operations.record({ action: 'resume', target: 'all', actor: 'ops', reason: 'test' });
    l.operations.switchOn('dry-run', 'ops', 'test');
    l.indexer.setCursor(8453, 'depository', 1234);
  });
  // The last admin action removed: PostgreSQL's identity must still start past it, as SQLite's sequence does.
  l.db.prepare('DELETE FROM admin_actions WHERE id = (SELECT MAX(id) FROM admin_actions)').run();
  l.close();
}

describe('relay-node db migrate / db copy on PostgreSQL', () => {
  let server: PostgresHandle;
  let dir: string;
  let file: string;
  beforeAll(async () => {
    server = await startPostgres({ durable: false });
    dir = mkdtempSync(join(tmpdir(), 'relay-pgcli-'));
    file = join(dir, 'ledger.sqlite');
    seedLedger(file);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const password = () => new URL(server.url).password;

  it('db migrate migrates PostgreSQL named by --url or --url-env, says which versions ran, and never shows the URL', async () => {
    const url = await server.createDatabase();
    const first = run(['db', 'migrate', '--url', url]);
    expect(first.code, first.out).toBe(0);
    const versions = migrations.map((m) => m.version).sort((a, b) => a - b);
    expect(first.out).toContain(`applied migrations ${versions.join(', ')} to the PostgreSQL ledger`);
    const again = run(['db', 'migrate', '--url-env', 'LEDGER_URL'], { LEDGER_URL: url });
    expect(again.code, again.out).toBe(0);
    expect(again.out).toMatch(/the PostgreSQL ledger is up to date/);
    const bad = new URL(url);
    bad.password = 'not-the-password-1234';
    const refused = run(['db', 'migrate', '--url', bad.toString()]);
    expect(refused.code).toBe(1);
    expect(refused.out).toMatch(/db migrate: .*password authentication failed/);
    for (const r of [first, again, refused]) {
      expect(r.out).not.toContain(password());
      expect(r.out).not.toContain('not-the-password-1234');
      expect(r.out).not.toContain('postgres://postgres');
    }
  }, 180_000);

  it('ledger commands (keys, admin keys) act on the PostgreSQL ledger a --config names, not on a file in its data directory', async () => {
    const url = await server.createDatabase();
    expect(run(['db', 'migrate', '--url', url]).code).toBe(0);
    const dataDir = mkdtempSync(join(dir, 'data-'));
    const config = join(dir, 'pg-config.json');
    writeFileSync(config, JSON.stringify({ ...MINIMAL_CONFIG, dataDir, ledger: { url: { env: 'LEDGER_URL' } } }));
    const env = { K: anvilKey(1), LEDGER_URL: url };
    const made = run(['keys', 'create', '--name', 'integrator', '--config', config], env);
    expect(made.code, made.out).toBe(0);
    const admin = run(['admin', 'keys', 'create', '--name', 'ops-dana', '--config', config], env);
    expect(admin.code, admin.out).toBe(0);
    const ledger = Ledger.connect({ path: join(dataDir, 'ledger.sqlite'), url });
    try {
      expect(ledger.apiKeys.list().map((k) => k.name)).toEqual(['integrator']);
      expect(ledger.operations.adminKeys().map((k) => k.name)).toEqual(['ops-dana']);
    } finally {
      ledger.close();
    }
    // Nothing was written beside the config's data directory.
    expect(existsSync(join(dataDir, 'ledger.sqlite'))).toBe(false);
    for (const r of [made, admin]) expect(r.out).not.toContain(password());
  }, 180_000);

  it('db copy moves every row, keeps the ids and moves the sequences past them, verifies, and refuses a non-empty target', async () => {
    const url = await server.createDatabase();
    const r = run(['db', 'copy', '--from', file, '--to', url]);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/copied requests: 120 rows/);
    expect(r.out).toMatch(/verified: \d+ tables, \d+ rows, the same row count in each and the same money sums/);
    expect(r.out).not.toContain(password());

    const lite = openDb(file, { readonly: true });
    try {
      const tables = tablesInForeignKeyOrder(lite);
      expect(tables.indexOf('requests')).toBeLessThan(tables.indexOf('deposits'));
      expect(tables.indexOf('payouts')).toBeLessThan(tables.indexOf('transactions'));
      // A transaction's signed bytes (stored once per hash, migration 23) before the rows that reference them.
      expect(tables.indexOf('transaction_bytes')).toBeLessThan(tables.indexOf('transactions'));
      expect(r.out).toMatch(/copied transaction_bytes: [1-9]\d* rows/);
      let nonEmpty = 0;
      for (const t of tables) {
        const a = lite.prepare(`SELECT * FROM "${t}"`).safeIntegers(true).all() as Record<string, unknown>[];
        const b = await pgQuery(url, `SELECT * FROM "${t}"`);
        expect(norm(b), t).toEqual(norm(a));
        if (a.length) nonEmpty++;
      }
      expect(nonEmpty).toBeGreaterThanOrEqual(16);
      // The uint256 claim, exact; the owed rows and entries the triggers wrote, as they were.
      expect((await pgQuery(url, `SELECT amount FROM payouts WHERE id = 'claim:big'`))[0]).toEqual({ amount: UINT256_MAX });
      expect(Number((await pgQuery<{ n: string }>(url, 'SELECT COUNT(*) AS n FROM depository_owed_entries'))[0]!.n)).toBeGreaterThan(10);
      // The next admin action takes the id after the deleted one, as SQLite would.
      const seq = (lite.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'admin_actions'`).get() as { seq: number }).seq;
      const [next] = await pgQuery<{ id: string }>(url, `INSERT INTO admin_actions (action, actor, reason, created_at) VALUES ('x', 'y', 'z', 0) RETURNING id`);
      expect(Number(next!.id)).toBe(seq + 1);
      // The triggers are on again: a new fill on a handled deposit makes it owed.
      const [dep] = await pgQuery<{ id: string }>(
        url,
        `SELECT id FROM deposits WHERE state = 'handled' AND id NOT IN (SELECT deposit_id FROM payouts WHERE deposit_id IS NOT NULL) LIMIT 1`,
      );
      expect(dep).toBeDefined();
      await pgQuery(
        url,
        `INSERT INTO payouts (id, kind, deposit_id, chain_id, recipient, currency, amount, state, decided_at, updated_at) VALUES ('fill:new', 'fill', '${dep!.id}', 1, 'r', 'c', '1', 'success', 0, 0)`,
      );
      expect(await pgQuery(url, `SELECT deposit_id FROM depository_owed WHERE deposit_id = '${dep!.id}'`)).toHaveLength(1);
    } finally {
      lite.close();
    }

    const twice = run(['db', 'copy', '--from', file, '--to-env', 'TARGET'], { TARGET: url });
    expect(twice.code).toBe(1);
    expect(twice.out).toMatch(/db copy: the PostgreSQL ledger is not empty \(table \w+ has rows\)/);
    expect(twice.out).not.toContain(password());
  }, 180_000);

  it('a copy whose verification fails (a row lost, an amount changed) rolls back whole and names the table', async () => {
    for (const c of [
      {
        rule: `CREATE RULE lose_holds AS ON INSERT TO balance_entries WHERE NEW.kind = 'hold' DO INSTEAD NOTHING`,
        error: /verification failed, nothing was written: table balance_entries has 3 rows in SQLite and 2 in PostgreSQL/,
      },
      {
        rule: `CREATE RULE inflate AS ON INSERT TO payouts WHERE NEW.kind = 'claim' DO ALSO UPDATE payouts SET amount = amount || '0' WHERE id = NEW.id`,
        error: /verification failed, nothing was written: payouts\.amount \[claim\/queued\/0xc\] sums to \d+ in SQLite and \d+ in PostgreSQL/,
      },
    ]) {
      const url = await server.createDatabase();
      expect(run(['db', 'migrate', '--url', url]).code).toBe(0);
      // A rule, not a trigger (the copy switches triggers off): the database itself changes what arrives.
      await pgQuery(url, c.rule);
      const r = run(['db', 'copy', '--from', file, '--to', url]);
      expect(r.code, r.out).toBe(1);
      expect(r.out).toMatch(c.error);
      expect(r.out).not.toContain(password());
      for (const t of ['requests', 'deposits', 'payouts', 'balance_entries', 'events']) {
        expect((await pgQuery<{ n: string }>(url, `SELECT COUNT(*) AS n FROM ${t}`))[0]!.n, t).toBe('0');
      }
    }
  }, 180_000);
});
