// Confirmations by value: a deposit waits as many blocks as its worth asks (the chain's
// confirmationsByValue table), and the quote's timeEstimate says so.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zeroAddress, type Hex } from 'viem';
import { confirmationsFor } from '../src/chains/evm/confirmations.ts';
import { api, byValueOn, executeSteps, MovablePrices, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;
// The node's price source (as a live feed would be), which a test may move off the config's usdPrice.
const prices = new MovablePrices();

beforeAll(async () => {
  // Chain A: deposits of $1000 or more wait 4 blocks, $100k or more wait for finality.
  s = await startStack({
    prices,
    chains: byValueOn(A, [
      { minUsd: '1000', confirmations: 4 },
      { minUsd: '100000', confirmations: 'finalized' },
    ]),
  });
});
afterAll(async () => {
  await s?.stop();
});

const quote = (account: number, amount: string) =>
  api(s.url, '/quote', {
    body: {
      user: s.devnet.accounts[account]!.address,
      originChainId: A,
      destinationChainId: B,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount,
      tradeType: 'EXACT_INPUT',
    },
  });

describe('confirmations by value', () => {
  it('the table: the base count below the first row, the highest row reached above, finality for the largest', () => {
    const chain = {
      confirmations: 1,
      finalityDepth: 64,
      confirmationsByValue: [
        { minUsd: '1000', confirmations: 4 as const },
        { minUsd: '100000', confirmations: 'finalized' as const },
      ],
      nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
      currencies: [],
    };
    expect(confirmationsFor(chain, zeroAddress, 10n ** 17n)).toBe(1); // $300
    expect(confirmationsFor(chain, zeroAddress, 10n ** 18n / 3n + 1n)).toBe(4); // just over $1000
    expect(confirmationsFor(chain, zeroAddress, 40n * 10n ** 18n)).toBe(64); // $120k: finalized
    expect(confirmationsFor({ ...chain, confirmationsByValue: [] }, zeroAddress, 40n * 10n ** 18n)).toBe(1);
  });

  it('a large deposit waits for its confirmations while a small one is filled; the quotes say so', async () => {
    const large = await quote(1, '500000000000000000'); // 0.5 ETH: $1500
    const small = await quote(2, '100000000000000000'); // 0.1 ETH: $300
    expect(large.status).toBe(200);
    expect(small.status).toBe(200);
    expect(large.body.details.timeEstimate).toBe(5);
    expect(small.body.details.timeEstimate).toBe(2);
    const largeId = large.body.steps[0].requestId as Hex;
    const smallId = small.body.steps[0].requestId as Hex;
    await executeSteps(s, large.body, 1);
    await executeSteps(s, small.body, 2);
    // Two blocks mined since the large deposit (its own and the small one's): the small one is
    // filled, the large one still waits for its fourth block.
    expect((await waitForStatus(s.url, smallId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect((await api(s.url, `/intents/status/v3?requestId=${largeId}`)).body.status).toBe('waiting');
    const pc = s.publicClient(A);
    await pc.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
    await until(
      async () =>
        (await api(s.url, '/ready')).body.chains.find((c: any) => c.chainId === A)?.head >= Number(await pc.getBlockNumber({ cacheTime: 0 }))
          ? true
          : undefined,
      'the node to see the head',
    );
    expect((await api(s.url, `/intents/status/v3?requestId=${largeId}`)).body.status).toBe('waiting');
    await pc.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
    expect((await waitForStatus(s.url, largeId, ['success', 'failure', 'refund'])).status).toBe('success');
  });

  it("a small deposit naming a large one's order, confirmed first, does not fail the order", async () => {
    // The large deposit waits 4 blocks; 1000 wei naming its order, sent a block later, needs 1. Decided
    // first, it failed the order, and the large deposit came back as a DOUBLE_SPEND: anyone who saw the
    // deposit mined could do it, no mempool race needed.
    const large = await quote(1, '500000000000000000');
    const id = large.body.steps[0].requestId as Hex;
    await executeSteps(s, large.body, 1);
    const item = large.body.steps[0].items[0].data;
    const attacker = s.wallet(3, A);
    const pc = s.publicClient(A);
    await pc.waitForTransactionReceipt({
      hash: await attacker.sendTransaction({ account: attacker.account!, chain: attacker.chain, to: item.to, data: item.data, value: 1_000n }),
    });
    // The small one is confirmed (one block) while the large one waits for its fourth.
    await until(() => {
      const state = s.node.ledger.deposits.byOrderRef(id).find((d) => d.amount === '1000')?.state;
      return state === 'confirmed' || state === 'handled' ? true : undefined;
    }, 'the small deposit confirmed');
    await pc.request({ method: 'anvil_mine' as never, params: ['0x3'] as never });
    expect(await waitForStatus(s.url, id, ['success', 'failure', 'refund'])).toMatchObject({ status: 'success' });
    const small = await until(() => {
      const d = s.node.ledger.deposits.byOrderRef(id).find((x) => x.amount === '1000');
      return d?.state === 'handled' ? d : undefined;
    }, 'the small deposit decided');
    expect(small.request_id).not.toBe(id);
    expect(s.node.ledger.requests.get(small.request_id!)!.fail_reason).toBe('DOUBLE_SPEND');
  });

  it("weighs a deposit at the feed's price where it is above the configured one: a stale usdPrice does not let it through at a smaller deposit's blocks", async () => {
    // 0.25 ETH: $750 at the configured 3000 (one block), $1,500 at the feed's 6000 (the $1000 row: four blocks).
    prices.set('ETH', '6000');
    try {
      const q = await quote(4, '250000000000000000');
      expect(q.status).toBe(200);
      expect(q.body.details.timeEstimate).toBe(5);
      const id = q.body.steps[0].requestId as Hex;
      await executeSteps(s, q.body, 4);
      const pc = s.publicClient(A);
      await until(() => (s.node.ledger.deposits.byOrderRef(id).length ? true : undefined), 'the deposit indexed');
      // Its own block and one more, seen by the node: a deposit of one block's worth would be filled by now.
      await pc.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
      await until(
        async () =>
          (await api(s.url, '/ready')).body.chains.find((c: any) => c.chainId === A)?.head >= Number(await pc.getBlockNumber({ cacheTime: 0 }))
            ? true
            : undefined,
        'the node to see the head',
      );
      expect(s.node.ledger.deposits.byOrderRef(id)[0]!.state).toBe('unconfirmed');
      expect((await api(s.url, `/intents/status/v3?requestId=${id}`)).body.status).toBe('waiting');
      await pc.request({ method: 'anvil_mine' as never, params: ['0x2'] as never });
      expect((await waitForStatus(s.url, id, ['success', 'failure', 'refund'])).status).toBe('success');
    } finally {
      prices.overrides.clear();
    }
  });
});
