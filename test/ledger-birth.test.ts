// A ledger started fresh over a depository used before (a lost ledger, a second node's ledger pointed at the same
// contracts) reads the old deposits again from the chain's startBlock, each naming an order it does not know: refunded
// as orphans, they paid deposits a ledger before it had filled, out of the depository. A deposit naming no order of
// this ledger, made before the ledger began on its chain, is left to an operator; one made after is refunded as ever.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, createWalletClient, http, keccak256, parseEther, toHex, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet, type Devnet } from '../src/devnet/devnet.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { until } from './helpers/until.ts';

const A = 8453;
let devnet: Devnet;
let node: RelayNode;

// A deposit of 0.01 ETH on chain A naming `orderId` (an order of no ledger of this node).
async function deposit(orderId: Hex): Promise<void> {
  const a = devnet.chains.find((c) => c.id === A)!;
  const chain = devnetChain(A, a.rpcUrl);
  const account = privateKeyToAccount(devnet.accounts[1]!.privateKey);
  const wallet = createWalletClient({ account, chain, transport: http(a.rpcUrl) });
  const hash = await wallet.writeContract({
    address: a.contracts.depository,
    abi: RelayDepositoryAbi,
    functionName: 'depositNative',
    args: [account.address, orderId],
    value: parseEther('0.01'),
  });
  await createPublicClient({ chain, transport: http(a.rpcUrl), pollingInterval: 50 }).waitForTransactionReceipt({ hash });
}

// The request the node made of the deposit naming `orderId`, once decided.
const decided = (orderId: Hex) =>
  until(() => {
    const d = node.ledger.deposits.byOrderRef(orderId)[0];
    return d?.state === 'handled' && d.request_id ? node.ledger.requests.get(d.request_id) : undefined;
  }, `the deposit naming ${orderId} decided`);

const before = keccak256(toHex('an order of a ledger before this one'));
const after = keccak256(toHex('an order of nobody, after the start'));

beforeAll(async () => {
  devnet = await startDevnet({ dataDir: mkdtempSync(join(tmpdir(), 'relay-birth-')), exchange: false });
  await deposit(before);
  const raw = devnet.nodeConfig({ port: 0, dataDir: mkdtempSync(join(tmpdir(), 'relay-birth-node-')) });
  node = await new RelayNode(buildConfigWithKeys(raw, devnet.keys), { log: createLogger('silent') }).start();
});
afterAll(async () => {
  await node?.stop();
  await devnet?.stop();
});

describe('a fresh ledger over a depository used before', () => {
  it('leaves a deposit made before it began, naming no order of it, to an operator: never refunded by itself', async () => {
    const r = await decided(before);
    expect(r).toMatchObject({ kind: 'orphan', status: 'failure', refund_fail_reason: 'MANUAL_REFUND_REQUIRED' });
    expect(node.ledger.payouts.forRequest(r.id).filter((p) => p.kind === 'refund')).toEqual([]);
  });

  it('refunds one made after it began, as any orphan', async () => {
    await deposit(after);
    const r = await decided(after);
    expect(r.kind).toBe('orphan');
    await until(() => (node.ledger.payouts.forRequest(r.id).some((p) => p.kind === 'refund' && p.state === 'success') ? true : undefined), 'the refund paid');
  });
});
