// Public API hardening (issue 13): what a hostile client got through, each reproduced here.
// Webhook SSRF, limits that hold (keys guessed, v2, probes, websocket, anonymous quotes),
// apiKey filters, unused quote pruning, and the read-only replica without a private key.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { zeroAddress } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { buildConfig, buildConfigWithKeys } from '../src/config/load.ts';
import { isNonPublicAddress } from '../src/events/targetGuard.ts';
import { pruneUnusedQuotes } from '../src/ledger/quotePruner.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { withPostgres } from '../src/ledger/pgUrl.ts';
import { ledgerByEnv } from './helpers/cliConfig.ts';
import { heaviestListing, seedRequests, seedRequestsPostgres } from './helpers/seedRequests.ts';
import { api, executeSteps, startStack, until, V2_LIVE, waitForStatus, type Stack } from './helpers/stack.ts';
import { stalledRequest } from './helpers/stalledRequest.ts';

const A = 8453;
const B = 10;
const HIGH = 1_000_000;
const RATE_LIMIT = {
  perKeyPerMinute: HIGH,
  unauthenticatedPerMinute: HIGH,
  anonymousQuotesPerMinute: 3,
  probesPerMinute: HIGH,
  wsConnectionsPerIp: HIGH,
  wsMessagesPerConnectionPerMinute: HIGH,
  wsMessagesPerIpPerMinute: HIGH,
};

let s: Stack;
const servers: Server[] = [];
const sockets: WebSocket[] = [];
const user = (i: number) => s.devnet.accounts[i]!.address;

beforeAll(async () => {
  s = await startStack({
    config: {
      // Listing workers at the main thread's priority: this machine also runs the other test files.
      api: { host: '127.0.0.1', port: 0, rateLimit: RATE_LIMIT, listing: { workerNice: 0 } },
      events: { maxWebhooksPerKey: 3, redeliverPerMinute: 2, redeliverDeadChunk: 2, maxAttempts: 1, pollIntervalMs: 50, deliveryTimeoutMs: 2_000 },
    },
  });
}, 120_000);
afterAll(async () => {
  for (const w of sockets) w.terminate();
  for (const srv of servers) {
    srv.closeAllConnections();
    srv.close();
  }
  await s?.stop();
}, 120_000);

// An HTTP receiver on 127.0.0.1 that counts what reaches it.
async function receiver(): Promise<{ port: number; calls: string[] }> {
  const calls: string[] = [];
  const srv = createServer((req, res) => {
    calls.push(req.url ?? '');
    req.resume();
    res.end('ok');
  });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  servers.push(srv);
  return { port: (srv.address() as AddressInfo).port, calls };
}

// A port nothing listens on (taken, then released).
async function closedPort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

const quoteBody = (account: number) => ({
  user: user(account),
  recipient: user(account),
  originChainId: A,
  destinationChainId: B,
  originCurrency: zeroAddress,
  destinationCurrency: zeroAddress,
  amount: '10000000000000000',
  tradeType: 'EXACT_INPUT',
});

async function quote(apiKey: string | undefined, account = 1) {
  const q = await api(s.url, '/quote/v2', { apiKey, body: quoteBody(account) });
  expect(q.status).toBe(200);
  return { body: q.body, requestId: q.body.steps.at(-1).requestId as string };
}

// A read-only replica over the stack's ledger with the given API settings; with logLines, its log (debug) goes there.
async function replica(apiOverrides: Record<string, unknown>, logLines?: string[]): Promise<RelayNode> {
  const raw = { ...s.devnet.nodeConfig({ port: 0, dataDir: s.dataDir, logLevel: 'silent' }), requestsV2: V2_LIVE, ...s.ledgerConfig };
  const config = buildConfigWithKeys(
    { ...raw, api: { host: '127.0.0.1', port: 0, ...apiOverrides, rateLimit: { ...RATE_LIMIT, ...(apiOverrides.rateLimit as object) } } },
    s.devnet.keys,
  );
  const log = logLines ? createLogger('debug', { write: (line: string) => void logLines.push(line) }) : createLogger('silent');
  return new RelayNode(config, { readOnly: true, log }).start();
}

