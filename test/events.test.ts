// Status events: signed webhooks delivered to a real receiving HTTP server on loopback, in order,
// through failures, restarts and dead letters; and the websocket status stream, which sees the
// same sequence as the webhooks.
import { spawnSync } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { zeroAddress, type Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { signature } from '../src/events/deliverer.ts';
import { CLOSE_SLOW_CLIENT } from '../src/api/statusStream.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';
import { ledgerArgs } from './helpers/cliConfig.ts';

const A = 8453;
const B = 10;
const FLOW = ['waiting', 'pending', 'submitted', 'success'];

interface Received {
  headers: Record<string, string | string[] | undefined>;
  raw: string;
  body: any;
  answered: number;
}

// A webhook receiver: records every call; answers `answer(callNumber)` (200 by default).
class Receiver {
  calls: Received[] = [];
  answer: (n: number) => number = () => 200;
  #server: Server;
  url = '';
  constructor() {
    this.#server = createServer((req, res) => {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        const status = this.answer(this.calls.length + 1);
        let body: any;
        try {
          body = JSON.parse(raw);
        } catch {
          body = undefined;
        }
        this.calls.push({ headers: req.headers, raw, body, answered: status });
        res.statusCode = status;
        res.end(status < 300 ? 'ok' : 'no');
      });
    });
  }
  async start(): Promise<this> {
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hooks/relay?token=t0ken`;
    return this;
  }
  // Accepted deliveries, first receipt of each event (at-least-once: a repeat is possible).
  accepted(): any[] {
    const seen = new Set<string>();
    const out: any[] = [];
    for (const c of this.calls) {
      if (c.answered >= 300 || seen.has(c.body.id)) continue;
      seen.add(c.body.id);
      out.push(c.body);
    }
    return out;
  }
  forRequest(requestId: string): any[] {
    return this.accepted().filter((b) => b.requestId === requestId);
  }
  close() {
    this.#server.closeAllConnections();
    this.#server.close();
  }
}

// The README's verification, as a receiver would write it.
function verify(secret: string, headers: Received['headers'], raw: string): boolean {
  const timestamp = String(headers['x-relay-timestamp']);
  const given = String(headers['x-relay-signature']);
  const expected = `v1=${createHmac('sha256', secret).update(`${timestamp}.${raw}`).digest('hex')}`;
  return given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
}

interface StreamClient {
  ws: WebSocket;
  msgs: any[];
  closed: Promise<{ code: number; reason: string }>;
}

async function streamClient(url: string, apiKey?: string): Promise<StreamClient> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/intents/status/ws`, { headers: apiKey ? { 'x-api-key': apiKey } : {} });
  const msgs: any[] = [];
  ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('error', () => {});
  await once(ws, 'open');
  return { ws, msgs, closed };
}

let s: Stack;
const receivers: Receiver[] = [];
const clients: WebSocket[] = [];
const user = (i: number) => s.devnet.accounts[i]!.address;

async function receiver(): Promise<Receiver> {
  const r = await new Receiver().start();
  receivers.push(r);
  return r;
}

async function addWebhook(apiKey: string, url: string): Promise<{ id: string; secret: string }> {
  const r = await api(s.url, '/webhooks', { body: { url }, apiKey });
  expect(r.status).toBe(201);
  return r.body;
}

async function quote(apiKey: string | undefined, account: number, amount = '10000000000000000') {
  const q = await api(s.url, '/quote/v2', {
    apiKey,
    body: {
      user: user(account),
      recipient: user(account),
      originChainId: A,
      destinationChainId: B,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount,
      tradeType: 'EXACT_INPUT',
    },
  });
  expect(q.status).toBe(200);
  return { body: q.body, requestId: q.body.steps.at(-1).requestId as Hex };
}

