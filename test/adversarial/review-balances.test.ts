// Adversarial review of the money that leaves on request: app balance credits, holds, relays, signed deposits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, parseGwei, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { linkWallet } from '../helpers/link.ts';
import { api, byValueOn, permitQuote, startStack, until, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;

beforeAll(async () => {
  // Chain A (the app balance funding chain): one confirmation, but what is worth $1000 or more waits 4 blocks.
  s = await startStack({ chains: byValueOn(A, [{ minUsd: '1000', confirmations: 4 }]) });
});
afterAll(async () => {
  await s?.stop();
});

const rpc = (chainId: number, method: string, params: unknown[] = []) => s.publicClient(chainId).request({ method: method as never, params: params as never });
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const marker = (credited: Address) => `012345abcdef${credited.slice(2).toLowerCase()}012345abcdef`;
const credit = (hash: Hex) => s.node.ledger.balances.get(`credit:${A}:${hash}`);

describe('app balance funding and confirmations by value', () => {
  it("a funding transfer worth more than a confirmationsByValue row waits for that row's blocks: a reorg shallower than it cannot take back a credit the attacker already spent", async () => {
    // The attacker funds its own app balance with $2000 (deposits of that worth wait 4 blocks on chain A) and,
    // once credited, fast-fills $1500 of orders paid out on chain B, then has the funding block reorged away.
    const funder = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const wallet = privateKeyToAccount(generatePrivateKey());
    const key = s.node.ledger.apiKeys.create('funding by value');
    expect((await linkWallet(s.url, key.key, wallet)).status).toBe(200);
    const q = await api(s.url, '/quote/v2', {
      apiKey: key.key,
      body: {
        user: wallet.address,
        recipient: wallet.address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '1500000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;

    const snapshot = (await rpc(A, 'evm_snapshot')) as Hex;
    const w = s.wallet(1, A);
    const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 2_000_000_000n] })}${marker(wallet.address)}` as Hex;
    const hash = await w.sendTransaction({ account: funder, chain: w.chain, to: usdc(A), data });
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    // Two more blocks: the transfer is 3 blocks deep, one short of its row.
    await rpc(A, 'anvil_mine', ['0x2']);
    expect(Number(await s.publicClient(A).getBlockNumber({ cacheTime: 0 })) - Number(receipt.blockNumber) + 1).toBe(3);
    // The scan has read the blocks before the transfer's; the credit, where it is booked at 3 blocks, comes at
    // once (a pass runs on every head). Bounded: a credit that is not due is not expected to appear.
    await until(() => ((s.node.ledger.indexer.cursor(A, 'app-balance') ?? 0) >= Number(receipt.blockNumber) - 1 ? true : undefined), 'the funding scan');
    await until(() => credit(hash), 'a credit at 3 blocks', 5_000).catch(() => undefined);
    const early = credit(hash);
    // Spend it while the funding can still be reorged away.
    const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId } });
    if (ff.status === 200) await until(() => (s.node.ledger.payouts.get(`fill:${requestId}`)?.state === 'success' ? true : undefined), 'the fast fill paid');

    // The block is reorged away (3 deep, under the row's 4): the chain grows without it.
    await rpc(A, 'evm_revert', [snapshot]);
    await rpc(A, 'anvil_mine', ['0x6']);
    await until(() => ((s.node.ledger.indexer.cursor(A, 'app-balance') ?? 0) >= Number(receipt.blockNumber) + 4 ? true : undefined), 'the scan past the reorg');
    if (early) await until(() => (s.node.ledger.balances.get(`credit_reversal:credit:${A}:${hash}`) ? true : undefined), 'the reversal');
    const paid = s.node.ledger.payouts.get(`fill:${requestId}`);
    // Before: credited at 3 blocks, the fast fill paid 1498.5 USDC on chain B, and the reorg left the wallet at
    // -1500 USD available (the hold, to become a permanent debit), a debt nobody pays. Now: nothing is credited before the row's 4 blocks, nothing paid.
    expect({ credited: early?.amount, fastFill: ff.status, paid: paid?.state, available: s.node.ledger.balances.summary(wallet.address).available }).toEqual({
      credited: undefined,
      fastFill: 402,
      paid: undefined,
      available: 0n,
    });
  });

  it('a funding transfer worth more than the row is credited once it is as deep as the row asks', async () => {
    const funder = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const wallet = privateKeyToAccount(generatePrivateKey());
    const w = s.wallet(1, A);
    const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 2_000_000_000n] })}${marker(wallet.address)}` as Hex;
    const hash = await w.sendTransaction({ account: funder, chain: w.chain, to: usdc(A), data });
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    await rpc(A, 'anvil_mine', ['0x3']);
    const booked = await until(() => credit(hash), 'the credit at 4 blocks');
    expect(booked.amount).toBe(2_000_000_000n);
    expect(s.node.ledger.funding.ofTx(A, hash)[0]).toMatchObject({ block_number: Number(receipt.blockNumber), reversed: false });
  });
});

