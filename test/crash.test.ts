import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, createWalletClient, http, parseEventLogs, zeroAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { OrderFillerAbi } from '../contracts-abi/index.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet, type Devnet } from '../src/devnet/devnet.ts';
import { Ledger } from '../src/ledger/index.ts';
import { api, until, waitForStatus } from './helpers/stack.ts';

// The node as its own process, killed with SIGKILL between recording a fill and broadcasting it
// (and right after broadcasting it), then restarted: the order is filled once, never twice.
let devnet: Devnet;
let dataDir: string;
let configPath: string;
const children = new Set<ChildProcess>();

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

async function startNode(fault?: string): Promise<{ child: ChildProcess; url: string; exited: Promise<NodeJS.Signals | number | null> }> {
  const port = await freePort();
  const args = ['bin/relay-node.js', 'start', '--config', configPath, '--port', String(port)];
  if (fault) args.push('--fault', fault);
  const child = spawn(process.execPath, args, {
    env: { ...process.env, RELAY_SOLVER_KEY: devnet.keys.solver, RELAY_ALLOCATOR_KEY: devnet.keys.allocator },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.add(child);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
    child.on('exit', (code, signal) => (children.delete(child), resolve(signal ?? code))),
  );
  const url = `http://127.0.0.1:${port}`;
  await until(async () => ((await api(url, '/health').catch(() => ({ status: 0 }))).status === 200 ? true : undefined), `node to start (${stderr})`, 60_000);
  return { child, url, exited };
}

async function stopNode(n: { child: ChildProcess; exited: Promise<unknown> }) {
  n.child.kill('SIGTERM');
  await n.exited;
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'relay-node-crash-'));
  devnet = await startDevnet({ dataDir });
  configPath = join(dataDir, 'config.json');
  writeFileSync(
    configPath,
    JSON.stringify({
      ...devnet.nodeConfig({ port: 0, logLevel: 'warn' }),
      solverKey: { env: 'RELAY_SOLVER_KEY' },
      allocatorKey: { env: 'RELAY_ALLOCATOR_KEY' },
    }),
  );
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await devnet?.stop();
});

async function depositFor(url: string, account: number): Promise<Hex> {
  const q = await api(url, '/quote', {
    body: {
      user: devnet.accounts[account]!.address,
      originChainId: 8453,
      destinationChainId: 10,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: '30000000000000000',
      tradeType: 'EXACT_INPUT',
    },
  });
  expect(q.status).toBe(200);
  const item = q.body.steps[0].items[0].data;
  const c = devnet.chains.find((x) => x.id === 8453)!;
  const wallet = createWalletClient({
    account: privateKeyToAccount(devnet.accounts[account]!.privateKey),
    chain: devnetChain(8453, c.rpcUrl),
    transport: http(c.rpcUrl),
  });
  await wallet.sendTransaction({ to: item.to, data: item.data, value: BigInt(item.value) });
  return q.body.steps[0].requestId;
}

async function fillsOf(id: Hex) {
  const c = devnet.chains.find((x) => x.id === 10)!;
  const pc = createPublicClient({ chain: devnetChain(10, c.rpcUrl), transport: http(c.rpcUrl) });
  const logs = await pc.getLogs({ address: c.contracts.filler, fromBlock: 0n, toBlock: 'latest' });
  return parseEventLogs({ abi: OrderFillerAbi, logs, eventName: 'OrderFilled' }).filter((l) => l.args.orderId === id);
}

describe('a node killed mid-fill and restarted', () => {
  it('after the fill is recorded but before it is broadcast: broadcasts the recorded fill, once', async () => {
    const first = await startNode('crash-after-fill-recorded');
    const requestId = await depositFor(first.url, 1);
    expect(await first.exited).toBe('SIGKILL');

    const ledger = Ledger.open(join(dataDir, 'ledger.sqlite'), { readonly: true });
    const [payout] = ledger.payouts.forRequest(requestId);
    expect(payout).toMatchObject({ kind: 'fill', state: 'sent' });
    expect(ledger.payouts.txsOf(payout!.id).map((t) => t.state)).toEqual(['signed']);
    ledger.close();
    expect(await fillsOf(requestId)).toHaveLength(0);

    const second = await startNode();
    const done = await waitForStatus(second.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    const fills = await fillsOf(requestId);
    expect(fills).toHaveLength(1);
    expect(done.txHashes).toEqual([fills[0]!.transactionHash]);
    await stopNode(second);
  });

  it('right after the broadcast: recognises its own fill and does not pay again', async () => {
    const first = await startNode('crash-after-fill-broadcast');
    const requestId = await depositFor(first.url, 2);
    expect(await first.exited).toBe('SIGKILL');
    const second = await startNode();
    const done = await waitForStatus(second.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    expect(await fillsOf(requestId)).toHaveLength(1);
    // A later deposit to another order still goes through: nonces were reconciled.
    const next = await depositFor(second.url, 3);
    expect((await waitForStatus(second.url, next, ['success', 'failure', 'refund'])).status).toBe('success');
    await stopNode(second);
  });
});
