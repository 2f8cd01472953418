// The EVM submitter against a real anvil chain with the node's contracts deployed.

import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  erc20Abi,
  getAbiItem,
  http,
  parseEther,
  parseTransaction,
  toHex,
  zeroAddress,
  type Address,
  type Hex,
  TransactionReceiptNotFoundError,
  type PublicClient,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { OrderFillerAbi, RelayDepositoryAbi, TestStablecoinAbi } from '../contracts-abi/index.ts';
import { EvmPayouts as EvmSubmitter } from '../src/chains/evm/payoutSender.ts';
import { fillGas, GAS } from '../src/chains/evm/gas.ts';
import type { PayoutHooks } from '../src/chains/adapter.ts';
import type { Faults } from '../src/config/load.ts';
import type { EvmChainConfig } from '../src/config/schema.ts';
import { startAnvil, type AnvilHandle } from '../src/devnet/anvil.ts';
import { deployNodeContracts, devnetChain, type NodeContracts } from '../src/devnet/deploy.ts';
import { Ledger, type PayoutKind, type TransactionRow } from '../src/ledger/index.ts';
import { createLogger, type Logger } from '../src/log.ts';
import { createMetrics, type Metrics } from '../src/metrics.ts';
import { anvilKey } from './helpers/anvilKeys.ts';
import { auditEvmChain } from '../src/audit/evmAudit.ts';

const CHAIN_ID = 31_337_001;
const DEPLOYER_KEY = anvilKey(0);
const SOLVER_KEY = anvilKey(1);
const ALLOCATOR_KEY = anvilKey(2);
const USER_KEY = anvilKey(3);

const solver = privateKeyToAccount(SOLVER_KEY);
const allocator = privateKeyToAccount(ALLOCATOR_KEY);
const user = privateKeyToAccount(USER_KEY);
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
const orderFilled = getAbiItem({ abi: OrderFillerAbi, name: 'OrderFilled' });
const callExecuted = getAbiItem({ abi: RelayDepositoryAbi, name: 'RelayCallExecuted' });

let anvil: AnvilHandle;
let contracts: NodeContracts;
let client: PublicClient;
let testClient: ReturnType<typeof makeTestClient>;
let userWallet: ReturnType<typeof makeUserWallet>;

function makeTestClient(rpcUrl: string) {
  return createTestClient({ chain: devnetChain(CHAIN_ID, rpcUrl), transport: http(rpcUrl), mode: 'anvil' });
}
function makeUserWallet(rpcUrl: string) {
  return createWalletClient({ chain: devnetChain(CHAIN_ID, rpcUrl), transport: http(rpcUrl), account: user });
}

beforeAll(async () => {
  anvil = await startAnvil({ chainId: CHAIN_ID });
  contracts = await deployNodeContracts({
    rpcUrl: anvil.rpcUrl,
    chainId: CHAIN_ID,
    deployerKey: DEPLOYER_KEY,
    solver: solver.address,
    allocator: allocator.address,
    fund: { accounts: [user.address], nativeWei: parseEther('10000'), stablecoinUnits: 1_000_000_000_000n },
  });
  client = createPublicClient({
    chain: devnetChain(CHAIN_ID, anvil.rpcUrl),
    transport: http(anvil.rpcUrl, { retryCount: 0 }),
    pollingInterval: 20,
  });
  testClient = makeTestClient(anvil.rpcUrl);
  userWallet = makeUserWallet(anvil.rpcUrl);
}, 60_000);

afterAll(async () => {
  await anvil?.stop();
});

// ------------------------------------------------------------------------------------------------ helpers

const running: EvmSubmitter[] = [];
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
});

function chainConfig(over: Partial<EvmChainConfig> = {}): EvmChainConfig {
  return {
    id: CHAIN_ID,
    name: 'devnet',
    kind: 'evm',
    rpcUrl: anvil.rpcUrl,
    depository: contracts.depository,
    filler: contracts.filler,
    startBlock: Number(contracts.deployBlock),
    confirmations: 1,
    finalityDepth: 64,
    pollIntervalMs: 50,
    maxLogRange: 2_000,
    replaceAfterBlocks: 3,
    gasMarginBps: 2_000,
    l1DataFee: 'auto',
    l1DataFeeMarginBps: 10_000,
    appBalanceDeposits: false,
    maxCallGas: 1_000_000,
    depositEnabled: true,
    private: false,
    nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
    currencies: [{ address: contracts.stablecoin, symbol: 'USDC', name: 'Test USD Coin', decimals: 6, usdPrice: '1', permit: true }],
    ...over,
  };
}

interface Recorded {
  signed: { payout: string; hash: Hex }[];
  paid: { payout: string; hash: Hex; fee: bigint }[];
  failed: { payout: string; reason: string; hash?: Hex }[];
}

function recorder(): { hooks: PayoutHooks; rec: Recorded } {
  const rec: Recorded = { signed: [], paid: [], failed: [] };
  return {
    rec,
    hooks: {
      onSigned: (p, hash) => void rec.signed.push({ payout: p.id, hash: hash as Hex }),
      onPaid: (p, hash, fee) => void rec.paid.push({ payout: p.id, hash: hash as Hex, fee }),
      onFailed: (p, reason, hash) => void rec.failed.push({ payout: p.id, reason, ...(hash ? { hash: hash as Hex } : {}) }),
    },
  };
}

function makeSubmitter(ledger: Ledger, opts: { chain?: Partial<EvmChainConfig>; faults?: Faults; log?: Logger; client?: PublicClient } = {}) {
  const { hooks, rec } = recorder();
  const metrics: Metrics = createMetrics();
  const sub = new EvmSubmitter({
    chain: chainConfig(opts.chain),
    ledger,
    publicClient: opts.client ?? client,
    account: solver,
    allocator: privateKeyToAccount(ALLOCATOR_KEY),
    hooks,
    metrics,
    log: opts.log ?? log,
    faults: opts.faults ?? {},
  });
  running.push(sub);
  return { sub, rec, metrics };
}

const randomId = (): Hex => toHex(randomBytes(32));
const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;

function insertRequest(ledger: Ledger, id: Hex = randomId()): Hex {
  ledger.requests.insert({
    id,
    parent_id: null,
    kind: 'order',
    request_type: 'bridge',
    status: 'pending',
    user: user.address,
    recipient: null,
    refund_to: user.address,
    origin_chain_id: CHAIN_ID,
    destination_chain_id: CHAIN_ID,
    origin_currency: zeroAddress,
    destination_currency: zeroAddress,
    trade_type: 'EXACT_INPUT',
    amount_in: '0',
    amount_out: '0',
    min_amount_out: '0',
    pricing: null,
    order_data: null,
    quote: null,
    expires_at: null,
    fill_deadline: null,
    created_at: Date.now(),
  });
  return id;
}

function queuePayout(
  ledger: Ledger,
  p: { kind: PayoutKind; recipient: Address; currency: Address; amount: bigint; requestId?: Hex; id?: string; decidedAt?: number },
): { id: string; requestId: Hex } {
  const requestId = p.requestId ?? insertRequest(ledger);
  const id = p.id ?? `${p.kind}:${requestId}`;
  ledger.payouts.insert({
    id,
    kind: p.kind,
    request_id: requestId,
    deposit_id: null,
    chain_id: CHAIN_ID,
    recipient: p.recipient,
    currency: p.currency,
    amount: p.amount.toString(),
    decided_at: p.decidedAt ?? Date.now(),
  });
  return { id, requestId };
}