describe('a gasless signed deposit the permit owner makes revert on chain', () => {
  it('charges the sponsor the gas the reverted deposit burned, as a reverted relay is: the solver does not pay it for the key that posted it', async () => {
    // The attacker holds an API key linked to its own app balance and is the permit's owner. It quotes a sponsored
    // usePermit order, posts the permit through POST /execute (the node pays the deposit's gas on the sponsor's
    // word), and moves its tokens away in the same block, ahead of the node's deposit: the deposit reverts on chain.
    const key = s.node.ledger.apiKeys.create('gasless griefer');
    const sponsor = privateKeyToAccount(generatePrivateKey());
    expect((await linkWallet(s.url, key.key, sponsor)).status).toBe(200);
    const w0 = s.wallet(0, A);
    const fund = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 5_000_000n] })}${marker(sponsor.address)}` as Hex;
    const funded = await w0.sendTransaction({ account: w0.account!, chain: w0.chain, to: usdc(A), data: fund });
    await s.publicClient(A).waitForTransactionReceipt({ hash: funded });
    await until(() => (s.node.ledger.balances.summary(sponsor.address).balance === 5_000_000n ? true : undefined), 'the app balance credit');

    const owner = s.devnet.accounts[3]!;
    const q = await permitQuote(s, owner.address, { subsidizeFees: true, maxSubsidizationAmount: '1000000' }, key.key);
    expect(q.status).toBe(200);
    const step = q.body.steps[0];
    const requestId = step.requestId as Hex;
    const signature = await privateKeyToAccount(owner.privateKey).signTypedData({ ...step.items[0].data.sign, message: step.items[0].data.sign.value });

    await rpc(A, 'evm_setAutomine', [false]);
    try {
      expect((await api(s.url, '/execute', { apiKey: key.key, body: { ...step.items[0].data.post.body, signature } })).status).toBe(200);
      // The node's deposit is in the mempool; the owner's transfer away outbids it into the same block.
      await until(() => (s.node.ledger.payouts.txsOf(`deposit:${requestId}`).some((t) => t.state === 'broadcast') ? true : undefined), 'the deposit broadcast');
      const user = s.wallet(3, A);
      const held = await s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [owner.address] });
      await user.writeContract({
        account: user.account!,
        chain: user.chain,
        address: usdc(A),
        abi: erc20Abi,
        functionName: 'transfer',
        args: [s.devnet.accounts[4]!.address, held],
        // Its own gas limit: estimated on the pending state, where the deposit took 7 USDC first, it would revert.
        gas: 100_000n,
        maxPriorityFeePerGas: parseGwei('50'),
        maxFeePerGas: parseGwei('200'),
      });
      await rpc(A, 'evm_mine');
    } finally {
      await rpc(A, 'evm_setAutomine', [true]);
    }
    await until(() => (s.node.ledger.requests.get(requestId)?.status === 'failure' ? true : undefined), 'the signed deposit failed');
    const tx = s.node.ledger.payouts.txsOf(`deposit:${requestId}`).find((t) => t.state === 'reverted');
    expect(tx?.fee).toBeDefined();
    const burned = BigInt(tx!.fee!);
    expect(burned).toBeGreaterThan(0n);
    // The gas the solver burned, in micro-USD at ETH's $3000 (rounded up).
    const burnedMicro = (burned * 3000n * 10n ** 6n + 10n ** 18n - 1n) / 10n ** 18n;
    // Before: the hold was released whole and the sponsor charged nothing (5 USD kept); the solver paid the gas.
    expect(s.node.ledger.balances.summary(sponsor.address)).toEqual({ balance: 5_000_000n - burnedMicro, held: 0n, available: 5_000_000n - burnedMicro });
  });
});

describe('a signed deposit whose order is then refunded', () => {
  it('bears the gas of the deposit the node sent for it, as a swept deposit bears its sweep: the solver keeps what it spent on the request', async () => {
    // Anyone (no key) quotes a usePermit order whose fill must fail: ETH on chain B to a recipient that refuses it
    // (the stablecoin contract has no receive function). The node pays the permit deposit's gas, the fill is
    // refused at its estimate and the deposit is refunded: before, less the refund's gas only, so each such order
    // cost the solver a deposit transaction, as often as anyone signed a permit.
    const user = s.devnet.accounts[2]!;
    const q = await permitQuote(s, user.address, { recipient: usdc(B), destinationCurrency: zeroAddress, amount: '20000000' });
    expect(q.status).toBe(200);
    const step = q.body.steps[0];
    const requestId = step.requestId as Hex;
    const signature = await privateKeyToAccount(user.privateKey).signTypedData({ ...step.items[0].data.sign, message: step.items[0].data.sign.value });
    expect((await api(s.url, '/permits', { body: { ...step.items[0].data.post.body, signature } })).status).toBe(200);
    await until(() => (s.node.ledger.payouts.get(`refund:${requestId}`)?.state === 'success' ? true : undefined), 'the refund paid', 60_000);
    expect(s.node.ledger.requests.get(requestId)!.fail_reason).toBe('EXECUTION_REVERTED');
    const spent = [`deposit:${requestId}`, `refund:${requestId}`]
      .flatMap((id) => s.node.ledger.payouts.txsOf(id))
      .reduce((sum, t) => sum + BigInt(t.fee ?? 0), 0n);
    const kept = 20_000_000n - BigInt(s.node.ledger.payouts.get(`refund:${requestId}`)!.amount);
    // What the solver kept of the 20 USDC (micro-USD) against the gas it paid for the request (ETH at $3000).
    expect(kept).toBeGreaterThanOrEqual((spent * 3000n * 10n ** 6n) / 10n ** 18n);
  });
});
