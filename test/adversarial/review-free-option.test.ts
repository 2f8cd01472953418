// Adversarial review: free options against the solver. A swap is decided at the rate of its deposit's decision and
// its payout then waits in the submitter until it can be paid. Whoever can keep that payout waiting and then choose
// (paid when the price moved his way, failed and refunded when it moved against him) holds a free option on the solver.
//
// 1. A fill had no bound at all: held for hours (its chain's fee cap during a fee spike, the solver short of funds, a
//    provider down), it was paid at the rate decided before the hold whenever it could be, long past the order's own
//    output deadline (orderData.output.deadline, the request's fill_deadline: the interface's PROTOCOL_DEADLINE_EXPIRED).
//    A recipient contract turns such a hold into a free option: it lets the fill through after the price moved its way,
//    and reverts (EXECUTION_REVERTED, a refund) after it moved the other. Fixed in the pipeline: a fill still unsigned
//    past its order's deadline fails (PROTOCOL_DEADLINE_EXPIRED) and its deposit is refunded.
// 2. A hold the user makes alone: a destination call whose target reverts with the bytes "insufficient funds". The
//    executor wraps the reason in CallFailed, the node's message carries it, and the submitter (NO_FUNDS matched
//    anywhere in the message) took the revert for the solver lacking funds: postponed for ever, paid once the attacker
//    disarmed after ETH rose, refunded (EXECUTION_REVERTED) had it fallen. Fixed in src/chains/evm/rpcErrors.ts (a
//    revert with data is a revert, whatever its text): review-no-funds-revert.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGwei, zeroAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { mineAtBaseFee } from '../helpers/baseFee.ts';
import { api, executeSteps, MovablePrices, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
// Chain B's fee cap: a payout the market prices above it waits unsigned.
const CAP = parseGwei('50');

const text = (x: unknown) => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

describe('a fill held past its order deadline', () => {
  const prices = new MovablePrices();
  let s: Stack;
  beforeAll(async () => {
    // The shortest deadline the config takes (60 s after the quote), and quotes deposited within 10 s.
    s = await startStack({
      prices,
      config: { quote: { ttlSeconds: 10, fillDeadlineSeconds: 60 } },
      chain: (c) => (c.id === B ? { ...c, maxFeePerGas: CAP.toString() } : c),
    });
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });

  it('a swap held on its fee cap past its deadline is failed (PROTOCOL_DEADLINE_EXPIRED) and refunded, never paid at the old rate after the price moved', async () => {
    const pc = s.publicClient(B);
    // A fresh recipient: what it received is the fill.
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const usdcA = s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin;
    // 30 USDC on A for ETH on B: a swap, its rate decided when the deposit is.
    const q = await api(s.url, '/quote', {
      body: {
        user: s.devnet.accounts[4]!.address,
        recipient,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdcA,
        destinationCurrency: zeroAddress,
        amount: '30000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const fillId = `fill:${requestId}`;
    const deadline = s.node.ledger.requests.get(requestId)!.fill_deadline!;
    try {
      // A fee spike on B (20 times the cap) before the deposit: the fill, once decided, waits on the cap.
      await mineAtBaseFee(s, B, 20n * CAP);
      await executeSteps(s, q.body, 4);
      const decided = await until(() => {
        const p = s.node.ledger.payouts.get(fillId);
        return p && p.state === 'queued' ? p : undefined;
      }, 'the fill decided and waiting');
      // The order's deadline passes while the fill waits.
      await until(() => (Date.now() > deadline + 1_000 ? true : undefined), "the order's fill deadline passed", 90_000);
      // ETH rises 10% and the fee spike ends.
      prices.set('ETH', '3300');
      s.node.solver!.invalidate();
      const before = await pc.getBalance({ address: recipient });
      await mineAtBaseFee(s, B, parseGwei('1'));
      const done = await waitForStatus(s.url, requestId, ['success', 'refund'], 90_000);
      const fill = s.node.ledger.payouts.get(fillId)!;
      const seen = {
        status: done.status,
        failReason: done.failReason,
        fill: fill.state,
        fillReason: fill.fail_reason,
        decidedAmount: decided.amount,
        received: (await pc.getBalance({ address: recipient })) - before,
        deadline,
      };
      // Past its deadline the order is not filled: the fill fails and the deposit goes back.
      expect(seen, text(seen)).toMatchObject({ status: 'refund', fill: 'failed', fillReason: 'PROTOCOL_DEADLINE_EXPIRED', received: 0n });
    } finally {
      prices.overrides.clear();
      s.node.solver!.invalidate();
    }
  }, 180_000);
});
