import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseEther, zeroAddress, type Address, type Hex } from 'viem';
import { TestNftAbi, TestNftBytecode } from '../contracts-abi/index.ts';
import { api, executeSteps, startStack, waitForStatus, type Stack } from './helpers/stack.ts';

let s: Stack;
beforeAll(async () => {
  s = await startStack();
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
    // The order's output carries the call.
    expect(q.body.protocol.v2.orderData.output.calls).toHaveLength(1);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    expect(await s.publicClient(B).readContract({ address: nft(B), abi: TestNftAbi, functionName: 'balanceOf', args: [user(1)] })).toBe(1n);
    expect(s.node.ledger.requests.get(requestId)!.request_type).toBe('Call');
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
});
