// Adversarial review of the public API as a hostile client (sixth pass): slow clients, pipelining, and what the node
// holds for them. Costs are counted, never timed.
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { convertViemChainToRelayChain, createClient, getClient } from '@relayprotocol/relay-sdk';
import { zeroAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { devnetChain } from '../../src/devnet/deploy.ts';
import { startStack, until, type Stack } from '../helpers/stack.ts';

let s: Stack;

// Receiving a request is bounded at 2 s here (api.requestTimeoutMs): answering is what these tests look at.
beforeAll(async () => {
  // The anonymous limit is lifted: the pipelined requests must reach the routes, not stop at 429.
  s = await startStack({
    ledger: 'sqlite',
    config: { api: { host: '127.0.0.1', port: 0, headersTimeoutMs: 1_000, requestTimeoutMs: 2_000, rateLimit: { unauthenticatedPerMinute: 100_000 } } },
  });
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

// A raw connection to the API that sends what it is given and never reads a byte of the answers.
async function neverReading(): Promise<{ client: Socket; closed: Promise<void> }> {
  const u = new URL(s.url);
  const client = connect(Number(u.port), u.hostname);
  await new Promise((r) => client.once('connect', r));
  client.pause();
  client.on('error', () => {});
  const closed = new Promise<void>((r) => client.once('close', () => r()));
  return { client, closed };
}

describe('a client that never reads its answers', () => {
  // HTTP/1.1 pipelining: the node parsed every request of a read (64 KB) and answered each, and the answers waited on
  // the connection until the client took them. A client that took none held them, and the connection, for good: no
  // bound closed a connection whose answers were not taken (api.requestTimeoutMs bounds receiving only, keep-alive's
  // clock runs between requests). Now the connection is closed, past 16 requests waiting (the next test), or once
  // what the node sent has not moved for api.requestTimeoutMs (closeStalledConnections: on loopback the kernel takes
  // 16 answers whole, so only this scenario without the first bound shows it).
  it('is not kept open with its answers held: the node closes the connection', async () => {
    const { client, closed } = await neverReading();
    const port = client.localPort;
    let answered = 0;
    let socket: Socket | undefined;
    const server = s.node.api.server;
    const onRequest = (req: IncomingMessage) => {
      if (req.socket.remotePort !== port) return;
      socket = req.socket;
      answered++;
    };
    server.on('request', onRequest);
    try {
      // Whole requests in one read, none left half-parsed (Node's receiving bounds would cut that connection): the
      // OpenAPI document (138 KB) 400 times, 55 MB, far more than the kernel's buffers take.
      client.write('GET /documentation/json HTTP/1.1\r\nHost: node\r\n\r\n'.repeat(400));
      await until(() => (answered >= 400 ? true : undefined), 'the 400 pipelined requests parsed', 20_000);
      // Before: the connection stayed open, its answers held, for as long as the client kept it.
      await until(() => (socket!.destroyed ? true : undefined), 'the node to close the connection that takes nothing', 20_000);
      // What the client finds when it reads at last: the answers taken up to then, then the end.
      client.resume();
      await closed;
    } finally {
      server.off('request', onRequest);
      client.destroy();
    }
  }, 60_000);

  // Each request of a read is handed to the API at once, whether the client takes the answers or not: 40 connections
  // writing 1,500 requests each (55 KB apiece, one read) made the node run 60,000 requests (the limiter answering
  // most of them 429), grew its heap by 700 MB that stayed, and held its event loop for up to 4.1 s at a time.
  it('runs no request of a connection past 16 waiting for their answers: the connection is closed', async () => {
    const { client } = await neverReading();
    const port = client.localPort;
    let parsed = 0;
    let socket: Socket | undefined;
    const server = s.node.api.server;
    const onRequest = (req: IncomingMessage) => {
      if (req.socket.remotePort !== port) return;
      socket = req.socket;
      parsed++;
    };
    // GET /lives reads the ledger once (ping): the count of pings is the count of requests the API ran.
    const ledger = s.node.ledger as unknown as { ping(): void };
    const ping = ledger.ping;
    let ran = 0;
    ledger.ping = function (this: unknown) {
      ran++;
      return ping.call(this);
    };
    server.on('request', onRequest);
    try {
      client.write('GET /lives HTTP/1.1\r\nHost: node\r\n\r\n'.repeat(1_000));
      await until(() => (parsed >= 1_000 ? true : undefined), 'the 1,000 requests parsed', 20_000);
      await until(() => (socket!.destroyed ? true : undefined), 'the connection closed', 20_000);
      // Before: all 1,000 ran.
      expect(ran).toBeLessThanOrEqual(16);
    } finally {
      ledger.ping = ping;
      server.off('request', onRequest);
      client.destroy();
    }
  }, 60_000);

  it('still answers a client that keeps a few requests ahead, and one that makes many in turn', async () => {
    const u = new URL(s.url);
    const client = connect(Number(u.port), u.hostname);
    await new Promise((r) => client.once('connect', r));
    let text = '';
    client.on('data', (d: Buffer) => (text += d.toString()));
    client.write('GET /lives HTTP/1.1\r\nHost: node\r\n\r\n'.repeat(15));
    client.write('GET /swap-sources HTTP/1.1\r\nHost: node\r\n\r\n');
    try {
      await until(() => (text.includes('relay-node') ? true : undefined), 'the 16th answer', 20_000);
      expect(text.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(16);
      // Answered requests no longer count: 20 more, one at a time, on the same connection.
      for (let i = 1; i <= 20; i++) {
        client.write('GET /lives HTTP/1.1\r\nHost: node\r\n\r\n');
        await until(() => ((text.match(/HTTP\/1\.1 200 OK/g)?.length ?? 0) === 16 + i ? true : undefined), `answer ${16 + i}`, 10_000);
      }
      expect(client.destroyed).toBe(false);
    } finally {
      client.destroy();
    }
  }, 60_000);
});

describe('the public SDK told to follow its request on the status stream', () => {
  // @relayprotocol/relay-sdk with `websocket: { enabled, url }` subscribes with {"type":"subscribe","event":
  // "request.status.updated","filters":{"id"}} and reads only messages with that `event`; it polls the status only
  // once its websocket fails. The stream answered the subscription with an error (INVALID_MESSAGE: requestIds) and
  // kept the connection open (heartbeats, pongs): no update ever came, no failure either, and execute waited for good.
  it('gets its updates: execute resolves with the fill', async () => {
    const g = globalThis as Record<string, unknown>;
    const had = { window: g.window, WebSocket: g.WebSocket };
    // The SDK follows a websocket in a browser only (window.WebSocket): ws stands in for the browser's.
    g.WebSocket = WebSocket;
    g.window = globalThis;
    let outcome: { ok: true; result: any } | { ok: false; error: unknown } | undefined;
    try {
      createClient({
        baseApiUrl: s.url,
        source: 'review-api-6',
        chains: s.devnet.chains.map((c) => convertViemChainToRelayChain(devnetChain(c.id, c.rpcUrl))),
        pollingInterval: 100,
        maxPollingAttemptsBeforeTimeout: 300,
        websocket: { enabled: true, url: `${s.url.replace(/^http/, 'ws')}/intents/status/ws` },
      });
      const wallet = s.wallet(1, 8453);
      const quote = await getClient().actions.getQuote(
        { chainId: 8453, toChainId: 10, currency: zeroAddress, toCurrency: zeroAddress, amount: '20000000000000000', tradeType: 'EXACT_INPUT', wallet },
        true,
      );
      getClient()
        .actions.execute({ quote, wallet, onProgress: () => {} })
        .then(
          (result) => (outcome = { ok: true, result }),
          (error) => (outcome = { ok: false, error }),
        );
      // Before: never (the SDK waited on the stream).
      const done = await until(() => outcome, 'execute to resolve', 60_000);
      expect(done.ok).toBe(true);
      const item = (done as { result: any }).result.data.steps.at(-1).items[0];
      expect(item.txHashes.find((t: { chainId: number }) => t.chainId === 10)?.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    } finally {
      g.window = had.window;
      g.WebSocket = had.WebSocket;
    }
  }, 90_000);
});
