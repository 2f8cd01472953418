// Adversarial review of d0eae8c..746e3ed (mayPay's payout hold, block-time arrivals): held payouts hid a chain's queue,
// a lagging block time let an expired quote be filled, a fatal indexer's deposits were still paid out of.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keccak256, toHex, zeroAddress, type Hex } from 'viem';
import { api, executeSteps, holdSubmitter, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
// EvmPayoutSender's QUEUED_BATCH: how many queued payouts one send pass reads past those in flight or backing off.
const EVM_QUEUED_BATCH = 500;

// A submitter's send pass reads the chain's oldest queued payouts, as many as its batch plus those it knows it skips (in
// flight, backing off), so that payouts it cannot send now never hide the ones decided after them. mayPay skipped a held
// payout without counting it: a batch's worth of payouts held (out of deposits on a chain whose indexer has not read its
// blocks since the start, or whose deposits' blocks a reorg replaced) hid every later payout of the destination chain,
// out of deposits on any chain, for as long as the hold lasted.
describe('payouts mayPay holds, a batch of them at the head of a chain queue', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(async () => {
    await s?.stop();
  });

  it("do not hide the chain's later payouts: a fill out of a checked deposit is paid", { timeout: 120_000 }, async () => {
    const ledger = s.node.ledger;
    const head = Number(await s.publicClient(A).getBlockNumber());
    // A deposit in a block the indexer of chain A does not hold as canonical (above its recorded tip: what a rewind or a
    // start before the first pass leaves), and a batch of refunds out of it queued on chain B before anything else.
    const held = {
      id: `${A}:held`,
      chain_id: A,
      tx_hash: keccak256(toHex('held deposit')),
      log_index: 0,
      block_number: head + 1_000_000,
      block_hash: keccak256(toHex('a block a reorg replaced')),
      depositor: '0x00000000000000000000000000000000000ec0d5',
      currency: zeroAddress,
      amount: '1000',
      order_ref: keccak256(toHex('no order')),
      seen_at: Date.now(),
    };
    const decidedAt = Date.now() - 60 * 60_000;
    ledger.tx(() => {
      ledger.deposits.insert(held);
      for (let i = 0; i < EVM_QUEUED_BATCH; i++)
        ledger.payouts.insert({
          id: `refund:held:${i}`,
          kind: 'refund',
          request_id: null,
          deposit_id: held.id,
          chain_id: B,
          recipient: held.depositor,
          currency: zeroAddress,
          amount: '1',
          decided_at: decidedAt + i,
        });
    });
    expect(s.node.adapters.get(A)!.mayPayOutOf(ledger.deposits.get(held.id)!)).toBe(false);

    const user = s.devnet.accounts[4]!.address;
    const recipient = '0x00000000000000000000000000000000000ec0d3' as Hex;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, recipient, A, B, '10000000000000000') });
    expect(q.status).toBe(200);
    const id = q.body.steps[0].requestId as Hex;
    await executeSteps(s, q.body, 4);
    // Before: the fill stayed queued behind the 500 held refunds (status pending until the bound).
    const end = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 60_000).catch(() => undefined);
    expect({ status: end?.status, fill: ledger.payouts.get(`fill:${id}`)?.state }).toEqual({ status: 'success', fill: 'success' });
    expect(await s.publicClient(B).getBalance({ address: recipient })).toBeGreaterThan(0n);
    // The held refunds stay held: none was signed.
    const signed = ledger.db.prepare(`SELECT COUNT(*) AS n FROM payouts WHERE id LIKE 'refund:held:%' AND state != 'queued'`).get() as { n: number };
    expect(signed.n).toBe(0);
  });
});

