// Webhooks across a takeover: two `relay-node start` processes (config.ha) on one PostgreSQL ledger and a
// webhook receiver on loopback that names the process each delivery came from (by its TCP connection,
// read from /proc). While the first node leads, every event is delivered by it alone (the standby
// delivers nothing); killed with SIGKILL while deliveries are outstanding (the receiver holds them
// unanswered), the standby takes over and delivers the rest. At the end every event of every order was
// delivered, in order, and each repeat (at least once: a delivery cut by the kill goes again) carries
// the same event id and body. The standby's websocket stream shows the same events throughout.
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startDevnet, type Devnet } from '../src/devnet/devnet.ts';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';
import { signature } from '../src/events/deliverer.ts';
import { Ledger } from '../src/ledger/index.ts';
import { EXIT_LEASE_LOST } from '../src/lease/leadership.ts';
import { depositOn, fillsOn } from './helpers/devnetOrders.ts';
import { haEnv, nodeRole, untilRole, writeHaConfig } from './helpers/haNodes.ts';
import { killAllNodeProcesses, startNodeProcess, stopNodeProcess } from './helpers/nodeProcess.ts';
import { api, nativeBridge, until, waitForStatus } from './helpers/stack.ts';

const LEASE_MS = 3_000;
const RENEW_MS = 500;
// Fast retries; a delivery the receiver holds stays in flight (unanswered) well past a fill. The stream's
// heartbeat stays at its default: at 1 s, a test process busy for a second (under CI load) missed a pong
// and the node rightly closed its stream.
const EVENTS = { deliveryTimeoutMs: 60_000, maxAttempts: 1_000, backoffBaseMs: 10, backoffMaxMs: 200, pollIntervalMs: 100 };

/** The process (among `pids`) that owns the loopback TCP connection from `clientPort` to `serverPort` (Linux /proc). */
function processOfConnection(clientPort: number, serverPort: number, pids: Map<number, string>): string | undefined {
  const hex = (p: number) => p.toString(16).toUpperCase().padStart(4, '0');
  const line = readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .find((f) => f[1]?.endsWith(`:${hex(clientPort)}`) && f[2]?.endsWith(`:${hex(serverPort)}`));
  if (!line) return undefined;
  const socket = `socket:[${line[9]}]`;
  for (const [pid, name] of pids) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === socket) return name;
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

interface Call {
  /** The node process that sent it ('a', 'b'), read from its connection when it arrived. */
  from: string | undefined;
  headers: IncomingMessage['headers'];
  raw: string;
  body: any;
  /** The status answered; 0 while held, or never answered (the sender died). */
  answered: number;
}

