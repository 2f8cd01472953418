// Active/standby (config.ha) for the payouts that are not EVM transactions: a fill to the SVM chain
// (792703809) and a fill on the perpetuals exchange (1337). Two `relay-node start` processes on one
// PostgreSQL ledger; the leader is killed (-9) right after recording the fill and before sending it;
// the standby takes the lease (epoch + 1), reconciles what the old leader recorded (the SVM signature
// and its blockhash; the exchange's nonce) and pays the order once, read from the chain and from the
// exchange's own ledger: the recorded transaction / action is the one that lands, never a second one.
// When the recorded SVM blockhash expired before anyone took over, the new leader signs the fill again,
// and the recorded signature never lands: still one transfer.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection, Keypair, PublicKey } from '@solana/web3.js';
import { createWalletClient, createPublicClient, http, keccak256, zeroAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SVM_NATIVE } from '../src/chains/address.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet, type Devnet } from '../src/devnet/devnet.ts';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';
import { Ledger } from '../src/ledger/index.ts';
import { killAllNodeProcesses, startNodeProcess, stopNodeProcess, type NodeProcess } from './helpers/nodeProcess.ts';
import { haEnv, nodeRole, untilRole, writeHaConfig } from './helpers/haNodes.ts';
import { api, until, waitForStatus } from './helpers/stack.ts';

const LEASE_MS = 3_000;
const RENEW_MS = 500;
const BASE = 8453;
const SVM = 792703809;
const EX = 1337;
const PERPS = `0x${'0'.repeat(32)}`;

let dir: string;
// One PostgreSQL server for the file (stopped after it), a database of its own per test.
let postgres: Promise<PostgresHandle> | undefined;

// The ledger of one test: its database, read by the test with its own (read-only) connection.
const openLedger = (url: string) => Ledger.connect({ path: join(dir, 'unused.sqlite'), url }, { readonly: true });
function lease(url: string) {
  const l = openLedger(url);
  try {
    return l.leases.current();
  } finally {
    l.close();
  }
}
// The fill payout of a request and its recorded transactions with their signed bytes (what a node wrote before sending).
function recordedFill(url: string, requestId: string) {
  const l = openLedger(url);
  try {
    const p = l.payouts.forRequest(requestId).find((x) => x.kind === 'fill');
    return p && { payout: p, txs: l.payouts.txsOf(p.id).map((t) => ({ ...t, raw: l.payouts.rawOf(t.hash) })) };
  } finally {
    l.close();
  }
}
// The one transaction the killed leader `a` recorded for the request's fill, under its epoch, before it died
// (SIGKILL at the fault) without sending it.
async function recordedByKilledLeader(a: NodeProcess, url: string, requestId: string, fill: { epoch: number; chain_id: number; amount?: string }) {
  expect(await a.exited).toBe('SIGKILL');
  const recorded = recordedFill(url, requestId)!;
  expect(recorded.payout).toMatchObject({ state: 'sent', ...fill });
  expect(recorded.txs.map((t) => t.state)).toEqual(['signed']);
  return recorded.txs[0]!;
}

// A quote of 0.1 ETH on Base to SOL for `recipient`.
function ethToSol(recipient: PublicKey) {
  return {
    recipient: recipient.toBase58(),
    originChainId: BASE,
    destinationChainId: SVM,
    originCurrency: zeroAddress,
    destinationCurrency: SVM_NATIVE,
    amount: '100000000000000000',
  };
}
// A node on the test's ledger: `a` leads with the crash fault; `b` (started while a leads, or once a is dead)
// is the standby that takes over.
function nodeOn(devnet: Devnet, ledgerUrl: string, nodeId: string, fault?: string): Promise<NodeProcess> {
  const config = writeHaConfig(devnet, join(dir, `config-${nodeId}.json`), {
    nodeId,
    dataDir: join(dir, nodeId, 'data'),
    leaseMs: LEASE_MS,
    renewMs: RENEW_MS,
    ledger: { url: ledgerUrl },
  });
  return startNodeProcess(config, haEnv(devnet), fault ? { fault } : {});
}
async function leaderAndStandby(devnet: Devnet, ledgerUrl: string, name: string): Promise<{ a: NodeProcess; b: NodeProcess; epochA: number }> {
  const a = await nodeOn(devnet, ledgerUrl, `${name}-a`, 'crash-after-fill-recorded');
  await untilRole(a, 'leader', `${name}-a to lead`);
  const epochA = lease(ledgerUrl).epoch;
  const b = await nodeOn(devnet, ledgerUrl, `${name}-b`);
  expect(await nodeRole(b)).toBe('standby');
  return { a, b, epochA };
}