async function wsClient(url: string, path = '/intents/status/ws') {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${path}`);
  sockets.push(ws);
  const msgs: any[] = [];
  ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  const opened = new Promise<number | 'open'>((resolve) => {
    ws.on('open', () => resolve('open'));
    ws.on('unexpected-response', (req, res) => {
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    ws.on('error', () => {});
  });
  return { ws, msgs, closed, opened };
}

describe('webhook targets (SSRF)', () => {
  it('judges addresses: loopback, private, link-local, unique-local, CGNAT, metadata and IPv4-mapped are not public', () => {
    for (const ip of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.100.100.200',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00:ec2::254',
      'fc00::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:a9fe:a9fe',
      '64:ff9b::a00:1',
      '::127.0.0.1',
      'ff02::1',
      // 6to4 and Teredo carry an IPv4 address (here 169.254.169.254, and Teredo's client 127.0.0.1) to reach through a relay.
      '2002:a9fe:a9fe::1',
      '64:ff9b:1:a9fe:a9:fe00::',
      '2001:0:4136:e378:8000:63bf:80ff:fffe',
      'not-an-ip',
    ]) {
      expect([ip, isNonPublicAddress(ip)]).toEqual([ip, true]);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '2a00:1450:4001:81c::200e']) {
      expect([ip, isNonPublicAddress(ip)]).toEqual([ip, false]);
    }
  });

  it('refuses private address literals, refuses names resolving there at connect time, and reports failures without network details', async () => {
    const cfg = s.node.config.events;
    cfg.allowPrivateTargets = false;
    try {
      const k = s.node.ledger.apiKeys.create('ssrf');
      for (const url of [
        'http://127.0.0.1:8545/',
        'http://[::1]/x',
        'http://[::ffff:127.0.0.1]/x',
        'http://[::ffff:a9fe:a9fe]/latest/meta-data',
        'http://169.254.169.254/latest/meta-data',
        'http://10.0.0.1/',
        'http://192.168.1.1/',
        'http://172.16.0.1/',
        'http://100.100.100.200/',
        'http://[fd00:ec2::254]/',
        'http://[fe80::1]/',
        'http://0.0.0.0/',
        'http://2130706433/', // 127.0.0.1 as one number: WHATWG URL parsing makes it the literal
      ]) {
        const r = await api(s.url, '/webhooks', { apiKey: k.key, body: { url } });
        expect([url, r.status, r.body.message]).toEqual([url, 400, expect.stringMatching(/url: must point to a public address/)]);
      }
      // A name that resolves to loopback passes registration, and is refused when connecting.
      const rx = await receiver();
      const byName = await api(s.url, '/webhooks', { apiKey: k.key, body: { url: `http://localhost:${rx.port}/hook` } });
      expect(byName.status).toBe(201);
      const q = await quote(k.key);
      const dead = await until(async () => {
        const d = await api(s.url, `/webhooks/${byName.body.id}/deliveries?state=dead`, { apiKey: k.key });
        return d.body.deliveries.find((x: any) => x.requestId === q.requestId);
      }, 'the delivery to a private target to be dead');
      expect(rx.calls).toHaveLength(0);
      expect(dead.lastError).toMatch(/private, loopback or link-local/);
      expect(dead.lastError).not.toMatch(/127\.0\.0\.1|::1|ECONN|localhost/);
      expect(dead.lastError).not.toContain(String(rx.port));

      // With private targets allowed (a devnet), the same delivery goes through: the refusal was the guard.
      cfg.allowPrivateTargets = true;
      const again = await api(s.url, `/webhooks/${byName.body.id}/redeliver`, { apiKey: k.key, body: { dead: true } });
      expect(again.status).toBe(200);
      await until(() => (rx.calls.length > 0 ? true : undefined), 'the redelivery to reach the receiver');

      // A refused connection: the owner learns that it failed, not how (no ECONNREFUSED, address or port).
      const port = await closedPort();
      const refused = await api(s.url, '/webhooks', { apiKey: k.key, body: { url: `http://127.0.0.1:${port}/hook` } });
      expect(refused.status).toBe(201);
      const q2 = await quote(k.key, 2);
      const failed = await until(async () => {
        const d = await api(s.url, `/webhooks/${refused.body.id}/deliveries?state=dead`, { apiKey: k.key });
        return d.body.deliveries.find((x: any) => x.requestId === q2.requestId);
      }, 'the delivery to a closed port to be dead');
      expect(failed.lastError).toBe('could not connect to the target or the connection failed');
      expect(JSON.stringify(failed)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
      expect(JSON.stringify(failed)).not.toContain(String(port));
    } finally {
      cfg.allowPrivateTargets = true;
    }
  });

  it('caps webhooks per key and rate-limits redelivery', async () => {
    const k = s.node.ledger.apiKeys.create('cap');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await api(s.url, '/webhooks', { apiKey: k.key, body: { url: `https://example.com/h${i}` } });
      expect(r.status).toBe(201);
      ids.push(r.body.id);
    }
    const fourth = await api(s.url, '/webhooks', { apiKey: k.key, body: { url: 'https://example.com/h4' } });
    expect(fourth.status).toBe(409);
    expect(fourth.body).toMatchObject({ errorCode: 'TOO_MANY_WEBHOOKS', message: expect.stringMatching(/at most 3 webhooks/) });
    // Deleting one makes room again.
    expect((await api(s.url, `/webhooks/${ids[0]}`, { apiKey: k.key, method: 'DELETE' })).status).toBe(200);
    expect((await api(s.url, '/webhooks', { apiKey: k.key, body: { url: 'https://example.com/h5' } })).status).toBe(201);

    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await api(s.url, `/webhooks/${ids[1]}/redeliver`, { apiKey: k.key, body: { dead: true } })).status);
    expect(statuses).toEqual([200, 200, 429]);
  });

  it('redelivers dead deliveries a bounded chunk per call, and says more are left', async () => {
    const k = s.node.ledger.apiKeys.create('dead backlog');
    const hook = await api(s.url, '/webhooks', { apiKey: k.key, body: { url: `http://127.0.0.1:${await closedPort()}/hook` } });
    expect(hook.status).toBe(201);
    for (const account of [1, 2, 3]) await quote(k.key, account);
    await until(() => s.node.ledger.events.deliveryCounts(hook.body.id).dead === 3 || undefined, 'three deliveries to a closed port to be dead');
    const again = await api(s.url, `/webhooks/${hook.body.id}/redeliver`, { apiKey: k.key, body: { dead: true } });
    expect([again.status, again.body]).toEqual([200, { redelivered: 2, more: true }]);
  });
});

