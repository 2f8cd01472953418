import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseEther, zeroAddress, type Address, type Hex } from 'viem';
import { GasTrapAbi, GasTrapBytecode, TestNftAbi, TestNftBytecode } from '../contracts-abi/index.ts';
import { api, executeSteps, MovablePrices, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

// The devnet's static prices, which a test may move between a quote and its deposit.
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
const user = (i: number) => s.devnet.accounts[i]!.address;
const nft = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.testNft;
const mint = (to: Address) => encodeFunctionData({ abi: TestNftAbi, functionName: 'mint', args: [to] });

function callQuote(account: number, target: Address, extra: Record<string, unknown> = {}) {
  return api(s.url, '/quote', {
    body: {
      user: user(account),
      originChainId: A,
      destinationChainId: B,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: parseEther('0.01').toString(),
      tradeType: 'EXACT_OUTPUT',
      txs: [{ to: target, value: parseEther('0.01').toString(), data: mint(user(account)) }],
      ...extra,
    },
  });
}

describe('contract calls', () => {
  it('pays for and runs the destination calls atomically in the fill', async () => {
    const q = await callQuote(1, nft(B), { protocolVersion: 'v2' });
    expect(q.status).toBe(200);
    expect(q.body.details.operation).toBe('call');
    // Paid in the native currency it spends: one asset, no swap, so no spread and no slippage.
    expect(Number(q.body.details.swapImpact.usd)).toBe(0);
    expect(q.body.details.slippageTolerance.destination.value).toBe('0');
    // The order's output carries the call.
    expect(q.body.protocol.v2.orderData.output.calls).toHaveLength(1);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    expect(await s.publicClient(B).readContract({ address: nft(B), abi: TestNftAbi, functionName: 'balanceOf', args: [user(1)] })).toBe(1n);
    expect(s.node.ledger.requests.get(requestId)!.request_type).toBe('Call');
  });

  it('prices a call paid from another asset (USDC → ETH) as a swap: spread, slippage, and refunded (SLIPPAGE) when the price moves past it', async () => {
    const usdcA = s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin;
    const q = await callQuote(4, nft(B), { originCurrency: usdcA, slippageTolerance: 50 });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    expect(q.body.details.operation).toBe('call');
    // About 30 USDC for 0.01 ETH at 3000: the spread (30 bps) shows as the swap's impact, and the
    // slippage tolerance is the one asked for.
    expect(Number(q.body.details.swapImpact.usd)).toBeLessThan(-0.08);
    expect(q.body.details.expandedPriceImpact.swap.usd).toBe(q.body.details.swapImpact.usd);
    expect(q.body.details.slippageTolerance.destination.value).toBe('50');
    const requestId = q.body.steps.at(-1).requestId as Hex;
    // ETH dearer by 1% before the deposit: at the fill's price the USDC buys past the 0.5% tolerance less.
    prices.set('ETH', '3030');
    try {
      s.node.solver!.invalidate();
      await executeSteps(s, q.body, 4);
      // 'failure' first (the fill refused), then 'refund' once the refund is paid.
      const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
      expect(done).toMatchObject({ status: 'refund', failReason: 'SLIPPAGE' });
      expect(await s.publicClient(B).readContract({ address: nft(B), abi: TestNftAbi, functionName: 'balanceOf', args: [user(4)] })).toBe(0n);
    } finally {
      prices.overrides.clear();
      s.node.solver!.invalidate();
    }
    expect(s.node.ledger.requests.get(requestId)!.request_type).toBe('Call');
  });

  it('fills a call paid from another asset (USDC → ETH) at the unmoved price, the spread taken', async () => {
    const usdcA = s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin;
    const q = await callQuote(3, nft(B), { originCurrency: usdcA });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    expect(Number(q.body.details.swapImpact.usd)).toBeLessThan(0);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    await executeSteps(s, q.body, 3);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect(await s.publicClient(B).readContract({ address: nft(B), abi: TestNftAbi, functionName: 'balanceOf', args: [user(3)] })).toBe(1n);
  });

  it('refuses at quote time calls that revert in simulation', async () => {
    const r = await api(s.url, '/quote', {
      body: {
        user: user(1),
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: parseEther('0.02').toString(),
        tradeType: 'EXACT_OUTPUT',
        // Twice the price: the mint reverts with WrongPayment.
        txs: [{ to: nft(B), value: parseEther('0.02').toString(), data: mint(user(1)) }],
      },
    });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ errorCode: 'EXECUTION_REVERTED' });
    expect(r.body.message).toMatch(/txs: the destination calls revert in simulation/);
  });

  it('ends in EXECUTION_REVERTED with failedCallData, then refunds, when a call reverts at fill time', async () => {
    // A mint with a supply of one: the quote simulates fine, then someone else takes the token.
    const deployer = s.wallet(0, B);
    const hash = await deployer.deployContract({
      account: deployer.account!,
      chain: deployer.chain,
      abi: TestNftAbi,
      bytecode: TestNftBytecode,
      args: [parseEther('0.01'), 1n],
    });
    const scarce = (await s.publicClient(B).waitForTransactionReceipt({ hash })).contractAddress!;
    const q = await callQuote(2, scarce);
    expect(q.status).toBe(200);
    const taken = await deployer.writeContract({
      account: deployer.account!,
      chain: deployer.chain,
      address: scarce,
      abi: TestNftAbi,
      functionName: 'mint',
      args: [user(0)],
      value: parseEther('0.01'),
    });
    await s.publicClient(B).waitForTransactionReceipt({ hash: taken });
    const requestId = q.body.steps.at(-1).requestId as Hex;
    await executeSteps(s, q.body, 2);
    const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'EXECUTION_REVERTED' });
    const r = s.node.ledger.requests.get(requestId)!;
    expect(r.failed_call_data).toMatch(/^0x/);
    expect(r.failed_call_data!.length).toBeGreaterThan(10);
  });

  it('a fill whose calls revert on chain after the estimate: the refund bears the gas the fill burned', async () => {
    // A call that burns gas and reverts once armed; the arming outbids the node's fill in the same block,
    // so the fill passed its estimate and then reverted on chain, at the solver's gas.
    const deployer = s.wallet(0, B);
    const deployed = await deployer.deployContract({ account: deployer.account!, chain: deployer.chain, abi: GasTrapAbi, bytecode: GasTrapBytecode });
    const trap = (await s.publicClient(B).waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const q = await callQuote(3, trap, {
      txs: [{ to: trap, value: parseEther('0.01').toString(), data: encodeFunctionData({ abi: GasTrapAbi, functionName: 'spring', args: [1_500n] }) }],
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const rpcB = (method: string, params: unknown[] = []) => s.publicClient(B).request({ method, params } as never) as Promise<any>;
    const pending = async () => Object.keys((await rpcB('txpool_content')).pending ?? {}).length;
    await rpcB('evm_setAutomine', [false]);
    try {
      await executeSteps(s, q.body, 3);
      await until(async () => ((await pending()) >= 1 ? true : undefined), "the node's fill in the mempool");
      await deployer.sendTransaction({
        account: deployer.account!,
        chain: deployer.chain,
        to: trap,
        data: encodeFunctionData({ abi: GasTrapAbi, functionName: 'arm' }),
        gas: 100_000n,
        maxPriorityFeePerGas: parseEther('0.0000001'),
        maxFeePerGas: parseEther('0.000001'),
      });
      await until(async () => ((await pending()) >= 2 ? true : undefined), 'the arming in the mempool');
      await rpcB('evm_mine');
    } finally {
      await rpcB('evm_setAutomine', [true]);
    }
    const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'TRANSACTION_REVERTED' });
    const fill = s.node.ledger.payouts.get(`fill:${requestId}`)!;
    const receipt = await s.publicClient(B).getTransactionReceipt({ hash: fill.tx_hash as Hex });
    expect(receipt.status).toBe('reverted');
    const burned = receipt.gasUsed * receipt.effectiveGasPrice;
    const refund = s.node.ledger.payouts.get(`refund:${requestId}`)!;
    const deposit = s.node.ledger.deposits.get(refund.deposit_id!)!;
    // ETH on both chains at one price: the refund is the deposit less the fill's gas and its own.
    expect(BigInt(refund.amount) + burned).toBeLessThan(BigInt(deposit.amount));
  });

  it('bounds the gas of calls (QUOTED_GAS_LIMIT_EXCEEDED)', async () => {
    // Ten mints in one order need more gas than a tight limit allows.
    const txs = Array.from({ length: 10 }, () => ({ to: nft(B), value: parseEther('0.01').toString(), data: mint(user(3)) }));
    const cfg = s.node.config.chains.find((c) => c.id === B)!;
    const saved = cfg.kind === 'evm' ? cfg.maxCallGas : 0;
    if (cfg.kind === 'evm') cfg.maxCallGas = 200_000;
    try {
      const r = await api(s.url, '/quote', {
        body: {
          user: user(3),
          originChainId: A,
          destinationChainId: B,
          originCurrency: zeroAddress,
          destinationCurrency: zeroAddress,
          amount: parseEther('0.1').toString(),
          tradeType: 'EXACT_OUTPUT',
          txs,
        },
      });
      expect(r.status).toBe(400);
      expect(r.body.errorCode).toBe('QUOTED_GAS_LIMIT_EXCEEDED');
    } finally {
      if (cfg.kind === 'evm') cfg.maxCallGas = saved;
    }
  });

  it('refuses calls paid in something else than the native currency', async () => {
    const usdc = s.devnet.chains.find((c) => c.id === B)!.contracts.stablecoin;
    const r = await api(s.url, '/quote', {
      body: {
        user: user(1),
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: usdc,
        amount: '1000000',
        tradeType: 'EXACT_OUTPUT',
        txs: [{ to: nft(B), value: '0', data: '0x' }],
      },
    });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/txs: destination calls are paid in the native currency/);
  });

  it('a call value past uint256, or values that together pass it, is a 400 naming txs, not a 500', async () => {
    const quote = (values: string[]) =>
      api(s.url, '/quote', {
        body: {
          user: user(1),
          originChainId: A,
          destinationChainId: B,
          originCurrency: zeroAddress,
          destinationCurrency: zeroAddress,
          amount: '1000000000000000',
          tradeType: 'EXACT_OUTPUT',
          txs: values.map((value) => ({ to: nft(B), value, data: '0x' })),
        },
      });
    const max = (2n ** 256n - 1n).toString();
    for (const values of [['9'.repeat(78)], [max, '1']]) {
      const r = await quote(values);
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ errorCode: 'INVALID_INPUT_PARAMETERS' });
      expect(r.body.message).toMatch(/txs.*uint256/);
    }
  });
});