// A chain's block time is its sequencer's word (OP Stack: genesis + 2 s a block, so blocks made catching up after a
// sequencer outage carry times minutes to hours old; Arbitrum: up to 24 h behind). Judged by it, a deposit sent after its
// quote expired, landing in such a block, is filled at the expired quote's price: a free option on the price for as long
// as the chain's time lags.
describe('a deposit sent after its quote expired, in a block whose time lags (a sequencer catching up)', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ config: { quote: { ttlSeconds: 10 } } });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('is refunded as ORDER_EXPIRED, not filled at the expired price', { timeout: 90_000 }, async () => {
    const user = s.devnet.accounts[4]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, 8453, 10, '10000000000000000') });
    const id = q.body.steps[0].requestId as Hex;
    const expiresAt = s.node.ledger.requests.get(id)!.expires_at!;
    await until(() => (Date.now() > expiresAt + 2_000 ? true : undefined), 'the quote to expire', 20_000);
    // Chain 8453's blocks carry a time before the expiry (catch-up blocks after a sequencer outage).
    await s.publicClient(8453).request({ method: 'evm_setTime' as never, params: [Math.floor(expiresAt / 1000) - 5] as never });
    const sentAt = Date.now();
    await executeSteps(s, q.body, 4);
    expect(sentAt).toBeGreaterThan(expiresAt);
    const end = await waitForStatus(s.url, id, ['success', 'refund'], 60_000);
    // Before: success, filled at the expired quote's price.
    expect({ status: end.status, failReason: s.node.ledger.requests.get(id)!.fail_reason }).toEqual({ status: 'refund', failReason: 'ORDER_EXPIRED' });
  });
});

// mayPay holds a payout until its deposit's chain holds the deposit as canonical. An indexer that met a reorg deeper than
// its finality window stops for good (fatal) with the blocks it recorded on the old fork: its deposits there still
// matched their stored blocks, and those below its last head less finalityDepth counted as final, so a queued fill out of
// a deposit the reorg took back was paid, out of other users' deposits.
describe("a deposit a reorg deeper than its chain's finality window took back, its fill still queued", () => {
  let s: Stack;
  const logLines: string[] = [];
  beforeAll(async () => {
    s = await startStack({ logLines, chain: (c) => (c.id === A ? { ...c, finalityDepth: 4 } : c) });
  });
  afterAll(async () => {
    await s?.stop();
  });
  const rpcA = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as never, params: params as never });

  it('is not paid once the indexer stopped on that reorg', { timeout: 90_000 }, async () => {
    const user = s.devnet.accounts[4]!.address;
    const recipient = '0x00000000000000000000000000000000000ec0d4' as Hex;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, recipient, A, B, '10000000000000000') });
    expect(q.status).toBe(200);
    const id = q.body.steps[0].requestId as Hex;
    const release = holdSubmitter(s, B); // the fill waits queued (a fee-cap wait)
    const before = (await rpcA('evm_snapshot')) as Hex;
    await executeSteps(s, q.body, 4);
    await until(() => (s.node.ledger.payouts.get(`fill:${id}`)?.state === 'queued' ? true : undefined), 'the fill queued');
    const deposit = s.node.ledger.deposits.byOrderRef(id)[0]!;
    // The node reads past the deposit's block, then the chain replaces every block from before the deposit on, deeper
    // than the 4 blocks the node keeps.
    await rpcA('anvil_mine', ['0x8']);
    await until(() => ((s.node.ledger.indexer.tip(A)?.number ?? 0) >= deposit.block_number + 8 ? true : undefined), 'the node past the deposit');
    await rpcA('evm_revert', [before]);
    await rpcA('anvil_mine', ['0x10']);
    await until(() => (logLines.some((l) => l.includes('reorg deeper than the finality window')) ? true : undefined), 'the indexer of chain A stopped');
    let pumps = 0;
    const queued = s.node.ledger.payouts.queued.bind(s.node.ledger.payouts);
    release();
    s.node.ledger.payouts.queued = (chain: number, limit?: number) => {
      if (chain === B) pumps++;
      return queued(chain, limit);
    };
    s.node.adapters.get(B)!.payoutsQueued();
    await until(() => (pumps >= 2 ? true : undefined), 'two send passes on chain B');
    // Before: mayPayOutOf said yes (the block matched the one stored, or lay below the last head less 4), and the fill
    // was signed and paid on chain B out of a deposit chain A no longer holds.
    expect(s.node.adapters.get(A)!.mayPayOutOf(deposit)).toBe(false);
    expect(s.node.ledger.payouts.get(`fill:${id}`)!.state).toBe('queued');
    expect(await s.publicClient(B).getBalance({ address: recipient })).toBe(0n);
  });
});
