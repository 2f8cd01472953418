// Adversarial review of the public API as a hostile client (second pass): reads whose cost a keyed client sets, and
// that ran synchronously on the node's event loop (SQLite answers on the calling thread: while a read runs, no fill,
// indexer pass or status change of anyone runs). Costs are counted (rows, statements on the node's thread), not timed.
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isNonPublicAddress } from '../../src/events/targetGuard.ts';
import { api, depositAddressQuote, startStack, until, type Stack } from '../helpers/stack.ts';

let s: Stack;
const WS_CAP = 3;

beforeAll(async () => {
  s = await startStack({
    // SQLite whatever RELAY_TEST_LEDGER says: the costs are counted with SQLite's own (total_changes, its query plans).
    ledger: 'sqlite',
    config: {
      api: { host: '127.0.0.1', port: 0, rateLimit: { wsConnectionsPerIp: WS_CAP }, listing: { workerNice: 0 } },
      events: { pollIntervalMs: 1_000 },
      depositAddresses: { maxWatchedPerKey: 2 },
    },
  });
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

// The node's own connection (SQLite in the stack's data directory), for seeding what a key's traffic leaves behind.
const db = () => (s.node.ledger as unknown as { db: { prepare(sql: string): any; transaction(fn: () => void): () => void } }).db;

// A new key's webhook and a backlog of `n` deliveries to it of one state (its events seeded as a key's traffic leaves
// them): delivered ones, or pending ones due in a day (the deliverer leaves them alone while the test runs).
async function webhookWithBacklog(
  name: string,
  n: number,
  state: 'delivered' | 'pending',
  base: number,
): Promise<{ key: { key: string; id: string }; webhookId: string }> {
  const key = s.node.ledger.apiKeys.create(name);
  const created = await api(s.url, '/webhooks', { apiKey: key.key, body: { url: 'http://127.0.0.1:9/hook' } });
  expect(created.status).toBe(201);
  const webhookId = created.body.id as string;
  const insEvent = db().prepare(
    `INSERT INTO events (id, request_id, api_key_id, type, status, payload, created_at) VALUES (?, ?, ?, 'request.status', 'waiting', '{}', ?)`,
  );
  const insDelivery = db().prepare(
    `INSERT INTO event_deliveries (event_id, webhook_id, request_id, event_seq, state, attempts, next_attempt_at, delivered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const now = Date.now();
  db().transaction(() => {
    for (let i = 0; i < n; i++) {
      const id = `evt_${(base + i).toString(16).padStart(24, '0')}`;
      const requestId = `0x${(base + i).toString(16).padStart(64, '0')}`;
      const seq = insEvent.run(id, requestId, key.id, now).lastInsertRowid;
      if (state === 'delivered') insDelivery.run(id, webhookId, requestId, seq, 'delivered', 1, now, now);
      else insDelivery.run(id, webhookId, requestId, seq, 'pending', 0, now + 86_400_000, null);
    }
  })();
  return { key, webhookId };
}

describe("GET /webhooks/:id/deliveries under a key's backlog", () => {
  // A key's webhooks get a delivery per event of its requests, a quote's 'waiting' included: quoting at its limit
  // with ten webhooks leaves hundreds of thousands of deliveries per webhook before the quote pruner takes them
  // (review-api.test.ts). The listing reads the webhook's newest 100, but no index orders a webhook's deliveries by
  // event_seq: the statement reads every delivery of the webhook (and its event) into a sort, on the node's thread
  // (about 0.5 s at 400,000 on this host), and a key may ask it 6,000 times a minute.
  it("is not read on the node's event loop", async () => {
    const N = 5_000;
    const { key, webhookId } = await webhookWithBacklog('backlog', N, 'delivered', 0xabc000000);
    // The statement's plan sorts the webhook's deliveries: its cost is the whole backlog, whatever the page.
    const plan = (
      db()
        .prepare(
          `EXPLAIN QUERY PLAN SELECT d.*, e.type, e.status FROM event_deliveries d JOIN events e ON e.seq = d.event_seq
             WHERE d.webhook_id = ? AND (CAST(NULL AS TEXT) IS NULL OR d.state = NULL) ORDER BY d.event_seq DESC LIMIT 100`,
        )
        .all(webhookId) as { detail: string }[]
    ).map((r) => r.detail);
    expect(plan.join(' | ')).toMatch(/TEMP B-TREE FOR ORDER BY/);

    const events = s.node.ledger.events;
    const { deliveries } = events;
    let onLoop = 0;
    events.deliveries = (...a) => {
      onLoop++;
      return deliveries.apply(events, a);
    };
    try {
      const listed = await api(s.url, `/webhooks/${webhookId}/deliveries`, { apiKey: key.key });
      expect(listed.status).toBe(200);
      expect(listed.body.deliveries).toHaveLength(100);
      // Newest first, as before.
      expect(listed.body.deliveries[0].eventId).toBe(`evt_${(0xabc000000 + N - 1).toString(16).padStart(24, '0')}`);
      const dead = await api(s.url, `/webhooks/${webhookId}/deliveries?state=dead`, { apiKey: key.key });
      expect([dead.status, dead.body.deliveries]).toEqual([200, []]);
      // Before: each listing ran on the node's thread, reading all N deliveries there.
      expect(onLoop).toBe(0);
      // Another key still cannot read them.
      const other = s.node.ledger.apiKeys.create('other');
      expect((await api(s.url, `/webhooks/${webhookId}/deliveries`, { apiKey: other.key })).status).toBe(404);
    } finally {
      events.deliveries = deliveries;
    }
  });
});

describe("DELETE /webhooks/:id under a key's backlog", () => {
  // Removing a webhook ended its pending deliveries (dead, 'webhook removed') in one UPDATE with no bound, on the
  // node's only write connection: a key that let a backlog build (a receiver that never answers, quotes at its limit:
  // about 400,000 in 70 minutes) held every fill for the rewrite (2.6 s at 400,000 on this host) with one call, and
  // again with each of its webhooks. They now end a chunk at a time, the node's loop turning between chunks.
  it("ends the pending deliveries a chunk at a time: the node's loop never waits for the whole backlog", async () => {
    const N = 5_000;
    const { key, webhookId } = await webhookWithBacklog('remove-backlog', N, 'pending', 0xdef000000);
    // Rows the node's connection has written, sampled at every turn of the event loop (this process is the node's)
    // while the call runs: the most written between two turns is what the loop waited for at once.
    const changes = () => (db().prepare('SELECT total_changes() AS n').get() as { n: number }).n;
    let last = changes();
    let most = 0;
    let running = true;
    const turn = () => {
      const now = changes();
      most = Math.max(most, now - last);
      last = now;
      if (running) setImmediate(turn);
    };
    setImmediate(turn);
    const removed = await api(s.url, `/webhooks/${webhookId}`, { method: 'DELETE', apiKey: key.key });
    running = false;
    expect(removed.status).toBe(200);
    // Every one ended (dead, 'webhook removed'), never more than a chunk (1,000) and the node's own few rows at once.
    expect(s.node.ledger.events.deliveryCounts(webhookId)).toMatchObject({ pending: 0, dead: N });
    expect(most).toBeGreaterThanOrEqual(1_000);
    expect(most).toBeLessThan(1_100);
  });
});

describe('GET /metrics/usage', () => {
  const MINUTE = 60_000;
  const HOUR = 60 * MINUTE;
  // Seeds `minutes` minutes of a key's counts, `combos` route/status pairs each minute, ending in the current hour.
  function seedUsage(apiKeyId: string, minutes: number, combos: number): { from: number; to: number } {
    const to = Math.floor(Date.now() / HOUR) * HOUR;
    const from = to - minutes * MINUTE;
    const counts = [];
    for (let m = from; m < to; m += MINUTE)
      for (let c = 0; c < combos; c++)
        counts.push({ apiKeyId, minute: m, endpoint: `GET /route-${c % 20}`, statusCode: 400 + Math.floor(c / 20), errorCode: '', count: 1 });
    s.node.ledger.apiUsage.add(counts);
    return { from, to };
  }

  // The span bounds (minutely 1 day, hourly 31 days, daily 366 days) assume a coarser granularity is read as fewer
  // rows. On SQLite the bucket size was bound as a REAL, so (minute / size) * size was the minute itself: an hourly or
  // daily read answered every minute's row, 60 or 1,440 times what its granularity promises (a key with 20 route and
  // status pairs a minute for 31 days: 892,800 rows, 77 MB of JSON built on the node's thread, 7.5 s on this host).
  it('sums a granularity into its buckets', async () => {
    const key = s.node.ledger.apiKeys.create('usage-hourly');
    const { from, to } = seedUsage(key.id, 180, 5);
    const r = await api(s.url, `/metrics/usage?granularity=hourly&startTimestamp=${from / 1000}&endTimestamp=${to / 1000}`, { apiKey: key.key });
    expect(r.status).toBe(200);
    // Three hours of five pairs: 15 rows of 60 calls each (before: 900 rows of 1).
    expect(r.body.metrics).toHaveLength(15);
    expect(r.body.metrics.every((m: { count: number }) => m.count === 60)).toBe(true);
    const daily = await api(s.url, `/metrics/usage?granularity=daily&startTimestamp=${from / 1000}&endTimestamp=${to / 1000}`, { apiKey: key.key });
    expect(daily.status).toBe(200);
    expect(daily.body.metrics.reduce((n: number, m: { count: number }) => n + m.count, 0)).toBe(900);
    expect(daily.body.metrics.length).toBeLessThanOrEqual(10);
  });

  // Even summed, the read scans every minute row of the span (an hourly read of 31 days is 44,640 minutes times the
  // key's route and status pairs): it runs off the node's thread, and an answer past MAX rows is refused.
  it("is not read on the node's event loop, and its answer is bounded", async () => {
    const key = s.node.ledger.apiKeys.create('usage-loop');
    const { from, to } = seedUsage(key.id, 1_440, 20);
    const usage = s.node.ledger.apiUsage;
    const { buckets } = usage;
    let onLoop = 0;
    usage.buckets = (...a) => {
      onLoop++;
      return buckets.apply(usage, a);
    };
    try {
      const hourly = await api(s.url, `/metrics/usage?granularity=hourly&startTimestamp=${from / 1000}&endTimestamp=${to / 1000}`, { apiKey: key.key });
      expect(hourly.status).toBe(200);
      expect(hourly.body.metrics).toHaveLength(24 * 20);
      // 28,800 minute rows, each its own bucket: past the bound, a 400 naming it (before: 28,800 rows answered).
      const minutely = await api(s.url, `/metrics/usage?granularity=minutely&startTimestamp=${from / 1000}&endTimestamp=${to / 1000}`, {
        apiKey: key.key,
      });
      expect([minutely.status, minutely.body.errorCode]).toEqual([400, 'INVALID_INPUT_PARAMETERS']);
      expect(minutely.body.message).toMatch(/more than 10000 counts/);
      expect(onLoop).toBe(0);
    } finally {
      usage.buckets = buckets;
    }
  });
});

describe('a key at its deposit-address cap', () => {
  // A deposit-address quote first counts the key's live addresses, up to its cap (20,000 by default: about 2 ms of
  // the node's thread at the cap on this host), and a key at its cap is refused there, before any chain read: a 429
  // that costs the client nothing, asked at the key's limit (100 a second), spent a fifth of the event loop on counts.
  it('is refused without the count being read again for every quote', async () => {
    const key = s.node.ledger.apiKeys.create('at-cap');
    for (let i = 0; i < 2; i++) expect((await depositAddressQuote(s, {}, key.key)).status).toBe(200);
    const requests = s.node.ledger.requests;
    const { watchedOf } = requests;
    let counts = 0;
    requests.watchedOf = (...a) => {
      counts++;
      return watchedOf.apply(requests, a);
    };
    try {
      for (let i = 0; i < 20; i++) {
        const r = await depositAddressQuote(s, {}, key.key);
        expect([r.status, r.body.errorCode]).toEqual([429, 'RATE_LIMITED']);
      }
      // Counted once (the first refusal), not twenty times.
      expect(counts).toBeLessThanOrEqual(1);
      // Another key is counted, and quoted, as before.
      const other = s.node.ledger.apiKeys.create('below-cap');
      expect((await depositAddressQuote(s, {}, other.key)).status).toBe(200);
    } finally {
      requests.watchedOf = watchedOf;
    }
  });
});

describe('POST /transactions/index of a transaction with many logs', () => {
  // The route read the transaction's whole receipt (EvmAdapter.indexTransaction: eth_getTransactionReceipt, then a
  // checksummed address per log) on the node's thread, to count the depository's logs in it. Logs cost 375 gas each:
  // one transaction of a block's gas carries about 70,000, paid once (5,000 here), and every call naming it (60 a minute per
  // address without a key, 6,000 with one) had the node parse and checksum all of them again. Now only the
  // depository's logs of the transaction's block are read.
  it('reads a bounded number of logs per call', async () => {
    const N = 5_000;
    // Init code that emits N empty LOG0s: PUSH2 N; loop: JUMPDEST DUP1 ISZERO PUSH1 end JUMPI PUSH1 0 PUSH1 0 LOG0
    // PUSH1 1 SWAP1 SUB PUSH1 loop JUMP; end: JUMPDEST STOP.
    const initCode = `0x61${N.toString(16).padStart(4, '0')}5b801560155760006000a0600190036003565b00` as `0x${string}`;
    const A = 8453;
    const wallet = s.wallet(3, A);
    const hash = await wallet.sendTransaction({ account: wallet.account!, chain: wallet.chain, data: initCode, gas: 15_000_000n });
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash, timeout: 30_000 });
    expect(receipt.logs.length).toBe(N);
    type Logged = (a: unknown) => Promise<{ logs: unknown[] } | unknown[]>;
    const { client } = (s.node as unknown as { adapters: Map<number, { client: Record<'getTransactionReceipt' | 'getLogs', Logged> }> }).adapters.get(A)!;
    // Every log the adapter's client hands the node, whichever call brings it.
    let logs = 0;
    const originals = { getTransactionReceipt: client.getTransactionReceipt, getLogs: client.getLogs };
    for (const m of ['getTransactionReceipt', 'getLogs'] as const) {
      client[m] = async (a: unknown) => {
        const r = await originals[m].call(client, a);
        logs += Array.isArray(r) ? r.length : r.logs.length;
        return r;
      };
    }
    try {
      for (let i = 0; i < 3; i++) {
        const r = await api(s.url, '/transactions/index', { body: { txHash: hash, chainId: A } });
        expect([r.status, r.body.deposits]).toEqual([200, 0]);
      }
      // Before: 3 x 5,000 logs parsed and checksummed on the node's thread for three calls that found no deposit.
      expect(logs).toBeLessThan(1_000);
    } finally {
      Object.assign(client, originals);
    }
  }, 120_000);
});

describe('webhook targets', () => {
  // ::ffff:0:0:0/96 (IPv4-translated, SIIT) carries an IPv4 host as IPv4-mapped addresses do, behind a translator; it
  // was judged public (the mapped form, ::ffff:a.b.c.d, is one group shorter). Decimal, octal and hex IPv4 forms need no
  // rule: the URL parser writes them as dotted quads before the check (http://0x7f000001/ is 127.0.0.1).
  it('refuses an IPv4-translated address of a private or metadata host', () => {
    for (const ip of ['::ffff:0:7f00:1', '::ffff:0:a9fe:a9fe', '0:0:0:0:ffff:0:a00:1']) expect([ip, isNonPublicAddress(ip)]).toEqual([ip, true]);
    expect(new URL('http://0x7f000001/').hostname).toBe('127.0.0.1');
    expect(new URL('http://017700000001/').hostname).toBe('127.0.0.1');
  });
});

describe('status stream connections per address', () => {
  // The cap is checked when the upgrade is asked (onRequest) and counted when the socket is attached: upgrades
  // asked together must not all pass the check before any is counted.
  it('holds for upgrades opened at once', async () => {
    const url = `${s.url.replace(/^http/, 'ws')}/intents/status/ws`;
    const sockets = Array.from({ length: 12 }, () => new WebSocket(url));
    try {
      const outcomes = await Promise.all(
        sockets.map(
          (ws) =>
            new Promise<string>((resolve) => {
              ws.on('open', () => resolve('open'));
              ws.on('unexpected-response', (req, res) => {
                resolve(String(res.statusCode));
                req.destroy();
              });
              ws.on('error', () => resolve('error'));
            }),
        ),
      );
      expect(outcomes.filter((o) => o === 'open')).toHaveLength(WS_CAP);
    } finally {
      for (const ws of sockets) ws.terminate();
      await until(() => (s.node.api.statusStream.clients === 0 ? true : undefined), 'sockets closed');
    }
  });
});
