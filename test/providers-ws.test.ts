// Websocket RPC providers for EVM chains (issue #16, Providers): real anvil, which serves
// websocket JSON-RPC on the same port as HTTP, and a websocket relay in front of it that can drop
// its connections or stop answering.
import { createHash } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../src/devnet/anvil.ts';
import WebSocket, { WebSocketServer } from 'ws';
import { ProviderPool, ProviderPoolError } from '../src/chains/providers/index.ts';
import { createMetrics } from '../src/metrics.ts';
import { createLogger } from '../src/log.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';
import { anvilKey } from './helpers/anvilKeys.ts';
import { auditStack } from './helpers/audit.ts';

const log = createLogger('silent');
// anvil's first dev account (a well-known test key, funded on every anvil).
const account = privateKeyToAccount(anvilKey(0));
let anvil: AnvilHandle;
let wsUrl: string;
const pools: ProviderPool[] = [];

type Spec = { url: string; name: string; role?: 'any' | 'read' | 'send' | 'fallback' };
function pool(specs: Spec[], extra: Partial<ConstructorParameters<typeof ProviderPool>[0]> = {}) {
  const metrics = createMetrics();
  const p = new ProviderPool({
    chainId: 31337,
    providers: specs.map((s) => ({ url: s.url, name: s.name, weight: 1, maxRps: 0, maxConcurrent: 32, role: s.role ?? 'any' })),
    metrics,
    log,
    maxWaitMs: 10_000,
    ...extra,
  });
  pools.push(p);
  return { pool: p, metrics };
}

async function requests(metrics: ReturnType<typeof createMetrics>, provider: string): Promise<number> {
  const text = await metrics.registry.getSingleMetricAsString('relay_rpc_provider_requests_total');
  const m = new RegExp(`provider="${provider}"} (\\d+)`).exec(text);
  return m ? Number(m[1]) : 0;
}

/** Signs a 1-wei transfer at the pool's nonce of the dev account and broadcasts it through the pool. */
async function broadcast(p: ProviderPool): Promise<Hex> {
  const nonce = Number(BigInt((await p.quorum({ method: 'eth_getTransactionCount', params: [account.address, 'latest'] })) as string));
  const raw = await account.signTransaction({
    chainId: 31337,
    type: 'eip1559',
    nonce,
    to: '0x000000000000000000000000000000000000dEaD',
    value: 1n,
    gas: 21_000n,
    maxFeePerGas: parseGwei('100'),
    maxPriorityFeePerGas: 1n,
  });
  return (await p.request({ method: 'eth_sendRawTransaction', params: [raw] })) as Hex;
}

/**
 * A websocket relay in front of anvil: each connection gets its own upstream connection. It can
 * stop answering (`mute`: requests are swallowed) and drop every connection it holds.
 */