// A quote at a standby's API (it serves quotes: its own writes, not fenced), and the user's transactions
// on the devnet's EVM chains for its steps (an approval, then the deposit).
async function quoteAndDeposit(devnet: Devnet, url: string, account: number, body: Record<string, unknown>) {
  const q = await api(url, '/quote/v2', { body: { user: devnet.accounts[account]!.address, tradeType: 'EXACT_INPUT', ...body } });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  for (const step of q.body.steps)
    for (const item of step.items) {
      const d = item.data;
      const c = devnet.chains.find((x) => x.id === d.chainId)!;
      const chain = devnetChain(d.chainId, c.rpcUrl);
      const wallet = createWalletClient({ account: privateKeyToAccount(devnet.accounts[account]!.privateKey), chain, transport: http(c.rpcUrl) });
      const hash = await wallet.sendTransaction({ to: d.to, data: d.data, value: BigInt(d.value) });
      await createPublicClient({ chain, transport: http(c.rpcUrl) }).waitForTransactionReceipt({ hash });
    }
  return { requestId: q.body.steps.at(-1).requestId as Hex, out: BigInt(q.body.details.currencyOut.amount) };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'relay-node-failover-kinds-'));
});
afterAll(async () => {
  killAllNodeProcesses();
  await (await postgres)?.stop();
});

