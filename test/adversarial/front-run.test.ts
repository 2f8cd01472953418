// A deposit that cannot pay its order, front-running the user's own: an attacker who sees the user's
// deposit in the mempool sends a 1000-wei deposit naming the same order ahead of it, in the same block.
// Decided first, it failed the order (DEPOSITED_AMOUNT_TOO_LOW_TO_FILL), and the user's deposit was then
// refunded as a DOUBLE_SPEND, less the refund's gas: a grief the attacker could repeat on every order
// for the gas of one deposit. The deposit that pays the order goes first; the attacker's is its own
// request, refunded to itself (or, as here, too small to refund).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { api, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const account = (i: number) => s.devnet.accounts[i]!;

// A depositor the operator denies: its deposits are left to an operator, never refunded on their own.
const DENIED = '0x000000000000000000000000000000000000dead';

beforeAll(async () => {
  s = await startStack({ configure: (c) => ({ ...c, risk: { ...c.risk, denyDepositors: [DENIED] } }) });
});
afterAll(async () => {
  await s?.stop();
});

describe('a deposit front-running the deposit of the same order', () => {
  it('cannot fail the order: the deposit that pays it is decided first, in the same block', async () => {
    const user = account(1).address;
    const recipient = account(2).address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, recipient, A, B, '10000000000000000') });
    expect(q.status).toBe(200);
    const item = q.body.steps[0].items[0].data;
    const requestId = q.body.steps[0].requestId as Hex;
    const rpcA = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method, params } as never) as Promise<any>;
    const pending = async () => Object.values((await rpcA('txpool_content')).pending ?? {}).length;
    const before = await s.publicClient(B).getBalance({ address: recipient });

    await rpcA('evm_setAutomine', [false]);
    try {
      // The same call (the same order id), 1000 wei, with a higher tip: first in the block.
      const attacker = s.wallet(4, A);
      await attacker.sendTransaction({
        account: attacker.account!,
        chain: attacker.chain,
        to: item.to,
        data: item.data,
        value: 1_000n,
        maxPriorityFeePerGas: 10_000_000_000n,
        maxFeePerGas: 100_000_000_000n,
      });
      const wallet = s.wallet(1, A);
      await wallet.sendTransaction({ account: wallet.account!, chain: wallet.chain, to: item.to, data: item.data, value: BigInt(item.value) });
      await until(async () => ((await pending()) >= 2 ? true : undefined), 'both deposits in the mempool');
      await rpcA('evm_mine');
    } finally {
      await rpcA('evm_setAutomine', [true]);
    }

    const done = await waitForStatus(s.url, requestId, ['success', 'refund', 'failure']);
    expect(done).toMatchObject({ status: 'success' });
    expect((await s.publicClient(B).getBalance({ address: recipient })) - before).toBe(BigInt(q.body.details.currencyOut.amount));
    // The attacker's deposit: a request of its own, decided after the order was paid, never a payout to the user.
    const deposits = s.node.ledger.deposits.byOrderRef(requestId);
    expect(deposits.map((d) => d.amount).sort()).toEqual(['1000', item.value].sort());
    const dust = await until(() => {
      const d = s.node.ledger.deposits.byOrderRef(requestId).find((x) => x.amount === '1000');
      return d?.state === 'handled' ? d : undefined;
    }, "the attacker's deposit decided");
    expect(dust.request_id).not.toBe(requestId);
    expect(s.node.ledger.requests.get(dust.request_id!)).toMatchObject({ status: 'failure', fail_reason: 'DOUBLE_SPEND' });
    expect(s.node.ledger.payouts.forRequest(requestId).map((p) => [p.kind, p.state])).toEqual([['fill', 'success']]);
  });

  it('a deposit naming a paid order from a denied depositor is a request of its own: the order stays paid', async () => {
    // The denial rewrote the decision as the order's own failure: anyone could name a denied depositor
    // (it is an argument of the deposit) and turn a paid order into a BLOCKED_WALLET failure awaiting a
    // manual refund, or, before its deposit, take the order's deposit slot.
    const q = await api(s.url, '/quote', { body: nativeBridge(account(1).address, account(2).address, A, B, '10000000000000000') });
    const item = q.body.steps[0].items[0].data;
    const requestId = q.body.steps[0].requestId as Hex;
    const w = s.wallet(1, A);
    await s.publicClient(A).waitForTransactionReceipt({
      hash: await w.sendTransaction({ account: w.account!, chain: w.chain, to: item.to, data: item.data, value: BigInt(item.value) }),
    });
    await waitForStatus(s.url, requestId, ['success']);
    const attacker = s.wallet(4, A);
    await s.publicClient(A).waitForTransactionReceipt({
      hash: await attacker.sendTransaction({
        account: attacker.account!,
        chain: attacker.chain,
        to: item.to,
        data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [DENIED, requestId] }),
        value: 10n ** 15n,
      }),
    });
    const denied = await until(() => {
      const d = s.node.ledger.deposits.byOrderRef(requestId).find((x) => x.depositor.toLowerCase() === DENIED);
      return d?.state === 'handled' ? d : undefined;
    }, "the denied depositor's deposit decided");
    expect(denied.request_id).not.toBe(requestId);
    expect(s.node.ledger.requests.get(denied.request_id!)).toMatchObject({ fail_reason: 'BLOCKED_WALLET', refund_fail_reason: 'MANUAL_REFUND_REQUIRED' });
    expect(s.node.ledger.requests.get(requestId)).toMatchObject({ status: 'success', fail_reason: null });
    expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('success');
  });
});
