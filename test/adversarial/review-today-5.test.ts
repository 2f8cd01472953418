// Review of this session's own commits (review-today-5): the fixes turned against the node. (Its webhook lookup
// finding is tested beside the module, in src/events/targetGuard.test.ts.)
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { WebSocket } from 'ws';
import { GasTrapAbi, GasTrapBytecode } from '../../contracts-abi/index.ts';
import { fundedSponsor } from '../helpers/appBalance.ts';
import { api, apiReplica, startStack, until, type Stack } from '../helpers/stack.ts';

let s: Stack;
beforeAll(async () => {
  s = await startStack({ ledger: 'sqlite' });
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

// A read-only API replica on the stack's ledger, with `api` settings of its own.
const replica = (api: Record<string, unknown>) => apiReplica(s, api);

describe('the connections of all clients together (263a767), held by status streams', () => {
  // An upgraded connection (a status stream) is never idle, so never closed to make room, and lives for as long as its
  // client answers pings: wsConnectionsPerIp (20) streams from each of maxConnections / 20 addresses (500 /64s of one
  // IPv6 /56 at the default 10,000) held the whole cap for good, and every other client's connection was refused (no
  // quote, no status, no fill for anyone) at no cost but the pings. 127.0.x.1 are distinct clients (and networks).
  it('an honest client is answered while status streams hold as many connections as the cap', { timeout: 60_000 }, async () => {
    const r = await replica({ connectionsPerIp: 100, maxConnections: 6, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000 });
    const streams: WebSocket[] = [];
    const sockets: Socket[] = [];
    try {
      const url = `${r.url.replace(/^http/, 'ws')}/intents/status/ws`;
      let open = 0;
      let closed = 0;
      for (let i = 0; i < 6; i++) {
        const ws = new WebSocket(url, { localAddress: `127.0.${30 + i}.1` });
        ws.on('open', () => open++);
        ws.on('close', () => closed++);
        ws.on('error', () => {});
        streams.push(ws);
      }
      await until(() => (open + closed === 6 || open === 6 ? true : undefined), 'the streams to open or be refused', 20_000);
      // Half the cap for streams: the others are refused.
      expect({ open, closed }).toEqual({ open: 3, closed: 3 });
      const { hostname, port } = new URL(r.url);
      const answers: string[] = [];
      let gone = false;
      const c = await new Promise<Socket>((resolve, reject) => {
        const sock = connect({ port: Number(port), host: hostname, localAddress: '127.0.40.1' }, () => resolve(sock));
        sock.once('error', reject);
      });
      sockets.push(c);
      c.on('error', () => {});
      c.on('data', (d) => answers.push(String(d)));
      c.on('close', () => (gone = true));
      c.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      await until(() => (gone || answers.join('').includes('"status":"ok"') ? true : undefined), 'an answer or the connection refused', 20_000);
      expect({ answered: answers.join('').includes('"status":"ok"'), refused: gone && answers.length === 0 }).toEqual({ answered: true, refused: false });
    } finally {
      for (const ws of streams) ws.terminate();
      for (const c of sockets) c.destroy();
      await r.stop();
    }
  });
});

describe('the connection caps in turn (263a767): the total made room before the address was refused', () => {
  // A connection past its own address's cap (nothing idle there) is refused; but past the total as well, the oldest idle
  // connection of all was closed for it first: each connection the attacker opened from its full address closed another
  // client's keep-alive connection, for nothing.
  it("a connection its address's cap refuses closes no other client's connection", { timeout: 60_000 }, async () => {
    const r = await replica({ connectionsPerIp: 1, maxConnections: 3, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000 });
    const all: Socket[] = [];
    const { hostname, port } = new URL(r.url);
    const closed = new Set<Socket>();
    const opened = (from: string) =>
      new Promise<Socket>((resolve, reject) => {
        const c = connect({ port: Number(port), host: hostname, localAddress: from }, () => resolve(c));
        all.push(c);
        c.on('close', () => closed.add(c));
        c.once('error', reject);
      }).then((c) => (c.on('error', () => {}), c));
    // Asks /health on `c`: true once answered, false once the connection is gone unanswered.
    const health = async (c: Socket) => {
      let text = '';
      c.on('data', (d) => (text += String(d)));
      c.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      return until(() => (text.includes('"status":"ok"') ? true : closed.has(c) ? false : undefined), 'an answer or the close', 20_000);
    };
    try {
      // An honest client's keep-alive connection, idle once answered.
      const honest = await opened('127.0.50.1');
      expect(await health(honest)).toBe(true);
      // The attacker's address at its cap (1), and a third client: the total (3) is full, nothing idle but the honest one.
      await opened('127.0.51.1');
      await opened('127.0.52.1');
      // Past the attacker's own cap: refused.
      const extra = await opened('127.0.51.1');
      await until(() => (closed.has(extra) ? true : undefined), "the attacker's connection past its cap to be refused", 10_000);
      // The honest connection is still there.
      expect(await health(honest)).toBe(true);
    } finally {
      for (const c of all) c.destroy();
      await r.stop();
    }
  });
});

describe("a relay that runs out of gas at the chain's own limit (9074f9d, the same estimate at admission)", () => {
  // The submitter now reads "gas required exceeds allowance" at the chain's limit as a call no gas runs; the relay's own
  // simulation at admission still took it for the RPC failing: 503 RPC_UNAVAILABLE, "try again", for a call that never
  // runs (a client retrying on 503 retried for good; the node's availability alerts counted it).
  it('is refused as a call too costly to relay, not as the chain unreadable', { timeout: 120_000 }, async () => {
    const A = 8453;
    const { key } = await fundedSponsor(s, 3, 'review-today-5 relay');
    const funder = s.wallet(1, A);
    const deployed = await funder.deployContract({ account: funder.account!, chain: funder.chain, abi: GasTrapAbi, bytecode: GasTrapBytecode });
    const delegate = (await s.publicClient(A).waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const wallet = privateKeyToAccount(generatePrivateKey());
    const auth = await wallet.signAuthorization({ contractAddress: delegate, chainId: A, nonce: 0 });
    const res = await api(s.url, '/execute', {
      apiKey: key.key,
      body: {
        executionKind: 'rawCalls',
        data: {
          chainId: A,
          to: wallet.address,
          // More hashes than any block's gas pays for.
          data: encodeFunctionData({ abi: GasTrapAbi, functionName: 'spring', args: [10n ** 12n] }),
          value: '0',
          authorizationList: [{ chainId: A, address: delegate, nonce: 0, yParity: auth.yParity, r: auth.r, s: auth.s }],
        },
        executionOptions: { referrer: 'tests', subsidizeFees: true },
      },
    });
    expect({ status: res.status, code: res.body.errorCode }).toEqual({ status: 400, code: 'GAS_LIMIT_EXCEEDED' });
  });
});
