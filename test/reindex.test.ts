import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEventLogs, type Hex } from 'viem';
import { OrderFillerAbi } from '../contracts-abi/index.ts';
import { reindex } from '../src/admin/actions.ts';
import type { ChainAdapter } from '../src/chains/adapter.ts';
import { EXCHANGE_CHAIN_ID } from '../src/chains/exchange/typedData.ts';
import { Ledger } from '../src/ledger/index.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';

// The admin re-index: a deposit the indexer passed over (its cursor was moved past the deposit's
// block) is found by re-reading the range, recorded once, and filled; re-indexing again changes
// nothing; every re-index is an admin action with who and why; what it cannot do is refused (400).
let s: Stack;
let adminKey: string;
const A = 8453;
const B = 10;
const MAX_BLOCKS = 100;

beforeAll(async () => {
  s = await startStack({ config: { admin: { port: 0, reindexMaxBlocks: MAX_BLOCKS } } });
  adminKey = s.node.ledger.operations.createAdminKey('ops-dana').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const admin = (path: string, body?: unknown) => api(s.node.adminUrl, path, { body, headers: { authorization: `Bearer ${adminKey}` } });
const mine = (chainId: number) => s.publicClient(chainId).request({ method: 'evm_mine' } as never);

// Waits for a pass of the chain's indexer that began after the chain had a block above `block`.
async function passAfter(chainId: number, block: bigint): Promise<void> {
  await mine(chainId);
  const adapter = s.node.adapters.get(chainId)!;
  await until(() => (adapter.progress().head > Number(block) ? true : undefined), `chain ${chainId}'s indexer to see block ${block + 1n}`);
}

async function fillsOnChain(chainId: number, id: Hex) {
  const c = s.devnet.chains.find((x) => x.id === chainId)!;
  const logs = await s.publicClient(chainId).getLogs({ address: c.contracts.filler, fromBlock: 0n, toBlock: 'latest' });
  return parseEventLogs({ abi: OrderFillerAbi, logs, eventName: 'OrderFilled' }).filter((l) => l.args.orderId === id);
}

const cli = async (args: string[], env: Record<string, string>) => {
  try {
    const r = await promisify(execFile)(process.execPath, ['bin/relay-node.js', 'admin', ...args], { env: { ...process.env, ...env }, timeout: 120_000 });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (e: any) {
    return { code: e.code as number, out: `${e.stdout}${e.stderr}` };
  }
};

describe('admin re-index of a block range', () => {
  it('finds a deposit the indexer skipped and fills it; a second re-index changes nothing', { timeout: 240_000 }, async () => {
    const ledger = s.node.ledger;
    const client = s.publicClient(A);
    // The indexer's cursor is moved far past the head, as a provider that answered a range without
    // its logs would leave it: the deposit below is in a block the indexer counts as read.
    const skipTo = Number(await client.getBlockNumber()) + 10_000;
    await until(async () => {
      ledger.indexer.setCursor(A, 'depository', skipTo);
      // A pass in flight when the cursor moved may write its own back: look after a later pass.
      await passAfter(A, await client.getBlockNumber());
      return ledger.indexer.cursor(A, 'depository') === skipTo ? true : undefined;
    }, 'the indexer cursor to stay past the head');

    const user = s.devnet.accounts[1]!.address;
    const q = await api(s.url, '/quote', {
      body: nativeBridge(user, user, A, B, '10000000000000000'),
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    const [hash] = await executeSteps(s, q.body, 1);
    const block = (await client.getTransactionReceipt({ hash: hash! })).blockNumber;
    // Two passes that began after the deposit's block: the indexer has passed over it.
    await passAfter(A, block);
    await passAfter(A, block + 1n);
    expect(ledger.deposits.byOrderRef(requestId)).toEqual([]);
    expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('waiting');

    const r = await admin('/admin/reindex', { chainId: A, fromBlock: Number(block), toBlock: Number(block), reason: 'provider skipped block logs' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const depositId = `${A}:${hash}:0`;
    expect(r.body.reindex).toMatchObject({ chainId: A, fromBlock: Number(block), toBlock: Number(block), logs: 1, recorded: [depositId], skipped: 0 });
    await waitForStatus(s.url, requestId, ['success'], 60_000);
    expect(await fillsOnChain(B, requestId)).toHaveLength(1);
    const payouts = ledger.payouts.forDeposit(depositId).map((p) => [p.id, p.kind, p.state]);
    expect(payouts).toEqual([[expect.any(String), 'fill', 'success']]);

    // Again, wider and through the CLI: the deposit is not recorded twice and nothing is paid again.
    const again = await cli(
      ['reindex', '--chain', String(A), '--from', String(Number(block) - 5), '--to', String(Number(block) + 1), '--reason', 'check again'],
      { RELAY_ADMIN_KEY: adminKey, RELAY_ADMIN_URL: s.node.adminUrl },
    );
    expect(again.code, again.out).toBe(0);
    expect(JSON.parse(again.out).reindex).toMatchObject({ logs: 1, recorded: [], skipped: 0 });
    expect(ledger.deposits.byOrderRef(requestId).map((d) => [d.id, d.state])).toEqual([[depositId, 'handled']]);
    expect(ledger.payouts.forDeposit(depositId).map((p) => [p.id, p.kind, p.state])).toEqual(payouts);
    expect(await fillsOnChain(B, requestId)).toHaveLength(1);

    // Both are admin actions with who and why, and what each found.
    const actions = ledger.operations.actions(10, `chain:${A}`).filter((a) => a.action === 'reindex');
    expect(actions.map((a) => [a.actor, a.reason, JSON.parse(a.detail!).recorded])).toEqual([
      [expect.stringContaining('ops-dana'), 'check again', []],
      [expect.stringContaining('ops-dana'), 'provider skipped block logs', [depositId]],
    ]);
  });

  it('refuses (400, naming why) a range too wide, one the indexer has not reached, an unknown chain, a chain without re-index, no reason', async () => {
    const before = s.node.ledger.operations.actions(1000).length;
    const indexedB = s.node.adapters.get(B)!.progress().indexed;
    const cases: [unknown, string][] = [
      [{ chainId: B, fromBlock: 0, toBlock: MAX_BLOCKS, reason: 'x' }, `at most ${MAX_BLOCKS}`],
      [{ chainId: B, fromBlock: indexedB, toBlock: indexedB + 1, reason: 'x' }, `indexed up to block ${indexedB}`],
      [{ chainId: B, fromBlock: 5, toBlock: 4, reason: 'x' }, 'below fromBlock'],
      [{ chainId: 999, fromBlock: 0, toBlock: 1, reason: 'x' }, 'not a chain of this node'],
      [{ chainId: EXCHANGE_CHAIN_ID, fromBlock: 0, toBlock: 1, reason: 'x' }, 'offers no re-index by range'],
      [{ chainId: B, fromBlock: 0, toBlock: 1 }, 'reason'],
      [{ chainId: B, fromBlock: -1, toBlock: 1, reason: 'x' }, 'fromBlock'],
    ];
    for (const [body, says] of cases) {
      const r = await admin('/admin/reindex', body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.message).toContain(says);
      expect(r.body.errorCode).toEqual(expect.any(String));
    }
    expect(s.node.ledger.operations.actions(1000).length).toBe(before);
  });

  it('refuses an SVM chain, naming why its indexer cannot re-read a slot range cheaply', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'reindex-'));
    const ledger = Ledger.open(join(dir, 'ledger.db'));
    try {
      const svm = { chainId: 792703809, kind: 'svm', progress: () => ({ head: 100, indexed: 100, ready: true }) } as unknown as ChainAdapter;
      const refused = reindex(ledger, svm, { chainId: 792703809, fromBlock: 1, toBlock: 2 }, 10, { actor: 'ops', reason: 'x' });
      await expect(refused).rejects.toMatchObject({
        status: 400,
        errorCode: 'REINDEX_UNSUPPORTED',
        message: expect.stringContaining('signatures newest first'),
      });
      expect(ledger.operations.actions()).toEqual([]);
    } finally {
      ledger.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