async function bridge(apiKey: string | undefined, account: number): Promise<Hex> {
  const q = await quote(apiKey, account);
  const [txHash] = await executeSteps(s, q.body, account);
  await api(s.url, '/transactions/index', { body: { txHash, chainId: A } });
  const done = await waitForStatus(s.url, q.requestId, ['success', 'failure', 'refund']);
  expect(done.status).toBe('success');
  return q.requestId;
}

const eventsConfig = {
  deliveryTimeoutMs: 2_000,
  maxAttempts: 1_000,
  backoffBaseMs: 10,
  backoffMaxMs: 150,
  pollIntervalMs: 100,
  heartbeatSeconds: 1,
};

beforeAll(async () => {
  s = await startStack({ config: { events: eventsConfig } });
}, 120_000);
afterAll(async () => {
  for (const c of clients) c.terminate();
  for (const r of receivers) r.close();
  await s?.stop();
});

describe('webhooks', () => {
  it('delivers every transition of a request in order, signed; the stream sees the same sequence; other keys get nothing', async () => {
    const a = s.node.ledger.apiKeys.create('events-a');
    const b = s.node.ledger.apiKeys.create('events-b');
    const ra = await receiver();
    const rb = await receiver();
    const wa = await addWebhook(a.key, ra.url);
    expect(wa.id).toMatch(/^wh_[0-9a-f]{16}$/);
    expect(wa.secret).toMatch(/^whsec_[0-9a-f]{64}$/);
    await addWebhook(b.key, rb.url);

    // Subscribed by wallet before the quote: the stream has every change, 'waiting' included.
    const byWallet = await streamClient(s.url, a.key);
    clients.push(byWallet.ws);
    byWallet.ws.send(JSON.stringify({ type: 'subscribe', wallet: user(1).toLowerCase() }));
    await until(() => byWallet.msgs.find((m) => m.type === 'subscribed'), 'the wallet subscription');

    const q = await quote(a.key, 1);
    // Subscribed by request id after the quote: the current status first, then every change.
    const byId = await streamClient(s.url);
    clients.push(byId.ws);
    byId.ws.send(JSON.stringify({ type: 'subscribe', requestIds: [q.requestId] }));
    await until(() => byId.msgs.find((m) => m.type === 'snapshot'), 'the snapshot');

    const [txHash] = await executeSteps(s, q.body, 1);
    await api(s.url, '/transactions/index', { body: { txHash, chainId: A } });
    const done = await waitForStatus(s.url, q.requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');

    const got = await until(() => (ra.forRequest(q.requestId).length >= FLOW.length ? ra.forRequest(q.requestId) : undefined), 'all webhook deliveries');
    expect(got.map((e) => e.status)).toEqual(FLOW);
    for (const e of got) {
      expect(Object.keys(e).sort()).toEqual(['data', 'id', 'requestId', 'status', 'timestamp', 'type']);
      expect(e).toMatchObject({ type: 'request.status', requestId: q.requestId });
      expect(e.id).toMatch(/^evt_[0-9a-f]{24}$/);
      expect(e.data.status).toBe(e.status);
    }
    // The last record is the one the status endpoint answers.
    expect(got.at(-1)!.data).toEqual(done);
    // Signatures verify with the secret, and with it only.
    for (const c of ra.calls) {
      expect(c.headers['x-relay-event-id']).toBe(c.body.id);
      expect(Number(c.headers['x-relay-timestamp'])).toBeGreaterThan(1_600_000_000);
      expect(c.headers['x-relay-signature']).toBe(signature(wa.secret, String(c.headers['x-relay-timestamp']), c.raw));
      expect(verify(wa.secret, c.headers, c.raw)).toBe(true);
      expect(
        verify(
          wa.secret.replace(/.$/, (x) => (x === '0' ? '1' : '0')),
          c.headers,
          c.raw,
        ),
      ).toBe(false);
      expect(verify(wa.secret, c.headers, c.raw.replace('"request.status"', '"request.statuz"'))).toBe(false);
    }

    // The websocket streams: the same events in the same order.
    const ids = got.map((e) => e.id);
    await until(
      () => (byWallet.msgs.filter((m) => m.type === 'request.status' && m.requestId === q.requestId).length >= FLOW.length ? true : undefined),
      'the wallet stream',
    );
    const walletEvents = byWallet.msgs.filter((m) => m.type === 'request.status' && m.requestId === q.requestId);
    expect(walletEvents.map((m) => m.id)).toEqual(ids);
    expect(walletEvents.map((m) => m.data)).toEqual(got.map((e) => e.data));
    await until(() => (byId.msgs.filter((m) => m.type === 'request.status').length >= FLOW.length - 1 ? true : undefined), 'the request stream');
    const snapshot = byId.msgs.find((m) => m.type === 'snapshot');
    expect(snapshot).toMatchObject({ requestId: q.requestId, status: 'waiting' });
    expect(snapshot.data).toEqual(got[0].data);
    const changes = byId.msgs.filter((m) => m.type === 'request.status');
    expect([snapshot.status, ...changes.map((m) => m.status)]).toEqual(FLOW);
    expect(changes.map((m) => m.id)).toEqual(ids.slice(1));

    // Only the key that created the request receives its events.
    expect(rb.calls).toHaveLength(0);
    // A request quoted without a key has events (for the stream) but no deliveries.
    const anon = await quote(undefined, 2);
    expect(s.node.ledger.events.forRequest(anon.requestId).map((e) => e.status)).toEqual(['waiting']);
    const deliveries = s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM event_deliveries WHERE request_id = ?').get(anon.requestId) as { n: number };
    expect(deliveries.n).toBe(0);
  });

  it('manages webhooks per API key over HTTP: 401 without a key, 404 for another key, 400 naming the field', async () => {
    const a = s.node.ledger.apiKeys.create('events-mgmt-a');
    const b = s.node.ledger.apiKeys.create('events-mgmt-b');
    expect((await api(s.url, '/webhooks', { body: { url: 'https://example.com/h' } })).status).toBe(401);
    expect((await api(s.url, '/webhooks')).status).toBe(401);
    for (const [url, needle] of [
      ['ftp://example.com/x', 'http or https'],
      ['not a url', 'absolute'],
      ['https://user:pw@example.com/', 'credentials'],
      [`https://example.com/${'x'.repeat(2100)}`, 'at most 2048'],
      [undefined, 'is required'],
    ] as const) {
      const r = await api(s.url, '/webhooks', { body: url === undefined ? {} : { url }, apiKey: a.key });
      expect(r.status).toBe(400);
      expect(r.body.message).toContain('url:');
      expect(r.body.message).toContain(needle);
    }
    const w = await addWebhook(a.key, 'https://example.com/hooks?token=abc');
    const listed = await api(s.url, '/webhooks', { apiKey: a.key });
    expect(listed.body.webhooks).toEqual([{ id: w.id, url: 'https://example.com/hooks?token=abc', createdAt: expect.any(Number) }]);
    expect(JSON.stringify(listed.body)).not.toContain(w.secret);
    expect((await api(s.url, '/webhooks', { apiKey: b.key })).body.webhooks).toEqual([]);
    expect((await api(s.url, `/webhooks/${w.id}`, { method: 'DELETE', apiKey: b.key })).status).toBe(404);
    expect((await api(s.url, `/webhooks/${w.id}/redeliver`, { body: { dead: true }, apiKey: b.key })).status).toBe(404);
    expect((await api(s.url, `/webhooks/${w.id}/deliveries`, { apiKey: b.key })).status).toBe(404);
    const bad = await api(s.url, `/webhooks/${w.id}/redeliver`, { body: { eventId: 'nope' }, apiKey: a.key });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('eventId:');
    expect((await api(s.url, `/webhooks/${w.id}`, { method: 'DELETE', apiKey: a.key })).body).toEqual({ id: w.id, removed: true });
    expect((await api(s.url, `/webhooks/${w.id}`, { method: 'DELETE', apiKey: a.key })).status).toBe(404);
    expect((await api(s.url, '/webhooks', { apiKey: a.key })).body.webhooks).toEqual([]);
  });

  it('a receiver that fails for a while still gets everything, in order, once it recovers', async () => {
    const k = s.node.ledger.apiKeys.create('events-flaky');
    const r = await receiver();
    const failures = 6;
    r.answer = (n) => (n <= failures ? 500 : 200);
    const w = await addWebhook(k.key, r.url);
    const requestId = await bridge(k.key, 3);
    const got = await until(() => (r.forRequest(requestId).length >= FLOW.length ? r.forRequest(requestId) : undefined), 'the deliveries after recovery');
    expect(got.map((e) => e.status)).toEqual(FLOW);
    expect(r.calls.slice(0, failures).every((c) => c.answered === 500)).toBe(true);
    // Never a later event of the request before an earlier one was accepted.
    const order = r.calls.map((c) => FLOW.indexOf(c.body.status));
    for (let i = 1; i < order.length; i++) expect(order[i]).toBeGreaterThanOrEqual(order[i - 1]!);
    const d = await until(async () => {
      const r = await api(s.url, `/webhooks/${w.id}/deliveries`, { apiKey: k.key });
      return r.body.deliveries.length === FLOW.length && r.body.deliveries.every((x: any) => x.state === 'delivered') ? r : undefined;
    }, 'the deliveries recorded');
    expect(d.body.deliveries.every((x: any) => x.state === 'delivered')).toBe(true);
    expect(Math.max(...d.body.deliveries.map((x: any) => x.attempts))).toBeGreaterThan(1);
  });

  it('a restart with deliveries pending loses nothing', async () => {
    const k = s.node.ledger.apiKeys.create('events-restart');
    const r = await receiver();
    let up = false;
    r.answer = () => (up ? 200 : 503);
    const w = await addWebhook(k.key, r.url);
    const requestId = await bridge(k.key, 4);
    // Every event is pending (the first failing, the others behind it) when the node stops.
    await until(() => (s.node.ledger.events.deliveryCounts(w.id).pending === FLOW.length ? true : undefined), 'four pending deliveries');
    await s.restartNode();
    up = true;
    const got = await until(() => (r.forRequest(requestId).length >= FLOW.length ? r.forRequest(requestId) : undefined), 'the deliveries after the restart');
    expect(got.map((e) => e.status)).toEqual(FLOW);
    await until(() => (s.node.ledger.events.deliveryCounts(w.id).pending === 0 ? true : undefined), 'the deliveries recorded');
    expect(s.node.ledger.events.deliveryCounts(w.id)).toMatchObject({ pending: 0, delivered: FLOW.length, dead: 0 });
  });

  it('dead-letters after the last attempt; manual redelivery over HTTP and from the CLI', async () => {
    const k = s.node.ledger.apiKeys.create('events-dead');
    const r = await receiver();
    let up = false;
    r.answer = () => (up ? 204 : 500);
    const w = await addWebhook(k.key, r.url);
    s.node.config.events.maxAttempts = 3;
    try {
      const q1 = await quote(k.key, 1);
      const q2 = await quote(k.key, 2);
      const dead = await until(async () => {
        const d = await api(s.url, `/webhooks/${w.id}/deliveries?state=dead`, { apiKey: k.key });
        return d.body.deliveries.length === 2 ? d.body.deliveries : undefined;
      }, 'two dead deliveries');
      expect(dead.map((d: any) => d.attempts)).toEqual([3, 3]);
      expect(dead[0]).toMatchObject({ lastStatus: 500, lastError: 'HTTP 500', nextAttemptAt: null });
      expect(r.calls).toHaveLength(6);

      up = true;
      const ev1 = s.node.ledger.events.forRequest(q1.requestId)[0]!;
      const again = await api(s.url, `/webhooks/${w.id}/redeliver`, { body: { eventId: ev1.id }, apiKey: k.key });
      expect(again.body).toEqual({ redelivered: 1 });
      await until(() => (r.forRequest(q1.requestId).length === 1 ? true : undefined), 'the redelivered event');
      expect(r.forRequest(q1.requestId)[0].id).toBe(ev1.id);

      // The CLI, against the ledger of the running node.
      const ledger = ledgerArgs(s);
      const cli = spawnSync(process.execPath, ['bin/relay-node.js', 'webhooks', 'redeliver', '--dead', '--webhook', w.id, ...ledger.args], {
        env: { ...process.env, ...ledger.env },
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(cli.status).toBe(0);
      expect(cli.stdout).toContain('queued 1 delivery again');
      await until(() => (r.forRequest(q2.requestId).length === 1 ? true : undefined), 'the event redelivered from the CLI');
      await until(() => (s.node.ledger.events.deliveryCounts(w.id).delivered === 2 ? true : undefined), 'both deliveries recorded');
      expect(s.node.ledger.events.deliveryCounts(w.id)).toMatchObject({ pending: 0, delivered: 2, dead: 0 });
    } finally {
      s.node.config.events.maxAttempts = eventsConfig.maxAttempts;
    }
  });

  // A receiver that answers 200 at once and then keeps sending its body: `chunk` every `everyMs`, never
  // ending. Resolves its URL; `closed` turns true when the node gives the connection up.
  async function endlessAnswer(chunk: string, everyMs: number): Promise<{ url: string; closed: () => boolean; stop: () => void }> {
    let closed = false;
    const timers: NodeJS.Timeout[] = [];
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => res.write(chunk), everyMs);
      timers.push(t);
      res.on('close', () => {
        clearInterval(t);
        closed = true;
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
      closed: () => closed,
      stop: () => {
        for (const t of timers) clearInterval(t);
        server.closeAllConnections();
        server.close();
      },
    };
  }

  it.each([
    ['a body that trickles forever', 'x', 50],
    ['a body larger than any acknowledgement needs', 'y'.repeat(64 * 1024), 5],
  ])('counts a 200 as delivered and gives the connection up when the answer is %s', async (_what, chunk, everyMs) => {
    const k = s.node.ledger.apiKeys.create(`events-endless-${everyMs}`);
    const r = await endlessAnswer(chunk, everyMs);
    try {
      const w = await addWebhook(k.key, r.url);
      await quote(k.key, 1);
      await until(() => (s.node.ledger.events.deliveryCounts(w.id).delivered >= 1 ? true : undefined), 'the delivery recorded');
      // It held the connection (and its socket) for as long as the receiver kept sending.
      await until(() => (r.closed() ? true : undefined), 'the node to close the endless answer', 20_000);
    } finally {
      r.stop();
    }
  });
});

describe('websocket status stream', () => {
  it('answers malformed messages with an error and keeps the connection', async () => {
    const c = await streamClient(s.url);
    clients.push(c.ws);
    c.ws.send('{not json');
    c.ws.send(JSON.stringify({ type: 'subscribe', requestIds: ['0x12'] }));
    c.ws.send(JSON.stringify({ type: 'dance' }));
    c.ws.send(JSON.stringify([1, 2]));
    // A wallet needs an API key.
    c.ws.send(JSON.stringify({ type: 'subscribe', wallet: user(1) }));
    c.ws.send(JSON.stringify({ type: 'subscribe', wallet: user(1), apiKey: 'rn_wrong' }));
    await until(() => (c.msgs.filter((m) => m.type === 'error').length >= 6 ? true : undefined), 'six errors');
    expect(c.msgs.map((m) => m.errorCode)).toEqual([
      'INVALID_MESSAGE',
      'INVALID_MESSAGE',
      'INVALID_MESSAGE',
      'INVALID_MESSAGE',
      'MISSING_API_KEY',
      'INVALID_API_KEY',
    ]);
    expect(JSON.stringify(c.msgs)).not.toContain('rn_wrong');
    // The key in the message works where the upgrade had none.
    const k = s.node.ledger.apiKeys.create('events-ws');
    c.ws.send(JSON.stringify({ type: 'subscribe', wallet: user(1), apiKey: k.key }));
    await until(() => c.msgs.find((m) => m.type === 'subscribed' && m.wallet === user(1)), 'the wallet subscription');
    // Heartbeats come (heartbeatSeconds: 1 in this test's config).
    await until(() => c.msgs.find((m) => m.type === 'heartbeat'), 'a heartbeat', 10_000);
    expect(c.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('keeps a client whose pong arrived while the node itself was busy past a heartbeat', async () => {
    const c = await streamClient(s.url);
    clients.push(c.ws);
    // The node's event loop (shared with this test) kept busy for 2.5 heartbeats right after the client answered a
    // ping, as a long synchronous call under load would keep it: the pong waits in the node's socket meanwhile, and
    // the overdue heartbeat fires before the loop reads it.
    let stalls = 0;
    c.ws.on('ping', () => {
      if (stalls++ < 2) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2_500);
    });
    await until(() => (stalls >= 2 ? true : undefined), 'a second ping (none comes to a dropped client)', 20_000);
    const heartbeats = c.msgs.filter((m) => m.type === 'heartbeat').length;
    await until(() => (c.msgs.filter((m) => m.type === 'heartbeat').length > heartbeats + 1 ? true : undefined), 'heartbeats after the stalls', 10_000);
    expect(c.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('closes a client that does not read with 4008 instead of buffering without bound', async () => {
    const { requestId } = await quote(undefined, 2);
    const stream = s.node.api.statusStream;
    const c = await streamClient(s.url);
    clients.push(c.ws);
    c.ws.send(JSON.stringify({ type: 'subscribe', requestIds: [requestId] }));
    await until(() => c.msgs.find((m) => m.type === 'snapshot'), 'the snapshot');
    const before = stream.clients;
    // Heartbeats would drop a client that answers no ping too (after two of them): not this test's subject.
    s.node.config.events.heartbeatSeconds = 600;
    s.node.config.events.wsMaxBufferedMessages = 5;
    s.node.config.events.wsMaxBufferedBytes = 16 * 1024;
    try {
      // The client stops reading; the request changes (with large records) until the node drops it.
      (c.ws as any)._socket.pause();
      const details = 'x'.repeat(32 * 1024);
      let changes = 0;
      await until(async () => {
        for (let i = 0; i < 20; i++) {
          s.node.ledger.tx(() => s.node.ledger.requests.setStatus(requestId, changes++ % 2 ? 'pending' : 'submitted', { details: `${details}${changes}` }));
        }
        await new Promise((resolve) => setImmediate(resolve));
        return stream.clients < before ? true : changes > 20_000 ? false : undefined;
      }, 'the slow client to be dropped').then((dropped) => expect(dropped).toBe(true));
      // Once it reads again, it finds the close frame after what was buffered.
      (c.ws as any)._socket.resume();
      const closed = await c.closed;
      expect(closed.code).toBe(CLOSE_SLOW_CLIENT);
      expect(closed.reason).toMatch(/too slowly/);
      // It got a prefix of the changes, in order, and not all of them.
      const seqs = c.msgs.filter((m) => m.type === 'request.status').map((m) => m.seq);
      expect(seqs.length).toBeLessThan(changes);
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]);
    } finally {
      s.node.config.events.heartbeatSeconds = eventsConfig.heartbeatSeconds;
      s.node.config.events.wsMaxBufferedMessages = 1_000;
      s.node.config.events.wsMaxBufferedBytes = 1_048_576;
    }
  });
});
