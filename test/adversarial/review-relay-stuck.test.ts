// Adversarial review: a sponsored relay stuck at its own fee cap does not hold up the chain's payouts.
//
// A sponsored relay (POST /execute rawCalls) is never signed nor bumped above the fee cap its sponsor's hold was
// computed at (payouts.max_fee_per_gas, review-relay-feecap.test.ts). Once broadcast, a base fee rising past that cap
// before inclusion left it stuck at its nonce, and under the default feeCapPolicy 'wait' every later payout of the
// chain (users' fills, refunds) waited behind it until the base fee fell below the relay's cap: any app, relaying a
// cheap call just before a fee spike (or an attacker causing one), stalled the solver's fills on that chain.
//
// Fixed: a transaction stuck at a relay's own cap (not the chain's, whose policy stays the operator's) is cancelled
// after the cancel policy's afterBlocks whatever the chain's policy (a zero-value self-transfer at the market's fee at
// the relay's nonce); once it lands the relay fails (TRANSACTION_NOT_INCLUDED), its sponsor charged the cancel's gas
// up to its hold, the rest the solver's. A relay that lands after all (the cancel lost the race) succeeds, once.
//
// Real devnet (anvil, chain 8453 the relay's and the fill's), blocks mined by hand at chosen base fees.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hex } from 'viem';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { sponsorHeld } from '../../src/solver/appBalanceBooks.ts';
import { usdMicroCeil } from '../../src/lib/money.ts';
import { fundedSponsor } from '../helpers/appBalance.ts';
import { admitHeldRelay } from '../helpers/relays.ts';
import { api, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { mineAtBaseFee } from '../helpers/baseFee.ts';

const A = 8453;
const B = 10;
const GWEI = 1_000_000_000n;
// Blocks mined at the high base fee before giving up on the fill behind the stuck relay: the relay's replacement
// point (replaceAfterBlocks, 3 on the devnet) plus the cancel's afterBlocks (10 by default) and room to spare.
const BLOCKS = 40;
let s: Stack;
const rpcUrl = () => s.devnet.chains.find((c) => c.id === A)!.rpcUrl;

beforeAll(async () => {
  s = await startStack();
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const mineAt = (baseFee: bigint) => mineAtBaseFee(s, A, baseFee);

// Mines blocks at `baseFee`, one after the node has seen the last, until `done` or `blocks` were mined; whether `done`.
async function mineUntil(baseFee: bigint, done: () => boolean, blocks: number): Promise<boolean> {
  for (let i = 0; i < blocks && !done(); i++) {
    await mineAt(baseFee);
    // The node's confirm pass on that head, bounded: what it did shows in the ledger.
    await until(() => (done() ? true : undefined), 'the condition', 150).catch(() => undefined);
  }
  return done();
}

const sponsor = (account: number) => fundedSponsor(s, account, 'relay stuck');

// Admits a relay of a plain call to a fresh wallet at a base fee of 1 gwei while the submitter holds it back, then
// (automine off) lets it go and waits until it is broadcast. Returns its request id and the fee cap its hold was computed at.
async function broadcastLowFeeRelay(key: { key: string }) {
  await mineAt(GWEI);
  const { requestId, cap, release } = await admitHeldRelay(s, A, key);
  try {
    await rpc(rpcUrl(), 'evm_setAutomine', [false]);
  } finally {
    release();
  }
  const payoutId = `relay:${requestId}`;
  await until(() => (s.node.ledger.payouts.txsOf(payoutId)[0]?.state === 'broadcast' ? true : undefined), 'the relay broadcast');
  const relayTx = s.node.ledger.payouts.txsOf(payoutId)[0]!;
  expect(BigInt(relayTx.max_fee_per_gas)).toBeLessThanOrEqual(cap);
  expect(s.node.ledger.payouts.get(payoutId)!.max_fee_per_gas).toBe(cap.toString());
  return { requestId, payoutId, cap, relayTx };
}

const text = (x: unknown) => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

async function receiptOf(hash: Hex) {
  return s
    .publicClient(A)
    .getTransactionReceipt({ hash })
    .catch(() => null);
}

// The relay's USD price of gas, as its charge is computed.
function relayPrice(requestId: Hex): string {
  return (JSON.parse(s.node.ledger.requests.get(requestId)!.money!) as { relay: { nativeUsdPrice: string } }).relay.nativeUsdPrice;
}

describe('a sponsored relay stuck at its own fee cap', () => {
  it("does not hold up a user's fill on its chain while the base fee stays high: it is cancelled and fails, its sponsor charged the cancel up to its hold", async () => {
    const { key, wallet } = await sponsor(3);
    const { requestId, payoutId, cap } = await broadcastLowFeeRelay(key);
    const txs = () => s.node.ledger.payouts.txsOf(payoutId);
    const held = BigInt(s.node.ledger.balances.get(`sponsor_hold:${requestId}`)!.amount);
    const high = 10n * cap;
    let fillPayout: string | undefined;
    try {
      // The base fee rises to 10 times the relay's cap: the relay cannot be included, nor bumped past its cap.
      await mineAt(high);
      // A user bridges 0.05 ETH from chain 10 to chain A: the fill goes out on A at the market's fee, at the nonce after the relay's.
      const user = s.devnet.accounts[2]!.address;
      const q = await api(s.url, '/quote', { body: nativeBridge(user, user, B, A, '50000000000000000') });
      expect(q.status, JSON.stringify(q.body)).toBe(200);
      const orderId = q.body.steps[0].requestId as Hex;
      const item = q.body.steps[0].items[0].data;
      const w = s.wallet(2, B);
      await s.publicClient(B).waitForTransactionReceipt({
        hash: await w.sendTransaction({ account: w.account!, chain: w.chain, to: item.to, data: item.data, value: BigInt(item.value) }),
      });
      const fillOf = () => s.node.ledger.payouts.forRequest(orderId).find((p) => p.kind === 'fill');
      await until(() => (fillOf() && s.node.ledger.payouts.txsOf(fillOf()!.id).some((t) => t.state === 'broadcast') ? true : undefined), 'the fill broadcast');
      fillPayout = fillOf()!.id;
      const fillTx = s.node.ledger.payouts.txsOf(fillPayout)[0]!;
      expect(fillTx.nonce).toBe(txs()[0]!.nonce + 1);
      // Blocks at the high base fee: the fill is paid while it lasts (before: it waited behind the relay, unpaid after
      // all BLOCKS of them, until the base fee fell below the relay's cap).
      const paid = await mineUntil(high, () => s.node.ledger.payouts.get(fillPayout!)!.state === 'success', BLOCKS);
      expect(paid, text({ fill: s.node.ledger.payouts.get(fillPayout)!.state, relay: txs() })).toBe(true);
      const fillReceipt = await receiptOf(s.node.ledger.payouts.get(fillPayout)!.tx_hash as Hex);
      expect(fillReceipt?.effectiveGasPrice ?? 0n).toBeGreaterThan(high);
      // The relay's nonce went to a cancel (a zero-value transfer to the solver itself) at the market's fee.
      const cancel = txs().find((t) => t.cancel === 1);
      expect(cancel, text(txs())).toBeDefined();
      // The relay fails once the cancel is in (the devnet's confirmations: 1).
      const status = await waitForStatus(s.url, requestId, ['success', 'failure']);
      expect(status.status).toBe('failure');
      const cancelReceipt = (await receiptOf(cancel!.hash as Hex))!;
      expect(cancelReceipt.status).toBe('success');
      expect(cancelReceipt.to?.toLowerCase()).toBe(s.devnet.solver.toLowerCase());
      expect(txs().find((t) => t.hash === cancel!.hash)!.state).toBe('included');
      // Never both: no transaction of the relay's own call is on chain, and nothing is pending for it.
      for (const t of txs().filter((x) => x.cancel !== 1)) {
        expect(t.state, text(t)).toBe('replaced');
        expect(await receiptOf(t.hash as Hex)).toBeNull();
      }
      expect(s.node.ledger.payouts.get(payoutId)!.state).toBe('failed');
      // The sponsor bears the cancel's gas up to its hold (here the cancel, at ten times the cap, costs more), the solver the rest.
      const cancelMicro = usdMicroCeil(cancelReceipt.gasUsed * cancelReceipt.effectiveGasPrice, 18, relayPrice(requestId));
      const charged = -BigInt(s.node.ledger.balances.get(`sponsorship:${requestId}`)?.amount ?? 0);
      expect(charged, text({ held, cancelMicro, charged })).toBe(cancelMicro < held ? cancelMicro : held);
      expect(cancelMicro).toBeGreaterThan(held);
      expect(sponsorHeld(s.node.ledger, requestId)).toBe(0n);
      expect(s.node.ledger.balances.summary(wallet)).toEqual({ balance: 1_000_000n - charged, held: 0n, available: 1_000_000n - charged });
    } finally {
      await rpc(rpcUrl(), 'evm_setAutomine', [true]);
    }
    // The base fee falls: nothing more is sent for the relay (it is never sent again after its cancel).
    const before = txs().length;
    await mineAt(GWEI);
    await mineAt(GWEI);
    expect(txs()).toHaveLength(before);
    expect(s.node.ledger.payouts.get(payoutId)!.state).toBe('failed');
  }, 180_000);

  it('that lands after its cancel was sent (the cancel lost the race) succeeds, charged its own gas once', async () => {
    const { key, wallet } = await sponsor(4);
    const { requestId, payoutId, cap, relayTx } = await broadcastLowFeeRelay(key);
    const txs = () => s.node.ledger.payouts.txsOf(payoutId);
    const held = BigInt(s.node.ledger.balances.get(`sponsor_hold:${requestId}`)!.amount);
    const high = 10n * cap;
    const payouts = s.node.ledger.payouts;
    const openTxs = payouts.openTxs.bind(payouts);
    try {
      // Blocks at ten times the relay's cap until its cancel is out (before the fix: none ever is under 'wait').
      const cancelled = await mineUntil(high, () => txs().some((t) => t.cancel === 1 && t.state === 'broadcast'), BLOCKS);
      expect(cancelled, text(txs())).toBe(true);
      const cancel = txs().find((t) => t.cancel === 1)!;
      // The node looks at nothing of chain A meanwhile (it would send its cancel again): the relay's own bytes (another
      // node's mempool kept them) reach a block at a base fee under its cap; the cancel never lands.
      payouts.openTxs = (chain: number) => (chain === A ? [] : openTxs(chain));
      try {
        await rpc(rpcUrl(), 'anvil_dropTransaction', [cancel.hash]);
        // (The pool takes the relay's bytes only once a block's base fee is under its max fee.)
        await mineAt(GWEI);
        await s.publicClient(A).sendRawTransaction({ serializedTransaction: payouts.rawOf(relayTx.hash) });
        await mineAt(GWEI);
      } finally {
        payouts.openTxs = openTxs;
      }
      const status = await waitForStatus(s.url, requestId, ['success', 'failure']);
      expect(status.status).toBe('success');
      expect(payouts.get(payoutId)!.tx_hash).toBe(relayTx.hash);
      expect(txs().map((t) => [t.hash, t.state])).toEqual([
        [relayTx.hash, 'included'],
        [cancel.hash, 'replaced'],
      ]);
      expect(await receiptOf(cancel.hash as Hex)).toBeNull();
      // Charged the relay's own gas (within its hold), once.
      const receipt = (await receiptOf(relayTx.hash as Hex))!;
      const paid = usdMicroCeil(receipt.gasUsed * receipt.effectiveGasPrice, 18, relayPrice(requestId));
      const charged = -BigInt(s.node.ledger.balances.get(`sponsorship:${requestId}`)!.amount);
      expect(charged).toBe(paid);
      expect(charged).toBeLessThanOrEqual(held);
      expect(s.node.ledger.balances.summary(wallet)).toEqual({ balance: 1_000_000n - charged, held: 0n, available: 1_000_000n - charged });
      // More blocks: nothing more is sent for the relay.
      await mineAt(GWEI);
      await mineAt(GWEI);
      expect(txs()).toHaveLength(2);
      expect(s.node.ledger.balances.ofRequest(requestId).filter((e) => e.kind === 'sponsorship')).toHaveLength(1);
    } finally {
      payouts.openTxs = openTxs;
      await rpc(rpcUrl(), 'evm_setAutomine', [true]);
    }
  }, 180_000);
});
