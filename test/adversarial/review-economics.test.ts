// Quote economics as an attacker: what a fill and the app fees it accrues pay out against what its deposit
// brought, at the node's own prices when it fills.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { Pricing } from '../../src/ledger/types.ts';
import { atRate, breakdown } from '../../src/quote/fillAmount.ts';
import { marketRate } from '../../src/quote/pricing.ts';
import { linkWallet } from '../helpers/link.ts';
import { pastFinality } from '../helpers/finality.ts';
import { api, executeSteps, MovablePrices, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const prices = new MovablePrices();
const A = 8453;
const B = 10;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;
const fresh = () => privateKeyToAccount(generatePrivateKey()).address;
const usdcOf = (who: Address) => s.publicClient(B).readContract({ address: usdc(B), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
const accrued = (requestId: string) => s.node.ledger.appFees.accruedFor(requestId).reduce((t, e) => t + BigInt(e.amount), 0n);

beforeAll(async () => {
  s = await startStack({ prices });
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

// 0.01 ETH on A to USDC on B, 80% of it an app fee to `app`, with the widest slippage tolerance the API takes (what is
// left after the fill's gas stays within it after the 40% fall, whatever the gas price of B at the fill).
const swapWithAppFee = (user: Address, recipient: Address, app: Address) => ({
  user,
  recipient,
  originChainId: A,
  destinationChainId: B,
  originCurrency: zeroAddress,
  destinationCurrency: usdc(B),
  amount: '10000000000000000',
  tradeType: 'EXACT_INPUT',
  slippageTolerance: 5000,
  appFees: [{ recipient: app, fee: 8000 }],
});

// What the fill of `input` pays at today's prices (ETH at `eth`), as the solver priced it: its output and app fees.
function atToday(requestId: string, input: bigint, eth: string) {
  const pricing = JSON.parse(s.node.ledger.requests.get(requestId)!.pricing!) as Pricing;
  const f = breakdown(input, atRate(pricing, marketRate(eth, { decimals: 18 }, '1', { decimals: 6 }, pricing.swap!.spreadBps)));
  return { out: f.out, app: f.app.reduce((t, a) => t + a.amount, 0n) };
}

describe('app fees of a swap filled at a rate other than its quote', () => {
  it("a deposit's fill accrues the app fees of the rate it paid at, not the quote's: after ETH fell 40%, the user and the app took no more than the deposit was worth", async () => {
    // The attacker is both the user and the app fee's recipient: it quotes, waits for the input's price to fall
    // (within the quote's life and its 50% tolerance), then deposits. The user is paid at today's rate; the app fees,
    // claimable from the solver's inventory, were accrued at the quote's.
    const app = privateKeyToAccount(generatePrivateKey());
    const recipient = fresh();
    const q = await api(s.url, '/quote/v2', { body: swapWithAppFee(account(3).address, recipient, app.address) });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    prices.set('ETH', '1800');
    try {
      s.node.solver!.invalidate();
      await executeSteps(s, q.body, 3);
      expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
      const paid = await usdcOf(recipient);
      const today = atToday(requestId, 10n ** 16n, '1800');
      expect(paid).toBe(today.out);
      // 0.01 ETH at 1800 USD is 18 USDC: what left the solver for this deposit (the fill and the fees it now owes) is no more.
      expect(paid + accrued(requestId)).toBeLessThanOrEqual(18_000_000n);
      // Exactly the fees the user was charged at today's rate (the fill's payout records the rate it paid at).
      expect(accrued(requestId)).toBe(today.app);
      // And the app claims them (once the deposit on A is final): out of the solver's USDC, less the claim's gas.
      await pastFinality(s, A);
      const to = fresh();
      const ask = await api(s.url, `/app-fees/${app.address}/claim`, { body: { chainId: B, currency: usdc(B), recipient: to } });
      const d = ask.body.steps[0].items[0].data;
      const claim = await api(s.url, `${d.post.endpoint}?signature=${await app.signMessage({ message: d.sign.message })}`, { body: d.post.body });
      expect(claim.status).toBe(200);
      await until(async () => ((await usdcOf(to)) === BigInt(claim.body.amount) ? true : undefined), 'the claim payout');
      expect(paid + (await usdcOf(to))).toBeLessThanOrEqual(18_000_000n);
    } finally {
      prices.overrides.delete('ETH');
      s.node.solver!.invalidate();
    }
  });

  it("a fast fill accrues the app fees of the rate it paid at, not the quote's", async () => {
    const key = s.node.ledger.apiKeys.create('economics-app');
    const sponsor = privateKeyToAccount(account(4).privateKey);
    expect((await linkWallet(s.url, key.key, sponsor)).status).toBe(200);
    const marker = `012345abcdef${sponsor.address.slice(2).toLowerCase()}012345abcdef`;
    const w = s.wallet(4, A);
    const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 100_000_000n] })}${marker}` as Hex;
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc(A), data });
    await s.publicClient(A).waitForTransactionReceipt({ hash });
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the app balance credit');

    const app = fresh();
    const recipient = fresh();
    const q = await api(s.url, '/quote/v2', { apiKey: key.key, body: swapWithAppFee(account(4).address, recipient, app) });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    prices.set('ETH', '1800');
    try {
      const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId } });
      expect(ff.status).toBe(200);
      await waitForStatus(s.url, requestId, ['success']);
      const today = atToday(requestId, 10n ** 16n, '1800');
      expect(await usdcOf(recipient)).toBe(today.out);
      // The hold is the input's worth today (18 USD): the fill and its fees stay within it.
      expect(BigInt(ff.body.amount) + accrued(requestId)).toBeLessThanOrEqual(18_000_000n);
      // Exactly the fees the user was charged at today's rate (the fill's payout records the rate it paid at).
      expect(accrued(requestId)).toBe(today.app);
    } finally {
      prices.overrides.delete('ETH');
    }
  });
});
