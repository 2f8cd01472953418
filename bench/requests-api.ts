// The request listing at scale: a ledger of N synthetic requests (1,000,000 by default) spread over
// chains, users, statuses and currencies, served by `relay-node api` in its own process; then p50/p99
// latency and requests/s of the listed queries, beside /health of the same server (a constant body:
// the ceiling), all driven by the same load generator (autocannon) in the same run.
// Usage: npm run bench:requests-api -- [rows] [seconds per query] [concurrency] [--ledger sqlite|postgres]
// Each query runs for a fixed time (after a 1 s warm-up): autocannon ends a run given a number of calls at its next
// whole-second tick, so a fast route's rate was capped near the call count per second (the ceiling included).
// --ledger postgres: the ledger in a PostgreSQL this bench starts (fsync off while seeding does not change reads),
// seeded in bulk (seedRequestsPostgres: the same rows as SQLite's), and the same API process on it.
// The last line printed is the run's figures as one JSON object (bench/ledgers.ts reads it).
import { spawn } from 'node:child_process';
import autocannon from 'autocannon';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { startPostgres } from '../src/devnet/postgres.ts';
import { Ledger } from '../src/ledger/index.ts';
import { withPostgres } from '../src/ledger/pgUrl.ts';
import { PostgresLedger } from '../src/ledger/postgres/ledger.ts';
import { seededRequest, seedRequests, seedRequestsPostgres } from '../test/helpers/seedRequests.ts';
import { takeLedgerFlag } from './ledgerFlag.ts';
import { scratchDir } from './scratchDir.ts';

const args = process.argv.slice(2);
const LEDGER = takeLedgerFlag(args);
const ROWS = Number(args[0] ?? 1_000_000);
const SECONDS = Number(args[1] ?? 10);
const CONCURRENCY = Number(args[2] ?? 2);

// The ledger file and the server's data go with the run (a million requests is hundreds of MB).
const dir = scratchDir('relay-bench-requests-');
const CHAINS = [8453, 10, 1, 42161, 137];

// ---------------------------------------------------------------- the ledger
const t0 = Date.now();
const postgres = LEDGER === 'postgres' ? await startPostgres({ durable: false }) : undefined;
// Interrupted (bench/ledgers.ts forwards its SIGINT): stop what this bench started, the API server and PostgreSQL.
let apiProcess: ReturnType<typeof spawn> | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    apiProcess?.kill('SIGKILL');
    void (postgres?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}
let key: string;
let ledgerUrl: string | undefined;
let seedSeconds = 0;
try {
  if (postgres) {
    // Migrated and given its key through the ledger, then seeded in bulk on a connection of its own.
    ledgerUrl = await postgres.createDatabase();
    const ledger = PostgresLedger.open(ledgerUrl);
    key = ledger.apiKeys.create('bench').key;
    ledger.close();
    const s0 = Date.now();
    await withPostgres(ledgerUrl, async (client) => {
      await seedRequestsPostgres(client, ROWS);
      await client.query('ANALYZE');
    });
    seedSeconds = (Date.now() - s0) / 1000;
  } else {
    const ledger = Ledger.open(join(dir, 'ledger.sqlite'));
    key = ledger.apiKeys.create('bench').key;
    ledger.db.pragma('synchronous = OFF');
    const s0 = Date.now();
    seedRequests(ledger.db, ROWS);
    ledger.db.pragma('synchronous = FULL');
    ledger.db.exec('ANALYZE');
    seedSeconds = (Date.now() - s0) / 1000;
    ledger.close();
  }
} catch (e) {
  await postgres?.stop();
  throw e;
}
// A fill from the middle of the ledger: the request, its wallet and its hashes are what the listed queries look up.
let mid = Math.floor(ROWS / 2);
while (seededRequest(mid).status !== 'success') mid++;
const { id, user, depositTx, fillTx } = seededRequest(mid);
const samples = { id, user, depositTx: depositTx!, fillTx: fillTx! };
const buildSeconds = (Date.now() - t0) / 1000;
console.log(
  `ledger (${LEDGER}): ${ROWS.toLocaleString()} requests seeded in ${seedSeconds.toFixed(1)} s (${Math.round(ROWS / Math.max(seedSeconds, 0.001)).toLocaleString()} requests/s, with ANALYZE), ${buildSeconds.toFixed(1)} s with the ledger's creation${postgres ? ' (server start and migrations)' : ''}`,
);

