// Adversarial review: a sponsored relay waiting unsigned at its own fee cap has a deadline.
//
// A sponsored relay (POST /execute rawCalls) is never signed above the fee cap its sponsor's hold was computed at
// (payouts.max_fee_per_gas, review-relay-feecap.test.ts): while the market asks more it waits unsigned. It waited for
// ever: the sponsor's hold stayed (the app's balance locked), the caller's request stayed pending, and when the base fee
// came back hours later the relay was sent, though the caller (and the call's own logic: prices, deadlines) had long
// moved on. A hostile or unlucky app could pile such relays up, each holding its sponsor's balance.
//
// Fixed: a relay not signed within its chain's relayMaxWaitMs of its admission fails (TTL_EXPIRED) through the failed
// relay path: its hold released, nothing charged (it was never sent), a status event. One signed before its deadline is
// not failed by it (its own cap's cancel owns it, review-relay-stuck.test.ts). The deadline is read from the ledger
// (the payout's decided_at): a node restarted past it fails the relay alike.
//
// Real devnet (anvil, chain 8453), blocks mined at chosen base fees; chain 8453's relays wait at most WAIT_MS.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address, Hex } from 'viem';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { sponsorHeld } from '../../src/solver/appBalanceBooks.ts';
import { DEFAULT_RELAY_MAX_WAIT_MS } from '../../src/chains/evm/relayTerms.ts';
import { usdMicroCeil } from '../../src/lib/money.ts';
import { fundedSponsor } from '../helpers/appBalance.ts';
import { admitHeldRelay } from '../helpers/relays.ts';
import { startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { mineAtBaseFee } from '../helpers/baseFee.ts';
import { configSchema } from '../../src/config/schema.ts';
import { MINIMAL_CHAIN, MINIMAL_CONFIG } from '../helpers/minimalConfig.ts';

const A = 8453;
const GWEI = 1_000_000_000n;
// Chain A's relayMaxWaitMs: long enough for a relay let go right after its admission to be signed (or to wait on its
// cap) well within it, short enough for the test.
const WAIT_MS = 5_000;
// The deadline and then the pipeline's backoff of a payout waiting on its cap (at most 30 s), with room to spare.
const FAIL_WITHIN_MS = WAIT_MS + 45_000;
let s: Stack;
const rpcUrl = () => s.devnet.chains.find((c) => c.id === A)!.rpcUrl;

beforeAll(async () => {
  s = await startStack({ chain: (c) => (c.id === A ? { ...c, relayMaxWaitMs: WAIT_MS } : c) });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const mineAt = (baseFee: bigint) => mineAtBaseFee(s, A, baseFee);

async function feeCapWaits(): Promise<number> {
  const { values } = await s.node.metrics.feeCapWaits.get();
  return values.find((v) => v.labels.chain === String(A) && v.labels.stage === 'send')?.value ?? 0;
}

const sponsor = (account: number) => fundedSponsor(s, account, 'relay deadline');

// Admits a relay of a plain call to a fresh wallet at a base fee of 1 gwei while the submitter holds it back.
async function admitLowFeeRelay(key: { key: string }) {
  await mineAt(GWEI);
  return admitHeldRelay(s, A, key);
}

// Admits a relay, raises the base fee to 20 times its cap, lets it go and waits until it waits unsigned on its cap.
async function relayWaitingAtItsCap(key: { key: string }) {
  const r = await admitLowFeeRelay(key);
  const before = await feeCapWaits();
  try {
    await mineAt(20n * r.cap);
  } finally {
    r.release();
  }
  await until(async () => ((await feeCapWaits()) > before ? true : undefined), 'the relay waiting on its fee cap');
  expect(s.node.ledger.payouts.get(r.payoutId)!.state).toBe('queued');
  expect(s.node.ledger.payouts.txsOf(r.payoutId)).toEqual([]);
  expect(sponsorHeld(s.node.ledger, r.requestId)).toBeGreaterThan(0n);
  return r;
}

// The relay failed at its deadline and nothing else: never sent, its hold released, nothing charged, a status event.
function expectExpired(requestId: Hex, payoutId: string, wallet: Address) {
  const payout = s.node.ledger.payouts.get(payoutId)!;
  expect(payout).toMatchObject({ state: 'failed', fail_reason: 'TTL_EXPIRED', tx_hash: null });
  expect(s.node.ledger.payouts.txsOf(payoutId)).toEqual([]);
  expect(s.node.ledger.requests.get(requestId)).toMatchObject({ status: 'failure', fail_reason: 'TTL_EXPIRED' });
  expect(sponsorHeld(s.node.ledger, requestId)).toBe(0n);
  expect(s.node.ledger.balances.get(`sponsorship:${requestId}`)).toBeUndefined();
  expect(s.node.ledger.balances.summary(wallet)).toEqual({ balance: 1_000_000n, held: 0n, available: 1_000_000n });
  // Its status event: the failure, decided no earlier than the deadline (both times are the node's clock).
  const failed = s.node.ledger.events.forRequest(requestId).filter((e) => e.status === 'failure');
  expect(failed).toHaveLength(1);
  expect(failed[0]!.created_at).toBeGreaterThanOrEqual(payout.decided_at + WAIT_MS);
}

describe('a sponsored relay waiting unsigned at its own fee cap', () => {
  it('fails at its deadline while the base fee stays above its cap: its hold released, nothing charged, never sent after', async () => {
    const { key, wallet } = await sponsor(3);
    const { requestId, payoutId } = await relayWaitingAtItsCap(key);
    // Before: still waiting (pending, the hold kept) when this ran out, for as long as the base fee stayed high.
    const status = await waitForStatus(s.url, requestId, ['success', 'failure'], FAIL_WITHIN_MS);
    expect(status.status).toBe('failure');
    expect(status.failReason).toBe('TTL_EXPIRED');
    expectExpired(requestId, payoutId, wallet);
    // The base fee falls back within the relay's cap: it is not sent any more.
    await mineAt(GWEI);
    s.node.adapters.get(A)!.payoutsQueued();
    await mineAt(GWEI);
    expect(s.node.ledger.payouts.txsOf(payoutId)).toEqual([]);
    expect(s.node.ledger.payouts.get(payoutId)!.state).toBe('failed');
  }, 120_000);

  it('whose deadline passes while the node is down fails when it is back (the deadline is the ledger’s)', async () => {
    const { key, wallet } = await sponsor(4);
    const { requestId, payoutId } = await relayWaitingAtItsCap(key);
    const deadline = s.node.ledger.payouts.get(payoutId)!.decided_at + WAIT_MS;
    await s.restartNode(undefined, async () => {
      await until(() => (Date.now() > deadline ? true : undefined), 'the relay’s deadline', WAIT_MS + 5_000);
    });
    const status = await waitForStatus(s.url, requestId, ['success', 'failure'], FAIL_WITHIN_MS);
    expect(status.failReason).toBe('TTL_EXPIRED');
    expectExpired(requestId, payoutId, wallet);
    await mineAt(GWEI);
  }, 120_000);

  it('queued again once its transaction could not land (its nonce taken by another) fails at its deadline too', async () => {
    const { key, wallet } = await sponsor(1);
    const { requestId, payoutId, release } = await admitLowFeeRelay(key);
    // As the sender leaves a payout whose every transaction can no longer land: the row dropped, the payout queued.
    const hash = `0x${'ab'.repeat(32)}` as Hex;
    s.node.ledger.tx(() => {
      s.node.ledger.payouts.insertTx({
        hash,
        payout_id: payoutId,
        chain_id: A,
        sender: '0x000000000000000000000000000000000000dEaD',
        nonce: 1_000_000,
        gas_limit: '21000',
        max_fee_per_gas: '1',
        max_priority_fee_per_gas: '1',
        created_at: Date.now(),
        raw: '0x00',
      });
      s.node.ledger.payouts.setTxState(hash, 'dropped', { error: 'its nonce was taken by another transaction' });
    });
    const before = await feeCapWaits();
    try {
      await mineAt(20n * (await s.node.chains.costs(A)!.feePerGas!()));
    } finally {
      release();
    }
    await until(async () => ((await feeCapWaits()) > before ? true : undefined), 'the relay waiting on its fee cap');
    // Before: a relay with a transaction on record was never failed by its deadline, however long it waited unsigned.
    const status = await waitForStatus(s.url, requestId, ['success', 'failure'], FAIL_WITHIN_MS);
    expect(status).toMatchObject({ status: 'failure', failReason: 'TTL_EXPIRED' });
    expect(s.node.ledger.payouts.txsOf(payoutId).map((t) => t.state)).toEqual(['dropped']);
    expect(sponsorHeld(s.node.ledger, requestId)).toBe(0n);
    expect(s.node.ledger.balances.summary(wallet)).toEqual({ balance: 1_000_000n, held: 0n, available: 1_000_000n });
    await mineAt(GWEI);
  }, 120_000);

  it('signed and broadcast before its deadline is not failed by it: it lands once the base fee falls, charged its own gas once', async () => {
    const { key, wallet } = await sponsor(2);
    const { requestId, payoutId, cap, release } = await admitLowFeeRelay(key);
    const txs = () => s.node.ledger.payouts.txsOf(payoutId);
    const payouts = s.node.ledger.payouts;
    const deadline = payouts.get(payoutId)!.decided_at + WAIT_MS;
    // Blocks are mined by hand from here: the relay is signed and broadcast at once, and waits in the pool.
    await rpc(rpcUrl(), 'evm_setAutomine', [false]);
    try {
      release();
      await until(() => (txs()[0]?.state === 'broadcast' ? true : undefined), 'the relay broadcast');
      expect(txs()[0]!.created_at).toBeLessThan(deadline);
      // The base fee above its cap: not included (three blocks in all at it, fewer than its replacement point).
      await mineAt(10n * cap);
      await until(() => (Date.now() > deadline ? true : undefined), 'the relay’s deadline', WAIT_MS + 5_000);
      // Past the deadline, send passes and two heads the node has seen (each wakes its confirm and send passes), fewer
      // than the relay's replacement point: it stays as it is, sent and pending.
      s.node.adapters.get(A)!.payoutsQueued();
      await mineAt(10n * cap);
      s.node.adapters.get(A)!.payoutsQueued();
      await mineAt(10n * cap);
      expect(payouts.get(payoutId)!.state).toBe('sent');
      expect(s.node.ledger.requests.get(requestId)!.status).toBe('pending');
      expect(txs().map((t) => t.state)).toEqual(['broadcast']);
    } finally {
      await rpc(rpcUrl(), 'evm_setAutomine', [true]);
    }
    // The base fee falls: the relay lands, and succeeds.
    await mineAt(GWEI);
    const status = await waitForStatus(s.url, requestId, ['success', 'failure']);
    expect(status.status).toBe('success');
    const receipt = await s.publicClient(A).getTransactionReceipt({ hash: payouts.get(payoutId)!.tx_hash as Hex });
    const price = (JSON.parse(s.node.ledger.requests.get(requestId)!.money!) as { relay: { nativeUsdPrice: string } }).relay.nativeUsdPrice;
    const paid = usdMicroCeil(receipt.gasUsed * receipt.effectiveGasPrice, 18, price);
    expect(-BigInt(s.node.ledger.balances.get(`sponsorship:${requestId}`)!.amount)).toBe(paid);
    expect(s.node.ledger.balances.ofRequest(requestId).filter((e) => e.kind === 'sponsorship')).toHaveLength(1);
    expect(s.node.ledger.balances.summary(wallet)).toEqual({ balance: 1_000_000n - paid, held: 0n, available: 1_000_000n - paid });
  }, 120_000);
});

describe('relayMaxWaitMs', () => {
  const parse = (relayMaxWaitMs: unknown) => configSchema.safeParse({ ...MINIMAL_CONFIG, chains: [{ ...MINIMAL_CHAIN, relayMaxWaitMs }] });

  it('is a whole number of milliseconds from one second to a day; absent, the node waits 10 minutes', () => {
    for (const bad of [0, 999, 1_500.5, 86_400_001, '60000']) {
      const r = parse(bad);
      expect(r.success, String(bad)).toBe(false);
      expect(r.error!.issues[0]!.path).toEqual(['chains', 0, 'relayMaxWaitMs']);
    }
    for (const good of [1_000, 600_000, 86_400_000]) expect(parse(good).success, String(good)).toBe(true);
    const absent = configSchema.parse(MINIMAL_CONFIG).chains[0]!;
    expect(absent.kind === 'evm' && absent.relayMaxWaitMs).toBeUndefined();
    expect(DEFAULT_RELAY_MAX_WAIT_MS).toBe(600_000);
  });
});
