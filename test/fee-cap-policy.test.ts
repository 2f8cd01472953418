// A fee-capped transaction never holds the nonces behind it (issue 16, "Fee limits"): a fill sent under the
// chain's cap whose replacement would exceed the cap is held at its nonce; under `feeCapPolicy: 'cancel'` it
// is replaced at that nonce by a zero-value transfer to the solver itself after `feeCapCancelAfterBlocks`,
// so the payouts behind it go out, and the capped payout is queued again (paid later at a new nonce, once).
// Real anvil chain, real contracts; blocks are mined by hand at chosen base fees (automine off).

import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  getAbiItem,
  hexToBigInt,
  http,
  parseEther,
  toHex,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { OrderFillerAbi, RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { bumped } from '../src/chains/evm/fees.ts';
import { EvmPayouts } from '../src/chains/evm/payoutSender.ts';
import type { PayoutHooks } from '../src/chains/adapter.ts';
import type { Faults } from '../src/config/load.ts';
import type { EvmChainConfig } from '../src/config/schema.ts';
import { startAnvil, type AnvilHandle } from '../src/devnet/anvil.ts';
import { deployNodeContracts, devnetChain, type NodeContracts } from '../src/devnet/deploy.ts';
import { Ledger, type TransactionRow } from '../src/ledger/index.ts';
import { createLogger } from '../src/log.ts';
import { createMetrics, type Metrics } from '../src/metrics.ts';
import { anvilKey } from './helpers/anvilKeys.ts';

const CHAIN_ID = 31_337_016;
const DEPLOYER_KEY = anvilKey(0);
const SOLVER_KEY = anvilKey(1);
const ALLOCATOR_KEY = anvilKey(2);
const solver = privateKeyToAccount(SOLVER_KEY);
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
const orderFilled = getAbiItem({ abi: OrderFillerAbi, name: 'OrderFilled' });

const GWEI = 1_000_000_000n;
const CAP = 20n * GWEI;
// Between the first fill's max fee and the cap: the first fill cannot be included, a fill priced at the cap can.
const STUCK_BASE_FEE = (39n * GWEI) / 2n;

let anvil: AnvilHandle;
let contracts: NodeContracts;
let client: PublicClient;
let testClient: ReturnType<typeof createTestClient>;

beforeAll(async () => {
  anvil = await startAnvil({ chainId: CHAIN_ID });
  contracts = await deployNodeContracts({
    rpcUrl: anvil.rpcUrl,
    chainId: CHAIN_ID,
    deployerKey: DEPLOYER_KEY,
    solver: solver.address,
    allocator: privateKeyToAccount(ALLOCATOR_KEY).address,
    fund: { accounts: [], nativeWei: parseEther('100'), stablecoinUnits: 0n },
  });
  client = createPublicClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl, { retryCount: 0 }), pollingInterval: 20 });
  testClient = createTestClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl), mode: 'anvil' });
  // The depository holds deposits to refund from.
  const depositor = createWalletClient({
    chain: devnetChain(CHAIN_ID, anvil.rpcUrl),
    transport: http(anvil.rpcUrl),
    account: privateKeyToAccount(DEPLOYER_KEY),
  });
  const hash = await depositor.writeContract({
    address: contracts.depository,
    abi: RelayDepositoryAbi,
    functionName: 'depositNative',
    args: [depositor.account.address, toHex(randomBytes(32))],
    value: parseEther('1'),
  });
  await client.waitForTransactionReceipt({ hash });
}, 60_000);

afterAll(async () => {
  await anvil?.stop();
});

const running: EvmPayouts[] = [];
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
  await testClient.setAutomine(true);
});