describe('limits that hold', () => {
  it('counts failed API-key lookups against the caller address: guessing ends in 429', async () => {
    const r = await replica({ rateLimit: { unauthenticatedPerMinute: 5 } });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await api(r.url, '/chains', { apiKey: `rn_guess${i}` })).status);
      expect(statuses).toEqual([403, 403, 403, 403, 403, 429, 429, 429]);
    } finally {
      await r.stop();
    }
  });

  it('puts /requests/v2 behind the general limiter, and limits probes', async () => {
    const r = await replica({ rateLimit: { unauthenticatedPerMinute: 3, probesPerMinute: 4 } });
    try {
      // The address's budget spent on cheap calls (quickly: the bucket refills at 3 a minute)...
      for (let i = 0; i < 3; i++) expect((await api(r.url, '/chains')).status).toBe(200);
      // ...leaves none for v2 either.
      const v2 = await api(r.url, '/requests/v2');
      expect(v2.status).toBe(429);
      expect(v2.body.errorCode).toBe('RATE_LIMITED');
      const probes: number[] = [];
      for (let i = 0; i < 5; i++) probes.push((await api(r.url, '/health')).status);
      expect(probes).toEqual([200, 200, 200, 200, 429]);
    } finally {
      await r.stop();
    }
  });

  it('serves /metrics and /ready on their own listen address when configured', async () => {
    const r = await replica({ metricsListen: { host: '127.0.0.1', port: 0 } });
    try {
      expect(r.operatorUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect((await api(r.url, '/metrics')).status).toBe(404);
      expect((await api(r.url, '/ready')).status).toBe(404);
      expect((await api(r.url, '/health')).status).toBe(200);
      const m = await api(r.operatorUrl!, '/metrics');
      expect(m.status).toBe(200);
      expect(String(m.body)).toMatch(/# HELP/);
      expect((await api(r.operatorUrl!, '/ready')).status).toBe(200);
    } finally {
      await r.stop();
    }
  });

  it("charges a subscription's snapshots like messages: one per request id read", async () => {
    // A subscribe reads and sends a snapshot per id (up to 100) for one message; subscribing and
    // unsubscribing in turn read 100 status records per message, on the node's thread.
    const r = await replica({ rateLimit: { wsMessagesPerConnectionPerMinute: 60, wsMessagesPerIpPerMinute: 60 } });
    try {
      const c = await wsClient(r.url);
      expect(await c.opened).toBe('open');
      const ids = (from: number) => Array.from({ length: 40 }, (_, i) => `0x${(from + i).toString(16).padStart(64, '0')}`);
      c.ws.send(JSON.stringify({ type: 'subscribe', requestIds: ids(1) }));
      await until(() => c.msgs.find((m) => m.type === 'subscribed'), 'the first subscription');
      c.ws.send(JSON.stringify({ type: 'unsubscribe', requestIds: ids(1) }));
      c.ws.send(JSON.stringify({ type: 'subscribe', requestIds: ids(1000) }));
      const refused = await until(() => c.msgs.find((m) => m.errorCode === 'RATE_LIMITED'), 'the second subscription refused');
      expect(refused.message).toMatch(/subscribing to 40 request ids cost 40 messages/);
      expect(c.msgs.filter((m) => m.type === 'subscribed')).toHaveLength(1);
    } finally {
      await r.stop();
    }
  });

  it('caps websocket connections per address and limits messages per connection and per address', async () => {
    const r = await replica({ rateLimit: { wsConnectionsPerIp: 2, wsMessagesPerConnectionPerMinute: 5, wsMessagesPerIpPerMinute: 7 } });
    try {
      const c1 = await wsClient(r.url);
      const c2 = await wsClient(r.url);
      expect(await c1.opened).toBe('open');
      expect(await c2.opened).toBe('open');
      const c3 = await wsClient(r.url);
      expect(await c3.opened).toBe(429);

      const pongs = (c: { msgs: any[] }) => c.msgs.filter((m) => m.type === 'pong').length;
      // c1 uses 5 of the address's 7; c2 gets 2, then one RATE_LIMITED error, then nothing.
      for (let i = 0; i < 5; i++) c1.ws.send('{"type":"ping"}');
      await until(() => (pongs(c1) === 5 ? true : undefined), 'c1 pongs');
      for (let i = 0; i < 5; i++) c2.ws.send('{"type":"ping"}');
      await until(() => c2.msgs.find((m) => m.errorCode === 'RATE_LIMITED'), 'the rate-limit error');
      // Closing: the server has handled every message sent before the close frame.
      c2.ws.close();
      await until(() => (r.api.statusStream.clients === 1 ? true : undefined), 'c2 to be gone');
      expect(pongs(c2)).toBe(2);
      expect(c2.msgs.filter((m) => m.errorCode === 'RATE_LIMITED')).toHaveLength(1);

      // A connection that keeps sending past its limit is closed (1008); a freed slot admits a new one.
      for (let i = 0; i < 50; i++) c1.ws.send('{"type":"ping"}');
      expect(await c1.closed).toBe(1008);
      expect(pongs(c1)).toBe(5);
      await until(() => (r.api.statusStream.clients === 0 ? true : undefined), 'c1 to be gone');
      const c4 = await wsClient(r.url);
      expect(await c4.opened).toBe('open');
    } finally {
      await r.stop();
    }
  });

  it('limits anonymous quotes below keyed ones', async () => {
    const k = s.node.ledger.apiKeys.create('quotes');
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await api(s.url, '/quote/v2', { body: quoteBody(3) })).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const limited = await api(s.url, '/quote/v2', { body: quoteBody(3) });
    expect(limited.body).toMatchObject({ errorCode: 'RATE_LIMITED', message: expect.stringMatching(/without an API key/) });
    for (let i = 0; i < 4; i++) expect((await api(s.url, '/quote/v2', { apiKey: k.key, body: quoteBody(3) })).status).toBe(200);
  });
});

