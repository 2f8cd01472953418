// Adversarial review of the public API as a hostile client (third pass): a client with no key, or a cheap key, looking
// for a request whose cost it does not pay for by its size. Costs are counted (reads on the node's thread, rows a
// statement walks), never timed.
import { connect, type Socket } from 'node:net';
import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConfigWithKeys } from '../../src/config/load.ts';
import { linkWallet } from '../helpers/appBalance.ts';
import { depositOn, fillsOn } from '../helpers/devnetOrders.ts';
import { api, apiReplica, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;

beforeAll(async () => {
  s = await startStack({
    // SQLite whatever RELAY_TEST_LEDGER says: the costs are counted with SQLite's own (its query plans).
    ledger: 'sqlite',
    // Receiving bounds of a second: a connection that never speaks is waited for in a test's time.
    config: { api: { host: '127.0.0.1', port: 0, listing: { workerNice: 0 }, headersTimeoutMs: 1_000, requestTimeoutMs: 2_000 } },
  });
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

// A TCP connection to the API at `url`, open.
function openTo(url: string, localAddress?: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const c = connect({ port: Number(port), host: hostname, ...(localAddress ? { localAddress } : {}) }, () => resolve(c));
    c.once('error', reject);
  });
}

// Connections to `url` a test opens (each from `from`, when given), and those the node has closed.
function tracked(url: string) {
  const all: Socket[] = [];
  const closed = new Set<Socket>();
  const opened = async (from?: string) => {
    const c = await openTo(url, from);
    all.push(c);
    c.on('close', () => closed.add(c));
    c.on('error', () => {});
    return c;
  };
  return { all, closed, opened };
}

// Asks GET /health on `c` and waits for its answer.
async function healthAnswered(c: Socket, what: string): Promise<void> {
  const answers: string[] = [];
  c.on('data', (d) => answers.push(String(d)));
  c.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await until(() => (answers.join('').includes('"status":"ok"') ? true : undefined), what, 10_000);
}

// The status of GET `path` on `url`, asked from `localAddress` on a connection of its own.
async function rawGet(url: string, path: string, localAddress: string): Promise<number> {
  const c = await openTo(url, localAddress);
  try {
    const data: string[] = [];
    c.on('data', (d) => data.push(String(d)));
    c.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    const head = await until(() => /^HTTP\/1\.1 (\d{3})/.exec(data.join(''))?.[1], `an answer to ${path}`, 10_000);
    return Number(head);
  } finally {
    c.destroy();
  }
}

// A read-only API replica on the stack's ledger, with `api` settings of its own.
const replica = (api: Record<string, unknown>) => apiReplica(s, api);

// The node's own connection (SQLite in the stack's data directory), for seeding what a busy app leaves behind.
const db = () => (s.node.ledger as unknown as { db: { prepare(sql: string): any; transaction(fn: () => void): () => void } }).db;

describe("GET /app-fees/:wallet/balances and /claims of a busy app's fee recipient", () => {
  // An app's fee recipient gets an app_fee_entries row per filled request that paid it a fee: a popular app's has
  // hundreds of thousands, and its address is public (every request of the app names it). Both reads took no key and
  // walked every one of those rows on the node's thread: the balances read builds each into a BigInt sum (1.1 to 1.7 s
  // at 200,000 on this host), the claims read finds the recipient's claims among them (no index has the kind). A client
  // without a key may ask 600 times a minute: with one address it held the node's event loop (every fill, indexer pass
  // and status answer) for as long as it liked.
  const N = 5_000;
  // As the ledger spells a recipient (checksummed), and the route reads it.
  const WALLET = getAddress('0x00000000000000000000000000000000000a9f11');
  const usdc10 = () => s.devnet.chains.find((c) => c.id === 10)!.contracts.stablecoin;

  beforeAll(() => {
    const ins = db().prepare(
      `INSERT INTO app_fee_entries (recipient, chain_id, currency, amount, kind, request_id, ref, created_at) VALUES (?, 10, ?, '1000', 'accrual', ?, ?, ?)`,
    );
    const now = Date.now();
    db().transaction(() => {
      for (let i = 0; i < N; i++) ins.run(WALLET, usdc10(), `0x${(0xfee00000 + i).toString(16).padStart(64, '0')}`, `review-api-3:${i}`, now);
    })();
  });

  // Every read of the recipient's rows made on the node's own connection (its thread), while `fn` runs.
  async function readsOnLoop<T>(fn: () => Promise<T>): Promise<{ result: T; onLoop: number }> {
    const fees = s.node.ledger.appFees;
    const sums = s.node.ledger.balances;
    const { balances, claimsOf } = fees;
    const { summary } = sums;
    let onLoop = 0;
    fees.balances = (...a) => {
      onLoop++;
      return balances.apply(fees, a);
    };
    fees.claimsOf = (...a) => {
      onLoop++;
      return claimsOf.apply(fees, a);
    };
    sums.summary = (...a) => {
      onLoop++;
      return summary.apply(sums, a);
    };
    try {
      return { result: await fn(), onLoop };
    } finally {
      fees.balances = balances;
      fees.claimsOf = claimsOf;
      sums.summary = summary;
    }
  }

  it("are not read on the node's event loop", async () => {
    // The claims statement finds the recipient's entries by the recipient alone: it walks all N accruals for none.
    const plan = (
      db()
        .prepare(
          `EXPLAIN QUERY PLAN SELECT p.* FROM payouts p WHERE p.kind = 'claim' AND p.id IN (SELECT request_id FROM app_fee_entries WHERE recipient = ? AND kind = 'claim') ORDER BY p.decided_at DESC, p.id DESC LIMIT 21`,
        )
        .all(WALLET) as { detail: string }[]
    ).map((r) => r.detail);
    expect(plan.join(' | ')).toMatch(/app_fee_entries USING INDEX app_fee_entries_recipient \(recipient=\?\)/);

    const { result, onLoop } = await readsOnLoop(async () => ({
      balances: await api(s.url, `/app-fees/${WALLET}/balances`),
      claims: await api(s.url, `/app-fees/${WALLET}/claims`),
    }));
    expect(result.balances.status).toBe(200);
    // The same answer as before: the app balance (none) and the N accruals summed exactly.
    const fees = result.balances.body.balances.filter((b: { type: string }) => b.type === 'app-fees');
    expect(fees).toHaveLength(1);
    expect([fees[0].currency.chainId, fees[0].amount]).toEqual([10, String(1000 * N)]);
    expect(result.balances.body.balances[0]).toMatchObject({ type: 'app-balance', amount: '0' });
    expect([result.claims.status, result.claims.body.claims]).toEqual([200, []]);
    // Before: three reads of the recipient's rows on the node's thread (its app balance, its fees, its claims).
    expect(onLoop).toBe(0);
    // A malformed wallet is still refused before any read.
    expect((await api(s.url, '/app-fees/nope/balances')).status).toBe(400);
  });

  it('a deposit is filled while a client without a key floods them, 200 at a time', async () => {
    const { result, onLoop } = await readsOnLoop(async () => {
      const id = await depositOn(s.devnet, s.url, 4);
      let filled = false;
      const done = waitForStatus(s.url, id, ['success'], 60_000).then(() => {
        filled = true;
      });
      const statuses: number[] = [];
      // Waves of 200 concurrent reads from one address, until the fill is made (bounded: waitForStatus fails first).
      while (!filled) {
        const wave = await Promise.all(
          Array.from({ length: 200 }, (_, i) => api(s.url, i % 2 ? `/app-fees/${WALLET}/claims` : `/app-fees/${WALLET}/balances`)),
        );
        statuses.push(...wave.map((r) => r.status));
        await Promise.race([done, new Promise((r) => setImmediate(r))]);
      }
      await done;
      return { id, statuses };
    });
    expect(await fillsOn(s.devnet, result.id)).toHaveLength(1);
    // Answered, or refused at once while the caller's read is in progress (its share of the listing workers) or past
    // its rate limit: never a read of the recipient's rows on the node's thread.
    expect(result.statuses.length).toBeGreaterThanOrEqual(200);
    expect(result.statuses.every((st) => st === 200 || st === 429)).toBe(true);
    expect(result.statuses).toContain(200);
    expect(onLoop).toBe(0);
  });
});

describe('a quote by a key linked to a busy sponsor wallet', () => {
  // A sponsor's app balance is a sum of its entries (a hold, a release, a charge per sponsored request): about 0.4 s
  // on the node's thread at 300,000 on this host. Every quote by a key linked to a sponsor read it, whether or not it
  // asked for sponsorship (only subsidizeFees uses it): a busy app's every plain quote, at its key's limit (100 a
  // second), held the node's loop for the sum.
  it('reads the sponsor balance only when the quote asks for sponsorship', async () => {
    const key = s.node.ledger.apiKeys.create('busy-sponsor');
    await linkWallet(s, key, 3);
    const wallet = s.devnet.accounts[3]!.address;
    const N = 3_000;
    const ins = db().prepare(`INSERT INTO balance_entries (wallet, kind, amount, request_id, ref, detail, created_at) VALUES (?, 'hold', 1, NULL, ?, NULL, ?)`);
    db().transaction(() => {
      for (let i = 0; i < N; i++) ins.run(wallet, `review-api-3:hold:${i}`, Date.now());
    })();
    const sums = s.node.ledger.balances;
    const { summary } = sums;
    let onLoop = 0;
    sums.summary = (...a) => {
      onLoop++;
      return summary.apply(sums, a);
    };
    try {
      const user = s.devnet.accounts[1]!.address;
      for (let i = 0; i < 3; i++) {
        const q = await api(s.url, '/quote', { apiKey: key.key, body: nativeBridge(user, user, 8453, 10, '20000000000000000') });
        expect(q.status).toBe(200);
      }
      // Before: one sum of the sponsor's N entries per quote.
      expect(onLoop).toBe(0);
      // A quote that asks for sponsorship still reads it, and is refused when the balance cannot pay (the held N).
      const sponsored = await api(s.url, '/quote', {
        apiKey: key.key,
        body: nativeBridge(user, user, 8453, 10, '20000000000000000', { subsidizeFees: true }),
      });
      expect(onLoop).toBe(1);
      expect(sponsored.status).toBe(400);
      expect(sponsored.body.message).toMatch(/sponsor's app balance/);
    } finally {
      sums.summary = summary;
    }
  });
});

describe('connections that never send a byte', () => {
  // api.headersTimeoutMs bounds a request whose headers are slow, and requestTimeoutMs one whose body is: Node starts
  // both clocks at a request's first byte. A connection that sends nothing has no request, and the server's socket
  // timeout is off: it stayed open for good. A client without a key opened them as fast as it could connect (no
  // request, so no rate limit counted them), each a file descriptor of the node's until the node ran out, and then
  // the node could open none for itself (its RPC connections, its ledger's files).
  it('are closed once api.headersTimeoutMs has passed without a request', async () => {
    const { hostname } = new URL(s.url);
    const open = () => openTo(s.url);
    const silent = await Promise.all(Array.from({ length: 50 }, open));
    const closed = new Set<Socket>();
    for (const c of silent) {
      // Opening the fifty may take longer than the bound on a busy machine: the first may be closed already.
      if (c.destroyed) closed.add(c);
      c.on('close', () => closed.add(c));
      c.on('error', () => {});
    }
    // A connection that asks at once is answered as before, and kept alive for its next request past the bound.
    const talker = await open();
    const answers: string[] = [];
    talker.on('data', (d) => answers.push(String(d)));
    const ask = () => talker.write(`GET /health HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
    ask();
    await until(() => (answers.join('').includes('"status":"ok"') ? true : undefined), 'the first answer', 10_000);
    try {
      // Before: none was ever closed (the wait fails).
      await until(() => (closed.size === silent.length ? true : undefined), 'every silent connection to be closed by the node', 20_000);
      expect(talker.destroyed).toBe(false);
      answers.length = 0;
      ask();
      await until(() => (answers.join('').includes('"status":"ok"') ? true : undefined), 'the second answer on the same connection', 10_000);
    } finally {
      for (const c of silent) c.destroy();
      talker.destroy();
    }
  });
});

describe('connections per address', () => {
  // Nothing counted a client's connections: a request answered 429 (free: no bucket is charged for a refusal) leaves
  // its connection open for the keep-alive time (72 s), so a client without a key could hold as many of the node's
  // file descriptors as it could open connections in that time. api.connectionsPerIp caps one address's connections:
  // past it, its oldest idle one makes room, and when none is idle the new one is refused.
  it("closes the address's oldest idle connection for a new one, and refuses one past the cap when none is idle", async () => {
    const CAP = 5;
    // Silent connections are not closed within the test's wait: what closes them here is the cap.
    const r = await replica({ connectionsPerIp: CAP, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000 });
    const all: Socket[] = [];
    try {
      const closed = new Set<Socket>();
      const opened = async () => {
        const c = await openTo(r.url);
        all.push(c);
        c.on('close', () => closed.add(c));
        c.on('error', () => {});
        return c;
      };
      // Asks /health on the connection and waits for the answer; the connection stays open (keep-alive).
      const ask = async (c: Socket) => {
        const answers: string[] = [];
        const onData = (d: Buffer) => answers.push(String(d));
        c.on('data', onData);
        c.write(`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
        await until(() => (answers.join('').includes('"status":"ok"') ? true : undefined), 'an answer to /health', 10_000);
        c.off('data', onData);
      };
      const idle: Socket[] = [];
      for (let i = 0; i < CAP; i++) {
        const c = await opened();
        await ask(c);
        idle.push(c);
      }
      // One more: answered, and the oldest idle connection of the address is closed for it (before: all six open).
      const sixth = await opened();
      await ask(sixth);
      await until(() => (closed.has(idle[0]!) ? true : undefined), "the address's oldest idle connection to be closed", 10_000);
      expect(idle.slice(1).some((c) => closed.has(c))).toBe(false);
      expect(closed.has(sixth)).toBe(false);

      // Connections that have not asked yet are not idle: with the cap held by them, one more is refused.
      for (const c of [...idle.slice(1), sixth]) c.destroy();
      await until(() => (closed.size === CAP + 1 ? true : undefined), 'the test to close its connections', 10_000);
      const waiting: Socket[] = [];
      for (let i = 0; i < CAP; i++) waiting.push(await opened());
      const refused = await opened();
      await until(() => (closed.has(refused) ? true : undefined), 'the connection past the cap to be refused', 10_000);
      expect(waiting.some((c) => closed.has(c))).toBe(false);
      // A waiting connection that asks now is answered.
      await ask(waiting[0]!);
    } finally {
      for (const c of all) c.destroy();
      await r.stop();
    }
  });

  it('caps the connections of all addresses together (api.maxConnections): addresses are cheap, descriptors are not', async () => {
    // Per address only, a client with many addresses (a /48 of IPv6 holds 65,536 /64s) held as many of the node's file
    // descriptors as it liked, until the node could open none for its own RPC calls. 127.0.x.1 are distinct clients (and networks).
    const r = await replica({ connectionsPerIp: 100, maxConnections: 6, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000 });
    const { all, closed, opened } = tracked(r.url);
    try {
      const held: Socket[] = [];
      for (let i = 0; i < 6; i++) held.push(await opened(`127.0.${10 + i}.1`));
      const refused = await opened('127.0.20.1');
      await until(() => (closed.has(refused) ? true : undefined), 'the connection past the total to be refused', 10_000);
      expect(held.some((c) => closed.has(c))).toBe(false);
      // One closed makes room again.
      held[0]!.destroy();
      await until(() => (closed.has(held[0]!) ? true : undefined), 'the test to close one', 10_000);
      await healthAnswered(await opened('127.0.21.1'), 'an answer on the connection that took its place');
    } finally {
      for (const c of all) c.destroy();
      await r.stop();
    }
  });

  it("caps one network's connections (an IPv4 /24, an IPv6 /48) at an eighth of the total: its many addresses do not take it all", async () => {
    // Capped per address and in total only, a client holding a network (a /48 of IPv6 is 65,536 /64s, each a client
    // of its own; an IPv4 /24, 256) filled the whole total with connections that never speak, reopened as each is closed
    // at api.headersTimeoutMs, and every other client was refused. 127.0.5.x is one /24, 127.0.6.1 another.
    const r = await replica({ connectionsPerIp: 100, maxConnections: 16, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000 });
    const { all, closed, opened } = tracked(r.url);
    try {
      const network: Socket[] = [];
      for (let i = 0; i < 16; i++) network.push(await opened(`127.0.5.${10 + i}`));
      // The /24 keeps two (16 / 8) of its silent connections; the others are refused as they come.
      await until(() => (closed.size === 14 ? true : undefined), "the network's connections past its cap to be refused", 10_000);
      expect(network.slice(0, 2).some((c) => closed.has(c))).toBe(false);
      await healthAnswered(await opened('127.0.6.1'), "another network's client answered");
    } finally {
      for (const c of all) c.destroy();
      await r.stop();
    }
  });

  it("limits one network's requests without a key (an IPv4 /24, an IPv6 /48) to ten addresses' worth", async () => {
    // Each address (an IPv6 /64) had its own bucket of unauthenticatedPerMinute, and a client holding a /48 has 65,536
    // of them: its requests without a key had no bound but the node's CPU. 127.0.7.x is one /24.
    const r = await replica({ rateLimit: { unauthenticatedPerMinute: 3 } });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) {
        for (let j = 0; j < 3; j++) statuses.push(await rawGet(r.url, '/chains', `127.0.7.${10 + i}`));
      }
      // 3 a minute per address, 30 for the network (and what refills at 30 a minute while the test asks): the rest 429.
      const ok = statuses.filter((x) => x === 200).length;
      expect({ ok: ok >= 30 && ok <= 40, limited: statuses.filter((x) => x === 429).length }).toEqual({ ok: true, limited: 120 - ok });
      // Another network is not held by it.
      expect(await rawGet(r.url, '/chains', '127.0.8.1')).toBe(200);
    } finally {
      await r.stop();
    }
  });

  it("does not count a trusted proxy's connections: its clients are counted by their requests", async () => {
    const r = await replica({ connectionsPerIp: 2, trustProxy: ['127.0.0.0/8'] });
    const all: Socket[] = [];
    try {
      for (let i = 0; i < 4; i++) all.push(await openTo(r.url));
      // Four connections of the proxy at once, each asking: all answered (past the cap, two would have been refused).
      const answered = await Promise.all(
        all.map(async (c) => {
          const answers: string[] = [];
          c.on('data', (d) => answers.push(String(d)));
          c.write(`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 203.0.113.${all.indexOf(c)}\r\n\r\n`);
          return until(() => (answers.join('').includes('"status":"ok"') ? true : undefined), 'an answer through the proxy', 10_000);
        }),
      );
      expect(answered).toEqual([true, true, true, true]);
    } finally {
      for (const c of all) c.destroy();
      await r.stop();
    }
  });
});

