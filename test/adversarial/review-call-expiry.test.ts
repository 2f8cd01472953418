// A failed refund's (or withdrawal's) signed depository call stays executable by anyone until block.timestamp passes
// its expiration. The node judged it dead by its own clock: with the chain's block timestamps behind the node's (a
// node clock running fast, a sequencer catching up after downtime), the node paid again while the old call still
// executed on chain: the deposit paid twice. Dead now means the chain shows it: not executed, and a block the chain's
// confirmations deep carries a timestamp past the expiration.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { getAddress, parseEther, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
let adminKey: string;
const A = 8453;
const B = 10;
const DAY = 86_400_000;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const rpc = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as any, params: params as any });
const admin = (path: string, body: unknown) => api(s.node.adminUrl, path, { body, headers: { authorization: `Bearer ${adminKey}` } });
const balance = (who: Address) => s.publicClient(A).getBalance({ address: who });
const settled = (payoutId: string) => (['success', 'failed'].includes(s.node.ledger.payouts.get(payoutId)?.state ?? '') ? true : undefined);

beforeAll(async () => {
  s = await startStack({ config: { admin: { port: 0 } } });
  adminKey = s.node.ledger.operations.createAdminKey('ops-review').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

// Runs fn with the node's clock (Date.now, still ticking) `days` ahead of the chain's block timestamps.
async function nodeClockAhead<T>(days: number, fn: () => Promise<T>): Promise<T> {
  const real = Date.now.bind(Date);
  const spy = vi.spyOn(Date, 'now').mockImplementation(() => real() + days * DAY);
  try {
    return await fn();
  } finally {
    spy.mockRestore();
  }
}

// The attacker submits a signed depository call (public calldata) from a wallet of its own, once the depository holds
// other users' deposits (1 ETH more, as any live depository does); returns what the call took out of the depository.
async function submit(call: Hex): Promise<bigint> {
  const depository = chain(A).contracts.depository;
  await rpc('anvil_setBalance', [depository, toHex((await balance(depository)) + parseEther('1'))]);
  const before = await balance(depository);
  const w = s.wallet(4, A);
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: depository, data: call, gas: 500_000n });
  expect((await s.publicClient(A).waitForTransactionReceipt({ hash })).status).toBe('success');
  return before - (await balance(depository));
}

// A refund target in raw bytecode: paid at a gas price of 0 (an estimate) it accepts; on chain it takes the first
// ether sent to it and reverts on every later payment.
const ACCEPT_ONCE_ON_CHAIN: Hex = '0x6019600c60003960196000f33a156017576000546011576001600055005b60006000fd5b00';

