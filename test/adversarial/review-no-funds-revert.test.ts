// A call target that reverts with the text "insufficient funds" (review-free-option): its revert was read as the solver
// lacking funds, and the fill postponed for ever, paid once the price moved: a free option. A revert with data is a revert.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hex } from 'viem';
import type { PayoutRow } from '../../src/ledger/types.ts';
import { api, executeSteps, MovablePrices, startStack, until, usdcForEth, waitForStatus, type Stack } from '../helpers/stack.ts';

const B = 10;
const text = (x: unknown) => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? v.toString() : v));
const word = (n: bigint): Hex => `0x${n.toString(16).padStart(64, '0')}`;
// A call target in raw bytecode: a call with calldata stores its first word (armed when not zero); a payment (no
// calldata) stops when unarmed, and when armed reverts with the 18 bytes "insufficient funds" (no selector).
const SAYS_NO_FUNDS: Hex = '0x6033600c60003960336000f33615600c57600035600055005b600054601457005b6012602160003960126000fd696e73756666696369656e742066756e6473';

describe('destination calls: a call whose revert reason reads as the solver lacking funds', () => {
  const prices = new MovablePrices();
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ prices });
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });

  // How many times chain B's submitter postponed a payout for want of funds.
  async function noFunds(): Promise<number> {
    const m = await s.node.metrics.payoutPostponed.get();
    return m.values.filter((v) => v.labels.chain === String(B) && v.labels.reason === 'no-funds').reduce((t, v) => t + v.value, 0);
  }

  it('a call reverting with "insufficient funds" is refused (EXECUTION_REVERTED) and refunded, never held as no-funds until the price moves', async () => {
    const pc = s.publicClient(B);
    const attacker = s.wallet(3, B);
    const deployed = await attacker.deployContract({ account: attacker.account!, chain: attacker.chain, abi: [], bytecode: SAYS_NO_FUNDS });
    const target = (await pc.waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const arm = async (on: boolean) =>
      pc.waitForTransactionReceipt({
        hash: await attacker.sendTransaction({ account: attacker.account!, chain: attacker.chain, to: target, data: word(on ? 1n : 0n) }),
      });
    // A call spending 0.01 ETH on B, paid in USDC on A: priced as a swap at its decision's rate.
    const q = await api(s.url, '/quote', { body: usdcForEth(s, s.devnet.accounts[3]!.address, { callTarget: target }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    // Armed after its quote, before its deposit.
    await arm(true);
    const before = await noFunds();
    await executeSteps(s, q.body, 3);
    const decided: PayoutRow = await until(async () => {
      const fill = s.node.ledger.payouts.get(`fill:${requestId}`);
      if (!fill) return undefined;
      if (fill.state !== 'queued' && fill.state !== 'sent') return fill;
      return (await noFunds()) >= before + 3 ? fill : undefined;
    }, 'the fill settled, or held for want of funds');
    // ETH rises 10%; the attacker disarms: held, the fill is paid at the rate decided before the rise.
    prices.set('ETH', '3300');
    try {
      s.node.solver!.invalidate();
      await arm(false);
      const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
      const seen = { status: done.status, failReason: done.failReason, fillState: decided.state, postponedNoFunds: (await noFunds()) - before };
      expect(seen, text(seen)).toMatchObject({ status: 'refund', failReason: 'EXECUTION_REVERTED', fillState: 'failed' });
    } finally {
      prices.overrides.clear();
      s.node.solver!.invalidate();
    }
  });
});
