// The throughput and request-listing benchmarks on both ledgers, side by side: bench/throughput.ts and
// bench/requests-api.ts, each run with --ledger sqlite then --ledger postgres in child processes, one
// after the other (never two at once: they would share the cores), then one table of their final JSON
// lines: figure | SQLite | PostgreSQL | ceiling (as each run measured it: SQLite's run / PostgreSQL's run).
// Usage: npm run bench:ledgers -- [fills] [rows] [seconds per query] [concurrency]
// Defaults are small enough to finish in a few minutes on a 2-core machine; the benches' own defaults are larger.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const FILLS = Number(process.argv[2] ?? 200);
const ROWS = Number(process.argv[3] ?? 20_000);
const SECONDS = Number(process.argv[4] ?? 5);
const CONCURRENCY = Number(process.argv[5] ?? 2);
for (const [name, v] of Object.entries({ fills: FILLS, rows: ROWS, seconds: SECONDS, concurrency: CONCURRENCY })) {
  if (!Number.isInteger(v) || v < 1)
    throw new Error(`${name}: a positive integer (usage: npm run bench:ledgers -- [fills] [rows] [seconds per query] [concurrency])`);
}
const LEDGERS = ['sqlite', 'postgres'] as const;
type LedgerName = (typeof LEDGERS)[number];

interface Throughput {
  filled: number;
  orders: number;
  fillsPerSecond: number;
  latencyMs: { p50: number; p99: number };
  filledTwice: number;
  missing: number;
  ceilingPerSecond: number;
  cpuMsPerFill: number;
  roundTripsPerFill?: number;
}
interface RequestsApi {
  rows: number;
  seedSeconds: number;
  results: Record<string, { p50: number; p99: number; rps: number }>;
}

// Interrupted: the running bench is told (it stops what it started), and no further one starts.
let current: ReturnType<typeof spawn> | undefined;
let interrupted = false;
process.on('SIGINT', () => {
  interrupted = true;
  current?.kill('SIGINT');
});

/** Runs one bench in a child process, its output passed through with a prefix; resolves to its last JSON line (undefined if it printed none). */
async function run<T>(file: string, args: string[], label: string): Promise<{ figures?: T; code: number | null; seconds: number }> {
  const t0 = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', file, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  current = child;
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let last: T | undefined;
  for await (const line of createInterface({ input: child.stdout! })) {
    console.log(`[${label}] ${line}`);
    if (line.startsWith('{')) {
      try {
        last = JSON.parse(line) as T;
      } catch {
        // Not a result line.
      }
    }
  }
  const code = await exited;
  current = undefined;
  if (interrupted) process.exit(130);
  return { figures: last, code, seconds: (Date.now() - t0) / 1000 };
}

const throughput = {} as Record<LedgerName, Awaited<ReturnType<typeof run<Throughput>>>>;
const requests = {} as Record<LedgerName, Awaited<ReturnType<typeof run<RequestsApi>>>>;
for (const ledger of LEDGERS) {
  requests[ledger] = await run<RequestsApi>(
    'bench/requests-api.ts',
    [String(ROWS), String(SECONDS), String(CONCURRENCY), '--ledger', ledger],
    `requests-api ${ledger}`,
  );
}
for (const ledger of LEDGERS) {
  throughput[ledger] = await run<Throughput>('bench/throughput.ts', [String(FILLS), '--ledger', ledger], `throughput ${ledger}`);
}

// ---------------------------------------------------------------- the table
const int = (n: number) => Math.round(n).toLocaleString('en-US');
const failed = (r: { code: number | null }) => `failed (exit ${r.code})`;
const rows: [string, string, string, string][] = [];
/** One figure on both ledgers: `cell` renders a run's figures; the ceiling column the same for the ceiling, per run. */
function row<T>(runs: Record<LedgerName, { figures?: T; code: number | null }>, figure: string, cell: (f: T) => string, ceiling?: (f: T) => string): void {
  const one = (l: LedgerName) => (runs[l].figures ? cell(runs[l].figures!) : failed(runs[l]));
  const c = ceiling ? LEDGERS.map((l) => (runs[l].figures ? ceiling(runs[l].figures!) : '–')).join(' / ') : '';
  rows.push([figure, one('sqlite'), one('postgres'), c]);
}
const query = (name: string) => (f: RequestsApi) => {
  const q = f.results[name];
  return q ? `${int(q.rps)} req/s (p50 ${q.p50}, p99 ${q.p99} ms)` : '–';
};
const CEILING = 'ceiling: GET /health (constant body)';
row(requests, `requests-api: ${int(ROWS)} requests seeded`, (f) => `${f.seedSeconds.toFixed(1)} s (${int(f.rows / f.seedSeconds)} requests/s)`);
for (const name of Object.keys(requests.sqlite.figures?.results ?? requests.postgres.figures?.results ?? {})) {
  if (name !== CEILING) row(requests, name, query(name), (f) => `${int(f.results[CEILING]?.rps ?? 0)} req/s`);
}
row(requests, 'GET /health (the ceiling itself)', query(CEILING));
row(
  throughput,
  `throughput: ${int(FILLS)} fills`,
  (f) => `${f.fillsPerSecond.toFixed(0)} fills/s (${f.filled}/${f.orders}, ${f.filledTwice} twice)`,
  (f) => `${int(f.ceilingPerSecond)} tx/s`,
);
row(throughput, 'deposit → fill included', (f) => `p50 ${int(f.latencyMs.p50)}, p99 ${int(f.latencyMs.p99)} ms`);
row(throughput, 'node CPU per fill', (f) => `${f.cpuMsPerFill.toFixed(1)} ms`);
row(throughput, 'ledger round trips per fill', (f) => (f.roundTripsPerFill === undefined ? '(in-process)' : f.roundTripsPerFill.toFixed(0)));

const header: [string, string, string, string] = ['figure', 'SQLite', 'PostgreSQL', 'ceiling (SQLite run / PostgreSQL run)'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
console.log(`\nboth ledgers, side by side (requests-api: ${SECONDS} s per query, concurrency ${CONCURRENCY}; PostgreSQL local, the throughput run durable):`);
console.log(line(header));
console.log(line(widths.map((w) => '-'.repeat(w))));
for (const r of rows) console.log(line(r));
mkdirSync('bench/results', { recursive: true });
const file = `bench/results/ledgers-${Date.now()}.json`;
writeFileSync(
  file,
  JSON.stringify({ fills: FILLS, rows: ROWS, secondsPerQuery: SECONDS, concurrency: CONCURRENCY, throughput, requests, table: rows }, null, 2),
);
console.log(`wrote ${file}`);
if ([...Object.values(throughput), ...Object.values(requests)].some((r) => r.code !== 0)) process.exitCode = 1;
