// Attacks on app balance funding: a credit only for value the chain proves arrived, and a credit
// whose transfer a reorg removes is reversed (issue 12, item 1).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, getContractAddress, type Address, type Hex } from 'viem';
import { FeeOnTransferTokenAbi, FeeOnTransferTokenBytecode, RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { erc20TransferCall, signCallRequest } from '../../src/chains/evm/callRequest.ts';
import { linkWallet } from '../helpers/link.ts';
import { api, startStack, until, type Stack } from '../helpers/stack.ts';

// Instant mining and three confirmations: blocks appear only when the test mines them, so the test
// decides when a funding transfer is confirmed and can rewind the chain under a booked credit.
let s: Stack;
// A fee-on-transfer token (1% burnt on every transfer), deployed by a fresh key at its first nonce, so
// its address is known before the chain exists and the node's config can list it as a currency.
const fotDeployer = privateKeyToAccount(generatePrivateKey());
const fot = getContractAddress({ from: fotDeployer.address, nonce: 0n });
let deployed = false;
beforeAll(async () => {
  // The node reads its tokens at start: it is restarted with the token in its config once deployed.
  s = await startStack({
    confirmations: 3,
    configure: (c) =>
      deployed
        ? {
            ...c,
            chains: c.chains.map((ch: any) =>
              ch.id === 8453
                ? { ...ch, currencies: [...ch.currencies, { address: fot, symbol: 'FOT', name: 'Fee On Transfer', decimals: 6, usdPrice: '1' }] }
                : ch,
            ),
          }
        : c,
  });
  await rpc('anvil_setBalance', [fotDeployer.address, '0xde0b6b3a7640000']);
  const w = s.wallet(0, A);
  const hash = await w.deployContract({
    account: fotDeployer,
    chain: w.chain,
    abi: FeeOnTransferTokenAbi,
    bytecode: FeeOnTransferTokenBytecode,
    args: [s.devnet.accounts[1]!.address, 10n ** 12n],
  });
  await rpc('anvil_mine', ['0x1']);
  expect((await s.publicClient(A).waitForTransactionReceipt({ hash })).contractAddress?.toLowerCase()).toBe(fot.toLowerCase());
  deployed = true;
  await s.restartNode();
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

const A = 8453;
const B = 10;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const marker = (credited: Address) => `012345abcdef${credited.slice(2).toLowerCase()}012345abcdef`;
const rpc = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as any, params: params as any });
const scanned = (block: bigint) =>
  until(() => ((s.node.ledger.indexer.cursor(A, 'app-balance') ?? 0) >= Number(block) ? true : undefined), `the funding scan past block ${block}`);

// A fresh wallet with gas and no tokens, as an attacker would use.
async function attacker() {
  const account = privateKeyToAccount(generatePrivateKey());
  await rpc('anvil_setBalance', [account.address, '0xde0b6b3a7640000']);
  return account;
}

async function linkedKey(account: ReturnType<typeof privateKeyToAccount>) {
  const key = s.node.ledger.apiKeys.create(`key of ${account.address}`);
  expect((await linkWallet(s.url, key.key, account)).status).toBe(200);
  return key;
}

async function sendMarkedTransfer(from: ReturnType<typeof privateKeyToAccount>, amount: bigint, credited: Address, gas?: bigint): Promise<Hex> {
  const w = s.wallet(0, A);
  const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, amount] })}${marker(credited)}` as Hex;
  return w.sendTransaction({ account: from, chain: w.chain, to: usdc(A), data, gas });
}

describe('app balance funding under attack', () => {
  it('a reverted transfer(solver, 1e12) from a wallet with no USDC credits nothing, and its fast fill is refused', async () => {
    const evil = await attacker();
    // An explicit gas limit: the wallet skips estimation and the transaction is mined, reverted.
    const hash = await sendMarkedTransfer(evil, 10n ** 12n, evil.address, 200_000n);
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe('reverted');
    await rpc('anvil_mine', ['0x3']);
    await scanned(receipt.blockNumber);
    expect(s.node.ledger.balances.get(`credit:${A}:${hash}`)).toBeUndefined();
    expect(s.node.ledger.balances.summary(evil.address).balance).toBe(0n);

    // Linked to a key, the empty balance pays no fast fill.
    const key = await linkedKey(evil);
    const q = await api(s.url, '/quote/v2', {
      apiKey: key.key,
      body: {
        user: evil.address,
        recipient: evil.address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '500000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId } });
    expect(ff.status).toBe(402);
    expect(ff.body.errorCode).toBe('APP_BALANCE_TOO_LOW');
    expect(s.node.ledger.payouts.forRequest(requestId)).toEqual([]);
  });

  it('credits what the Transfer log moved, not what calldata says: a marked call that moves nothing credits nothing', async () => {
    // approve(solver, 1e12) with the marker: succeeds, moves nothing to the solver.
    const evil = await attacker();
    const w = s.wallet(0, A);
    const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [s.devnet.solver, 10n ** 12n] })}${marker(evil.address)}` as Hex;
    const hash = await w.sendTransaction({ account: evil, chain: w.chain, to: usdc(A), data });
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe('success');
    await rpc('anvil_mine', ['0x3']);
    await scanned(receipt.blockNumber);
    expect(s.node.ledger.balances.summary(evil.address).balance).toBe(0n);
  });

  it('the depository paying the solver, through an execute another account submits with its marker appended, credits nothing', async () => {
    // The depository holds 30 USDC a depositor left there.
    const depository = s.devnet.chains.find((c) => c.id === A)!.contracts.depository;
    const depositor = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const w = s.wallet(0, A);
    const amount = 30_000_000n;
    const stocked = await w.sendTransaction({
      account: depositor,
      chain: w.chain,
      to: usdc(A),
      data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [depository, amount] }),
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: stocked });

    // A withdrawal of it to the solver, signed by the allocator as the payout sender signs one: what
    // an attacker reads from the node's pending transaction. The attacker submits it with the marker
    // naming its own wallet after the arguments, which the contract ignores.
    const request = { calls: [erc20TransferCall(usdc(A), s.devnet.solver, amount)], nonce: 0xfeedn, expiration: 2n ** 40n };
    const signature = await signCallRequest({ chainId: A, depository, request, allocatorKey: s.devnet.keys.allocator });
    const evil = await attacker();
    const data = `${encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'execute', args: [request, signature] })}${marker(evil.address)}` as Hex;
    const solverBefore = await s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [s.devnet.solver] });
    const hash = await w.sendTransaction({ account: evil, chain: w.chain, to: depository, data });
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe('success');
    // The solver was paid its own withdrawal by this transaction.
    expect(await s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [s.devnet.solver] })).toBe(
      solverBefore + amount,
    );
    await rpc('anvil_mine', ['0x3']);
    await scanned(receipt.blockNumber);
    expect(s.node.ledger.funding.ofTx(A, hash)).toEqual([]);
    expect(s.node.ledger.balances.get(`credit:${A}:${hash}`)).toBeUndefined();
    expect(s.node.ledger.balances.summary(evil.address).balance).toBe(0n);
  });

  it('tokens moved to the solver from an address other than the sender (a transferFrom of an allowance) credit nothing', async () => {
    // Not the node's contract: the sender's own rule alone refuses it. The owner allowed the attacker 5
    // USDC; the attacker moves them to the solver with its marker.
    const owner = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const evil = await attacker();
    const w = s.wallet(0, A);
    const amount = 5_000_000n;
    const approved = await w.sendTransaction({
      account: owner,
      chain: w.chain,
      to: usdc(A),
      data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [evil.address, amount] }),
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: approved });
    const data =
      `${encodeFunctionData({ abi: erc20Abi, functionName: 'transferFrom', args: [owner.address, s.devnet.solver, amount] })}${marker(evil.address)}` as Hex;
    const hash = await w.sendTransaction({ account: evil, chain: w.chain, to: usdc(A), data });
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe('success');
    await rpc('anvil_mine', ['0x3']);
    await scanned(receipt.blockNumber);
    expect(s.node.ledger.funding.ofTx(A, hash)).toEqual([]);
    expect(s.node.ledger.balances.summary(evil.address).balance).toBe(0n);
  });

  it('a fee-on-transfer token credits what arrived (the Transfer log), not the amount in the calldata', async () => {
    const funder = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const wallet = await attacker();
    const w = s.wallet(0, A);
    const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 100_000_000n] })}${marker(wallet.address)}` as Hex;
    const hash = await w.sendTransaction({ account: funder, chain: w.chain, to: fot, data });
    await s.publicClient(A).waitForTransactionReceipt({ hash });
    await rpc('anvil_mine', ['0x3']);
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the credit');
    // 100 FOT sent, 1% burnt: 99 arrived, 99 USD credited.
    expect(s.node.ledger.balances.summary(wallet.address).balance).toBe(99_000_000n);
    expect(s.node.ledger.funding.ofTx(A, hash)[0]!.parts).toEqual([{ currency: fot, amount: 99_000_000n, logIndex: expect.any(Number) }]);
  });

  it('a reorg that drops a booked funding transfer reverses the credit with a new entry, and the fast fill it would pay is refused', async () => {
    const funder = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const wallet = await attacker();
    const key = await linkedKey(wallet);
    const snapshot = (await rpc('evm_snapshot')) as Hex;
    const hash = await sendMarkedTransfer(funder, 50_000_000n, wallet.address);
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    await rpc('anvil_mine', ['0x3']);
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the credit');
    expect(s.node.ledger.balances.summary(wallet.address).balance).toBe(50_000_000n);
    expect(s.node.ledger.funding.ofTx(A, hash)[0]).toMatchObject({ block_number: Number(receipt.blockNumber), wallet: wallet.address, reversed: false });

    // Rewind past the transfer and grow a longer chain without it.
    await rpc('evm_revert', [snapshot]);
    await rpc('anvil_mine', ['0x6']);
    await until(() => (s.node.ledger.balances.get(`credit_reversal:credit:${A}:${hash}`) ? true : undefined), 'the credit reversal');
    // The credit is still there, answered by a reversal entry: nothing was edited.
    expect(s.node.ledger.balances.get(`credit:${A}:${hash}`)).toMatchObject({ kind: 'credit', amount: 50_000_000n });
    expect(s.node.ledger.balances.get(`credit_reversal:credit:${A}:${hash}`)).toMatchObject({
      kind: 'credit_reversal',
      amount: -50_000_000n,
      wallet: wallet.address,
    });
    expect(s.node.ledger.balances.summary(wallet.address).balance).toBe(0n);

    const q = await api(s.url, '/quote/v2', {
      apiKey: key.key,
      body: {
        user: wallet.address,
        recipient: wallet.address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '10000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId: q.body.steps.at(-1).requestId } });
    expect(ff.status).toBe(402);
  });
  it('a balance driven negative by a reorg reversal blocks sponsorship and fast fill for its wallet, until a new funding transfer covers it', async () => {
    const funder = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const wallet = await attacker();
    const key = await linkedKey(wallet);
    const quote = (extra: Record<string, unknown> = {}) =>
      api(s.url, '/quote/v2', {
        apiKey: key.key,
        body: {
          user: wallet.address,
          recipient: wallet.address,
          originChainId: A,
          destinationChainId: B,
          originCurrency: usdc(A),
          destinationCurrency: usdc(B),
          amount: '10000000',
          tradeType: 'EXACT_INPUT',
          ...extra,
        },
      });
    const snapshot = (await rpc('evm_snapshot')) as Hex;
    const hash = await sendMarkedTransfer(funder, 20_000_000n, wallet.address);
    await s.publicClient(A).waitForTransactionReceipt({ hash });
    await rpc('anvil_mine', ['0x3']);
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the credit');

    // The 20 USD is spent: a fast fill paid on chain B whose deposit never comes (the app bears it).
    const spent = await quote();
    const spentId = spent.body.steps.at(-1).requestId as Hex;
    expect((await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId: spentId } })).status).toBe(200);
    await until(() => (s.node.ledger.payouts.get(`fill:${spentId}`)?.state === 'success' ? true : undefined), 'the fast fill paid');
    s.node.solver!.expireHolds(s.node.ledger.requests.get(spentId)!.fast_fill_deadline! + 1);
    const charged = -s.node.ledger.balances.get(`permanent_debit:${spentId}`)!.amount;
    expect(charged).toBeGreaterThan(0n);

    // A reorg drops the funding transfer: the balance goes below zero.
    await rpc('evm_revert', [snapshot]);
    await rpc('anvil_mine', ['0x6']);
    await until(() => (s.node.ledger.balances.get(`credit_reversal:credit:${A}:${hash}`) ? true : undefined), 'the credit reversal');
    expect(s.node.ledger.balances.summary(wallet.address)).toEqual({ balance: -charged, held: 0n, available: -charged });

    // Blocked: no fast fill, no sponsored quote, with a clear 4xx; nothing booked or paid.
    const next = await quote();
    const nextId = next.body.steps.at(-1).requestId as Hex;
    const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId: nextId } });
    expect(ff.status).toBe(402);
    expect(ff.body.errorCode).toBe('APP_BALANCE_TOO_LOW');
    const sponsored = await quote({ subsidizeFees: true });
    expect(sponsored.status).toBe(400);
    expect(sponsored.body.errorCode).toBe('SPONSOR_BALANCE_TOO_LOW');
    expect(s.node.ledger.payouts.forRequest(nextId)).toEqual([]);
    expect(s.node.ledger.balances.ofRequest(nextId)).toEqual([]);

    // A new funding transfer covering the debt and more unblocks both.
    const cover = await sendMarkedTransfer(funder, charged + 30_000_000n, wallet.address);
    await s.publicClient(A).waitForTransactionReceipt({ hash: cover });
    await rpc('anvil_mine', ['0x3']);
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${cover}`) ? true : undefined), 'the covering credit');
    expect(s.node.ledger.balances.summary(wallet.address).balance).toBe(30_000_000n);
    expect((await quote({ subsidizeFees: true })).status).toBe(200);
    const again = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId: nextId } });
    expect(again.status).toBe(200);
    await until(() => (s.node.ledger.payouts.get(`fill:${nextId}`)?.state === 'success' ? true : undefined), 'the unblocked fast fill paid');
  });
});
