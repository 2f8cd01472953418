import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../../devnet/postgres.ts';
import { LedgerQueryError, LedgerUnavailable } from '../errors.ts';
import { SyncPgClient } from './syncClient.ts';
import { until } from '../../../test/helpers/stack.ts';

describe('SyncPgClient: PostgreSQL called synchronously through a worker thread', () => {
  let server: PostgresHandle;
  let url: string;
  const clients: SyncPgClient[] = [];
  const open = (timeoutMs = 5_000) => {
    const c = new SyncPgClient(url, { timeoutMs });
    clients.push(c);
    return c;
  };
  beforeAll(async () => {
    server = await startPostgres({ durable: false });
    url = await server.createDatabase();
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.close();
    await server?.stop();
  });

  it('answers queries synchronously, values typed (int8 as bigint, numeric exact, NULL as null)', () => {
    const c = open();
    c.query('CREATE TABLE t (id BIGINT PRIMARY KEY, amount NUMERIC NOT NULL, note TEXT)');
    const big = 2n ** 63n - 1n;
    const r = c.query('INSERT INTO t (id, amount, note) VALUES ($1, $2, $3), ($4, $5, $6)', [big, '123456789012345678901234567890', null, 1, 7, 'x']);
    expect(r.rowCount).toBe(2);
    const rows = c.query('SELECT id, amount, note FROM t ORDER BY id').rows;
    expect(rows).toEqual([
      { id: 1n, amount: '7', note: 'x' },
      { id: big, amount: '123456789012345678901234567890', note: null },
    ]);
    expect(c.query('SELECT SUM(amount) AS s, COUNT(*) AS n, 2 > 1 AS yes FROM t').rows).toEqual([{ s: '123456789012345678901234567897', n: 2n, yes: true }]);
  });

  it("throws PostgreSQL's message and code, and never the URL or its password", () => {
    const c = open();
    c.query('CREATE TABLE u (k TEXT PRIMARY KEY)');
    c.query("INSERT INTO u VALUES ('a')");
    let err: unknown;
    try {
      c.query("INSERT INTO u VALUES ('a')");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LedgerQueryError);
    expect((err as LedgerQueryError).code).toBe('23505');
    expect((err as LedgerQueryError).message).toMatch(/duplicate key value violates unique constraint/);
    expect(() => c.query('SELEC 1')).toThrow(/syntax error/);
    // The connection is still usable after an error.
    expect(c.query('SELECT 1 AS one').rows).toEqual([{ one: 1 }]);

    const wrong = new URL(url);
    wrong.password = 'not-the-password-4d1c';
    const bad = new SyncPgClient(wrong.toString(), { timeoutMs: 5_000 });
    clients.push(bad);
    let e2: Error | undefined;
    try {
      bad.query('SELECT 1');
    } catch (e) {
      e2 = e as Error;
    }
    expect(e2).toBeInstanceOf(LedgerUnavailable);
    expect(`${e2!.message} ${String(e2!.stack)}`).not.toMatch(/not-the-password-4d1c|postgres:\/\//);
    expect(e2!.message).toMatch(/password authentication failed/);
  });

  it('runs a batch in one round trip and rolls the transaction back when a statement fails', () => {
    const c = open();
    c.query('CREATE TABLE v (k INT PRIMARY KEY)');
    c.batch([{ sql: 'BEGIN' }, { sql: 'INSERT INTO v VALUES (1)' }, { sql: 'COMMIT' }]);
    expect(() =>
      c.batch([{ sql: 'BEGIN' }, { sql: 'INSERT INTO v VALUES (2)' }, { sql: 'INSERT INTO v VALUES (1)' }, { sql: 'COMMIT' }], { rollbackOnError: true }),
    ).toThrow(LedgerQueryError);
    // 2 was rolled back with the failed statement's transaction, and the connection is out of it.
    expect(c.query('SELECT k FROM v ORDER BY k').rows).toEqual([{ k: 1 }]);
    expect(c.query('SELECT now() = statement_timestamp() AS autocommit').rows).toEqual([{ autocommit: true }]);
  });

  it('throws LedgerUnavailable within its timeout when the server is paused, fails fast meanwhile, and reconnects once it is back', async () => {
    const c = open(1_000);
    const before = c.query('SELECT pg_backend_pid() AS pid').rows[0].pid;
    // The whole server: the postmaster and its children (our connection's backend among them).
    const pids = [server.pid!, ...readFileSync(`/proc/${server.pid}/task/${server.pid}/children`, 'utf8').trim().split(/\s+/).map(Number)];
    expect(pids).toContain(before);
    for (const p of pids) process.kill(p, 'SIGSTOP');
    const errors: unknown[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        try {
          c.query('SELECT 1');
        } catch (e) {
          errors.push(e);
        }
      }
    } finally {
      for (const p of pids) process.kill(p, 'SIGCONT');
    }
    // Without the bound the first call would block until SIGCONT, which comes only after it returns.
    expect(errors).toHaveLength(2);
    expect(errors[0]).toBeInstanceOf(LedgerUnavailable);
    expect((errors[0] as Error).message).toMatch(/did not answer within 1000 ms/);
    // The second, right after: refused at once until the next attempt is due, not another wait of the whole bound.
    expect((errors[1] as Error).message).toMatch(/unreachable; next attempt in \d+ ms/);
    // Then a new connection (a new backend).
    const after = await until(() => {
      try {
        return c.query('SELECT pg_backend_pid() AS pid').rows[0].pid;
      } catch (e) {
        if (e instanceof LedgerUnavailable) return undefined;
        throw e;
      }
    }, 'a new connection');
    expect(after).not.toBe(before);
  });

  it('reconnects on the next call after the server restarted', async () => {
    const c = open();
    c.query('CREATE TABLE w (k INT)');
    c.query('INSERT INTO w VALUES (1)');
    await server.restart();
    expect(c.query('SELECT k FROM w').rows).toEqual([{ k: 1 }]);
  });
});
