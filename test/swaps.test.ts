import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, zeroAddress, type Address } from 'viem';
import { api, executeSteps, MovablePrices, startStack, waitForStatus, type Stack } from './helpers/stack.ts';

const prices = new MovablePrices();
let s: Stack;
beforeAll(async () => {
  s = await startStack({ prices });
});
afterAll(async () => {
  await s?.stop();
});

const A = 8453;
const B = 10;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const user = (i: number) => s.devnet.accounts[i]!.address;
const usdcOf = (chainId: number, who: Address) =>
  s.publicClient(chainId).readContract({ address: usdc(chainId), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

describe('swaps', () => {
  it('quotes and fills a cross-chain swap (ETH → USDC) at the price less the spread', async () => {
    const recipient = '0x00000000000000000000000000000000005a1e01' as Address;
    const q = await api(s.url, '/quote', {
      body: {
        user: user(1),
        recipient,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: usdc(B),
        amount: '100000000000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    // 0.1 ETH at 3000 = 300 USDC, less 30 bps spread (0.9), 10 bps service and gas.
    const out = BigInt(q.body.details.currencyOut.amount);
    expect(out).toBeLessThan(299_100_000n);
    expect(out).toBeGreaterThan(298_000_000n);
    expect(q.body.details.operation).toBe('swap');
    expect(q.body.details.swapImpact.usd).toBe('-0.9');
    expect(q.body.details.slippageTolerance.destination.value).toBe('50');
    expect(BigInt(q.body.details.currencyOut.minimumAmount)).toBe((out * 9950n) / 10000n);
    const requestId = q.body.steps.at(-1).requestId;
    await executeSteps(s, q.body, 1);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect(await usdcOf(B, recipient)).toBe(out);
    expect(s.node.ledger.requests.get(requestId)!.request_type).toBe('Crosschain Swap');
  });

  it('fills a same-chain swap (USDC → ETH) from the same inventory', async () => {
    const recipient = '0x00000000000000000000000000000000005a1e02' as Address;
    const q = await api(s.url, '/quote', {
      body: {
        user: user(2),
        recipient,
        originChainId: A,
        destinationChainId: A,
        originCurrency: usdc(A),
        destinationCurrency: zeroAddress,
        amount: '30000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId;
    await executeSteps(s, q.body, 2);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect(await s.publicClient(A).getBalance({ address: recipient })).toBe(BigInt(q.body.details.currencyOut.amount));
    expect(s.node.ledger.requests.get(requestId)!.request_type).toBe('Same-chain Swap');
  });

  it('EXPECTED_OUTPUT aims at the amount and tolerates the slippage below it; EXACT_OUTPUT never pays less', async () => {
    const base = {
      user: user(1),
      originChainId: A,
      destinationChainId: B,
      originCurrency: zeroAddress,
      destinationCurrency: usdc(B),
      amount: '100000000',
      slippageTolerance: '100',
    };
    const expected = await api(s.url, '/quote', { body: { ...base, tradeType: 'EXPECTED_OUTPUT' } });
    expect(BigInt(expected.body.details.currencyOut.amount)).toBeGreaterThanOrEqual(100_000_000n);
    expect(expected.body.details.currencyOut.minimumAmount).toBe('99000000');
    const exact = await api(s.url, '/quote', { body: { ...base, tradeType: 'EXACT_OUTPUT' } });
    expect(exact.body.details.currencyOut.minimumAmount).toBe('100000000');
    // The exact quote carries the slippage as a margin on the input.
    expect(BigInt(exact.body.details.currencyIn.amount)).toBeGreaterThan(BigInt(expected.body.details.currencyIn.amount));
  });

  it('refunds a swap whose price fell past the tolerance before the fill (SLIPPAGE)', async () => {
    const q = await api(s.url, '/quote', {
      body: {
        user: user(3),
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: usdc(B),
        amount: '50000000000000000',
        tradeType: 'EXACT_INPUT',
        slippageTolerance: 50,
      },
    });
    const requestId = q.body.steps.at(-1).requestId;
    prices.set('ETH', '2970'); // -1%: past the 0.5% tolerance
    try {
      s.node.solver!.invalidate();
      await executeSteps(s, q.body, 3);
      const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
      expect(done).toMatchObject({ status: 'refund', failReason: 'SLIPPAGE' });
    } finally {
      prices.overrides.clear();
    }
  });

  it('sends the same currency on the same chain to someone else', async () => {
    const recipient = '0x00000000000000000000000000000000005e0d01' as Address;
    const q = await api(s.url, '/quote', {
      body: {
        user: user(4),
        recipient,
        originChainId: B,
        destinationChainId: B,
        originCurrency: usdc(B),
        destinationCurrency: usdc(B),
        amount: '10000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    expect(q.body.details.operation).toBe('send');
    await executeSteps(s, q.body, 4);
    expect((await waitForStatus(s.url, q.body.steps.at(-1).requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect(await usdcOf(B, recipient)).toBe(BigInt(q.body.details.currencyOut.amount));
  });
});

describe('wrap and unwrap', () => {
  const weth = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.wrappedNative;
  const wethOf = (who: Address) => s.publicClient(A).readContract({ address: weth(A), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

  it('wraps native into the wrapped token and unwraps it back, without a spread', async () => {
    const me = user(2);
    const wrap = await api(s.url, '/quote', {
      body: {
        user: me,
        originChainId: A,
        destinationChainId: A,
        originCurrency: zeroAddress,
        destinationCurrency: weth(A),
        amount: '1000000000000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(wrap.status).toBe(200);
    expect(wrap.body.details.operation).toBe('wrap');
    expect(wrap.body.details.swapImpact.usd).toBe('0');
    const before = await wethOf(me);
    await executeSteps(s, wrap.body, 2);
    const wrapped = await waitForStatus(s.url, wrap.body.steps.at(-1).requestId, ['success', 'failure', 'refund']);
    expect(wrapped.status).toBe('success');
    const got = (await wethOf(me)) - before;
    // Only the fees: 10 bps and the fill's gas.
    expect(got).toBe(BigInt(wrap.body.details.currencyOut.amount));
    expect(got).toBeGreaterThan(998_000_000_000_000_000n);
    expect(s.node.ledger.requests.get(wrap.body.steps.at(-1).requestId)!.request_type).toBe('Wrap');

    const unwrap = await api(s.url, '/quote', {
      body: {
        user: me,
        recipient: '0x0000000000000000000000000000000000bAbE01',
        originChainId: A,
        destinationChainId: A,
        originCurrency: weth(A),
        destinationCurrency: zeroAddress,
        amount: got.toString(),
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(unwrap.body.details.operation).toBe('unwrap');
    expect(unwrap.body.steps.map((x: any) => x.id)).toEqual(['approve', 'deposit']);
    await executeSteps(s, unwrap.body, 2);
    expect((await waitForStatus(s.url, unwrap.body.steps.at(-1).requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect(await s.publicClient(A).getBalance({ address: '0x0000000000000000000000000000000000bAbE01' })).toBe(BigInt(unwrap.body.details.currencyOut.amount));
  });

  it('shows each request type it executed in the request record, with its features', async () => {
    const key = s.node.ledger.apiKeys.create('types').key;
    for (const type of ['Crosschain Swap', 'Same-chain Swap', 'Send', 'Wrap', 'Unwrap']) {
      const r = await api(s.url, `/requests/v3?requestType=${encodeURIComponent(type)}&status=success`, { apiKey: key });
      expect(r.status).toBe(200);
      expect(r.body.requests.length, type).toBeGreaterThan(0);
      for (const rec of r.body.requests) {
        expect(rec.requestType).toBe(type);
        expect(Array.isArray(rec.features)).toBe(true);
      }
    }
  });
});
