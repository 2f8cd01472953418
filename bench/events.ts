// Status events: webhook deliveries per second and change → delivery latency, through the real
// outbox (Requests.setStatus in ledger transactions), the real Deliverer and a real receiving HTTP
// server on loopback. No chains: the requests are written to a fresh ledger directly.
//   1. backlog: N events written while no deliverer runs, then drained (deliveries per second);
//   2. live: M status changes committed one transaction at a time while the deliverer runs
//      (deliveries per second, and p50/p99 from the commit of a change to its receipt).
// Prints figures and writes bench/results/events.json; asserts nothing about time.
// Usage: npx tsx bench/events.ts [requests]
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../src/config/load.ts';
import { Deliverer } from '../src/events/deliverer.ts';
import { Ledger } from '../src/ledger/index.ts';
import type { Status } from '../src/ledger/types.ts';
import { createLogger } from '../src/log.ts';
import { createMetrics } from '../src/metrics.ts';
import { scratchDir } from './scratchDir.ts';

const REQUESTS = Number(process.argv[2] ?? 1000);
const FLOW: Status[] = ['pending', 'submitted', 'success'];
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;

// The receiver: accepts everything, records when each event arrived.
const arrivals = new Map<string, { at: number; timestamp: number }>();
let onArrival: (() => void) | undefined;
const server = createServer((req, res) => {
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    const body = JSON.parse(raw) as { id: string; timestamp: number };
    if (!arrivals.has(body.id)) arrivals.set(body.id, { at: Date.now(), timestamp: body.timestamp });
    res.statusCode = 204;
    res.end();
    onArrival?.();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

const dir = scratchDir('relay-bench-events-');
const ledger = Ledger.open(join(dir, 'ledger.sqlite'));
const key = ledger.apiKeys.create('bench');
ledger.events.addWebhook(key.id, url);
const config = {
  events: {
    deliveryTimeoutMs: 10_000,
    maxAttempts: 20,
    backoffBaseMs: 1000,
    backoffMaxMs: 3_600_000,
    concurrency: 16,
    pollIntervalMs: 1000,
    heartbeatSeconds: 30,
    wsMaxBufferedMessages: 1000,
    wsMaxBufferedBytes: 1 << 20,
  },
} as unknown as Config;
const metrics = createMetrics();
const log = createLogger('silent');

let n = 0;
function newRequest(): string {
  const id = `0x${(++n).toString(16).padStart(64, '0')}`;
  const now = Date.now();
  ledger.requests.insert({
    id: id as `0x${string}`,
    parent_id: null,
    kind: 'order',
    request_type: 'bridge',
    user: '0x000000000000000000000000000000000000bEEF',
    recipient: '0x000000000000000000000000000000000000bEEF',
    refund_to: null,
    origin_chain_id: 8453,
    destination_chain_id: 10,
    origin_currency: '0x0000000000000000000000000000000000000000',
    destination_currency: '0x0000000000000000000000000000000000000000',
    trade_type: 'EXACT_INPUT',
    amount_in: '1000000000000000',
    amount_out: '990000000000000',
    min_amount_out: '990000000000000',
    pricing: null,
    order_data: null,
    quote: null,
    expires_at: now + 600_000,
    fill_deadline: now + 3_600_000,
    created_at: now,
    api_key_id: key.id,
  });
  return id;
}

async function drained(total: number): Promise<void> {
  if (arrivals.size >= total) return;
  await new Promise<void>((resolve) => {
    onArrival = () => {
      if (arrivals.size >= total) {
        onArrival = undefined;
        resolve();
      }
    };
  });
}

// 1. Backlog: every event written first, then drained.
const tWrite = performance.now();
for (let i = 0; i < REQUESTS; i++) {
  ledger.tx(() => {
    const id = newRequest();
    for (const s of FLOW) ledger.requests.setStatus(id, s);
  });
}
const writeSeconds = (performance.now() - tWrite) / 1000;
const backlog = REQUESTS * (FLOW.length + 1);
const deliverer = new Deliverer({ ledger, config, metrics, log });
const t0 = performance.now();
deliverer.start();
await drained(backlog);
const backlogSeconds = (performance.now() - t0) / 1000;

// 2. Live: one change per transaction, yielding to the event loop between them (as the solver does).
arrivals.clear();
const live = REQUESTS * (FLOW.length + 1);
const tLive = performance.now();
for (let i = 0; i < REQUESTS; i++) {
  const id = ledger.tx(() => newRequest());
  await new Promise((r) => setImmediate(r));
  for (const s of FLOW) {
    ledger.tx(() => ledger.requests.setStatus(id, s));
    await new Promise((r) => setImmediate(r));
  }
}
await drained(live);
const liveSeconds = (performance.now() - tLive) / 1000;
const latencies = [...arrivals.values()].map((a) => a.at - a.timestamp).sort((a, b) => a - b);

// Outcomes are recorded just after the receiver answers: let the last ones land before stopping.
for (let i = 0; i < 200 && ledger.events.pendingCount() > 0; i++) await new Promise((r) => setTimeout(r, 10));
await deliverer.stop();
server.closeAllConnections();
server.close();
const counts = ledger.db.prepare(`SELECT state, COUNT(*) AS n FROM event_deliveries GROUP BY state`).all();
ledger.close();

const result = {
  requests: REQUESTS,
  eventsPerRequest: FLOW.length + 1,
  concurrency: config.events.concurrency,
  backlog: {
    events: backlog,
    writeSeconds: +writeSeconds.toFixed(3),
    eventsWrittenPerSecond: Math.round(backlog / writeSeconds),
    drainSeconds: +backlogSeconds.toFixed(3),
    deliveredPerSecond: Math.round(backlog / backlogSeconds),
  },
  live: {
    events: live,
    seconds: +liveSeconds.toFixed(3),
    deliveredPerSecond: Math.round(live / liveSeconds),
    latencyMs: { p50: pct(latencies, 50), p90: pct(latencies, 90), p99: pct(latencies, 99), max: latencies.at(-1) },
  },
  deliveries: counts,
  machine: { cpus: cpus().length, cpu: cpus()[0]?.model.split(' ').slice(0, 2).join(' '), memGiB: +(totalmem() / 2 ** 30).toFixed(1), node: process.version },
};
process.stdout.write(
  [
    `status events: ${REQUESTS} requests x ${FLOW.length + 1} events, one webhook on loopback, concurrency ${config.events.concurrency}`,
    `  backlog: wrote ${backlog} events in ${writeSeconds.toFixed(2)} s; drained in ${backlogSeconds.toFixed(2)} s = ${result.backlog.deliveredPerSecond} deliveries/s`,
    `  live:    ${live} events in ${liveSeconds.toFixed(2)} s = ${result.live.deliveredPerSecond} deliveries/s; change -> delivery p50 ${result.live.latencyMs.p50} ms, p99 ${result.live.latencyMs.p99} ms, max ${result.live.latencyMs.max} ms`,
    '',
  ].join('\n'),
);
mkdirSync(join(import.meta.dirname, 'results'), { recursive: true });
writeFileSync(join(import.meta.dirname, 'results', 'events.json'), `${JSON.stringify(result, null, 2)}\n`);
