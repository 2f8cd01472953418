// Adversarial review: the connections of the operator's listeners (the admin API, src/admin/server.ts, and
// api.metricsListen's /ready and /metrics, src/api/server.ts createOperatorApi).
//
// The public API caps the connections of each client address, each network and all clients together
// (src/api/connectionCap.ts); the operator's listeners did not. A client that reached one (bound to a network
// interface, or any process of the host) held as many of the node's file descriptors as it opened silent
// connections, each for api.headersTimeoutMs and reopened, until the node could open none for its own RPC, ledger
// and webhook connections. Fixed: both are capped as the public one is, at OPERATOR_MAX_CONNECTIONS.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR_MAX_CONNECTIONS } from '../../src/api/connectionCap.ts';
import { startStack, until, type Stack } from '../helpers/stack.ts';

let s: Stack;
let adminKey: string;

beforeAll(async () => {
  // Silent connections stay open for the test's length unless a cap closes them.
  s = await startStack({
    config: {
      admin: { port: 0 },
      api: { headersTimeoutMs: 120_000, requestTimeoutMs: 120_000, metricsListen: { host: '127.0.0.1', port: 0 } },
    },
  });
  adminKey = s.node.ledger.operations.createAdminKey('ops-listener').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const open = (url: string, localAddress: string) =>
  new Promise<Socket>((resolve, reject) => {
    const { hostname, port } = new URL(url);
    const sock = connect({ port: Number(port), host: hostname, localAddress }, () => resolve(sock));
    sock.once('error', reject);
  });

const listeners = [
  { name: 'the admin API', url: () => s.node.adminUrl, path: '/admin/switches', answered: '"switches"' },
  { name: "api.metricsListen's listener", url: () => s.node.operatorUrl!, path: '/health', answered: '"status":"ok"' },
];

describe.each(listeners)('$name', ({ url, path, answered }) => {
  it('closes silent connections past its cap at once, and still answers an operator from elsewhere', { timeout: 90_000 }, async () => {
    const flood = 2 * OPERATOR_MAX_CONNECTIONS;
    const sockets: Socket[] = [];
    let closed = 0;
    try {
      // One client address's silent connections (never a request): the cap refuses them past its share.
      for (let i = 0; i < flood; i++) {
        const c = await open(url(), '127.0.0.1');
        c.once('close', () => closed++);
        c.on('error', () => {});
        sockets.push(c);
      }
      await until(() => (closed >= flood - OPERATOR_MAX_CONNECTIONS ? true : undefined), 'the connections past the cap closed', 20_000);
      expect(sockets.filter((c) => !c.destroyed && !c.readableEnded).length).toBeLessThanOrEqual(OPERATOR_MAX_CONNECTIONS);

      // An operator from another network is still answered.
      const op = await open(url(), '127.0.77.1');
      const answer: string[] = [];
      op.on('data', (d) => answer.push(String(d)));
      op.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${adminKey}\r\nConnection: close\r\n\r\n`);
      await until(() => (answer.join('').includes(answered) ? true : undefined), "the operator's answer", 10_000);
      expect(answer.join('')).toMatch(/^HTTP\/1\.1 200/);
      op.destroy();
    } finally {
      for (const c of sockets) c.destroy();
    }
  });
});
