// Active/standby (config.ha): two `relay-node start` processes on one ledger. The leader dies
// (kill -9) or hangs (SIGSTOP) between recording a fill and broadcasting it; the standby takes the
// lease, reconciles what the old leader recorded and pays; the order is filled once, read from the
// chain. A hung leader resumed after the takeover broadcasts and records nothing, and exits with
// EXIT_LEASE_LOST.
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevnet, type Devnet } from '../src/devnet/devnet.ts';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';
import { Ledger } from '../src/ledger/index.ts';
import { EXIT_LEASE_LOST } from '../src/lease/leadership.ts';
import { depositOn, fillsOn } from './helpers/devnetOrders.ts';
import { killAllNodeProcesses, startNodeProcess, stopNodeProcess } from './helpers/nodeProcess.ts';
import { haEnv, nodeRole, untilRole, writeHaConfig } from './helpers/haNodes.ts';
import { until, waitForStatus } from './helpers/stack.ts';
import { type ProxyProcess, startProxyProcess } from './helpers/tcpProxyProcess.ts';

const LEASE_MS = 3_000;
const RENEW_MS = 500;

let devnet: Devnet;
let dir: string;
// One PostgreSQL server for the file (started on first use, stopped by PID after the file).
let postgres: Promise<PostgresHandle> | undefined;
// Where the ledger is, in one place: the nodes' config (dataDir, or ledger.url) and the test's own reads.
let ledgerDir: string;
let ledgerUrl: string | undefined;
const openLedger = () => Ledger.connect({ path: join(ledgerDir, 'ledger.sqlite'), url: ledgerUrl }, { readonly: true });

// Counts the JSON-RPC sends a node makes to a chain (single calls and batches), forwarding everything.
class SendCounter {
  sends = 0;
  #server: Server | undefined;
  constructor(private target: string) {}
  async start(): Promise<string> {
    this.#server = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', async () => {
        this.sends += body.match(/"eth_sendRawTransaction"/g)?.length ?? 0;
        try {
          const r = await fetch(this.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
          res.writeHead(r.status, { 'content-type': 'application/json' }).end(await r.text());
        } catch {
          res.destroy();
        }
      });
    });
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', () => resolve()));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }
  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }
}
const counters: SendCounter[] = [];
const proxies: ProxyProcess[] = [];
// The payouts recorded under an epoch (what a fenced node may no longer add to).
function payoutsOfEpoch(epoch: number): number {
  const l = openLedger();
  try {
    return (l.db.prepare('SELECT COUNT(*) AS n FROM payouts WHERE epoch = ?').get(epoch) as { n: number }).n;
  } finally {
    l.close();
  }
}

// A node's config file: the devnet's chains, ha enabled with this node id; `destinationRpc` replaces
// Optimism's RPC URL (a SendCounter in front of it).
function configFor(nodeId: string, destinationRpc?: string, ledger: { url?: string; timeoutMs?: number } = { url: ledgerUrl }): string {
  return writeHaConfig(devnet, join(dir, `config-${nodeId}.json`), {
    nodeId,
    dataDir: ledgerDir,
    leaseMs: LEASE_MS,
    renewMs: RENEW_MS,
    ledger,
    destinationRpc,
  });
}
const env = () => haEnv(devnet);
const role = nodeRole;
// The lease as the ledger holds it.
function lease() {
  const l = openLedger();
  try {
    return l.leases.current();
  } finally {
    l.close();
  }
}
// The payout rows and transaction rows in the ledger: what a node recorded.
function rowCounts(): { payouts: number; transactions: number } {
  const l = openLedger();
  try {
    const n = (t: string) => (l.db.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
    return { payouts: n('payouts'), transactions: n('transactions') };
  } finally {
    l.close();
  }
}
// The fill of a request once recorded (its transaction signed, not yet broadcast).
function recordedFill(requestId: string) {
  const l = openLedger();
  try {
    const p = l.payouts.forRequest(requestId).find((x) => x.kind === 'fill');
    return p && { payout: p, txs: l.payouts.txsOf(p.id) };
  } finally {
    l.close();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'relay-node-failover-'));
});
afterAll(async () => {
  killAllNodeProcesses();
  for (const c of counters) await c.stop();
  for (const p of proxies) await p.stop();
  await (await postgres)?.stop();
});