describe("a failed signed call's expiry is the chain's, not the node's clock", () => {
  it("a refund by hand while the chain's blocks have not passed the failed refund's expiry is refused: the old call still executes", async () => {
    // 0.013 ETH to a strict deposit address quoted 0.01: the fill fails (its recipient, a token contract, refuses ether);
    // refundTo takes the excess, then refuses the refund on chain, which reverts there. In an estimate (gas price 0) it
    // accepts anything: the refund is signed whether or not the excess has landed when it is prepared (with a contract
    // that refused there too, the refund failed unsigned whenever the excess landed first, and there was no call).
    const deployer = s.wallet(0, A);
    const deployed = await deployer.deployContract({ account: deployer.account!, chain: deployer.chain, abi: [], bytecode: ACCEPT_ONCE_ON_CHAIN });
    const refundTo = getAddress((await s.publicClient(A).waitForTransactionReceipt({ hash: deployed })).contractAddress!);
    const q = await api(s.url, '/quote/v2', {
      body: {
        user: s.devnet.accounts[1]!.address,
        recipient: chain(B).contracts.stablecoin,
        refundTo,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        tradeType: 'EXACT_INPUT',
        useDepositAddress: true,
        amount: parseEther('0.01').toString(),
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps.at(-1);
    const id = step.requestId as Hex;
    const w = s.wallet(1, A);
    await s.publicClient(A).waitForTransactionReceipt({
      hash: await w.sendTransaction({ account: w.account!, chain: w.chain, to: step.depositAddress, value: parseEther('0.013') }),
    });
    await until(() => (s.node.ledger.payouts.get(`refund:${id}`)?.state === 'failed' ? true : undefined), "the fill's refund refused");
    expect(await waitForStatus(s.url, id, ['failure'])).toMatchObject({ refundFailReason: 'MANUAL_REFUND_REQUIRED' });
    const failed = s.node.ledger.payouts.get(`refund:${id}`)!;
    // Its signed call is public: the input of its reverted transaction.
    const [reverted] = s.node.ledger.payouts.txsOf(failed.id);
    expect(reverted?.state).toBe('reverted');
    const call = (await s.publicClient(A).getTransaction({ hash: reverted!.hash as Hex })).input;

    // The node's clock 8 days on (past the call's 7-day expiry); the chain's blocks are not (their timestamps are anvil's).
    const to = privateKeyToAccount(generatePrivateKey()).address;
    await rpc('evm_mine');
    const r = await nodeClockAhead(8, () => admin(`/admin/requests/${id}/refund`, { reason: 'review: refundTo refuses', to }));
    if (r.status === 200) await until(() => settled(r.body.refund.payoutId), 'the refund by hand settled');

    // The attacker (refundTo's owner) makes refundTo accept, and submits the failed refund's public call.
    await rpc('anvil_setCode', [refundTo, '0x']);
    const oldCall = await submit(call);
    expect(oldCall).toBe(BigInt(failed.amount));
    // Paid out of the 0.013 deposit: the excess, the old call, and the refund by hand. Before: 0.003 + 0.0099 + 0.0099.
    const paid = BigInt(s.node.ledger.payouts.get(`excess:${id}`)!.amount) + oldCall + (await balance(to));
    expect(paid, `paid ${paid} out of a deposit of ${parseEther('0.013')}`).toBeLessThanOrEqual(parseEther('0.013'));
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.message).toMatch(/can still be executed/);
  });

  it("a failed withdrawal's deposits stay taken while the chain's blocks have not passed its call's expiry", { timeout: 180_000 }, async () => {
    const account = s.devnet.accounts[1]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(account, account, A, B, '10000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, 1);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    const depositId = s.node.ledger.deposits.byOrderRef(requestId)[0]!.id;
    const depository = chain(A).contracts.depository;

    // The withdrawal is sent; the depository is emptied before its block, so it reverts; then it holds its deposits again.
    let payoutId = '';
    await rpc('evm_setAutomine', [false]);
    try {
      const r = await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, depositIds: [depositId], reason: 'review' });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      payoutId = r.body.withdrawal.payoutId as string;
      await until(() => (s.node.ledger.payouts.txsOf(payoutId).some((t) => t.broadcast_at !== null) ? true : undefined), 'the withdrawal sent');
      const held = await s.publicClient(A).getBalance({ address: depository });
      await rpc('anvil_setBalance', [depository, '0x0']);
      await rpc('evm_mine');
      await rpc('anvil_setBalance', [depository, toHex(held)]);
    } finally {
      await rpc('evm_setAutomine', [true]);
    }
    const [sent] = s.node.ledger.payouts.txsOf(payoutId);
    const call = (await s.publicClient(A).getTransaction({ hash: sent!.hash as Hex })).input;
    await rpc('anvil_mine', ['0x4']);
    await until(() => (s.node.ledger.payouts.get(payoutId)?.state === 'failed' ? true : undefined), 'the withdrawal failed');
    expect(s.node.ledger.withdrawals.depositsOf(payoutId)).toEqual([depositId]);

    // The node's clock past the call's expiry, the chain's blocks not: the solver's tick reads the call again (twice, to
    // be sure it acted on a read), and the deposits stay taken. Before: released, withdrawn again, and the old call
    // (submitted by anyone) took them a second time.
    const signedCalls = s.node.chains.signedCalls(A)!;
    const reads = vi.spyOn(signedCalls, 'callOutcome');
    const again = await nodeClockAhead(8, async () => {
      await until(
        () => (reads.mock.calls.length >= 2 || s.node.ledger.withdrawals.depositsOf(payoutId).length === 0 ? true : undefined),
        'the failed withdrawal read again',
      );
      return admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, depositIds: [depositId], reason: 'review: again' });
    });
    reads.mockRestore();
    let twice = 0n;
    if (again.status === 200) {
      const second = again.body.withdrawal.payoutId as string;
      await until(() => settled(second), 'the second withdrawal settled');
      if (s.node.ledger.payouts.get(second)!.state === 'success') twice += BigInt(s.node.ledger.payouts.get(second)!.amount);
    }
    const taken = await submit(call);
    expect(taken, 'the old call took the deposit').toBeGreaterThan(0n);
    expect(twice, `withdrawn again after the old call's ${taken}: the deposit left the depository twice`).toBe(0n);
    expect(again.body.errorCode).toBe('DEPOSIT_NOT_OWED');
  });
});
