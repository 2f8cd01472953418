// Adversarial review of deposit evidence and matching on EVM chains.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { encodeFunctionData, parseEther, zeroAddress, type Abi, type Hex } from 'viem';
import { api, byValueOn, startStack, until, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;

beforeAll(async () => {
  // Chain A: one confirmation, but deposits worth $1000 or more wait 4 blocks (ETH at $3000).
  s = await startStack({ chains: byValueOn(A, [{ minUsd: '1000', confirmations: 4 }]) });
});
afterAll(async () => {
  await s?.stop();
});

const rpc = (chainId: number, method: string, params: unknown[] = []) => s.publicClient(chainId).request({ method: method as never, params: params as never });

const quote = async (account: number, amount: string) => {
  const q = await api(s.url, '/quote', {
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
  expect(q.status).toBe(200);
  return q.body;
};

describe('confirmations by value against split deposits', () => {
  it('three $450 deposits in one block are not all filled at one confirmation: a reorg of that block costs the solver less than the $1000 row', async () => {
    // An attacker wanting $1350 out at one confirmation quotes three orders of $450 (each below the $1000 row) and
    // deposits all three in one block. Judged one by one, each needed one confirmation: all three were filled after
    // one block, and a one-block reorg (a double spend of that block) took back $1350 of deposits the solver had paid.
    const quotes = [await quote(1, '150000000000000000'), await quote(2, '150000000000000000'), await quote(3, '150000000000000000')];
    const ids = quotes.map((q) => q.steps[0].requestId as Hex);
    const pc = s.publicClient(A);
    const snapshot = (await rpc(A, 'evm_snapshot')) as Hex;
    await rpc(A, 'evm_setAutomine', [false]);
    const hashes: Hex[] = [];
    for (const [i, q] of quotes.entries()) {
      const d = q.steps[0].items[0].data;
      const w = s.wallet(i + 1, A);
      hashes.push(await w.sendTransaction({ account: w.account!, chain: w.chain, to: d.to, data: d.data, value: BigInt(d.value) }));
    }
    await rpc(A, 'evm_mine');
    await rpc(A, 'evm_setAutomine', [true]);
    const receipts = await Promise.all(hashes.map((hash) => pc.waitForTransactionReceipt({ hash })));
    expect(new Set(receipts.map((r) => r.blockNumber)).size).toBe(1);
    const block = Number(receipts[0]!.blockNumber);

    // No block after the deposits' own: every request either paid or still waiting for its confirmations.
    const settled = () =>
      ids.every((id) => {
        const fill = s.node.ledger.payouts.get(`fill:${id}`);
        const deposit = s.node.ledger.deposits.byOrderRef(id)[0];
        return fill?.state === 'success' || (deposit?.state === 'unconfirmed' && s.node.adapters.get(A)!.progress().ready);
      });
    await until(() => (settled() ? true : undefined), 'each deposit paid or waiting for its confirmations', 30_000);
    expect(Number(await pc.getBlockNumber({ cacheTime: 0 }))).toBe(block);
    // Two of them ($900) are paid at one confirmation; the third would take the block's sum to $1350: it waits 4 blocks.
    expect(ids.filter((id) => s.node.ledger.payouts.get(`fill:${id}`)?.state === 'success')).toHaveLength(2);

    // The block is reorged away (the attacker's double spend): the chain grows without it.
    await rpc(A, 'evm_revert', [snapshot]);
    await rpc(A, 'anvil_mine', ['0x6']);
    await until(
      () =>
        ids.every((id) => {
          const d = s.node.ledger.deposits.byOrderRef(id)[0];
          const r = s.node.ledger.requests.get(id)!;
          return d === undefined || r.fail_reason === 'DEPOSIT_REORGED' ? true : undefined;
        })
          ? true
          : undefined,
      'the reorg to be seen',
      30_000,
    );
    for (const h of hashes) expect(await pc.getTransactionReceipt({ hash: h }).catch(() => undefined)).toBeUndefined();

    // What the solver paid for deposits the chain no longer holds, at the config's $3000 per ETH.
    const paid = ids.reduce((sum, id) => {
      const fill = s.node.ledger.payouts.get(`fill:${id}`);
      return fill?.state === 'success' ? sum + BigInt(fill.amount) : sum;
    }, 0n);
    const usd = (paid * 3000n) / 10n ** 18n;
    expect(usd).toBeLessThan(1000n);
  });

  it('split deposits are all paid once the block is as deep as their sum asks', async () => {
    const quotes = [await quote(1, '150000000000000000'), await quote(2, '150000000000000000'), await quote(3, '150000000000000000')];
    const ids = quotes.map((q) => q.steps[0].requestId as Hex);
    await rpc(A, 'evm_setAutomine', [false]);
    for (const [i, q] of quotes.entries()) {
      const d = q.steps[0].items[0].data;
      const w = s.wallet(i + 1, A);
      await w.sendTransaction({ account: w.account!, chain: w.chain, to: d.to, data: d.data, value: BigInt(d.value) });
    }
    await rpc(A, 'evm_mine');
    await rpc(A, 'evm_setAutomine', [true]);
    await until(() => (ids.filter((id) => s.node.ledger.payouts.get(`fill:${id}`)?.state === 'success').length === 2 ? true : undefined), 'two paid');
    await rpc(A, 'anvil_mine', ['0x3']);
    await until(() => (ids.every((id) => s.node.ledger.payouts.get(`fill:${id}`)?.state === 'success') ? true : undefined), 'all three paid');
  });
});

// A depositor whose deposit depends on the block it lands in: everything sent at block `at`, 1 wei at any other
// (the rest goes back). A swap's output deposited in the same call behaves alike.
const FLIP = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;
interface IDepository { function depositNative(address depositor, bytes32 id) external payable; }
contract BlockDependentDepositor {
    function deposit(IDepository depository, bytes32 id, uint256 at) external payable {
        uint256 amount = block.number == at ? msg.value : 1;
        depository.depositNative{value: amount}(msg.sender, id);
        if (msg.value > amount) payable(msg.sender).transfer(msg.value - amount);
    }
}`;

function compileFlip(): { abi: Abi; bytecode: Hex } {
  const solc = createRequire(import.meta.url)('solc') as { compile(input: string): string };
  const out = JSON.parse(
    solc.compile(
      JSON.stringify({
        language: 'Solidity',
        sources: { 'Flip.sol': { content: FLIP } },
        settings: { outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
      }),
    ),
  );
  const c = out.contracts['Flip.sol'].BlockDependentDepositor;
  return { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
}

describe('a deposit that a reorg brings back changed', () => {
  it('is decided on what the new chain says it deposited, not on what the removed block said', async () => {
    // The transaction deposits 0.5 ETH at block b and is seen unconfirmed; a reorg re-includes the same transaction
    // at b + 1, where it deposits 1 wei at the same log index (the same deposit id). The row came back ('reorged' to
    // 'unconfirmed') with its new block but its old amount: 0.5 ETH was filled for 1 wei.
    const q = await quote(1, '500000000000000000');
    const id = q.steps[0].requestId as Hex;
    const depository = q.steps[0].items[0].data.to as Hex;
    const pc = s.publicClient(A);
    const w = s.wallet(1, A);
    const { abi, bytecode } = compileFlip();
    const deployed = await pc.waitForTransactionReceipt({ hash: await w.deployContract({ account: w.account!, chain: w.chain, abi, bytecode }) });
    const flip = deployed.contractAddress!;

    const snapshot = (await rpc(A, 'evm_snapshot')) as Hex;
    const at = (await pc.getBlockNumber({ cacheTime: 0 })) + 1n;
    const request = await w.prepareTransactionRequest({
      account: w.account!,
      chain: w.chain,
      to: flip,
      value: parseEther('0.5'),
      gas: 200_000n,
      data: encodeFunctionData({ abi, functionName: 'deposit', args: [depository, id, at] }),
    });
    const raw = await w.signTransaction(request as never);
    const hash = (await rpc(A, 'eth_sendRawTransaction', [raw])) as Hex;
    expect((await pc.waitForTransactionReceipt({ hash })).blockNumber).toBe(at);
    const depositId = await until(() => s.node.ledger.deposits.byOrderRef(id)[0]?.id, 'the 0.5 ETH deposit indexed');
    expect(s.node.ledger.deposits.get(depositId)).toMatchObject({ state: 'unconfirmed', amount: '500000000000000000' });

    // The reorg: block `at` comes back empty, and the same signed transaction lands a block later.
    await rpc(A, 'evm_revert', [snapshot]);
    await rpc(A, 'anvil_mine', ['0x1']);
    expect((await rpc(A, 'eth_sendRawTransaction', [raw])) as Hex).toBe(hash);
    const again = await pc.waitForTransactionReceipt({ hash });
    expect(again.blockNumber).toBe(at + 1n);
    await rpc(A, 'anvil_mine', ['0x5']);
    await until(
      () => (s.node.ledger.deposits.get(depositId)?.block_number === Number(at + 1n) && s.node.adapters.get(A)!.progress().ready ? true : undefined),
      'the deposit seen at its new block',
    );
    const status = await until(async () => {
      const r = (await api(s.url, `/intents/status/v3?requestId=${id}`)).body;
      return r.status === 'waiting' && s.node.ledger.deposits.get(depositId)?.state === 'unconfirmed' ? undefined : r;
    }, 'the deposit decided');
    // The chain holds a deposit of 1 wei: the ledger says so, and nothing is paid for 0.5 ETH.
    expect(s.node.ledger.deposits.get(depositId)!.amount).toBe('1');
    expect(s.node.ledger.payouts.get(`fill:${id}`)?.state).not.toBe('success');
    expect(status.status).not.toBe('success');
  });
});