function makePayouts(ledger: Ledger, chain: Partial<EvmChainConfig>, faults: Faults = {}) {
  const rec = { paid: [] as { payout: string; hash: string }[], failed: [] as string[] };
  const hooks: PayoutHooks = {
    onSigned: () => undefined,
    onPaid: (p, hash) => void rec.paid.push({ payout: p.id, hash }),
    onFailed: (p) => void rec.failed.push(p.id),
  };
  const metrics: Metrics = createMetrics();
  const sub = new EvmPayouts({
    chain: {
      id: CHAIN_ID,
      name: 'devnet',
      kind: 'evm',
      rpcUrl: anvil.rpcUrl,
      depository: contracts.depository,
      filler: contracts.filler,
      startBlock: Number(contracts.deployBlock),
      confirmations: 1,
      finalityDepth: 64,
      // No timer passes: heads are pushed by hand, as the indexer would, and each is followed by a confirm pass.
      pollIntervalMs: 600_000,
      maxLogRange: 2_000,
      replaceAfterBlocks: 1,
      gasMarginBps: 2_000,
      l1DataFee: 'auto',
      l1DataFeeMarginBps: 10_000,
      appBalanceDeposits: false,
      maxCallGas: 1_000_000,
      depositEnabled: true,
      private: false,
      nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
      currencies: [],
      maxFeePerGas: CAP.toString(),
      ...chain,
    },
    ledger,
    publicClient: client,
    account: solver,
    allocator: privateKeyToAccount(ALLOCATOR_KEY),
    hooks,
    metrics,
    log,
    faults,
  });
  running.push(sub);
  return { sub, rec, metrics };
}

function queueFill(ledger: Ledger, kind: 'fill' | 'refund' = 'fill'): { id: string; orderId: Hex; recipient: Address } {
  const orderId = toHex(randomBytes(32));
  const recipient = privateKeyToAccount(generatePrivateKey()).address;
  ledger.requests.insert({
    id: orderId,
    parent_id: null,
    kind: 'order',
    request_type: 'bridge',
    status: 'pending',
    user: recipient,
    recipient: null,
    refund_to: recipient,
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
  const id = `${kind}:${orderId}`;
  ledger.payouts.insert({
    id,
    kind,
    request_id: orderId,
    deposit_id: null,
    chain_id: CHAIN_ID,
    recipient,
    currency: zeroAddress,
    amount: parseEther('0.01').toString(),
    decided_at: Date.now(),
  });
  return { id, orderId, recipient };
}

// Polls a condition, bounded; never a bare sleep.
async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function counterValue(metric: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> }, labels: Record<string, string>) {
  const { values } = await metric.get();
  return values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;
}

const filled = (orderId: Hex) => client.readContract({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'filled', args: [orderId] });
const fillEvents = (orderId: Hex) => client.getLogs({ address: contracts.filler, event: orderFilled, args: { orderId }, fromBlock: 0n, toBlock: 'latest' });

// Mines one block at `baseFee`, tells the payouts its head and runs a confirm pass, as the head tracker does.
async function mineAt(sub: EvmPayouts, baseFee: bigint): Promise<void> {
  await testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: baseFee });
  await testClient.mine({ blocks: 1 });
  const block = await client.getBlock({ blockTag: 'latest' });
  sub.onHead({ number: block.number, baseFeePerGas: block.baseFeePerGas ?? 0n });
  await sub.confirmNow();
}

/**
 * The capped fill and the fill behind it: a first fill sent under the cap at a max fee whose minimum
 * replacement bump is above the cap; the base fee rises between that max fee and the cap (the first
 * fill is stuck, its replacement capped); a second fill, priced at the cap, signed at the next nonce.
 */
async function cappedFillWithOneBehind(ledger: Ledger, sub: EvmPayouts, firstKind: 'fill' | 'refund' = 'fill') {
  await sub.start();
  await testClient.setAutomine(false);
  // The first fill's max fee is 2 x base fee + tip: 19 gwei, under the cap, less than a bump below it.
  const tip = hexToBigInt((await client.request({ method: 'eth_maxPriorityFeePerGas' })) as Hex);
  await mineAt(sub, (19n * GWEI - tip) / 2n);
  const p1 = queueFill(ledger, firstKind);
  sub.wake();
  const txs = (id: string) => ledger.payouts.txsOf(id);
  await waitFor(() => txs(p1.id)[0]?.state === 'broadcast', 'the first fill broadcast');
  const first: TransactionRow = txs(p1.id)[0]!;
  expect(BigInt(first.max_fee_per_gas) <= CAP).toBe(true);
  expect(bumped(BigInt(first.max_fee_per_gas)) > CAP).toBe(true);
  expect(BigInt(first.max_fee_per_gas) < STUCK_BASE_FEE).toBe(true);
  // The base fee rises above what the first fill offers, still under the cap.
  await mineAt(sub, STUCK_BASE_FEE);
  const p2 = queueFill(ledger);
  sub.wake();
  await waitFor(() => txs(p2.id)[0]?.state === 'broadcast', 'the second fill broadcast');
  const second = txs(p2.id)[0]!;
  expect(second.nonce).toBe(first.nonce + 1);
  expect(BigInt(second.max_fee_per_gas)).toBe(CAP);
  return { p1, p2, first, second, txs };
}