describe('active/standby on PostgreSQL: kill -9 of the leader between recording and sending a fill', () => {
  let devnet: Devnet | undefined;
  afterAll(async () => {
    killAllNodeProcesses();
    await devnet?.stop();
  });
  // Each test on chains of its own: a fresh ledger on a devnet another test used would index that test's deposits.
  const setup = async (name: string, opts: { svm?: boolean; exchange?: boolean; svmSlotIntervalMs?: number }) => {
    await devnet?.stop();
    devnet = undefined;
    devnet = await startDevnet({ dataDir: join(dir, name), ...opts });
    return { devnet, ledgerUrl: await (await (postgres ??= startPostgres({ durable: false }))).createDatabase() };
  };

  it('SVM (ETH on 8453 to SOL): the standby sends the signature the old leader recorded; one transfer, paid once', async () => {
    const { devnet, ledgerUrl } = await setup('svm', { svm: true, exchange: false });
    const conn = new Connection(devnet.svm!.rpcUrl, 'confirmed');
    const { a, b, epochA } = await leaderAndStandby(devnet, ledgerUrl, 'svm');
    // A fresh account: whatever it holds afterwards came from this order's fill.
    const recipient = Keypair.generate().publicKey;
    const { requestId, out } = await quoteAndDeposit(devnet, b.url, 1, ethToSol(recipient));
    expect(out).toBeGreaterThan(0n);

    // a recorded the fill (signed, its blockhash's last valid height as the nonce) and died before sending it.
    const recorded = await recordedByKilledLeader(a, ledgerUrl, requestId, { epoch: epochA, chain_id: SVM, amount: out.toString() });
    const signature = recorded.hash;
    expect(await conn.getSignatureStatus(signature, { searchTransactionHistory: true })).toMatchObject({ value: null });
    expect(await conn.getBalance(recipient, 'confirmed')).toBe(0);

    await untilRole(b, 'leader', 'svm-b to take over');
    expect(lease(ledgerUrl)).toMatchObject({ holder: 'svm-b', epoch: epochA + 1 });
    // The recorded blockhash is still valid when b leads (150 slots of 200 ms; the takeover takes a lease's length).
    const heightAtTakeover = (await conn.getEpochInfo('confirmed')).blockHeight!;
    const done = await waitForStatus(b.url, requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status, JSON.stringify(done)).toBe('success');

    // Read from the chain: the recipient got the amount once, by one transaction, the one a recorded.
    expect(BigInt(await conn.getBalance(recipient, 'confirmed'))).toBe(out);
    const toRecipient = await conn.getSignaturesForAddress(recipient, undefined, 'confirmed');
    expect(toRecipient.map((s) => s.signature)).toEqual([signature]);
    expect(toRecipient[0]!.err).toBeNull();
    expect(heightAtTakeover).toBeLessThanOrEqual(recorded.nonce);
    expect(done.txHashes).toEqual([signature]);
    // The solver sent one transaction carrying this order's memo.
    const solverSigs = await conn.getSignaturesForAddress(new PublicKey(devnet.svm!.solver), { limit: 1000 }, 'confirmed');
    const withMemo: string[] = [];
    for (const s of solverSigs) {
      const tx = await conn.getTransaction(s.signature, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
      if (tx?.meta?.logMessages?.join('\n').includes(requestId)) withMemo.push(s.signature);
    }
    expect(withMemo).toEqual([signature]);
    expect(recordedFill(ledgerUrl, requestId)!.txs.map((t) => [t.hash, t.state])).toEqual([[signature, 'included']]);
    await stopNodeProcess(b);
  }, 180_000);

  it('exchange (USDC on 8453 to perps USD): the standby posts the action the old leader recorded, once (same nonce)', async () => {
    const { devnet, ledgerUrl } = await setup('exchange', { exchange: true });
    const state = devnet.exchange!.standin.state;
    const { a, b, epochA } = await leaderAndStandby(devnet, ledgerUrl, 'ex');
    const recipient = devnet.accounts[2]!.address;
    const before = state.perpsUsd(recipient);
    const { requestId, out } = await quoteAndDeposit(devnet, b.url, 1, {
      recipient,
      originChainId: BASE,
      destinationChainId: EX,
      originCurrency: devnet.chains.find((c) => c.id === BASE)!.contracts.stablecoin,
      destinationCurrency: PERPS,
      amount: '5000000',
    });
    expect(out).toBeGreaterThan(0n);

    // a signed and recorded the sendAsset (its id the keccak of the signed body, the action's nonce) and died
    // before posting it: the exchange never saw it.
    const tx = await recordedByKilledLeader(a, ledgerUrl, requestId, { epoch: epochA, chain_id: EX, amount: out.toString() });
    expect(keccak256(tx.raw)).toBe(tx.hash);
    expect(state.isNonceUsed(devnet.solver, tx.nonce)).toBe(false);
    expect(state.perpsUsd(recipient)).toBe(before);

    await untilRole(b, 'leader', 'ex-b to take over');
    expect(lease(ledgerUrl)).toMatchObject({ holder: 'ex-b', epoch: epochA + 1 });
    const done = await waitForStatus(b.url, requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status, JSON.stringify(done)).toBe('success');

    // Read from the exchange's own ledger: one send from the solver to the recipient, at the recorded nonce.
    expect(state.perpsUsd(recipient) - before).toBe(out);
    const sends = state.ledger(devnet.solver).filter((u) => u.delta.type === 'send' && u.delta.user === devnet.solver);
    expect(sends.map((u) => u.delta.nonce)).toEqual([tx.nonce]);
    expect(sends[0]!.delta).toMatchObject({ destination: recipient });
    expect(state.ledger(recipient).filter((u) => u.delta.type === 'send')).toHaveLength(1);
    expect(done.txHashes).toEqual([tx.hash]);
    expect(recordedFill(ledgerUrl, requestId)!.txs.map((t) => [t.hash, t.state])).toEqual([[tx.hash, 'included']]);
    await stopNodeProcess(b);
  }, 180_000);

  it('SVM, the recorded blockhash expired before anyone took over: the new leader signs again, and the recorded signature never lands (one transfer)', async () => {
    // Short slots: the recorded blockhash (150 blocks, then 32 to be finalized) expires in about 9 s.
    const { devnet, ledgerUrl } = await setup('svm-expired', { svm: true, exchange: false, svmSlotIntervalMs: 50 });
    const conn = new Connection(devnet.svm!.rpcUrl, 'confirmed');
    const a = await nodeOn(devnet, ledgerUrl, 'svx-a', 'crash-after-fill-recorded');
    await untilRole(a, 'leader', 'svx-a to lead');
    const epochA = lease(ledgerUrl).epoch;
    const recipient = Keypair.generate().publicKey;
    const { requestId, out } = await quoteAndDeposit(devnet, a.url, 1, ethToSol(recipient));
    const old = await recordedByKilledLeader(a, ledgerUrl, requestId, { epoch: epochA, chain_id: SVM });
    // No node runs until the recorded blockhash has expired at the finalized height.
    await until(async () => ((await conn.getEpochInfo('finalized')).blockHeight! > old.nonce ? true : undefined), 'the recorded blockhash to expire', 60_000);

    const b = await nodeOn(devnet, ledgerUrl, 'svx-b');
    await untilRole(b, 'leader', 'svx-b to lead');
    expect(lease(ledgerUrl)).toMatchObject({ holder: 'svx-b', epoch: epochA + 1 });
    const done = await waitForStatus(b.url, requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status, JSON.stringify(done)).toBe('success');

    // One transfer, by a new signature; the recorded one is dropped in the ledger and absent from the chain.
    expect(BigInt(await conn.getBalance(recipient, 'confirmed'))).toBe(out);
    const toRecipient = await conn.getSignaturesForAddress(recipient, undefined, 'confirmed');
    expect(toRecipient).toHaveLength(1);
    expect(toRecipient[0]!.signature).not.toBe(old.hash);
    expect(done.txHashes).toEqual([toRecipient[0]!.signature]);
    expect((await conn.getSignatureStatus(old.hash, { searchTransactionHistory: true })).value).toBeNull();
    const txs = recordedFill(ledgerUrl, requestId)!.txs;
    expect(Object.fromEntries(txs.map((t) => [t.hash, t.state]))).toEqual({ [old.hash]: 'dropped', [toRecipient[0]!.signature]: 'included' });
    // The payout keeps the epoch it was decided under (a's); only its transaction was signed again.
    expect(recordedFill(ledgerUrl, requestId)!.payout).toMatchObject({ state: 'success', epoch: epochA });
    await stopNodeProcess(b);
  }, 180_000);
});