describe('apiKey filters', () => {
  it('filter by the caller own key id only; raw keys are never a filter value (v2 and v3)', async () => {
    const mine = s.node.ledger.apiKeys.create('mine');
    const theirs = s.node.ledger.apiKeys.create('theirs');
    const q = await quote(theirs.key);
    const enc = (f: unknown) => encodeURIComponent(JSON.stringify(f));
    const cases: [string, string | undefined][] = [
      [`/requests/v3?apiKey=${theirs.id}`, mine.key],
      [`/requests/v3?filters=${enc([{ apiKey: theirs.id }])}`, mine.key],
      [`/requests/v3?filters=${enc([{ 'not:apiKey': theirs.id }])}`, mine.key],
      [`/requests/v3?apiKey=${theirs.key}`, mine.key],
      [`/requests/v3?apiKey=${mine.key}`, mine.key],
      [`/requests/v2?apiKey=${theirs.id}`, undefined],
      [`/requests/v2?apiKey=${theirs.key}`, undefined],
      [`/requests/v2?apiKey=${theirs.id}`, mine.key],
    ];
    for (const [path, key] of cases) {
      const r = await api(s.url, path, { apiKey: key });
      expect([path, r.status, r.body.errorCode]).toEqual([path, 400, 'INVALID_INPUT_PARAMETERS']);
      expect(JSON.stringify(r.body)).not.toContain(q.requestId);
    }
    // A raw key gets the same answer whether it is valid or not: no validity oracle.
    const valid = await api(s.url, `/requests/v2?apiKey=${theirs.key}`);
    const invalid = await api(s.url, `/requests/v2?apiKey=rn_${'0'.repeat(40)}`);
    expect(valid.body.message).toBe(invalid.body.message);
    // The owner filters by its own id.
    const own = await api(s.url, `/requests/v3?apiKey=${theirs.id}&limit=50`, { apiKey: theirs.key });
    expect(own.status).toBe(200);
    expect(own.body.requests.map((r: any) => r.id)).toContain(q.requestId);
  });
});