it("feeCapPolicy 'wait' (the default) holds the capped fill at its nonce, and the fill behind it with it, until the base fee falls", async () => {
  const ledger = Ledger.open(':memory:');
  const { sub, rec, metrics } = makePayouts(ledger, {});
  const { p1, p2, first, second, txs } = await cappedFillWithOneBehind(ledger, sub);
  for (let i = 0; i < 6; i++) await mineAt(sub, STUCK_BASE_FEE);
  expect(await counterValue(metrics.feeCapWaits, { chain: String(CHAIN_ID), stage: 'replace' })).toBeGreaterThan(0);
  expect(txs(p1.id).map((t) => [t.hash, t.state])).toEqual([[first.hash, 'broadcast']]);
  expect(ledger.payouts.get(p2.id)!.state).toBe('sent');
  expect(await filled(p2.orderId)).toBe(false);
  // The base fee falls: both land, each once, at their own nonce.
  await mineAt(sub, 5n * GWEI);
  await waitFor(() => ledger.payouts.get(p1.id)!.state === 'success' && ledger.payouts.get(p2.id)!.state === 'success', 'both fills paid');
  expect(ledger.payouts.get(p1.id)!.tx_hash).toBe(first.hash);
  expect(ledger.payouts.get(p2.id)!.tx_hash).toBe(second.hash);
  expect(rec.paid.map((p) => p.payout).sort()).toEqual([p1.id, p2.id].sort());
});

it("feeCapPolicy 'cancel' replaces the capped fill with a cancel at its nonce: the fill behind it goes out, the capped payout is queued again and paid once", async () => {
  const ledger = Ledger.open(':memory:');
  const { sub, rec } = makePayouts(ledger, { feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 2 });
  const { p1, p2, first, second, txs } = await cappedFillWithOneBehind(ledger, sub);
  // Blocks at the stuck base fee until the cancel is sent; today the fill behind the capped one never goes out.
  for (let i = 0; i < 6 && ledger.payouts.get(p2.id)!.state !== 'success'; i++) await mineAt(sub, STUCK_BASE_FEE);
  await waitFor(() => ledger.payouts.get(p2.id)!.state === 'success', 'the fill behind the capped one paid', 5_000);
  expect(ledger.payouts.get(p2.id)!.tx_hash).toBe(second.hash);
  // The cancel took the first fill's nonce: the first payout goes out again at a new nonce and is paid.
  for (let i = 0; i < 6 && ledger.payouts.get(p1.id)!.state !== 'success'; i++) {
    await waitFor(
      () => txs(p1.id).some((t) => t.nonce > second.nonce && t.state === 'broadcast') || ledger.payouts.get(p1.id)!.state === 'success',
      'the first fill resent',
    );
    await mineAt(sub, STUCK_BASE_FEE);
  }
  await waitFor(() => ledger.payouts.get(p1.id)!.state === 'success', 'the first fill paid at a new nonce', 5_000);
  const rows = txs(p1.id);
  const cancel = rows.find((t) => t.cancel === 1)!;
  expect(rows.map((t) => [t.hash, t.nonce, t.state, t.cancel])).toEqual([
    [first.hash, first.nonce, 'replaced', 0],
    [cancel.hash, first.nonce, 'included', 1],
    [ledger.payouts.get(p1.id)!.tx_hash, expect.any(Number), 'included', 0],
  ]);
  expect(rows[2]!.nonce).toBeGreaterThan(second.nonce);
  // The cancel: a zero-value transfer to the solver itself, its fee booked as spent, within the cancel's cap.
  const tx = await client.getTransaction({ hash: cancel.hash });
  expect(tx.to?.toLowerCase()).toBe(solver.address.toLowerCase());
  expect(tx.value).toBe(0n);
  expect(tx.gas).toBe(21_000n);
  expect(tx.maxFeePerGas! <= bumped(CAP)).toBe(true);
  const receipt = await client.getTransactionReceipt({ hash: cancel.hash });
  expect(cancel.fee).toBe((receipt.gasUsed * receipt.effectiveGasPrice).toString());
  // Each order paid exactly once, on chain and in the ledger.
  expect(await filled(p1.orderId)).toBe(true);
  expect(await filled(p2.orderId)).toBe(true);
  expect(await fillEvents(p1.orderId)).toHaveLength(1);
  expect(await fillEvents(p2.orderId)).toHaveLength(1);
  expect(rec.paid.filter((p) => p.payout === p1.id)).toHaveLength(1);
  expect(rec.paid.filter((p) => p.payout === p2.id)).toHaveLength(1);
  expect(rec.paid.find((p) => p.payout === p1.id)!.hash).not.toBe(cancel.hash);
});