describe.each(['sqlite', 'postgres'] as const)('active/standby nodes on one ledger (%s)', (kind) => {
  // Each kind on chains and a ledger of its own (a fresh ledger would index the other kind's deposits): a SQLite
  // file, or a fresh database on the file's PostgreSQL.
  beforeAll(async () => {
    devnet = await startDevnet({ dataDir: join(dir, kind) });
    ledgerDir = join(dir, kind, 'ledger');
    ledgerUrl = kind === 'postgres' ? await (await (postgres ??= startPostgres({ durable: false }))).createDatabase() : undefined;
  }, 120_000);
  afterAll(async () => {
    killAllNodeProcesses();
    await devnet?.stop();
  });

  it('kill -9 of the leader mid-fill: the standby takes over, reconciles what was recorded and pays the order once', async () => {
    const a = await startNodeProcess(configFor('a'), env(), { fault: 'crash-after-fill-recorded' });
    await untilRole(a, 'leader', 'a to lead');
    const epochA = lease().epoch;
    const b = await startNodeProcess(configFor('b'), env());
    expect(await role(b)).toBe('standby');
    // A standby serves the API: its quotes are its own writes, not fenced.
    const requestId = await depositOn(devnet, b.url, 1);
    expect(await a.exited).toBe('SIGKILL');
    const recorded = recordedFill(requestId)!;
    expect(recorded.payout).toMatchObject({ state: 'sent', epoch: epochA });
    expect(recorded.txs.map((t) => t.state)).toEqual(['signed']);
    expect(await fillsOn(devnet, requestId)).toHaveLength(0);

    await untilRole(b, 'leader', 'b to take over');
    expect(lease()).toMatchObject({ holder: 'b', epoch: epochA + 1 });
    const done = await waitForStatus(b.url, requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status).toBe('success');
    const fills = await fillsOn(devnet, requestId);
    expect(fills).toHaveLength(1);
    // The transaction a recorded is the one that paid: b broadcast it rather than signing another.
    expect(done.txHashes).toEqual([fills[0]!.transactionHash]);
    expect(recorded.txs[0]!.hash).toBe(fills[0]!.transactionHash);
    // A clean stop frees the lease at once.
    await stopNodeProcess(b);
    expect(lease()).toMatchObject({ holder: null, epoch: epochA + 1 });
  }, 180_000);

  it('SIGSTOP of the leader past its lease: the standby takes over and pays; resumed, the old leader broadcasts and records nothing and exits', async () => {
    const counter = new SendCounter(devnet.chains.find((c) => c.id === 10)!.rpcUrl);
    counters.push(counter);
    const a = await startNodeProcess(configFor('a2', await counter.start()), env(), { fault: 'pause-after-fill-recorded' });
    await untilRole(a, 'leader', 'a2 to lead');
    const epochA = lease().epoch;
    const b = await startNodeProcess(configFor('b2'), env());
    expect(await role(b)).toBe('standby');
    const requestId = await depositOn(devnet, b.url, 2);
    // a2 recorded the fill and stopped itself right before broadcasting it.
    const recorded = await until(() => {
      const r = recordedFill(requestId);
      return r?.txs.length ? r : undefined;
    }, 'a2 to record the fill');
    expect(recorded.payout.epoch).toBe(epochA);
    await untilRole(b, 'leader', 'b2 to take over');
    expect(lease()).toMatchObject({ holder: 'b2', epoch: epochA + 1 });
    const done = await waitForStatus(b.url, requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status).toBe('success');
    expect(await fillsOn(devnet, requestId)).toHaveLength(1);
    const sendsBefore = counter.sends;
    const rowsBefore = rowCounts();

    // Resumed: its next step was the broadcast of the recorded fill. Past its deadline, it sends nothing.
    a.child.kill('SIGCONT');
    expect(await a.exited).toBe(EXIT_LEASE_LOST);
    expect(a.stderr()).toMatch(/leader lease lost/);
    expect(counter.sends).toBe(sendsBefore);
    expect(rowCounts()).toEqual(rowsBefore);
    expect(await fillsOn(devnet, requestId)).toHaveLength(1);
    // b2 still leads, and still pays.
    expect(await role(b)).toBe('leader');
    const next = await depositOn(devnet, b.url, 3);
    expect((await waitForStatus(b.url, next, ['success', 'failure', 'refund'], 60_000)).status).toBe('success');
    expect(await fillsOn(devnet, next)).toHaveLength(1);
    await stopNodeProcess(b);
  }, 180_000);
  // PostgreSQL only: each node reaches the ledger through its own TCP proxy; the chains stay reachable.
  if (kind === 'postgres')
    it('the leader cut off from PostgreSQL mid-fill: its gate closes, the standby takes over and pays once; healed, the old leader records nothing and exits', async () => {
      const target = { host: '127.0.0.1', port: Number(new URL(ledgerUrl!).port) };
      // Each in a process of its own: this test's reads of the ledger block its main thread (a synchronous client).
      const [toA, toB] = [await startProxyProcess(target), await startProxyProcess(target)];
      proxies.push(toA, toB);
      const counter = new SendCounter(devnet.chains.find((c) => c.id === 10)!.rpcUrl);
      counters.push(counter);
      // a's ledger calls are bounded by the default 5 s: a call hung on the cut outlives a's lease deadline.
      const a = await startNodeProcess(configFor('a3', await counter.start(), { url: toA.via(ledgerUrl!) }), env(), {
        fault: 'pause-after-fill-recorded',
      });
      await untilRole(a, 'leader', 'a3 to lead');
      const epochA = lease().epoch;
      const b = await startNodeProcess(configFor('b3', undefined, { url: toB.via(ledgerUrl!) }), env());
      expect(await role(b)).toBe('standby');
      const requestId = await depositOn(devnet, b.url, 4);
      // a3 recorded the fill and stopped itself right before broadcasting it: cut its link there, and resume it.
      const recorded = await until(() => {
        const r = recordedFill(requestId);
        return r?.txs.length ? r : undefined;
      }, 'a3 to record the fill');
      expect(recorded.payout.epoch).toBe(epochA);
      // Stopped (state T in /proc), so that the SIGCONT below cannot come before its SIGSTOP.
      await until(() => (/^\d+ \(.*\) T/.test(readFileSync(`/proc/${a.child.pid}/stat`, 'utf8')) ? true : undefined), 'a3 to stop itself');
      const sendsAtCut = counter.sends;
      await toA.cut();
      const cutAt = performance.now();
      a.child.kill('SIGCONT');
      await untilRole(b, 'leader', 'b3 to take over');
      console.log(
        `leader cut off from PostgreSQL: the standby led ${Math.round(performance.now() - cutAt)} ms after the cut (lease ${LEASE_MS} ms, renewals every ${RENEW_MS} ms)`,
      );
      expect(lease()).toMatchObject({ holder: 'b3', epoch: epochA + 1 });
      const done = await waitForStatus(b.url, requestId, ['success', 'failure', 'refund'], 60_000);
      expect(done.status).toBe('success');
      const fills = await fillsOn(devnet, requestId);
      expect(fills).toHaveLength(1);
      expect(recorded.txs[0]!.hash).toBe(fills[0]!.transactionHash);
      // a3 sent at most the recorded fill (resumed before its deadline); nothing after b3 led.
      const sendsAtTakeover = counter.sends;
      expect(sendsAtTakeover - sendsAtCut).toBeLessThanOrEqual(1);
      const ofEpochA = payoutsOfEpoch(epochA);

      await toA.heal();
      expect(await a.exited).toBe(EXIT_LEASE_LOST);
      expect(a.stderr()).toMatch(/leader lease lost/);
      expect(counter.sends).toBe(sendsAtTakeover);
      expect(payoutsOfEpoch(epochA)).toBe(ofEpochA);
      expect(await fillsOn(devnet, requestId)).toHaveLength(1);
      // b3 still leads and pays the orders that follow, once each.
      expect(await role(b)).toBe('leader');
      const next = await depositOn(devnet, b.url, 1);
      expect((await waitForStatus(b.url, next, ['success', 'failure', 'refund'], 60_000)).status).toBe('success');
      expect(await fillsOn(devnet, next)).toHaveLength(1);
      expect(await fillsOn(devnet, requestId)).toHaveLength(1);
      await stopNodeProcess(b);
    }, 240_000);
});