// ---------------------------------------------------------------- the server, in its own process
const configPath = join(dir, 'config.json');
writeFileSync(
  configPath,
  JSON.stringify({
    dataDir: dir,
    ...(ledgerUrl ? { ledger: { url: ledgerUrl } } : {}),
    api: {
      host: '127.0.0.1',
      port: 0,
      rateLimit: { perKeyPerMinute: 100_000_000, unauthenticatedPerMinute: 100_000_000, probesPerMinute: 100_000_000 },
      // The load generator is one caller (one key) with CONCURRENCY connections, and a run's last calls may still be
      // in the workers when the next run starts (it stops waiting for them): twice that many listings may be in
      // progress at once, where the default share of one would answer the second 429.
      listing: { perCaller: 2 * CONCURRENCY },
    },
    log: { level: 'info' },
    solverKey: { env: 'BENCH_SOLVER_KEY' },
    chains: CHAINS.map((id) => ({
      id,
      name: `chain ${id}`,
      rpcUrl: 'http://127.0.0.1:9',
      depository: '0x0000000000000000000000000000000000000001',
      filler: '0x0000000000000000000000000000000000000002',
      nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
      currencies: [],
    })),
  }),
);
const server = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'api', '--config', configPath, '--port', '0'], {
  env: { ...process.env, BENCH_SOLVER_KEY: `0x${'11'.repeat(32)}` },
  stdio: ['ignore', 'pipe', 'pipe'],
});
apiProcess = server;
const url = await new Promise<string>((resolve, reject) => {
  let out = '';
  const onData = (d: Buffer) => {
    out += d.toString();
    const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out);
    if (m) resolve(m[1]!);
  };
  server.stdout.on('data', onData);
  server.stderr.on('data', onData);
  server.on('exit', (code) => reject(new Error(`api exited (${code}): ${out}`)));
}).catch(async (e: unknown) => {
  server.kill('SIGKILL');
  await postgres?.stop();
  throw e;
});