it('the original fill landing instead of its cancel pays the payout once, and it is not queued again', async () => {
  const ledger = Ledger.open(':memory:');
  const { sub, rec } = makePayouts(ledger, { feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 2 });
  const { p1, p2, first, txs } = await cappedFillWithOneBehind(ledger, sub);
  for (let i = 0; i < 6 && !txs(p1.id).some((t) => t.cancel === 1 && t.state === 'broadcast'); i++) await mineAt(sub, STUCK_BASE_FEE);
  const cancel = txs(p1.id).find((t) => t.cancel === 1);
  expect(cancel?.state).toBe('broadcast');
  // The original reaches a block first (another node's mempool still held it): the cancel never lands.
  await client.request({ method: 'anvil_dropTransaction' as never, params: [cancel!.hash] as never });
  await client.sendRawTransaction({ serializedTransaction: ledger.payouts.rawOf(first.hash) });
  // (Dropping the cancel drops the fill behind it from anvil's pool too: the node rebroadcasts it.)
  for (let i = 0; i < 6 && ledger.payouts.get(p2.id)!.state !== 'success'; i++) await mineAt(sub, 5n * GWEI);
  await waitFor(() => ledger.payouts.get(p1.id)!.state === 'success' && ledger.payouts.get(p2.id)!.state === 'success', 'both fills paid');
  expect(ledger.payouts.get(p1.id)!.tx_hash).toBe(first.hash);
  expect(txs(p1.id).map((t) => [t.hash, t.state])).toEqual([
    [first.hash, 'included'],
    [cancel!.hash, 'replaced'],
  ]);
  // More blocks: nothing more is sent for the first payout.
  await mineAt(sub, 5n * GWEI);
  await mineAt(sub, 5n * GWEI);
  expect(txs(p1.id)).toHaveLength(2);
  expect(await fillEvents(p1.orderId)).toHaveLength(1);
  expect(rec.paid.filter((p) => p.payout === p1.id)).toEqual([{ payout: p1.id, hash: first.hash }]);
});

it('a crash between recording the cancel and broadcasting it: the restarted node sends the recorded cancel and pays the payout once', async () => {
  const ledger = Ledger.open(':memory:');
  const kill = vi.spyOn(process, 'kill').mockImplementation(() => {
    throw new Error('simulated crash after the cancel was recorded');
  });
  let p1: { id: string; orderId: Hex };
  let p2: { id: string; orderId: Hex };
  let first: TransactionRow;
  try {
    const crashing = makePayouts(ledger, { feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 2 }, { crashAfterCancelRecorded: true } as Faults);
    ({ p1, p2, first } = await cappedFillWithOneBehind(ledger, crashing.sub));
    for (let i = 0; i < 6 && kill.mock.calls.length === 0; i++) await mineAt(crashing.sub, STUCK_BASE_FEE);
    expect(kill).toHaveBeenCalled();
    await crashing.sub.stop();
    running.splice(running.indexOf(crashing.sub), 1);
  } finally {
    kill.mockRestore();
  }
  const cancel = ledger.payouts.txsOf(p1.id).find((t) => t.cancel === 1)!;
  expect(cancel.state).toBe('signed');
  expect(ledger.payouts.get(p1.id)!.state).toBe('sent');

  const { sub, rec } = makePayouts(ledger, { feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 2 });
  await sub.start();
  for (let i = 0; i < 8 && ledger.payouts.get(p1.id)!.state !== 'success'; i++) {
    await mineAt(sub, STUCK_BASE_FEE);
    await waitFor(
      () => ledger.payouts.txsOf(p1.id).every((t) => t.state !== 'signed') || ledger.payouts.get(p1.id)!.state === 'success',
      'nothing of the first payout left unbroadcast',
    );
  }
  await waitFor(() => ledger.payouts.get(p1.id)!.state === 'success' && ledger.payouts.get(p2.id)!.state === 'success', 'both fills paid', 5_000);
  const rows = ledger.payouts.txsOf(p1.id);
  expect(rows.find((t) => t.hash === cancel.hash)!.state).toBe('included');
  expect(rows.find((t) => t.hash === first.hash)!.state).toBe('replaced');
  expect(await fillEvents(p1.orderId)).toHaveLength(1);
  expect(await fillEvents(p2.orderId)).toHaveLength(1);
  expect(rec.paid.filter((p) => p.payout === p1.id)).toHaveLength(1);
});