// A batch of `n` native fills signed and recorded by a submitter that then crashes before broadcasting it
// (its crash point hit, process.kill stubbed), as a restarted node finds it.
async function recordBatchThenCrash(
  ledger: Ledger,
  n: number,
): Promise<{ ids: { id: string; requestId: Hex }[]; fills: { recipient: Address; amount: bigint }[]; hash: Hex }> {
  const kill = vi.spyOn(process, 'kill').mockImplementation(() => {
    throw new Error('simulated crash after the batch was recorded');
  });
  try {
    const first = makeSubmitter(ledger, { chain: { pollIntervalMs: 600_000 }, faults: { crashAfterFillRecorded: true } });
    await first.sub.start();
    const fills = Array.from({ length: n }, () => ({ recipient: freshAddress(), amount: parseEther('0.01') }));
    const ids = fills.map((f) => queuePayout(ledger, { kind: 'fill', recipient: f.recipient, currency: zeroAddress, amount: f.amount }));
    first.sub.wake();
    await waitFor(() => kill.mock.calls.length === 1, 'crash point reached');
    await first.sub.stop();
    running.splice(running.indexOf(first.sub), 1);
    return { ids, fills, hash: ledger.payouts.get(ids[0]!.id)!.tx_hash as Hex };
  } finally {
    kill.mockRestore();
  }
}

// Sends a recorded transaction of fills so that it lands and reverts: the filler's owner takes the solver off its
// list just before, and puts it back after.
async function landReverted(ledger: Ledger, hash: Hex): Promise<void> {
  const owner = createWalletClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl), account: privateKeyToAccount(DEPLOYER_KEY) });
  const setSolver = async (functionName: 'removeSolver' | 'addSolver') =>
    client.waitForTransactionReceipt({
      hash: await owner.writeContract({ address: contracts.filler, abi: OrderFillerAbi, functionName, args: [solver.address] }),
    });
  await setSolver('removeSolver');
  await client.sendRawTransaction({ serializedTransaction: ledger.payouts.rawOf(hash) });
  expect((await client.waitForTransactionReceipt({ hash })).status).toBe('reverted');
  await setSolver('addSolver');
}

// Polls a condition, bounded; never a bare sleep.
async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function fillEvents(orderId: Hex) {
  return client.getLogs({ address: contracts.filler, event: orderFilled, args: { orderId }, fromBlock: 0n, toBlock: 'latest' });
}

async function tokenBalance(owner: Address): Promise<bigint> {
  return client.readContract({ address: contracts.stablecoin, abi: erc20Abi, functionName: 'balanceOf', args: [owner] });
}

const pendingNonce = () => client.getTransactionCount({ address: solver.address, blockTag: 'pending' });

async function counterValue(metric: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> }, labels: Record<string, string>) {
  const { values } = await metric.get();
  return values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;
}

// ------------------------------------------------------------------------------------------------ tests