// autocannon drives the server from this process, which only sends and counts: the same load
// generator for every route, so the constant-body route is a ceiling of the server, not of a client.
// A path, or a function giving each call's path (the first call's is probed).
async function measure(paths: string | (() => string), withKey = true) {
  const headers: Record<string, string> = withKey ? { 'x-api-key': key } : {};
  const next = typeof paths === 'string' ? () => paths : paths;
  const path = next();
  // A check that the query answers what it should, then a warm-up.
  const probe = await fetch(url + path, { headers });
  if (probe.status !== 200) throw new Error(`${path}: ${probe.status} ${await probe.text()}`);
  const requests = [{ setupRequest: (req: { path: string }) => ({ ...req, path: next() }) }];
  await autocannon({ url: url + path, headers, connections: CONCURRENCY, duration: 1, requests });
  const r = await autocannon({ url: url + path, headers, connections: CONCURRENCY, duration: SECONDS, requests });
  if (r.non2xx || r.errors || r.timeouts) throw new Error(`${path}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
  const seconds = r.duration;
  return { p50: r.latency.p50, p99: r.latency.p99, rps: Math.round(r.requests.total / seconds) };
}

// A page deep in a continuation: follow 200 pages of 50 first (fewer on a smaller ledger: half of it).
const DEPTH = Math.max(1, Math.min(200, Math.floor(ROWS / 100)));
async function deepContinuation(): Promise<string> {
  let c = '';
  for (let i = 0; i < DEPTH; i++) {
    const r = (await (await fetch(`${url}/requests/v3?limit=50${c ? `&continuation=${c}` : ''}`, { headers: { 'x-api-key': key } })).json()) as {
      continuation: string;
    };
    c = r.continuation;
  }
  return c;
}

try {
  const twoGroups = encodeURIComponent(
    JSON.stringify([
      { status: 'refund', originChainId: 10 },
      { user: samples.user, 'not:status': 'failure' },
    ]),
  );
  // Every request's id in turn: on PostgreSQL each read is a miss of the replica's cache (10,000 records, the
  // oldest kept going first), where the same id again is served from it between its changes.
  // (The paths made beforehand: the load generator does nothing more per call than for one path.)
  const idPaths = Array.from({ length: ROWS }, (_, i) => `/intents/status/v3?requestId=${seededRequest(i).id}`);
  let turn = 0;
  const everyId = () => idPaths[turn++ % ROWS]!;
  const queries: [string, string | (() => string), boolean][] = [
    ['ceiling: GET /health (constant body)', '/health', false],
    ['status by id (the same id again)', `/intents/status/v3?requestId=${samples.id}`, false],
    [`status by id (${ROWS.toLocaleString()} ids in turn)`, everyId, false],
    ['requests/v3 by user', `/requests/v3?user=${samples.user}`, true],
    ['requests/v3 by term = tx hash', `/requests/v3?term=${samples.fillTx}`, true],
    ['requests/v3 two-group filters', `/requests/v3?filters=${twoGroups}`, true],
    [`requests/v3 ${DEPTH} pages deep in a continuation`, `/requests/v3?limit=50&continuation=${await deepContinuation()}`, true],
  ];
  const results: Record<string, { p50: number; p99: number; rps: number }> = {};
  for (const [name, path, withKey] of queries) {
    results[name] = await measure(path, withKey);
    const ceiling = Object.values(results)[0]!.rps;
    console.log(
      `${name.padEnd(45)} p50 ${String(results[name]!.p50).padStart(6)} ms  p99 ${String(results[name]!.p99).padStart(6)} ms  ${String(results[name]!.rps).padStart(6)} req/s  ${((100 * results[name]!.rps) / ceiling).toFixed(0).padStart(3)}% of the ceiling`,
    );
  }
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))?.[1] ?? 0);
  const hwmKb = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))?.[1] ?? 0);
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: +(totalmem() / 2 ** 30).toFixed(1), node: process.version };
  console.log(
    `server memory: ${(rssKb / 1024).toFixed(0)} MB resident, ${(hwmKb / 1024).toFixed(0)} MB peak; concurrency ${CONCURRENCY}, ${SECONDS} s per query`,
  );
  console.log(`machine: ${machine.cpus} × ${machine.cpu}, ${machine.memGiB} GiB, node ${machine.node}`);
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/requests-api-${Date.now()}.json`;
  writeFileSync(
    file,
    JSON.stringify(
      {
        ledger: LEDGER,
        rows: ROWS,
        secondsPerQuery: SECONDS,
        concurrency: CONCURRENCY,
        buildSeconds,
        seedSeconds,
        results,
        serverRssMb: rssKb / 1024,
        serverPeakMb: hwmKb / 1024,
        machine,
      },
      null,
      2,
    ),
  );
  console.log(`wrote ${file}`);
  // The figures as the last line, one JSON object, for bench/ledgers.ts.
  console.log(JSON.stringify({ bench: 'requests-api', ledger: LEDGER, rows: ROWS, seedSeconds, buildSeconds, results }));
} finally {
  const exited = new Promise((r) => (server.exitCode !== null || server.signalCode !== null ? r(null) : server.once('exit', r)));
  server.kill('SIGTERM');
  await exited;
  await postgres?.stop();
}