it('a cancelled refund is never reported paid by its cancel: it goes back to the queue and is made once, at a new nonce', async () => {
  const ledger = Ledger.open(':memory:');
  const { sub, rec } = makePayouts(ledger, { feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 2 });
  const { p1, p2, first, second, txs } = await cappedFillWithOneBehind(ledger, sub, 'refund');
  for (let i = 0; i < 10 && ledger.payouts.get(p1.id)!.state !== 'success'; i++) {
    await mineAt(sub, STUCK_BASE_FEE);
    await waitFor(
      () => txs(p1.id).every((t) => t.state !== 'signed') && !ledger.payouts.queued(CHAIN_ID).some((p) => p.id === p1.id),
      'nothing of the refund unsent',
    );
  }
  await waitFor(() => ledger.payouts.get(p1.id)!.state === 'success' && ledger.payouts.get(p2.id)!.state === 'success', 'the refund and the fill paid', 5_000);
  const rows = txs(p1.id);
  const cancel = rows.find((t) => t.cancel === 1)!;
  expect(rows.map((t) => [t.hash, t.state, t.cancel])).toEqual([
    [first.hash, 'replaced', 0],
    [cancel.hash, 'included', 1],
    [ledger.payouts.get(p1.id)!.tx_hash, 'included', 0],
  ]);
  expect(rows[2]!.nonce).toBeGreaterThan(second.nonce);
  expect(rec.paid.filter((p) => p.payout === p1.id)).toEqual([{ payout: p1.id, hash: rows[2]!.hash }]);
  expect(await client.getBalance({ address: p1.recipient })).toBe(parseEther('0.01'));
});

it('a restart while the cancel is pending: the new node confirms the cancel like any transaction of that nonce and pays the payout once', async () => {
  const ledger = Ledger.open(':memory:');
  const before = makePayouts(ledger, { feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 2 });
  const { p1, p2, first, txs } = await cappedFillWithOneBehind(ledger, before.sub);
  for (let i = 0; i < 6 && !txs(p1.id).some((t) => t.cancel === 1 && t.state === 'broadcast'); i++) await mineAt(before.sub, STUCK_BASE_FEE);
  const cancel = txs(p1.id).find((t) => t.cancel === 1)!;
  expect(cancel.state).toBe('broadcast');
  await before.sub.stop();
  running.splice(running.indexOf(before.sub), 1);

  const { sub, rec } = makePayouts(ledger, { feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 2 });
  await sub.start();
  for (let i = 0; i < 8 && ledger.payouts.get(p1.id)!.state !== 'success'; i++) {
    await mineAt(sub, STUCK_BASE_FEE);
    await waitFor(
      () => (txs(p1.id).every((t) => t.state !== 'signed') && ledger.payouts.get(p1.id)!.state !== 'queued') || ledger.payouts.get(p1.id)!.state === 'success',
      'nothing of the first payout unsent',
    );
  }
  await waitFor(() => ledger.payouts.get(p1.id)!.state === 'success' && ledger.payouts.get(p2.id)!.state === 'success', 'both fills paid', 5_000);
  const rows = txs(p1.id);
  expect(rows.map((t) => [t.hash, t.state])).toEqual([
    [first.hash, 'replaced'],
    [cancel.hash, 'included'],
    [ledger.payouts.get(p1.id)!.tx_hash, 'included'],
  ]);
  expect(await fillEvents(p1.orderId)).toHaveLength(1);
  expect(rec.paid.filter((p) => p.payout === p1.id)).toHaveLength(1);
});