describe('EvmSubmitter', () => {
  it('pays a native fill and an ERC-20 fill exactly once and reports the hashes', async () => {
    const ledger = Ledger.open(':memory:');
    const { sub, rec, metrics } = makeSubmitter(ledger);
    await sub.start();

    // start() approved the filler for the chain's ERC-20
    const allowance = await client.readContract({
      address: contracts.stablecoin,
      abi: erc20Abi,
      functionName: 'allowance',
      args: [solver.address, contracts.filler],
    });
    expect(allowance >= 2n ** 255n).toBe(true);

    const nativeTo = freshAddress();
    const tokenTo = freshAddress();
    // One at a time: each is a lone fill, which leaves at once in a transaction of its own.
    const native = queuePayout(ledger, { kind: 'fill', recipient: nativeTo, currency: zeroAddress, amount: parseEther('0.25') });
    sub.wake();
    await waitFor(() => rec.paid.length === 1, 'native fill paid');
    const token = queuePayout(ledger, { kind: 'fill', recipient: tokenTo, currency: contracts.stablecoin, amount: 12_345_678n });
    sub.wake();

    await waitFor(() => rec.paid.length === 2, 'both fills paid');
    for (const p of [native, token]) {
      const row = ledger.payouts.get(p.id)!;
      expect(row.state).toBe('success');
      const paid = rec.paid.filter((x) => x.payout === p.id);
      expect(paid).toHaveLength(1);
      expect(paid[0]!.hash).toBe(row.tx_hash);
      expect(rec.signed.filter((x) => x.payout === p.id).map((x) => x.hash)).toEqual([row.tx_hash]);
      const receipt = await client.getTransactionReceipt({ hash: row.tx_hash! });
      expect(receipt.status).toBe('success');
      expect(paid[0]!.fee).toBe(receipt.gasUsed * receipt.effectiveGasPrice);
      const events = await fillEvents(p.requestId);
      expect(events).toHaveLength(1);
      expect(events[0]!.transactionHash).toBe(row.tx_hash);
      const [tx] = ledger.payouts.txsOf(p.id);
      expect(ledger.payouts.txsOf(p.id)).toHaveLength(1);
      expect(tx!.state).toBe('included');
      expect(tx!.fee).toBe(paid[0]!.fee.toString());
    }
    expect(await client.getBalance({ address: nativeTo })).toBe(parseEther('0.25'));
    expect(await tokenBalance(tokenTo)).toBe(12_345_678n);
    expect(rec.failed).toEqual([]);
    // Counted once, by the solver's onPaid (e2e.test.ts): the submitter counted each again.
    expect(await counterValue(metrics.fills, { chain: String(CHAIN_ID), outcome: 'success' })).toBe(0);

    // The same order handed to a node that lost its ledger: reported paid with the original hash, no new payment.
    const other = Ledger.open(':memory:');
    const again = makeSubmitter(other);
    await again.sub.start();
    const nonceBefore = await pendingNonce();
    const dup = queuePayout(other, {
      kind: 'fill',
      recipient: nativeTo,
      currency: zeroAddress,
      amount: parseEther('0.25'),
      requestId: insertRequest(other, native.requestId),
    });
    again.sub.wake();
    await waitFor(() => again.rec.paid.length === 1, 'duplicate reported paid');
    expect(again.rec.paid[0]!.hash).toBe(ledger.payouts.get(native.id)!.tx_hash);
    expect(again.rec.signed).toEqual([]);
    expect(other.payouts.txsOf(dup.id)).toEqual([]);
    expect(other.payouts.get(dup.id)!.state).toBe('success');
    expect(await pendingNonce()).toBe(nonceBefore);
    expect(await client.getBalance({ address: nativeTo })).toBe(parseEther('0.25'));
    expect(await fillEvents(native.requestId)).toHaveLength(1);
  });

  it('fails a fill that cannot execute, with a reason, without sending anything', async () => {
    const ledger = Ledger.open(':memory:');
    const { sub, rec } = makeSubmitter(ledger);
    await sub.start();
    const nonceBefore = await pendingNonce();
    const tooMuch = (await tokenBalance(solver.address)) + 1n;
    const p = queuePayout(ledger, { kind: 'fill', recipient: freshAddress(), currency: contracts.stablecoin, amount: tooMuch });
    sub.wake();
    await waitFor(() => rec.failed.length === 1, 'fill failed');
    expect(rec.failed[0]).toEqual({ payout: p.id, reason: 'EXECUTION_REVERTED' });
    expect(ledger.payouts.get(p.id)).toMatchObject({ state: 'failed', fail_reason: 'EXECUTION_REVERTED' });
    expect(ledger.payouts.txsOf(p.id)).toEqual([]);
    expect(rec.signed).toEqual([]);
    expect(await pendingNonce()).toBe(nonceBefore);
  });

  it('never pays a batch past the gas its fills were priced at: recipients that burn what the batch gives them are sent alone', async () => {
    // The filler gives each recipient of a batch 100,000 gas. A recipient whose receive burns all it is given (and
    // succeeds) took it, and its fill was paid at a loss, as often as anyone quoted orders to it: 142,410 gas a fill
    // in a batch of 4, against 85,000 priced.
    const burner = freshAddress();
    // receive: loop while gasleft() > 3000, then stop.
    await testClient.setCode({ address: burner, bytecode: '0x5b610bb85a1160005700' });
    const ledger = Ledger.open(':memory:');
    const { sub } = makeSubmitter(ledger);
    const payouts = Array.from({ length: 4 }, () =>
      queuePayout(ledger, { kind: 'fill', recipient: burner, currency: zeroAddress, amount: parseEther('0.001') }),
    );
    await sub.start();
    sub.wake();
    await waitFor(() => payouts.every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'all 4 paid');
    const hashes = [...new Set(payouts.map((p) => ledger.payouts.get(p.id)!.tx_hash as Hex))];
    let gasUsed = 0n;
    for (const hash of hashes) gasUsed += (await client.getTransactionReceipt({ hash })).gasUsed;
    expect(gasUsed).toBeLessThanOrEqual(4n * fillGas(true, false));
  });

  it("never signs a lone fill for more gas than its price and its recipient's allowance: the margin stops there", async () => {
    // A recipient whose receive reverts unless it is given 67,000 gas, then burns down to 3,000, is estimated just
    // under the price plus GAS.recipient; signed with the 20% margin on top, it burned all of that (147,406 gas for
    // a fill priced at 85,000).
    const gated = freshAddress();
    await testClient.setCode({ address: gated, bytecode: '0x5a620105b8116014575b610bb85a1160095700005b600080fd' });
    const ledger = Ledger.open(':memory:');
    const { sub } = makeSubmitter(ledger);
    const p = queuePayout(ledger, { kind: 'fill', recipient: gated, currency: zeroAddress, amount: parseEther('0.001') });
    await sub.start();
    sub.wake();
    await waitFor(() => ledger.payouts.get(p.id)!.state === 'success', 'the fill paid');
    const receipt = await client.getTransactionReceipt({ hash: ledger.payouts.get(p.id)!.tx_hash as Hex });
    expect(receipt.gasUsed).toBeGreaterThan(fillGas(true, false));
    expect(receipt.gasUsed).toBeLessThanOrEqual(fillGas(true, false) + GAS.recipient);
  });

  it('pays 20 fills queued at once in batch transactions: each order paid once, each payout recording its transaction, the fee shared', async () => {
    const ledger = Ledger.open(':memory:');
    const { sub, rec } = makeSubmitter(ledger);
    await sub.start();
    const firstNonce = await pendingNonce();
    const payouts = Array.from({ length: 20 }, (_, i) => {
      const recipient = freshAddress();
      const native = i % 4 !== 3;
      const amount = native ? parseEther('0.001') + BigInt(i) : 1_000_000n + BigInt(i);
      return { ...queuePayout(ledger, { kind: 'fill', recipient, currency: native ? zeroAddress : contracts.stablecoin, amount }), recipient, amount, native };
    });
    sub.wake();
    await waitFor(() => payouts.every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'all 20 paid');

    const byTx = new Map<Hex, string[]>();
    for (const p of payouts) {
      const row = ledger.payouts.get(p.id)!;
      // The payout's own row of the transaction that paid it, included.
      expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([[row.tx_hash, 'included']]);
      byTx.set(row.tx_hash as Hex, [...(byTx.get(row.tx_hash as Hex) ?? []), p.id]);
      const events = await fillEvents(p.requestId);
      expect(events).toHaveLength(1);
      expect(events[0]!.transactionHash).toBe(row.tx_hash);
      expect(rec.paid.filter((x) => x.payout === p.id)).toEqual([{ payout: p.id, hash: row.tx_hash, fee: expect.any(BigInt) }]);
      expect(rec.signed.filter((x) => x.payout === p.id)).toEqual([{ payout: p.id, hash: row.tx_hash }]);
      expect(p.native ? await client.getBalance({ address: p.recipient }) : await tokenBalance(p.recipient)).toBe(p.amount);
    }
    // Fewer transactions than fills, at consecutive nonces; the fee of each split among its fills.
    expect(byTx.size).toBeLessThan(20);
    expect(await pendingNonce()).toBe(firstNonce + byTx.size);
    for (const [hash, ids] of byTx) {
      const receipt = await client.getTransactionReceipt({ hash });
      const shares = rec.paid.filter((x) => ids.includes(x.payout)).reduce((sum, x) => sum + x.fee, 0n);
      expect(shares).toBe(receipt.gasUsed * receipt.effectiveGasPrice);
      expect(
        ledger.payouts
          .rowsOfTx(hash)
          .map((t) => t.payout_id)
          .sort(),
      ).toEqual([...ids].sort());
    }
    expect(rec.failed).toEqual([]);
  });

  it('never signs a gas limit the chain refuses: the margin stops at the block gas limit, for a lone fill and a batch', async () => {
    // A transaction over the block's gas limit (or EIP-7825's 2^24) is refused by every node for good: signed
    // and recorded, it would hold its nonce and every later payout behind it. A 500% margin on a ~85,000-gas
    // fill asks for ~510,000; the chain admits 400,000 per block (room for a batch of two with each order's whole
    // BATCH_CALL_GAS: a batch that could need more than a block is split).
    const blockGasLimit = 400_000n;
    await testClient.setBlockGasLimit({ gasLimit: blockGasLimit });
    await testClient.mine({ blocks: 1 });
    try {
      expect((await client.getBlock()).gasLimit).toBe(blockGasLimit);
      const ledger = Ledger.open(':memory:');
      const { sub, rec } = makeSubmitter(ledger, { chain: { gasMarginBps: 50_000, currencies: [] } });
      await sub.start();
      const lone = queuePayout(ledger, { kind: 'fill', recipient: freshAddress(), currency: zeroAddress, amount: 1_000n });
      sub.wake();
      await waitFor(() => ledger.payouts.get(lone.id)!.state === 'success', 'lone fill paid', 15_000);
      // Two more at once: they leave as one batch, whose margin stops at the limit too.
      const pair = [0, 1].map(() => queuePayout(ledger, { kind: 'fill', recipient: freshAddress(), currency: zeroAddress, amount: 2_000n }));
      sub.wake();
      await waitFor(() => pair.every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'pair paid', 15_000);
      const hashes = [lone, pair[0]!].map((p) => ledger.payouts.get(p.id)!.tx_hash as Hex);
      expect(ledger.payouts.get(pair[1]!.id)!.tx_hash).toBe(hashes[1]);
      for (const [i, hash] of hashes.entries()) {
        const [tx, receipt] = await Promise.all([client.getTransaction({ hash }), client.getTransactionReceipt({ hash })]);
        expect(receipt.status).toBe('success');
        expect(tx.gas).toBeLessThanOrEqual(blockGasLimit);
        // The estimate and its margin were over the bounds: the lone fill's stops at its price and its recipient's
        // allowance first, the batch's at the block's limit.
        expect(tx.gas).toBe(i === 0 ? fillGas(true, false) + GAS.recipient : blockGasLimit);
      }
      expect(rec.failed).toEqual([]);
    } finally {
      await testClient.setBlockGasLimit({ gasLimit: 30_000_000n });
      await testClient.mine({ blocks: 1 });
    }
  });

  it('a batch skips an order paid before and one whose recipient refuses; sent alone, the first is reported paid and the second fails with its reason; the rest are paid', async () => {
    const ledger = Ledger.open(':memory:');
    // The order paid before, by this key outside the node's ledger (before the submitter takes its nonces).
    const paidBefore = insertRequest(ledger);
    const solverWallet = createWalletClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl), account: solver });
    const earlierHash = await solverWallet.writeContract({
      address: contracts.filler,
      abi: OrderFillerAbi,
      functionName: 'fillNative',
      args: [paidBefore, freshAddress()],
      value: 7n,
    });
    await client.waitForTransactionReceipt({ hash: earlierHash });
    const { sub, rec } = makeSubmitter(ledger);
    await sub.start();

    const good = Array.from({ length: 4 }, () => ({
      ...queuePayout(ledger, { kind: 'fill', recipient: freshAddress(), currency: zeroAddress, amount: 1_000n }),
    }));
    const dup = queuePayout(ledger, { kind: 'fill', recipient: freshAddress(), currency: zeroAddress, amount: 7n, requestId: paidBefore });
    // The stablecoin has no receive function: it refuses native value.
    const refusing = queuePayout(ledger, { kind: 'fill', recipient: contracts.stablecoin, currency: zeroAddress, amount: 11n });
    sub.wake();
    await waitFor(() => [...good, dup, refusing].every((p) => ['success', 'failed'].includes(ledger.payouts.get(p.id)!.state)), 'all settled');

    const batchHash = ledger.payouts.get(good[0]!.id)!.tx_hash as Hex;
    for (const p of good) {
      expect(ledger.payouts.get(p.id)).toMatchObject({ state: 'success', tx_hash: batchHash });
      expect(await fillEvents(p.requestId)).toHaveLength(1);
    }
    // The order paid before: its batch row is included but it was not paid by it; reported paid by the earlier transaction.
    expect(ledger.payouts.get(dup.id)).toMatchObject({ state: 'success', tx_hash: earlierHash });
    expect(ledger.payouts.txsOf(dup.id).map((t) => [t.hash, t.state])).toEqual([[batchHash, 'included']]);
    expect(rec.paid.filter((x) => x.payout === dup.id).map((x) => x.hash)).toEqual([earlierHash]);
    expect(await fillEvents(paidBefore)).toHaveLength(1);
    // The refusing recipient: failed with its own reason, never paid.
    expect(ledger.payouts.get(refusing.id)).toMatchObject({ state: 'failed', fail_reason: 'EXECUTION_REVERTED' });
    expect(rec.failed.map((x) => [x.payout, x.reason])).toEqual([[refusing.id, 'EXECUTION_REVERTED']]);
    expect(await fillEvents(refusing.requestId)).toHaveLength(0);
    const skipped = await client.getLogs({
      address: contracts.filler,
      event: getAbiItem({ abi: OrderFillerAbi, name: 'FillSkipped' }),
      fromBlock: 0n,
      toBlock: 'latest',
    });
    expect(
      skipped
        .filter((l) => l.transactionHash === batchHash)
        .map((l) => l.args.orderId)
        .sort(),
    ).toEqual([paidBefore, refusing.requestId].sort());
    expect(await client.getBalance({ address: contracts.filler })).toBe(0n);
    // The audit reads the batch as the node did: a success that skipped an order did not pay it.
    const audit = await auditEvmChain(chainConfig({ currencies: [] }), client, ledger, solver.address);
    expect(audit.differences.filter((d) => [dup.id, refusing.id].some((id) => d.includes(id)))).toEqual([]);
  });

  it('pays refunds through depository.execute, and a refund never executes twice', async () => {
    // Fund the depository the way users do: deposits.
    const depositNative = await userWallet.writeContract({
      address: contracts.depository,
      abi: RelayDepositoryAbi,
      functionName: 'depositNative',
      args: [user.address, randomId()],
      value: parseEther('2'),
    });
    await client.waitForTransactionReceipt({ hash: depositNative });
    const approve = await userWallet.writeContract({
      address: contracts.stablecoin,
      abi: TestStablecoinAbi,
      functionName: 'approve',
      args: [contracts.depository, 50_000_000n],
    });
    await client.waitForTransactionReceipt({ hash: approve });
    const depositToken = await userWallet.writeContract({
      address: contracts.depository,
      abi: RelayDepositoryAbi,
      functionName: 'depositErc20',
      args: [user.address, contracts.stablecoin, 50_000_000n, randomId()],
    });
    await client.waitForTransactionReceipt({ hash: depositToken });

    const ledger = Ledger.open(':memory:');
    const { sub, rec, metrics } = makeSubmitter(ledger);
    await sub.start();
    const nativeTo = freshAddress();
    const tokenTo = freshAddress();
    const decidedAt = Date.now();
    const nativeRefund = queuePayout(ledger, { kind: 'refund', recipient: nativeTo, currency: zeroAddress, amount: parseEther('1.5'), decidedAt });
    const tokenRefund = queuePayout(ledger, { kind: 'refund', recipient: tokenTo, currency: contracts.stablecoin, amount: 40_000_000n, decidedAt });
    sub.wake();
    await waitFor(() => rec.paid.length === 2, 'both refunds paid');

    expect(await client.getBalance({ address: nativeTo })).toBe(parseEther('1.5'));
    expect(await tokenBalance(tokenTo)).toBe(40_000_000n);
    for (const p of [nativeRefund, tokenRefund]) {
      const row = ledger.payouts.get(p.id)!;
      expect(row.state).toBe('success');
      const receipt = await client.getTransactionReceipt({ hash: row.tx_hash! });
      expect(receipt.to?.toLowerCase()).toBe(contracts.depository.toLowerCase());
      expect(rec.paid.filter((x) => x.payout === p.id).map((x) => x.hash)).toEqual([row.tx_hash]);
    }
    // Counted once, by the solver's onPaid: the submitter counted each again.
    expect(await counterValue(metrics.refunds, { chain: String(CHAIN_ID), outcome: 'success' })).toBe(0);

    // The same refund again (a node that lost its ledger signs the very same call request): the depository
    // refuses it, and the node reports the original payment instead of paying again.
    const other = Ledger.open(':memory:');
    const again = makeSubmitter(other);
    await again.sub.start();
    const before = await client.getBalance({ address: nativeTo });
    const dup = queuePayout(other, {
      kind: 'refund',
      id: nativeRefund.id,
      requestId: insertRequest(other, nativeRefund.requestId),
      recipient: nativeTo,
      currency: zeroAddress,
      amount: parseEther('1.5'),
      decidedAt,
    });
    again.sub.wake();
    await waitFor(() => again.rec.paid.length === 1, 'duplicate refund reported paid');
    expect(again.rec.paid[0]!.hash).toBe(ledger.payouts.get(nativeRefund.id)!.tx_hash);
    expect(other.payouts.txsOf(dup.id)).toEqual([]);
    expect(await client.getBalance({ address: nativeTo })).toBe(before);
    const executed = await client.getLogs({ address: contracts.depository, event: callExecuted, fromBlock: 0n, toBlock: 'latest' });
    expect(executed.filter((l) => l.transactionHash === ledger.payouts.get(nativeRefund.id)!.tx_hash)).toHaveLength(1);
  });

  it('replaces a stuck transaction at the same nonce with higher fees; only one lands', async () => {
    const ledger = Ledger.open(':memory:');
    // No timer passes: heads are pushed by hand, as the indexer would.
    const { sub, rec, metrics } = makeSubmitter(ledger, { chain: { replaceAfterBlocks: 2, pollIntervalMs: 600_000 } });
    await sub.start();
    await testClient.setAutomine(false);
    try {
      const mineAndTell = async () => {
        await testClient.mine({ blocks: 1 });
        const block = await client.getBlock({ blockTag: 'latest' });
        sub.onHead({ number: block.number, baseFeePerGas: block.baseFeePerGas ?? 0n });
        await sub.confirmNow();
      };
      const recipient = freshAddress();
      const p = queuePayout(ledger, { kind: 'fill', recipient, currency: zeroAddress, amount: parseEther('0.3') });
      sub.wake();
      const txs = () => ledger.payouts.txsOf(p.id);
      await waitFor(() => txs()[0]?.state === 'broadcast', 'first transaction broadcast');
      const first: TransactionRow = txs()[0]!;

      // The base fee jumps above what the first transaction offers: it cannot be included.
      await testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: BigInt(first.max_fee_per_gas) * 4n });
      await mineAndTell();
      expect(txs()).toHaveLength(1);
      expect(await client.getTransactionCount({ address: solver.address, blockTag: 'latest' })).toBe(first.nonce);
      await mineAndTell(); // replaceAfterBlocks blocks after it was sent: replaced
      await waitFor(() => txs().length === 2 && txs()[1]!.state === 'broadcast', 'replacement broadcast');
      const second = txs()[1]!;
      expect(second.nonce).toBe(first.nonce);
      expect(BigInt(second.max_fee_per_gas) * 1000n >= BigInt(first.max_fee_per_gas) * 1125n).toBe(true);
      expect(BigInt(second.max_priority_fee_per_gas) * 1000n >= BigInt(first.max_priority_fee_per_gas) * 1125n).toBe(true);
      expect(await counterValue(metrics.replacements, { chain: String(CHAIN_ID) })).toBe(1);

      await mineAndTell();
      await waitFor(() => ledger.payouts.get(p.id)!.state === 'success', 'payout paid');
      expect(ledger.payouts.get(p.id)!.tx_hash).toBe(second.hash);
      expect(rec.paid).toEqual([{ payout: p.id, hash: second.hash, fee: expect.any(BigInt) }]);
      expect(txs().map((t) => [t.hash, t.state])).toEqual([
        [first.hash, 'replaced'],
        [second.hash, 'included'],
      ]);
      const events = await fillEvents(p.requestId);
      expect(events).toHaveLength(1);
      expect(events[0]!.transactionHash).toBe(second.hash);
      expect(await client.getBalance({ address: recipient })).toBe(parseEther('0.3'));
    } finally {
      await testClient.setAutomine(true);
    }
  });

  it('re-sends a recorded fill whose nonce something else took, and pays it once', async () => {
    const ledger = Ledger.open(':memory:');
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => {
      throw new Error('simulated crash after the fill was recorded');
    });
    const recipient = freshAddress();
    let p: { id: string; requestId: Hex };
    let lost: TransactionRow;
    try {
      const first = makeSubmitter(ledger, { chain: { pollIntervalMs: 600_000 }, faults: { crashAfterFillRecorded: true } });
      await first.sub.start();
      p = queuePayout(ledger, { kind: 'fill', recipient, currency: zeroAddress, amount: parseEther('0.7') });
      first.sub.wake();
      await waitFor(() => kill.mock.calls.length === 1, 'crash point reached');
      await first.sub.stop();
      running.splice(running.indexOf(first.sub), 1);
      lost = ledger.payouts.txsOf(p.id)[0]!;
      expect(lost.state).toBe('signed');
    } finally {
      kill.mockRestore();
    }

    // Another process with the solver key takes that nonce first.
    const solverWallet = createWalletClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl), account: solver });
    const other = await solverWallet.sendTransaction({ to: solver.address, value: 0n, nonce: lost.nonce });
    await client.waitForTransactionReceipt({ hash: other });

    const second = makeSubmitter(ledger);
    await second.sub.start();
    await waitFor(() => ledger.payouts.get(p.id)!.state === 'success', 'fill re-sent and paid');
    const txs = ledger.payouts.txsOf(p.id);
    expect(txs.map((t) => t.state)).toEqual(['dropped', 'included']);
    expect(txs[0]!.hash).toBe(lost.hash);
    expect(txs[1]!.nonce).toBeGreaterThan(lost.nonce);
    expect(second.rec.signed).toEqual([{ payout: p.id, hash: txs[1]!.hash }]);
    expect(second.rec.paid.map((x) => x.hash)).toEqual([txs[1]!.hash]);
    expect(await fillEvents(p.requestId)).toHaveLength(1);
    expect(await client.getBalance({ address: recipient })).toBe(parseEther('0.7'));
  });

  it('after a crash right after the broadcast, a restart settles the fill from its receipt without sending again', async () => {
    const ledger = Ledger.open(':memory:');
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => {
      throw new Error('simulated crash after the fill was broadcast');
    });
    const recipient = freshAddress();
    let p: { id: string; requestId: Hex };
    try {
      const first = makeSubmitter(ledger, { chain: { pollIntervalMs: 600_000 }, faults: { crashAfterFillBroadcast: true } });
      await first.sub.start();
      p = queuePayout(ledger, { kind: 'fill', recipient, currency: zeroAddress, amount: parseEther('0.9') });
      first.sub.wake();
      await waitFor(() => kill.mock.calls.length === 1, 'crash point reached');
      await first.sub.stop();
      running.splice(running.indexOf(first.sub), 1);
    } finally {
      kill.mockRestore();
    }
    const [sent] = ledger.payouts.txsOf(p.id);
    const nonceAfterCrash = await pendingNonce();
    const second = makeSubmitter(ledger);
    await second.sub.start();
    await waitFor(() => ledger.payouts.get(p.id)!.state === 'success', 'fill settled after restart');
    expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([[sent!.hash, 'included']]);
    expect(second.rec.signed).toEqual([]);
    expect(second.rec.paid.map((x) => x.hash)).toEqual([sent!.hash]);
    expect(await pendingNonce()).toBe(nonceAfterCrash);
    expect(await fillEvents(p.requestId)).toHaveLength(1);
    expect(await client.getBalance({ address: recipient })).toBe(parseEther('0.9'));
  });

  it('on restart broadcasts a fill recorded but never sent, pays it once; a later instance does nothing', async () => {
    const ledger = Ledger.open(':memory:');
    // The first instance "crashes" right after recording the fill (process.kill is intercepted).
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => {
      throw new Error('simulated crash after the fill was recorded');
    });
    let recordedHash: Hex;
    let p: { id: string; requestId: Hex };
    const recipient = freshAddress();
    try {
      const first = makeSubmitter(ledger, { chain: { pollIntervalMs: 600_000 }, faults: { crashAfterFillRecorded: true } });
      await first.sub.start();
      const nonceBefore = await pendingNonce();
      p = queuePayout(ledger, { kind: 'fill', recipient, currency: zeroAddress, amount: parseEther('0.5') });
      first.sub.wake();
      await waitFor(() => kill.mock.calls.length === 1, 'crash point reached');
      expect(kill.mock.calls[0]).toEqual([process.pid, 'SIGKILL']);
      await first.sub.stop();
      running.splice(running.indexOf(first.sub), 1);

      const txs = ledger.payouts.txsOf(p.id);
      expect(txs).toHaveLength(1);
      expect(txs[0]!.state).toBe('signed');
      recordedHash = txs[0]!.hash;
      expect(ledger.payouts.get(p.id)).toMatchObject({ state: 'sent', tx_hash: recordedHash });
      expect(first.rec.signed).toEqual([{ payout: p.id, hash: recordedHash }]);
      expect(await pendingNonce()).toBe(nonceBefore); // it never reached the chain
    } finally {
      kill.mockRestore();
    }

    const second = makeSubmitter(ledger);
    await second.sub.start();
    await waitFor(() => ledger.payouts.get(p.id)!.state === 'success', 'recorded fill paid after restart');
    expect(second.rec.paid.map((x) => [x.payout, x.hash])).toEqual([[p.id, recordedHash]]);
    expect(second.rec.signed).toEqual([]);
    expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([[recordedHash, 'included']]);
    const events = await fillEvents(p.requestId);
    expect(events).toHaveLength(1);
    expect(events[0]!.transactionHash).toBe(recordedHash);
    expect(await client.getBalance({ address: recipient })).toBe(parseEther('0.5'));
    await second.sub.stop();

    // Another instance over the same ledger after success: nothing to do, nothing sent, nothing reported.
    const nonceAfter = await pendingNonce();
    const third = makeSubmitter(ledger);
    await third.sub.start();
    third.sub.wake();
    await third.sub.confirmNow();
    expect(third.rec).toEqual({ signed: [], paid: [], failed: [] });
    expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([[recordedHash, 'included']]);
    expect(ledger.payouts.get(p.id)).toMatchObject({ state: 'success', tx_hash: recordedHash });
    expect(await pendingNonce()).toBe(nonceAfter);
    expect(await fillEvents(p.requestId)).toHaveLength(1);
    expect(await client.getBalance({ address: recipient })).toBe(parseEther('0.5'));
  });

  it('on restart broadcasts a batch recorded but never sent, once, and pays every fill in it once', async () => {
    const ledger = Ledger.open(':memory:');
    const nonceBefore = await pendingNonce();
    const { ids, fills, hash: recordedHash } = await recordBatchThenCrash(ledger, 5);
    // One transaction, recorded for every payout it carries, before it reached the chain.
    for (const p of ids) {
      expect(ledger.payouts.get(p.id)).toMatchObject({ state: 'sent', tx_hash: recordedHash });
      expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([[recordedHash, 'signed']]);
    }
    expect(await pendingNonce()).toBe(nonceBefore);

    const lines: Record<string, unknown>[] = [];
    const second = makeSubmitter(ledger, { log: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }) });
    await second.sub.start();
    await waitFor(() => ids.every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'batch paid after restart');
    // The rebroadcast's line names the batch's nonce group by every request it carries.
    const rebroadcast = lines.filter((l) => String(l.msg).startsWith('node does not hold our transaction'));
    expect(rebroadcast).toHaveLength(1);
    expect(rebroadcast[0]).toMatchObject({ txHash: recordedHash, payouts: 5 });
    expect(new Set(rebroadcast[0]!.requestIds as string[])).toEqual(new Set(ids.map((p) => p.requestId)));
    expect(second.rec.signed).toEqual([]);
    expect(second.rec.paid.map((x) => x.hash)).toEqual(ids.map(() => recordedHash));
    for (const [i, p] of ids.entries()) {
      expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([[recordedHash, 'included']]);
      const events = await fillEvents(p.requestId);
      expect(events.map((e) => e.transactionHash)).toEqual([recordedHash]);
      expect(await client.getBalance({ address: fills[i]!.recipient })).toBe(fills[i]!.amount);
    }
  });

  it('a claim whose receipt a provider has not served yet is not taken for one whose nonce something else took: paid once', async () => {
    // A claim is a plain transfer: nothing on chain refuses a second one. Its nonce used with no receipt served read
    // as "something else took the nonce", and the claim was sent again and paid twice.
    const ledger = Ledger.open(':memory:');
    let receiptMisses = 1;
    const faulty = {
      ...client,
      getTransactionReceipt: (args: { hash: Hex }) =>
        receiptMisses-- > 0 ? Promise.reject(new TransactionReceiptNotFoundError({ hash: args.hash })) : client.getTransactionReceipt(args),
    } as unknown as PublicClient;
    const { sub, rec } = makeSubmitter(ledger, { client: faulty });
    const recipient = freshAddress();
    const p = queuePayout(ledger, { kind: 'claim', recipient, currency: zeroAddress, amount: parseEther('0.01') });
    await sub.start();
    sub.wake();
    await waitFor(() => ledger.payouts.get(p.id)!.state === 'success', 'the claim paid');
    expect(receiptMisses).toBeLessThan(1);
    expect(rec.signed).toHaveLength(1);
    expect(await client.getBalance({ address: recipient })).toBe(parseEther('0.01'));
  });

  it('a batch whose nonce another transaction took (paying its fills) settles every fill it paid, though one read fails on the way', async () => {
    const ledger = Ledger.open(':memory:');
    const { ids, hash } = await recordBatchThenCrash(ledger, 2);
    expect(ledger.payouts.get(ids[1]!.id)!.tx_hash).toBe(hash);
    // Another holder of the key (the ledger lost it) sent the same batch at the same nonce, with other fees: it pays
    // both orders, and the recorded batch can land no more. Its receipt is not of any transaction the node recorded.
    const tx = parseTransaction(ledger.payouts.rawOf(hash));
    const other = await client.sendRawTransaction({
      serializedTransaction: await solver.signTransaction({
        type: 'eip1559',
        chainId: CHAIN_ID,
        nonce: tx.nonce!,
        to: tx.to!,
        data: tx.data!,
        value: tx.value ?? 0n,
        gas: tx.gas!,
        maxFeePerGas: tx.maxFeePerGas! + 1n,
        maxPriorityFeePerGas: tx.maxPriorityFeePerGas!,
      }),
    });
    expect((await client.waitForTransactionReceipt({ hash: other })).status).toBe('success');
    for (const p of ids) expect(await fillEvents(p.requestId)).toHaveLength(1);

    // The restarted node's provider fails one read of the second order.
    let filledFailures = 1;
    const faulty = {
      ...client,
      readContract: (args: { functionName: string; args?: readonly unknown[] }) =>
        args.functionName === 'filled' && args.args?.[0] === ids[1]!.requestId && filledFailures-- > 0
          ? Promise.reject(new Error('provider answered 502'))
          : client.readContract(args as Parameters<typeof client.readContract>[0]),
    } as unknown as PublicClient;
    const second = makeSubmitter(ledger, { client: faulty });
    await second.sub.start();
    await waitFor(() => ids.every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'both fills settled', 15_000);
    expect(filledFailures).toBeLessThan(1);
    for (const p of ids) {
      expect(ledger.payouts.get(p.id)!.tx_hash).toBe(other);
      expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([[hash, 'dropped']]);
    }
    expect(second.rec.signed).toEqual([]);
    expect(second.rec.paid.map((x) => x.payout).sort()).toEqual(ids.map((p) => p.id).sort());
  });

  it('a batch that landed while its receipt is not served, look after look, is settled from its receipt once served, never taken for a nonce something else used', async () => {
    const ledger = Ledger.open(':memory:');
    const { ids, hash } = await recordBatchThenCrash(ledger, 2);
    await client.sendRawTransaction({ serializedTransaction: ledger.payouts.rawOf(hash) });
    expect((await client.waitForTransactionReceipt({ hash })).status).toBe('success');
    // The restarted node's provider serves no receipt of it for six looks (a backend behind the head).
    let receiptMisses = 6;
    const faulty = {
      ...client,
      getTransactionReceipt: (args: { hash: Hex }) =>
        args.hash === hash && receiptMisses-- > 0 ? Promise.reject(new TransactionReceiptNotFoundError({ hash })) : client.getTransactionReceipt(args),
    } as unknown as PublicClient;
    const second = makeSubmitter(ledger, { client: faulty });
    await second.sub.start();
    await waitFor(() => ids.every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'both fills settled', 15_000);
    expect(receiptMisses).toBeLessThan(1);
    for (const p of ids) expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([[hash, 'included']]);
    expect(second.rec.signed).toEqual([]);
  });

  it('a batch that reverted sends each of its fills again alone, each paid once; a failed read on the way settles none of the batch before all are read', async () => {
    const ledger = Ledger.open(':memory:');
    const { ids, hash } = await recordBatchThenCrash(ledger, 3);
    // The batch lands and reverts.
    await landReverted(ledger, hash);

    // The restarted node's provider fails one read of whether the second order was paid; what the ledger
    // held for the batch at that moment is kept.
    const held = () => ids.map((p) => `${ledger.payouts.get(p.id)!.state} ${ledger.payouts.txsOf(p.id).map((t) => t.state)}`);
    const before = held();
    expect(before).toEqual(ids.map(() => 'sent signed'));
    let filledFailures = 1;
    let atFailure: string[] | undefined;
    const faulty = {
      ...client,
      readContract: (args: { functionName: string; args?: readonly unknown[] }) => {
        if (args.functionName === 'filled' && args.args?.[0] === ids[1]!.requestId && filledFailures-- > 0) {
          atFailure = held();
          return Promise.reject(new Error('provider answered 502'));
        }
        return client.readContract(args as Parameters<typeof client.readContract>[0]);
      },
    } as unknown as PublicClient;
    const second = makeSubmitter(ledger, { client: faulty });
    await second.sub.start();
    await waitFor(() => ids.every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'every fill paid', 20_000);
    // Nothing of the batch was settled while one of its payouts was still unread.
    expect(atFailure).toEqual(before);
    const paidBy = ids.map((p) => ledger.payouts.get(p.id)!.tx_hash as Hex);
    // Each went again alone, and was paid once, by its own transaction.
    expect(new Set(paidBy).size).toBe(ids.length);
    for (const [i, p] of ids.entries()) {
      expect(paidBy[i]).not.toBe(hash);
      expect((await fillEvents(p.requestId)).map((e) => e.transactionHash)).toEqual([paidBy[i]]);
      expect(ledger.payouts.txsOf(p.id).map((t) => [t.hash, t.state])).toEqual([
        [hash, 'reverted'],
        [paidBy[i], 'included'],
      ]);
    }
    expect(second.rec.paid.map((x) => x.payout).sort()).toEqual(ids.map((p) => p.id).sort());
    expect(second.rec.failed).toEqual([]);
    expect(ledger.payouts.stranded(CHAIN_ID)).toEqual([]);
  });

  it("a fill's reverted receipt is acted on only at the chain's confirmations: reorged away, the same bytes land and pay, and nothing failed", async () => {
    // Failed at its first receipt, the fill was refunded at once (onFailed queues the refund). A reorg then let its
    // signed bytes, which anyone may send again, land and pay: the order filled and refunded.
    const ledger = Ledger.open(':memory:');
    const { ids, hash } = await recordBatchThenCrash(ledger, 1);
    const { id } = ids[0]!;
    const snapshot = await testClient.snapshot();
    await landReverted(ledger, hash);
    // The revert is 2 blocks deep; the chain's confirmations are 3.
    const { sub, rec } = makeSubmitter(ledger, { chain: { confirmations: 3 } });
    await sub.start();
    await sub.confirmNow();
    expect(ledger.payouts.get(id)!.state).toBe('sent');
    expect(rec.failed).toEqual([]);
    // The reorg: back to before the solver was taken off the list. The same bytes land again (sent by anyone: by
    // the node itself, which finds its transaction gone), and pay.
    await testClient.revert({ id: snapshot });
    await client.sendRawTransaction({ serializedTransaction: ledger.payouts.rawOf(hash) }).catch(() => undefined);
    await waitFor(() => ledger.payouts.get(id)!.state === 'success', 'the fill paid by its own bytes');
    expect(rec.failed).toEqual([]);
    expect(rec.paid.map((p) => p.hash)).toEqual([hash]);
    expect((await fillEvents(ids[0]!.requestId)).map((e) => e.transactionHash)).toEqual([hash]);
  });

  it("a fill whose nonce another transaction took is queued again only at the chain's confirmations: reorged away, its own bytes land and pay once", async () => {
    // Queued again as soon as the taker was seen at the head, the fill was signed again (or, past its deadline,
    // failed and refunded); a reorg that took the taker away let the fill's first bytes, which anyone may send, land
    // too: the refund and the fill both paid.
    const ledger = Ledger.open(':memory:');
    const { ids, hash } = await recordBatchThenCrash(ledger, 1);
    const { id, requestId } = ids[0]!;
    const snapshot = await testClient.snapshot();
    // Another holder of the key (the ledger lost it) uses the nonce for a transfer to itself: it pays nothing.
    const nonce = parseTransaction(ledger.payouts.rawOf(hash)).nonce!;
    const fees = await client.estimateFeesPerGas();
    const other = await client.sendRawTransaction({
      serializedTransaction: await solver.signTransaction({ type: 'eip1559', chainId: CHAIN_ID, nonce, to: solver.address, value: 0n, gas: 21_000n, ...fees }),
    });
    expect((await client.waitForTransactionReceipt({ hash: other })).status).toBe('success');
    // The taker is 1 block deep; the chain's confirmations are 3. Two looks (a nonce used with no receipt of ours is
    // acted on at a later look only).
    const { sub, rec } = makeSubmitter(ledger, { chain: { confirmations: 3, pollIntervalMs: 600_000 } });
    await sub.start();
    await sub.confirmNow();
    await sub.confirmNow();
    await sub.confirmNow();
    expect(ledger.payouts.get(id)!.state).toBe('sent');
    expect(rec.signed).toEqual([]);
    // The reorg: the taker is gone, and the fill's own bytes land.
    await testClient.revert({ id: snapshot });
    expect(
      (await client.waitForTransactionReceipt({ hash: await client.sendRawTransaction({ serializedTransaction: ledger.payouts.rawOf(hash) }) })).status,
    ).toBe('success');
    await sub.confirmNow();
    await waitFor(() => ledger.payouts.get(id)!.state === 'success', 'the fill paid by its own bytes');
    expect(rec.failed).toEqual([]);
    expect(rec.signed).toEqual([]);
    expect((await fillEvents(requestId)).map((e) => e.transactionHash)).toEqual([hash]);
  });

  it("a fill its batch skipped is acted on only at the chain's confirmations, though the batch paid the others at once", async () => {
    // Settling the batch's paid fills closed the skipped fill's row too (they share the transaction), and the pass
    // over payouts with nothing open sent it again at once, where it failed (refunded) before its block was deep.
    const ledger = Ledger.open(':memory:');
    const { sub, rec } = makeSubmitter(ledger, { chain: { confirmations: 3 } });
    await sub.start();
    const good = Array.from({ length: 3 }, () => queuePayout(ledger, { kind: 'fill', recipient: freshAddress(), currency: zeroAddress, amount: 1_000n }));
    // The stablecoin has no receive function: it refuses native value.
    const refusing = queuePayout(ledger, { kind: 'fill', recipient: contracts.stablecoin, currency: zeroAddress, amount: 11n });
    sub.wake();
    await waitFor(() => good.every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'the batch paid');
    const batch = await client.getTransactionReceipt({ hash: ledger.payouts.get(good[0]!.id)!.tx_hash as Hex });
    expect(await client.getBlockNumber()).toBe(batch.blockNumber);
    await sub.confirmNow();
    await sub.confirmNow();
    expect(ledger.payouts.get(refusing.id)!.state).toBe('sent');
    expect(rec.failed).toEqual([]);
    await testClient.mine({ blocks: 2 });
    await waitFor(() => ledger.payouts.get(refusing.id)!.state === 'failed', 'the skipped fill failed alone');
    expect(rec.failed.map((x) => [x.payout, x.reason])).toEqual([[refusing.id, 'EXECUTION_REVERTED']]);
  });

  it('a payout left sent with no transaction open is settled from the chain: paid, it succeeds; not paid, it is sent again', async () => {
    const ledger = Ledger.open(':memory:');
    const { ids, hash } = await recordBatchThenCrash(ledger, 2);
    await client.sendRawTransaction({ serializedTransaction: ledger.payouts.rawOf(hash) });
    expect((await client.waitForTransactionReceipt({ hash })).status).toBe('success');
    // A settlement interrupted after the batch's first payout: the rows both payouts share are closed, the second is still 'sent'.
    ledger.tx(() => {
      ledger.payouts.setTxState(hash, 'included');
      ledger.payouts.setState(ids[0]!.id, 'success', { txHash: hash });
    });
    // And a payout whose only transaction was dropped before it paid anything.
    const unpaid = queuePayout(ledger, { kind: 'fill', recipient: freshAddress(), currency: zeroAddress, amount: parseEther('0.02') });
    const lost = randomId();
    ledger.tx(() => {
      ledger.payouts.insertTx({
        hash: lost,
        payout_id: unpaid.id,
        chain_id: CHAIN_ID,
        sender: solver.address,
        nonce: 0,
        raw: '0x00',
        gas_limit: '0',
        max_fee_per_gas: '0',
        max_priority_fee_per_gas: '0',
        created_at: Date.now(),
      });
      ledger.payouts.setTxState(lost, 'dropped');
      ledger.payouts.setState(unpaid.id, 'sent', { txHash: lost });
    });
    expect(
      ledger.payouts
        .stranded(CHAIN_ID)
        .map((p) => p.id)
        .sort(),
    ).toEqual([ids[1]!.id, unpaid.id].sort());

    const second = makeSubmitter(ledger);
    await second.sub.start();
    await waitFor(() => [ids[1]!, unpaid].every((p) => ledger.payouts.get(p.id)!.state === 'success'), 'both settled', 15_000);
    expect(ledger.payouts.get(ids[1]!.id)!.tx_hash).toBe(hash);
    expect(second.rec.paid.filter((x) => x.payout === ids[1]!.id).map((x) => x.hash)).toEqual([hash]);
    // The unpaid one went again, in a transaction of its own, and was paid once.
    const again = ledger.payouts.get(unpaid.id)!.tx_hash as Hex;
    expect(again).not.toBe(lost);
    expect((await fillEvents(unpaid.requestId)).map((e) => e.transactionHash)).toEqual([again]);
    expect(ledger.payouts.stranded(CHAIN_ID)).toEqual([]);
  });

  it('a payout the market prices above the fee cap waits unsigned (no nonce held), then goes at the cap or under', async () => {
    const ledger = Ledger.open(':memory:');
    const cap = 20_000_000_000n; // 20 gwei
    // The base fee jumps to 50 gwei: above the cap.
    await testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: 50_000_000_000n });
    await testClient.mine({ blocks: 1 });
    const { sub, rec, metrics } = makeSubmitter(ledger, { chain: { maxFeePerGas: cap.toString() } });
    await sub.start();
    const nonceBefore = await pendingNonce();
    const p = queuePayout(ledger, { kind: 'fill', recipient: freshAddress(), currency: zeroAddress, amount: parseEther('0.01') });
    sub.wake();
    await waitFor(
      async () => (await counterValue(metrics.feeCapWaits, { chain: String(CHAIN_ID), stage: 'send' })) >= 2,
      'the payout to wait on the cap twice',
    );
    expect(ledger.payouts.txsOf(p.id)).toEqual([]);
    expect(ledger.payouts.get(p.id)!.state).toBe('queued');
    expect(await pendingNonce()).toBe(nonceBefore);
    expect(rec.signed).toEqual([]);
    // The base fee falls under the cap: paid, at no more than the cap.
    await testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: 5_000_000_000n });
    await testClient.mine({ blocks: 1 });
    await waitFor(() => ledger.payouts.get(p.id)!.state === 'success', 'payout paid', 60_000);
    const [tx] = ledger.payouts.txsOf(p.id);
    expect(BigInt(tx!.max_fee_per_gas) <= cap).toBe(true);
  });
});