describe('priced requests with an API key', () => {
  // Quotes and prices with a key had only the key's limit of every call (6,000 a minute): 100 a second, each reading the
  // chains on the solver's own RPC budget (the fills' estimates and sends wait behind them at a provider's rate limit),
  // and each quote stored for its life and the prune's grace (tens of KB each). Without a key they had 60 a minute.
  it('are limited per key apart from its other calls (api.rateLimit.pricedPerKeyPerMinute, 1,200)', async () => {
    const key = s.node.ledger.apiKeys.create('busy-quoter');
    expect(buildConfigWithKeys({ ...s.devnet.nodeConfig({ port: 0 }), api: {} }, s.devnet.keys).api.rateLimit.pricedPerKeyPerMinute).toBe(1_200);
    const r = await replica({ rateLimit: { pricedPerKeyPerMinute: 100 } });
    try {
      const statuses = new Map<number, number>();
      const ask = async (path: string) => {
        const res = await api(r.url, path, { apiKey: key.key });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        return res.status;
      };
      // /chains/liquidity reads the solver's balances over RPC on a node that speaks to chains; a read-only replica answers
      // it without RPC (503), which is enough to count: of 300 asked back to back, 100 pass the key's priced bucket (and
      // what refills while they are asked: 100 a minute). Before, at the default of 1,200, 1,300 all passed.
      for (let i = 0; i < 300; i += 50) await Promise.all(Array.from({ length: 50 }, () => ask('/chains/liquidity?chainId=10')));
      expect(statuses.get(429) ?? 0).toBeGreaterThanOrEqual(150);
      // The key's other calls are not held by it.
      expect(await ask('/chains')).toBe(200);
    } finally {
      await r.stop();
    }
  });
});
