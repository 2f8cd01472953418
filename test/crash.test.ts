import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hex } from 'viem';
import { startDevnet, type Devnet } from '../src/devnet/devnet.ts';
import { Ledger } from '../src/ledger/index.ts';
import { depositOn, fillsOn } from './helpers/devnetOrders.ts';
import { killAllNodeProcesses, startNodeProcess, stopNodeProcess } from './helpers/nodeProcess.ts';
import { waitForStatus } from './helpers/stack.ts';

// The node as its own process, killed with SIGKILL between recording a fill and broadcasting it
// (and right after broadcasting it), then restarted: the order is filled once, never twice.
let devnet: Devnet;
let dataDir: string;
let configPath: string;
const env = () => ({ RELAY_SOLVER_KEY: devnet.keys.solver, RELAY_ALLOCATOR_KEY: devnet.keys.allocator });
const startNode = (fault?: string) => startNodeProcess(configPath, env(), { fault });
const stopNode = stopNodeProcess;

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
  killAllNodeProcesses();
  await devnet?.stop();
});

const depositFor = (url: string, account: number) => depositOn(devnet, url, account);
const fillsOf = (id: Hex) => fillsOn(devnet, id);

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