describe('unused quotes', () => {
  it('prunes quotes past expiry that nothing happened to, and keeps every request with a deposit, payout or event', async () => {
    const k = s.node.ledger.apiKeys.create('prune');
    const unused = await quote(k.key, 4);
    const used = await quote(k.key, 4);
    const [txHash] = await executeSteps(s, used.body, 4);
    await api(s.url, '/transactions/index', { body: { txHash, chainId: A } });
    expect((await waitForStatus(s.url, used.requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    const ledger = s.node.ledger;
    const count = (sql: string, id: string) => (ledger.db.prepare(sql).get(id) as { n: number }).n;

    // Not yet expired: kept.
    pruneUnusedQuotes(ledger.db, Date.now());
    expect(ledger.requests.get(unused.requestId)).toBeDefined();
    // Past its expiry (and the grace): gone with its 'waiting' event; the used request stays whole.
    const pruned = pruneUnusedQuotes(ledger.db, Date.now() + 3_600_000);
    expect(pruned).toBeGreaterThanOrEqual(1);
    expect(ledger.requests.get(unused.requestId)).toBeUndefined();
    expect(count('SELECT COUNT(*) AS n FROM events WHERE request_id = ?', unused.requestId)).toBe(0);
    expect(ledger.requests.get(used.requestId)?.status).toBe('success');
    expect(count('SELECT COUNT(*) AS n FROM deposits WHERE request_id = ?', used.requestId)).toBeGreaterThan(0);
    expect(count('SELECT COUNT(*) AS n FROM events WHERE request_id = ?', used.requestId)).toBeGreaterThan(1);
    expect((await api(s.url, `/intents/status/v3?requestId=${used.requestId}`)).body.status).toBe('success');
    // The node runs the pruner itself.
    expect(s.node.quotePruner).toBeDefined();
  });
});

describe('read-only replica', () => {
  it('starts from the solver address in config, without any private key', async () => {
    const solver = privateKeyToAccount(s.devnet.keys.solver).address;
    // On a PostgreSQL stack (RELAY_TEST_LEDGER=postgres), the same database, its URL (and password) from the environment.
    const ledger = ledgerByEnv(s);
    const raw = {
      ...s.devnet.nodeConfig({ port: 0, dataDir: s.dataDir, logLevel: 'info' }),
      requestsV2: V2_LIVE,
      solverAddress: solver,
      ...ledger.config,
    };
    // The node itself still needs its key.
    expect(() => buildConfig(raw, ledger.env)).toThrow(/solverKey: is required to run the node/);
    const dir = mkdtempSync(join(tmpdir(), 'relay-replica-'));
    const path = join(dir, 'replica.json');
    writeFileSync(path, JSON.stringify(raw));
    // No key anywhere in the environment either.
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/KEY/i.test(k))), ...ledger.env };
    const child = spawn(process.execPath, ['bin/relay-node.js', 'api', '--config', path, '--port', '0'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = once(child, 'exit');
    try {
      const started = await until(() => (/"msg":"relay node started"/.exec(out) ? out : undefined), 'the replica to start', 90_000);
      const line = JSON.parse(started.split('\n').find((l) => l.includes('relay node started'))!);
      expect(line.solver).toBe(solver);
      expect((await api(line.url, '/health')).status).toBe(200);
      expect((await api(line.url, '/requests/v2')).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  }, 120_000);
});

describe('listings isolated from the node', () => {
  it('bounds the cost of a listing query: a 400 naming the bound', async () => {
    const k = s.node.ledger.apiKeys.create('bounds');
    const b = s.node.config.api.listing;
    const enc = (f: unknown) => encodeURIComponent(JSON.stringify(f));
    const addr = (i: number) => `0x${(i + 1).toString(16).padStart(40, '0')}`;
    const cases: [string, RegExp][] = [
      [`filters=${enc(Array.from({ length: b.maxGroups + 1 }, () => ({ status: 'success' })))}`, new RegExp(`at most ${b.maxGroups} groups`)],
      [`filters=${enc([{ user: Array.from({ length: b.maxValuesPerField + 1 }, (_, i) => addr(i)) }])}`, new RegExp(`1 to ${b.maxValuesPerField} values`)],
      [
        `status=success&filters=${enc(Array.from({ length: b.maxGroups }, () => ({ status: Array(b.maxValuesPerField).fill('success') })))}`,
        new RegExp(`at most ${b.maxFilterValues} filter values in all`),
      ],
      [`filters=${enc([{ term: 'x'.repeat(b.maxFiltersLength) }])}`, new RegExp(`at most ${b.maxFiltersLength} characters`)],
    ];
    for (const [q, message] of cases) {
      const r = await api(s.url, `/requests/v3?${q}`, { apiKey: k.key });
      expect([q.slice(0, 40), r.status, r.body.message]).toEqual([q.slice(0, 40), 400, expect.stringMatching(message)]);
    }
    // The heaviest query within the bound is answered.
    expect((await api(s.url, `/requests/v3?${heaviestListing(b)}`, { apiKey: k.key })).status).toBe(200);
  });

  it('counts features toward the filter-value bound (each is a condition), once per distinct name', async () => {
    const k = s.node.ledger.apiKeys.create('features');
    const { maxFilterValues } = s.node.config.api.listing;
    const names = (n: number) => Array.from({ length: n }, (_, i) => `f${i}`).join(',');
    const over = await api(s.url, `/requests/v3?features=${names(maxFilterValues + 1)}`, { apiKey: k.key });
    expect([over.status, over.body.message]).toEqual([400, expect.stringMatching(`features: at most ${maxFilterValues} filter values in all`)]);
    // With other filters: the sum is what is bounded.
    const mixed = await api(s.url, `/requests/v3?status=success&features=${names(maxFilterValues)}`, { apiKey: k.key });
    expect([mixed.status, mixed.body.message]).toEqual([400, expect.stringMatching(`this query has ${maxFilterValues + 1}`)]);
    // The same name many times is one condition.
    const repeated = await api(
      s.url,
      `/requests/v3?features=${Array(maxFilterValues * 3)
        .fill('fast_fill')
        .join(',')}&features=fast_fill`,
      { apiKey: k.key },
    );
    expect(repeated.status).toBe(200);
    expect((await api(s.url, `/requests/v3?features=${names(maxFilterValues)}`, { apiKey: k.key })).status).toBe(200);
  });

  it('refuses a forged continuation whose sort key is not a safe integer (PostgreSQL compares it as BIGINT)', async () => {
    const k = s.node.ledger.apiKeys.create('continuation');
    const forged = (key: unknown, sortBy = 'createdAt', d = 'desc') => Buffer.from(JSON.stringify({ s: sortBy, d, k: key, i: 'x' })).toString('base64url');
    for (const [key, sortBy, dir] of [
      [1.5, 'createdAt', 'desc'],
      [1e300, 'updatedAt', 'desc'],
      [2 ** 53, 'amountUsd', 'asc'],
    ] as const) {
      const r = await api(s.url, `/requests/v3?sortBy=${sortBy}&sortDirection=${dir}&continuation=${forged(key, sortBy, dir)}`, { apiKey: k.key });
      expect([key, r.status, r.body.message]).toEqual([key, 400, expect.stringMatching(/continuation: is not a continuation this API returned/)]);
    }
    // An integer key (an unpriced request sorts as -1) is one the API could have returned.
    expect((await api(s.url, `/requests/v3?sortBy=amountUsd&sortDirection=asc&continuation=${forged(-1, 'amountUsd', 'asc')}`, { apiKey: k.key })).status).toBe(
      200,
    );
  });

  it('runs listings in worker threads: /health answers while heavy listings are still running', async () => {
    // Ten callers, a listing each: a caller has one in progress at most (the test below).
    const keys = Array.from({ length: 10 }, (_, i) => s.node.ledger.apiKeys.create(`isolation-${i}`));
    const k = keys[0]!;
    // On PostgreSQL in bulk: 20,000 requests row by row through the node's connection outlast its statement timeout.
    const pgUrl = s.ledgerConfig.ledger?.url;
    const seed = { prefix: 'iso', start: Date.UTC(2025, 0, 1) };
    if (pgUrl)
      await withPostgres(pgUrl, async (client) => {
        await seedRequestsPostgres(client, 20_000, seed);
        await client.query('ANALYZE');
      });
    else seedRequests(s.node.ledger.db, 20_000, seed);
    // Workers up (their first listing starts them).
    expect((await api(s.url, '/requests/v3?limit=1', { apiKey: k.key })).status).toBe(200);
    const done: string[] = [];
    const listings = Array.from({ length: 10 }, (_, i) =>
      api(s.url, `/requests/v3?${heaviestListing(s.node.config.api.listing, i)}`, { apiKey: keys[i % keys.length]!.key }).then((r) => {
        done.push(`listing ${r.status}`);
        return r;
      }),
    );
    await until(() => (s.node.listings.busy > 0 ? true : undefined), 'a listing to be running');
    const health = await api(s.url, '/health');
    done.push(`health ${health.status}`);
    const results = await Promise.all(listings);
    for (const r of results) expect(r.status).toBe(200);
    // /health did not wait for the listings that were sent before it.
    expect(done.indexOf('health 200')).toBeGreaterThanOrEqual(0);
    expect(done.indexOf('health 200')).toBeLessThan(done.length - 1);
    expect(results[0]!.body.total).toBeGreaterThan(0);
    // Listing workers run at a lower thread priority: on a machine busy with other test files they
    // take the wait, so the bound is generous.
  }, 240_000);

  it('holds one caller to its share of the listing workers: past 1 in progress, 429; another caller is still served', async () => {
    // The workers and their queue (256) are shared: before, one key's heavy listings held every worker and filled the
    // queue, and every other caller waited or got 503 LISTING_BUSY.
    const greedy = s.node.ledger.apiKeys.create('greedy');
    const other = s.node.ledger.apiKeys.create('other-caller');
    const heavy = Array.from({ length: 6 }, (_, i) => api(s.url, `/requests/v3?${heaviestListing(s.node.config.api.listing, i)}`, { apiKey: greedy.key }));
    await until(() => (s.node.listings.busy > 0 ? true : undefined), 'a listing to be running');
    const light = await api(s.url, '/requests/v3?limit=1', { apiKey: other.key });
    const statuses = (await Promise.all(heavy)).map((r) => [r.status, r.body.errorCode]);
    expect(light.status).toBe(200);
    expect(statuses.filter(([status]) => status === 200)).toHaveLength(1);
    expect(statuses.filter(([status]) => status === 429)).toEqual(Array(5).fill([429, 'RATE_LIMITED']));
  }, 240_000);
});

describe('limits keyed on the matched route, however the path is spelled', () => {
  it('counts a percent-encoded /quote in the anonymous-quote limit', async () => {
    const r = await replica({});
    try {
      // Fastify decodes the path before routing: /qu%6Fte is /quote (a replica answers it 503 READ_ONLY).
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await api(r.url, '/qu%6Fte', { body: quoteBody(1) })).status);
      expect(statuses).toEqual([503, 503, 503, 429]);
      expect((await api(r.url, '/quote/v%32', { body: quoteBody(1) })).status).toBe(429);
    } finally {
      await r.stop();
    }
  });

  it('caps status stream connections opened by a percent-encoded path', async () => {
    const r = await replica({ rateLimit: { wsConnectionsPerIp: 2 } });
    try {
      const c1 = await wsClient(r.url);
      const c2 = await wsClient(r.url, '/intents/status/w%73');
      expect(await c1.opened).toBe('open');
      expect(await c2.opened).toBe('open');
      const c3 = await wsClient(r.url, '/intents/st%61tus/w%73');
      expect(await c3.opened).toBe(429);
    } finally {
      await r.stop();
    }
  });

  it('refuses a percent-encoded committing route while draining', async () => {
    const r = await replica({});
    try {
      await r.drain(0);
      const refused = await api(r.url, '/qu%6Fte', { body: quoteBody(1) });
      expect([refused.status, refused.body.errorCode]).toEqual([503, 'NODE_DRAINING']);
    } finally {
      await r.stop();
    }
  });
});

describe('priced routes in the anonymous-quote limit', () => {
  it('counts /price (GET and POST), /config/v2 and /chains/liquidity with the quotes: each makes RPC reads', async () => {
    const r = await replica({});
    try {
      const priceQuery = new URLSearchParams({ ...quoteBody(1), originChainId: String(A), destinationChainId: String(B) }).toString();
      const first = [
        (await api(r.url, `/price?${priceQuery}`)).status,
        (await api(r.url, '/price', { body: quoteBody(1) })).status,
        (await api(r.url, `/config/v2?originChainId=${A}&destinationChainId=${B}`)).status,
      ];
      // A replica prices nothing itself (503 READ_ONLY) but answers /config/v2: either way, a call counted.
      expect(first).toEqual([503, 503, 200]);
      for (const call of [
        () => api(r.url, '/quote', { body: quoteBody(1) }),
        () => api(r.url, `/price?${priceQuery}`),
        () => api(r.url, `/config/v2?originChainId=${A}&destinationChainId=${B}`),
        () => api(r.url, `/chains/liquidity?chainId=${B}`),
      ]) {
        const limited = await call();
        expect([limited.status, limited.body.message]).toEqual([429, expect.stringMatching(/at most 3 quotes and prices per minute without an API key/)]);
      }
      // A key is not in the anonymous bucket.
      const k = s.node.ledger.apiKeys.create('priced');
      expect((await api(r.url, `/config/v2?originChainId=${A}&destinationChainId=${B}`, { apiKey: k.key })).status).toBe(200);
    } finally {
      await r.stop();
    }
  });
});

describe('routes that read chains per call, in the anonymous-quote limit', () => {
  it('counts /transactions/index, /transactions/single, /permits and /execute/permits with the quotes', async () => {
    // Each reads the chain before anything else refuses it: on SVM, /transactions/index polled a signature
    // for seconds (about 100 provider calls); a permit post read the token four times before its signature
    // was checked. They were charged only to the general per-IP limit.
    const r = await replica({});
    try {
      const tx = `0x${'ab'.repeat(32)}`;
      const calls = [
        () => api(r.url, '/transactions/index', { body: { chainId: A, txHash: tx } }),
        () => api(r.url, '/transactions/single', { body: { chainId: A, requestId: tx, tx } }),
        () => api(r.url, '/permits', { body: {} }),
        () => api(r.url, '/execute/permits', { body: {} }),
      ];
      for (let i = 0; i < 3; i++) await calls[i]!();
      for (const call of calls) {
        const limited = await call();
        expect([limited.status, limited.body.message]).toEqual([429, expect.stringMatching(/at most 3 quotes and prices per minute without an API key/)]);
      }
    } finally {
      await r.stop();
    }
  });
});

describe('logged URLs', () => {
  it('carry no API key: a request with ?apiKey=<key> that fails leaves no key in the log', async () => {
    const lines: string[] = [];
    const r = await replica({}, lines);
    try {
      const k = s.node.ledger.apiKeys.create('logged');
      // The replica's usage read fails (a ledger fault, in the listing worker that reads it): a 500, logged with the request's URL.
      r.listings.run = () => Promise.reject<never>(new Error('usage table unreadable'));
      const failed = await api(r.url, `/metrics/usage?apiKey=${k.key}&granularity=daily`, { apiKey: k.key });
      expect([failed.status, failed.body.errorCode]).toEqual([500, 'INTERNAL_ERROR']);
      // Another spelling of the parameter name: Fastify decodes it to apiKey too.
      await api(r.url, `/metrics/usage?api%4Bey=${k.key}`, { apiKey: k.key });
      const logged = await until(() => {
        const failures = lines.filter((l) => l.includes('request failed'));
        return failures.length === 2 ? failures : undefined;
      }, 'both failures to be logged');
      expect(logged[0]).toContain('/metrics/usage?');
      // A key put in the path (a client's mistake) stays out of the access log too.
      expect((await api(r.url, `/keys/${k.key}`)).status).toBe(404);
      await until(() => (lines.some((l) => l.includes('"url":"/keys/[secret]"')) ? true : undefined), 'the access log line');
      expect(lines.join('\n')).not.toContain(k.key);
      expect(lines.join('\n')).not.toContain(k.key.slice(3));
    } finally {
      await r.stop();
    }
  });
});

describe('client address and slow clients', () => {
  const forwarded = (url: string, client: string) => api(url, '/chains', { headers: { 'x-forwarded-for': client } });

  it('ignores X-Forwarded-For by default: every forwarded value shares the peer address bucket', async () => {
    const r = await replica({ rateLimit: { unauthenticatedPerMinute: 2 } });
    try {
      const statuses = [
        (await forwarded(r.url, '203.0.113.1')).status,
        (await forwarded(r.url, '203.0.113.1')).status,
        (await forwarded(r.url, '203.0.113.2')).status,
      ];
      expect(statuses).toEqual([200, 200, 429]);
    } finally {
      await r.stop();
    }
  });

  it('with the peer a trusted proxy (api.trustProxy), each forwarded client has its own bucket', async () => {
    const r = await replica({ trustProxy: ['127.0.0.1/32', '::1'], rateLimit: { unauthenticatedPerMinute: 2 } });
    try {
      const statuses = [
        (await forwarded(r.url, '203.0.113.1')).status,
        (await forwarded(r.url, '203.0.113.1')).status,
        (await forwarded(r.url, '203.0.113.1')).status,
      ];
      expect(statuses).toEqual([200, 200, 429]);
      expect((await forwarded(r.url, '203.0.113.2')).status).toBe(200);
      // A client cannot name itself past the proxy: the address the trusted proxy saw is the one that counts.
      expect((await forwarded(r.url, '203.0.113.9, 203.0.113.1')).status).toBe(429);
    } finally {
      await r.stop();
    }
  });

  it('counts IPv6 clients by their /64: addresses of one host share a bucket', async () => {
    // Keyed on the whole address, a client holding a /64 (as most hosts do) had a bucket per address: no limit.
    const r = await replica({ trustProxy: ['127.0.0.1/32', '::1'], rateLimit: { unauthenticatedPerMinute: 2 } });
    try {
      const statuses = [
        (await forwarded(r.url, '2001:db8:1:2::a')).status,
        (await forwarded(r.url, '2001:db8:1:2:ffff::b')).status,
        (await forwarded(r.url, '2001:0db8:0001:0002:0:0:0:c')).status,
      ];
      expect(statuses).toEqual([200, 200, 429]);
      // Another /64 has its own.
      expect((await forwarded(r.url, '2001:db8:1:3::a')).status).toBe(200);
    } finally {
      await r.stop();
    }
  });

  it('stops anonymous quotes of all addresses together at anonymousQuotesPerMinuteTotal: addresses are cheap', async () => {
    // Per address only, a client with many addresses (a /48 of IPv6 holds 65,536 /64s) quoted without bound: each
    // quote reads chains on the solver's RPC budget and is stored for about 75 minutes (up to ~140 KB with call data).
    const r = await replica({ trustProxy: ['127.0.0.1/32', '::1'], rateLimit: { anonymousQuotesPerMinute: 3, anonymousQuotesPerMinuteTotal: 5 } });
    try {
      const config = (client: string, apiKey?: string) =>
        api(r.url, `/config/v2?originChainId=${A}&destinationChainId=${B}`, { headers: { 'x-forwarded-for': client }, ...(apiKey ? { apiKey } : {}) });
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await config(`2001:db8:${i}::1`)).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
      const refused = await config('2001:db8:99::1');
      expect([refused.status, refused.body.message]).toEqual([429, expect.stringMatching(/without an API key are busy; an API key has its own limit/)]);
      // A key is not in it.
      const k = s.node.ledger.apiKeys.create('total');
      expect((await config('2001:db8:99::1', k.key)).status).toBe(200);
    } finally {
      await r.stop();
    }
  });

  it('closes a connection whose request body stalls (api.requestTimeoutMs)', async () => {
    const r = await replica({ requestTimeoutMs: 1_000, headersTimeoutMs: 1_000 });
    try {
      expect(await stalledRequest(r.url, '/chains')).toMatch(/^HTTP\/1\.1 408/);
    } finally {
      await r.stop();
    }
  });
});