class WsRelay {
  readonly #server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  readonly #clients = new Set<WebSocket>();
  mute = false;
  received = 0;
  connections = 0;
  constructor(target: string) {
    this.#server.on('connection', (client: WebSocket) => {
      this.connections++;
      this.#clients.add(client);
      const upstream = new WebSocket(target);
      const queued: string[] = [];
      upstream.on('open', () => {
        for (const m of queued.splice(0)) upstream.send(m);
      });
      upstream.on('message', (data: WebSocket.Data) => client.readyState === WebSocket.OPEN && client.send(data.toString()));
      upstream.on('error', () => client.terminate());
      client.on('message', (data: WebSocket.Data) => {
        this.received++;
        if (this.mute) return;
        if (upstream.readyState === WebSocket.OPEN) upstream.send(data.toString());
        else queued.push(data.toString());
      });
      client.on('close', () => {
        this.#clients.delete(client);
        upstream.terminate();
      });
    });
  }
  listening(): Promise<void> {
    return this.#server.address() ? Promise.resolve() : new Promise((r) => this.#server.once('listening', () => r()));
  }
  get url(): string {
    return `ws://127.0.0.1:${(this.#server.address() as { port: number }).port}`;
  }
  get open(): number {
    return this.#clients.size;
  }
  drop(): void {
    for (const c of this.#clients) c.terminate();
  }
  stop(): Promise<void> {
    this.drop();
    return new Promise((r) => this.#server.close(() => r()));
  }
}
const relays: WsRelay[] = [];

/** A websocket endpoint that completes the handshake and then never sends another byte (not even a pong): a dead link that never closes. */
async function silentEndpoint(): Promise<{ url: string; open: () => number; accepted: () => number; stop: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server: Server = createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => sock.destroy());
    sock.once('data', (head) => {
      const key = /sec-websocket-key: *(\S+)/i.exec(head.toString())?.[1] ?? '';
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      accepted++;
      sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
      // Everything after the handshake is read and ignored.
      sock.on('data', () => {});
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    url: `ws://127.0.0.1:${port}`,
    open: () => sockets.size,
    accepted: () => accepted,
    stop: () =>
      new Promise<void>((r) => {
        for (const x of sockets) x.destroy();
        server.close(() => r());
      }),
  };
}
async function relay(): Promise<WsRelay> {
  const r = new WsRelay(wsUrl);
  await r.listening();
  relays.push(r);
  return r;
}

async function errors(metrics: ReturnType<typeof createMetrics>, provider: string, kind: string): Promise<number> {
  const text = await metrics.registry.getSingleMetricAsString('relay_rpc_provider_errors_total');
  const m = new RegExp(`provider="${provider}",kind="${kind}"} (\\d+)`).exec(text);
  return m ? Number(m[1]) : 0;
}

async function rpcCall(method: string, params: unknown[] = []): Promise<string> {
  const res = await fetch(anvil.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await res.json()) as { result: string }).result;
}

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 31337 });
  wsUrl = anvil.rpcUrl.replace(/^http/, 'ws');
});

afterAll(async () => {
  for (const p of pools) await p.stop();
  for (const r of relays) await r.stop();
  await anvil?.stop();
});