// A webhook receiver on 127.0.0.1 that records each call and the process it came from. `hold`: calls are
// left unanswered (deliveries outstanding) until released; `failNext`: that many calls answer 500;
// `failAll`: every call answers 500 (deliveries stay pending, retried).
class Receiver {
  calls: Call[] = [];
  hold = false;
  failNext = 0;
  failAll = false;
  held: { call: Call; res: ServerResponse }[] = [];
  readonly pids = new Map<number, string>();
  url = '';
  #server: Server;
  constructor() {
    this.#server = createServer((req, res) => {
      const port = (this.#server.address() as AddressInfo).port;
      // Named at once, while the sender's connection is open.
      const call: Call = { from: processOfConnection(req.socket.remotePort!, port, this.pids), headers: req.headers, raw: '', body: undefined, answered: 0 };
      this.calls.push(call);
      req.setEncoding('utf8');
      req.on('data', (c) => (call.raw += c));
      req.on('end', () => {
        call.body = JSON.parse(call.raw);
        if (this.hold) return void this.held.push({ call, res });
        const status = this.failAll ? 500 : this.failNext > 0 ? (this.failNext--, 500) : 200;
        call.answered = status;
        res.writeHead(status).end(status === 200 ? 'ok' : 'no');
      });
    });
  }
  async start(): Promise<this> {
    // Connections kept open across a long pause of a sender (as many receivers keep them), so that what a
    // resumed process sends on its kept-alive connection arrives.
    this.#server.keepAliveTimeout = 120_000;
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hooks`;
    return this;
  }
  /** The event ids answered 2xx, first receipt of each, in the order received. */
  accepted(): string[] {
    return [...new Set(this.calls.filter((c) => c.answered === 200).map((c) => c.body.id as string))];
  }
  close() {
    this.#server.closeAllConnections();
    this.#server.close();
  }
}

let devnet: Devnet;
let dir: string;
let postgres: PostgresHandle | undefined;
let ledgerUrl: string;
const receivers: Receiver[] = [];
const sockets: WebSocket[] = [];
const openLedger = (readonly = true) => Ledger.connect({ path: join(dir, 'ledger', 'ledger.sqlite'), url: ledgerUrl }, { readonly });
const configFor = (nodeId: string, events: Record<string, unknown> = {}) =>
  writeHaConfig(devnet, join(dir, `config-${nodeId}.json`), {
    nodeId,
    dataDir: join(dir, 'ledger'),
    leaseMs: LEASE_MS,
    renewMs: RENEW_MS,
    ledger: { url: ledgerUrl },
    events: { ...EVENTS, ...events },
  });
// An integrator's key, written straight into the ledger (once a node migrated it).
function createApiKey(name: string): string {
  const ledger = openLedger(false);
  try {
    return ledger.apiKeys.create(name).key;
  } finally {
    ledger.close();
  }
}
async function startReceiver(): Promise<Receiver> {
  const r = await new Receiver().start();
  receivers.push(r);
  return r;
}
// The ledger's event ids of an order, in outbox order, read through one connection per test (a connection
// per poll kept the test's event loop busy for seconds under load).
let reader: Ledger | undefined;
function eventIdsOf(requestId: string): string[] {
  reader ??= openLedger();
  return reader.events.forRequest(requestId).map((e) => e.id);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'relay-node-webhooks-failover-'));
  devnet = await startDevnet({ dataDir: join(dir, 'devnet') });
  postgres = await startPostgres({ durable: false });
}, 120_000);
// Each test on a ledger of its own, and none leaves a node running into the next (a failed test's leader
// would otherwise hold the next test's lease).
beforeEach(async () => {
  ledgerUrl = await postgres!.createDatabase();
});
afterEach(() => {
  killAllNodeProcesses();
  reader?.close();
  reader = undefined;
});
afterAll(async () => {
  for (const s of sockets) s.terminate();
  for (const r of receivers) r.close();
  await devnet?.stop();
  await postgres?.stop();
});

describe('webhooks across a takeover (two nodes on PostgreSQL)', () => {
  it('only the leader delivers; kill -9 of the leader mid-delivery: the standby delivers the rest, every event at least once, repeats with the same id', async () => {
    const receiver = await startReceiver();
    const a = await startNodeProcess(configFor('a'), haEnv(devnet));
    await untilRole(a, 'leader', 'a to lead');
    const b = await startNodeProcess(configFor('b'), haEnv(devnet));
    expect(await nodeRole(b)).toBe('standby');
    receiver.pids.set(a.child.pid!, 'a').set(b.child.pid!, 'b');

    // An integrator's key (written once the leader migrated the ledger), its webhook added through the standby's API.
    const key = createApiKey('webhooks-failover');
    const hook = await api(b.url, '/webhooks', { body: { url: receiver.url }, apiKey: key });
    expect(hook.status).toBe(201);
    const secret = hook.body.secret as string;

    // The standby's status stream, subscribed to the orders' wallets before any quote.
    const ws = new WebSocket(`${b.url.replace(/^http/, 'ws')}/intents/status/ws`, { headers: { 'x-api-key': key } });
    sockets.push(ws);
    const streamed: any[] = [];
    ws.on('message', (d) => streamed.push(JSON.parse(d.toString())));
    ws.on('error', () => {});
    await once(ws, 'open');
    for (const account of [1, 2]) ws.send(JSON.stringify({ type: 'subscribe', wallet: devnet.accounts[account]!.address }));
    await until(() => (streamed.filter((m) => m.type === 'subscribed').length === 2 ? true : undefined), 'the wallet subscriptions');

    // Orders filled while a leads: each event delivered once, by a only.
    const orders: string[] = [];
    for (const account of [1, 2]) {
      const id = await depositOn(devnet, b.url, account, key);
      orders.push(id);
      expect((await waitForStatus(b.url, id, ['success', 'failure', 'refund'], 60_000)).status).toBe('success');
    }
    await until(() => (orders.every((id) => eventIdsOf(id).every((e) => receiver.accepted().includes(e))) ? true : undefined), 'the first orders delivered');
    expect(receiver.calls.length).toBeGreaterThanOrEqual(8);
    expect(receiver.calls.map((c) => c.from)).toEqual(receiver.calls.map(() => 'a'));
    expect(new Set(receiver.calls.map((c) => c.body.id)).size).toBe(receiver.calls.length);

    // Deliveries outstanding: the receiver holds them; two more orders are filled meanwhile.
    receiver.hold = true;
    for (const account of [1, 2]) {
      const id = await depositOn(devnet, b.url, account, key);
      orders.push(id);
      expect((await waitForStatus(b.url, id, ['success', 'failure', 'refund'], 60_000)).status).toBe('success');
    }
    // The first event of each (in order per order and webhook: the others wait behind it).
    await until(() => (receiver.held.length >= 2 ? true : undefined), 'deliveries held at the receiver');
    expect(await nodeRole(b)).toBe('standby');
    expect(receiver.calls.every((c) => c.from === 'a')).toBe(true);
    const beforeKill = receiver.calls.length;
    const held = receiver.held.map((h) => h.call.body.id as string);

    a.child.kill('SIGKILL');
    expect(await a.exited).toBe('SIGKILL');
    // Its connections died with it: what it sent and was not answered is outstanding in the ledger.
    for (const h of receiver.held) h.res.destroy();
    receiver.held = [];
    receiver.hold = false;
    receiver.failNext = 3;

    await untilRole(b, 'leader', 'b to take over');
    // Every event delivered and none pending, read in that order (an order's record can change after its status
    // did, the fill's confirmation say, which appends an event of the same status).
    const { perOrder, accepted } = await until(
      async () => {
        const pending = await api(b.url, `/webhooks/${hook.body.id}/deliveries?state=pending`, { apiKey: key });
        if (pending.body.deliveries.length > 0) return undefined;
        const perOrder = orders.map((id) => eventIdsOf(id));
        const accepted = receiver.accepted();
        return perOrder.flat().every((e) => accepted.includes(e)) ? { perOrder, accepted } : undefined;
      },
      'every event delivered, none pending',
      60_000,
    );

    // Only b delivered after the kill, and it did deliver (the held ones at least, and the 500s again).
    const after = receiver.calls.slice(beforeKill);
    expect(after.length).toBeGreaterThanOrEqual(held.length + 3);
    expect(after.map((c) => c.from)).toEqual(after.map(() => 'b'));
    // Every event of every order, in the ledger's order per order; nothing else.
    const all = perOrder.flat();
    expect(all.length).toBeGreaterThanOrEqual(16);
    expect(new Set(accepted)).toEqual(new Set(all));
    for (const events of perOrder) expect(accepted.filter((e) => events.includes(e))).toEqual(events);
    // Repeats: the same event id in the header and the body, the same body, each signed for its own attempt.
    const byId = new Map<string, Call[]>();
    for (const c of receiver.calls) byId.set(c.body.id, [...(byId.get(c.body.id) ?? []), c]);
    for (const [id, calls] of byId) {
      for (const c of calls) {
        expect(c.headers['x-relay-event-id']).toBe(id);
        expect(c.raw).toBe(calls[0]!.raw);
        expect(c.headers['x-relay-signature']).toBe(signature(secret, String(c.headers['x-relay-timestamp']), c.raw));
      }
    }
    // The held deliveries, cut by the kill, went again from b under the same ids.
    for (const id of held) expect(byId.get(id)!.filter((c) => c.from === 'b' && c.answered === 200)).toHaveLength(1);
    const repeated = [...byId.values()].filter((calls) => calls.length > 1);
    console.log(
      `webhooks across a takeover: ${all.length} events of ${orders.length} orders, ${receiver.calls.length} calls, ` +
        `${repeated.length} events received more than once (${held.length} held at the kill, 3 answered 500), all under their own event id`,
    );

    // The standby's stream, served by b throughout: the same events, in the same order per order.
    expect(ws.readyState, 'the stream is still open').toBe(WebSocket.OPEN);
    await until(
      () =>
        orders.every((id) => streamed.filter((m) => m.type === 'request.status' && m.requestId === id).length === eventIdsOf(id).length) ? true : undefined,
      'the stream to show every event',
    );
    for (const id of orders) expect(streamed.filter((m) => m.type === 'request.status' && m.requestId === id).map((m) => m.id)).toEqual(eventIdsOf(id));
    for (const id of orders) expect(await fillsOn(devnet, id as `0x${string}`)).toHaveLength(1);
    await stopNodeProcess(b);
  }, 240_000);

  it('a leader paused past its lease and resumed sends no webhook: the deliverer passes the lease gate first', async () => {
    const receiver = await startReceiver();
    // Polling often: once resumed, the old leader's deliverer comes round before its lease renewal does.
    const a = await startNodeProcess(configFor('a2', { pollIntervalMs: 20 }), haEnv(devnet));
    await untilRole(a, 'leader', 'a2 to lead');
    const b = await startNodeProcess(configFor('b2', { pollIntervalMs: 20 }), haEnv(devnet));
    expect(await nodeRole(b)).toBe('standby');
    receiver.pids.set(a.child.pid!, 'a2').set(b.child.pid!, 'b2');
    const key = createApiKey('webhooks-paused-leader');
    const hook = await api(b.url, '/webhooks', { body: { url: receiver.url }, apiKey: key });
    expect(hook.status).toBe(201);
    const quote = async (account: number) => {
      const user = devnet.accounts[account]!.address;
      const q = await api(b.url, '/quote', { apiKey: key, body: nativeBridge(user, user, 8453, 10, '20000000000000000') });
      expect(q.status).toBe(200);
      return q.body.steps[0].requestId as string;
    };

    // A quote's 'waiting' event, delivered by a2 on a connection it keeps alive.
    const first = await quote(1);
    await until(() => (receiver.accepted().includes(eventIdsOf(first)[0]!) ? true : undefined), 'a2 to deliver');
    expect(receiver.calls.map((c) => c.from)).toEqual(['a2']);
    // Stopped (a long pause, a stalled VM), past its lease: b2 takes over.
    a.child.kill('SIGSTOP');
    await until(() => (/^\d+ \(.*\) T/.test(readFileSync(`/proc/${a.child.pid}/stat`, 'utf8')) ? true : undefined), 'a2 to stop');
    await untilRole(b, 'leader', 'b2 to take over');
    // A delivery pending meanwhile, retried by b2 (the receiver answers 500).
    receiver.failAll = true;
    const second = await quote(2);
    await until(() => (receiver.calls.some((c) => c.from === 'b2') ? true : undefined), 'b2 to deliver');

    // Resumed past its deadline: it sends nothing more, to the webhooks either, and exits.
    const resumedAt = receiver.calls.length;
    a.child.kill('SIGCONT');
    expect(await a.exited).toBe(EXIT_LEASE_LOST);
    const after = receiver.calls.slice(resumedAt).map((c) => c.from);
    expect(after).toEqual(after.map(() => 'b2'));

    // b2 delivers every event once the receiver accepts.
    receiver.failAll = false;
    const all = [first, second].flatMap((id) => eventIdsOf(id));
    await until(() => (all.every((e) => receiver.accepted().includes(e)) ? true : undefined), 'every event delivered', 60_000);
    expect(receiver.calls.slice(resumedAt).every((c) => c.from === 'b2')).toBe(true);
    await stopNodeProcess(b);
  }, 240_000);
});
