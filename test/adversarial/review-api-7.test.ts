// The public API against a client that sends `Upgrade:` on ordinary requests (no `Connection: upgrade`): Node answers
// them as any request, but the node's connection bounds read the header alone and took such a connection for a status
// stream's, exempt from the stall bound and counted in the streams' share of the connection cap.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { apiReplica, startStack, until, type Stack } from '../helpers/stack.ts';

let s: Stack;
beforeAll(async () => {
  s = await startStack({
    ledger: 'sqlite',
    config: { api: { host: '127.0.0.1', port: 0, headersTimeoutMs: 1_000, requestTimeoutMs: 2_000, rateLimit: { unauthenticatedPerMinute: 100_000 } } },
  });
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

// A read-only API replica on the stack's ledger, with `api` settings of its own.
const replica = (api: Record<string, unknown>) => apiReplica(s, api);

// A connection that never reads, sent 16 requests at a time (under the pipelining cap) until the node holds answers
// the kernel will not take; with the server's side of it.
async function stalled(extraHeader: string): Promise<{ client: Socket; server: Socket }> {
  const u = new URL(s.url);
  const client = connect(Number(u.port), u.hostname);
  await new Promise((r) => client.once('connect', r));
  client.pause();
  client.on('error', () => {});
  const port = client.localPort;
  let sent = 0;
  let closed = 0;
  let server: Socket | undefined;
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    if (req.socket.remotePort !== port) return;
    server = req.socket;
    res.once('close', () => closed++);
  };
  s.node.api.server.on('request', onRequest);
  try {
    for (let round = 0; round < 40; round++) {
      client.write(`GET /documentation/json HTTP/1.1\r\nHost: node\r\n${extraHeader}\r\n`.repeat(16));
      sent += 16;
      const stuck = await until(
        () => (closed === sent ? false : server && server.writableLength > 0 && sent - closed >= 2 ? true : undefined),
        `round ${round}`,
        20_000,
      );
      if (stuck) return { client, server: server! };
    }
    throw new Error('the kernel took every answer');
  } finally {
    s.node.api.server.off('request', onRequest);
  }
}

describe('a client that never reads its answers', () => {
  it('is closed by the stall bound even when its requests carry an Upgrade header (no upgrade)', async () => {
    const evading = await stalled('Upgrade: x\r\n');
    const plain = await stalled('');
    try {
      await until(() => (plain.server.destroyed ? true : undefined), 'the plain stalled connection closed', 20_000);
      const seen = await until(() => (evading.server.destroyed ? 'closed' : undefined), 'the Upgrade-header connection closed too', 10_000).catch(
        () => `open, ${evading.server.writableLength} bytes unsent`,
      );
      expect(seen).toBe('closed');
    } finally {
      evading.client.destroy();
      plain.client.destroy();
    }
  }, 120_000);
});

describe("the status streams' share of the connection cap", () => {
  it('is not taken by ordinary requests that carry an Upgrade header', { timeout: 60_000 }, async () => {
    // maxConnections 4: streams take at most 2. Two connections asking /health with `Upgrade: x` were counted as streams
    // (never idle, so never closed for room either), and a real status stream was then refused.
    const r = await replica({ connectionsPerIp: 100, maxConnections: 4, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000 });
    const sockets: Socket[] = [];
    let ws: WebSocket | undefined;
    try {
      const { hostname, port } = new URL(r.url);
      for (const from of ['127.0.60.1', '127.0.61.1']) {
        const c = await new Promise<Socket>((resolve, reject) => {
          const sock = connect({ port: Number(port), host: hostname, localAddress: from }, () => resolve(sock));
          sock.once('error', reject);
        });
        sockets.push(c);
        const answers: string[] = [];
        c.on('data', (d) => answers.push(String(d)));
        c.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: x\r\n\r\n');
        await until(() => (answers.join('').includes('"status":"ok"') ? true : undefined), 'an answer to /health', 10_000);
      }
      ws = new WebSocket(`${r.url.replace(/^http/, 'ws')}/intents/status/ws`, { localAddress: '127.0.62.1' });
      const outcome = await new Promise<string>((resolve) => {
        ws!.once('open', () => resolve('open'));
        ws!.once('close', () => resolve('closed'));
        ws!.once('error', () => resolve('closed'));
      });
      expect(outcome).toBe('open');
    } finally {
      ws?.terminate();
      for (const c of sockets) c.destroy();
      await r.stop();
    }
  });
});