describe('websocket providers', () => {
  it('a chain with a ws:// provider alone: reads, a quorum read and a broadcast are answered through it', async () => {
    const { pool: p, metrics } = pool([{ url: wsUrl, name: 'ws' }]);
    const head = BigInt((await p.request({ method: 'eth_blockNumber', params: [] })) as string);
    const block = (await p.request({ method: 'eth_getBlockByNumber', params: ['latest', false] })) as { number: string };
    expect(BigInt(block.number)).toBeGreaterThanOrEqual(head);
    expect(await p.quorum({ method: 'eth_chainId', params: [] })).toBe('0x7a69');
    const hash = await broadcast(p);
    const receipt = await until(
      async () => ((await p.quorum({ method: 'eth_getTransactionReceipt', params: [hash] })) as { status: string } | null) ?? undefined,
      'the receipt through the websocket provider',
    );
    expect(receipt.status).toBe('0x1');
    // Calls of one tick go as one batch (an array, matched by id).
    const many = await Promise.all(Array.from({ length: 30 }, () => p.request({ method: 'eth_getBalance', params: [account.address, 'latest'] })));
    expect(new Set(many).size).toBe(1);
    expect(await requests(metrics, 'ws')).toBeGreaterThan(30);
  });

  it('a ws:// provider beside an HTTP one: the quorum read needs both, the broadcast goes through the websocket', async () => {
    // The HTTP provider only reads: a broadcast can only go out through the websocket.
    const { pool: p, metrics } = pool(
      [
        { url: anvil.rpcUrl, name: 'http', role: 'read' },
        { url: wsUrl, name: 'ws' },
      ],
      { quorum: 2 },
    );
    await p.probeHeads();
    expect(p.health().providers.map((x) => [x.name, x.state])).toEqual([
      ['http', 'ok'],
      ['ws', 'ok'],
    ]);
    const balance = await p.quorum({ method: 'eth_getBalance', params: [account.address, 'latest'] });
    expect(balance).toMatch(/^0x[0-9a-f]+$/);
    const hash = await broadcast(p);
    const receipt = await until(
      async () => ((await p.quorum({ method: 'eth_getTransactionReceipt', params: [hash] })) as { status: string } | null) ?? undefined,
      'the receipt agreed by both providers',
    );
    expect(receipt.status).toBe('0x1');
    expect(await requests(metrics, 'ws')).toBeGreaterThan(0);
    expect(await requests(metrics, 'http')).toBeGreaterThan(0);
  });

  it('a dropped connection: the call on it fails as network and is answered elsewhere; the provider reconnects', async () => {
    const r = await relay();
    // The websocket provider is the primary; the HTTP one is used only while the websocket is not usable.
    const { pool: p, metrics } = pool([
      { url: r.url, name: 'ws' },
      { url: anvil.rpcUrl, name: 'http', role: 'fallback' },
    ]);
    expect(await p.request({ method: 'eth_chainId', params: [] })).toBe('0x7a69');
    expect(await requests(metrics, 'http')).toBe(0);
    r.mute = true;
    const before = r.received;
    const call = p.request({ method: 'eth_getBalance', params: [account.address, 'latest'] });
    await until(() => (r.received > before ? true : undefined), 'the call to reach the websocket');
    r.drop();
    expect(await call).toMatch(/^0x[0-9a-f]+$/);
    expect(await errors(metrics, 'ws', 'network')).toBeGreaterThan(0);
    expect(await requests(metrics, 'http')).toBeGreaterThan(0);
    // After its backoff the provider opens a new connection and answers again.
    r.mute = false;
    const served = await requests(metrics, 'ws');
    await until(async () => {
      await p.request({ method: 'eth_chainId', params: [] });
      return (await requests(metrics, 'ws')) > served ? true : undefined;
    }, 'the websocket provider to answer again');
    expect(r.connections).toBe(2);
  });

  it('no answer in time is a timeout; a provider stopping closes its connection', async () => {
    const r = await relay();
    const { pool: p, metrics } = pool([{ url: r.url, name: 'ws' }], { timeoutMs: 300, maxWaitMs: 1_000 });
    expect(await p.request({ method: 'eth_chainId', params: [] })).toBe('0x7a69');
    r.mute = true;
    await expect(p.request({ method: 'eth_blockNumber', params: [] })).rejects.toThrow(/no provider answered eth_blockNumber.*ws: (failing \()?timeout/);
    expect(await errors(metrics, 'ws', 'timeout')).toBeGreaterThan(0);
    r.mute = false;
    expect(r.open).toBe(1);
    await p.stop();
    await until(() => (r.open === 0 ? true : undefined), 'the connection to close', 5_000);
    await expect(p.request({ method: 'eth_chainId', params: [] })).rejects.toThrow(ProviderPoolError);
  });

  it('a connection that went silent (no answer, no pong) is dropped after a timeout and opened again', async () => {
    const dead = await silentEndpoint();
    try {
      const { pool: p, metrics } = pool(
        [
          { url: dead.url, name: 'ws' },
          { url: anvil.rpcUrl, name: 'http', role: 'fallback' },
        ],
        { timeoutMs: 300 },
      );
      // The call times out on the silent websocket and is answered by the fallback.
      expect(await p.request({ method: 'eth_chainId', params: [] })).toBe('0x7a69');
      expect(await errors(metrics, 'ws', 'timeout')).toBe(1);
      expect(dead.accepted()).toBe(1);
      // The unanswered ping drops the connection; a later call opens a new one.
      await until(() => (dead.open() === 0 ? true : undefined), 'the silent connection to be dropped', 5_000);
      await until(async () => {
        await p.request({ method: 'eth_chainId', params: [] });
        return dead.accepted() === 2 ? true : undefined;
      }, 'a new connection');
    } finally {
      await dead.stop();
    }
  });

  it("learns a websocket provider's head from its newHeads subscription, polling the others", async () => {
    // The probe polls once at start, then not for a minute: only the subscription can move a head.
    await rpcCall('anvil_mine', ['0x1']); // (a head above 0: 0 means "not known yet")
    const { pool: p, metrics } = pool(
      [
        { url: anvil.rpcUrl, name: 'http' },
        { url: wsUrl, name: 'ws' },
      ],
      { probeMs: 60_000 },
    );
    const [http, ws] = p.providers;
    p.start();
    const polled = await until(() => (http!.head > 0n && ws!.head > 0n ? http!.head : undefined), 'the first probe');
    let head = 0n;
    await until(async () => {
      await rpcCall('anvil_mine', ['0x1']);
      head = BigInt(await rpcCall('eth_blockNumber'));
      return ws!.head === head ? true : undefined;
    }, 'a new head announced by the websocket provider');
    expect(head).toBeGreaterThan(polled);
    expect(ws!.followsHeads()).toBe(true);
    // The HTTP provider's head is still the polled one.
    expect(http!.head).toBe(polled);
    // A subscribed provider is not polled: a probe leaves its head to the subscription.
    const asked = await requests(metrics, 'ws');
    await p.probeHeads();
    expect(http!.head).toBe(head);
    expect(await requests(metrics, 'ws')).toBe(asked);
  });

  it('a websocket URL never appears in errors or metrics', async () => {
    const r = await relay();
    const url = r.url;
    await r.stop();
    const { pool: p, metrics } = pool([{ url: `${url}/ws/v3/SECRETKEY`, name: 'infura' }], { maxWaitMs: 500 });
    const err = await p.request({ method: 'eth_blockNumber', params: [] }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(ProviderPoolError);
    expect(err!.message).toMatch(/infura: (failing \()?network/);
    for (const s of [err!.message, err!.stack ?? '', await metrics.registry.metrics()]) expect(s).not.toMatch(/SECRETKEY|127\.0\.0\.1/);
  });
});

describe('a node whose EVM chains are reached by websocket', () => {
  let s: Stack;
  const A = 8453;
  const B = 10;
  const urls: string[] = [];
  const logLines: string[] = [];
  beforeAll(async () => {
    s = await startStack({
      logLines,
      chains: async (_devnet, chains) =>
        (chains as { id: number; rpcUrl: string }[]).map((c) => {
          if (c.id !== A && c.id !== B) return c;
          const ws = c.rpcUrl.replace(/^http/, 'ws');
          urls.push(ws);
          // A: one websocket provider alone. B: a websocket provider beside an HTTP one that only
          // reads, with a quorum of both: the payout goes out through the websocket.
          if (c.id === A) return { ...c, rpcUrl: undefined, rpc: [{ url: ws, name: 'ws' }] };
          return {
            ...c,
            rpcUrl: undefined,
            rpc: [
              { url: c.rpcUrl, name: 'http', role: 'read' },
              { url: ws, name: 'ws' },
            ],
            quorum: 2,
          };
        }),
    });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('indexes a deposit, pays it out and confirms the payout through websocket providers', async () => {
    const q = await api(s.url, '/quote/v2', {
      body: nativeBridge(s.devnet.accounts[1]!.address, '0x000000000000000000000000000000000000dEaD', A, B, '100000000000000000', { protocolVersion: 'v2' }),
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    const ready = await api(s.url, '/ready');
    const providers = (id: number) => ready.body.chains.find((c: any) => c.chainId === id)?.providers.map((p: any) => [p.name, p.state]);
    expect(providers(A)).toEqual([['ws', 'ok']]);
    expect(providers(B)).toEqual([
      ['http', 'ok'],
      ['ws', 'ok'],
    ]);
    // The provider URLs never reach the node's log or its answers.
    for (const u of urls) {
      expect(logLines.join('\n')).not.toContain(u);
      expect(JSON.stringify(ready.body)).not.toContain(u);
    }
  });

  it('audits a chain whose only provider is a websocket', async () => {
    const audit = await auditStack(s);
    expect(audit.chains.map((c) => c.chainId)).toContain(A);
    expect(audit.differences).toEqual([]);
  });
});
