// Adversarial review of the day's commits (bd1fa60, 8000bc6, 77f948f, 0e7358c, bcfdd8f), second pass.
//
// bcfdd8f returns a depository deposit's part beyond the input its request's fast fill was priced at as an excess, and
// widened the solver's #excessOf with it, which the operator's manual refund (#manualExcess) also reads. A fast-filled
// deposit whose excess was not returned when it settled (a fast fill settled before bcfdd8f kept it whole; one at most
// a return's gas is not returned) was counted owed to the solver whole, and a withdrawal took it out of the depository.
// The operator's refund of that excess then paid it out of the depository all the same: out of other users' deposits.
//
// Real devnet (anvil), the node and its admin API over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { fundAppBalance, linkWallet } from '../helpers/appBalance.ts';
import { mineAtBaseFee } from '../helpers/baseFee.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
let adminKey: string;
let app: { key: string; id: string };
const A = 8453;
const B = 10;
// Devnet account 4 holds the app's balance; account 2 is the user.
const APP_WALLET = 4;
const USER = 2;

beforeAll(async () => {
  s = await startStack({ config: { admin: { port: 0 } } });
  adminKey = s.node.ledger.operations.createAdminKey('ops').key;
  app = s.node.ledger.apiKeys.create('app');
  await linkWallet(s, app, APP_WALLET);
  await fundAppBalance(s, APP_WALLET, s.devnet.accounts[APP_WALLET]!.address, 100_000_000n);
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin as Address;
const admin = (path: string, body?: unknown) =>
  api(s.node.adminUrl, path, { method: body === undefined ? 'GET' : 'POST', body, headers: { authorization: `Bearer ${adminKey}` } });

// Waits until the solver has read a snapshot of gas and prices since now (its decisions use one up to 3 s old): its
// inventory gauge shows a transfer to the solver made after this call.
async function solverSnapshotSinceNow(): Promise<void> {
  const w = s.wallet(0, A);
  const hash = await w.writeContract({
    account: w.account!,
    chain: w.chain,
    address: usdc(A),
    abi: erc20Abi,
    functionName: 'transfer',
    args: [s.devnet.solver as Address, 1n],
  });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  const held = await s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [s.devnet.solver as Address] });
  await until(async () => {
    const g = await s.node.metrics.solverBalance.get();
    return g.values.some((v) => String(v.labels.chain) === String(A) && v.labels.currency === 'USDC' && v.value === Number(held)) ? true : undefined;
  }, 'a snapshot read since the gas rose');
}

describe("bcfdd8f: an operator's refund of a fast-filled deposit's excess", () => {
  it('is refused once a withdrawal took the deposit: the depository no longer holds it, and other deposits would pay it', { timeout: 180_000 }, async () => {
    // 10 USDC from A to B quoted with the app's key, fast-filled priced at 9 USDC.
    const user = s.devnet.accounts[USER]!.address as Address;
    const q = await api(s.url, '/quote/v2', {
      apiKey: app.key,
      body: {
        user,
        recipient: privateKeyToAccount(generatePrivateKey()).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '10000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId, solverInputCurrencyAmount: '9000000' } });
    expect({ status: ff.status, body: ff.body }).toMatchObject({ status: 200 });
    await waitForStatus(s.url, requestId, ['success']);

    // Gas on A is dear when the user's 10 USDC settle the fast fill: returning the 1 USDC beyond 9 would cost more
    // than it brings, so it is not returned (as any excess at most its own return's gas), and the deposit is owed whole.
    await mineAtBaseFee(s, A, 200_000_000_000n);
    await solverSnapshotSinceNow();
    await executeSteps(s, q.body, USER);
    await until(() => (s.node.ledger.balances.get(`hold_release:${requestId}`) ? true : undefined), 'the hold release');
    expect(s.node.ledger.payouts.forRequest(requestId).filter((p) => p.kind === 'excess')).toEqual([]);
    const d = s.node.ledger.deposits.forRequest(requestId)[0]!;
    expect(d.amount).toBe('10000000');
    await until(() => s.node.ledger.withdrawals.owed(A, usdc(A)).find((o) => o.id === d.id && o.owed === 10_000_000n), 'the deposit owed whole');

    // Gas gets cheap again; the operator withdraws what the depository owes the solver, this deposit with it.
    await mineAtBaseFee(s, A, 1_000_000n);
    const w = await admin('/admin/withdrawals', { chainId: A, currency: usdc(A), depositIds: [d.id], reason: 'inventory back to the solver' });
    expect(w.status, JSON.stringify(w.body)).toBe(200);
    const withdrawal = w.body.withdrawal.payoutId as string;
    await until(() => (s.node.ledger.payouts.get(withdrawal)?.state === 'success' ? true : undefined), 'the withdrawal paid', 60_000);

    // The user asks for the 1 USDC back; the operator refunds the request. The depository paid the whole deposit to
    // the solver: an excess of it now would come out of other users' deposits.
    // (Asked again while the solver's snapshot still prices the return at the dear gas: a refusal for that says nothing.)
    const r = await until(async () => {
      const a = await admin(`/admin/requests/${requestId}/refund`, { reason: 'the user overpaid' });
      return a.status === 409 && /cannot pay its own return/.test(a.body.message) ? undefined : a;
    }, "the operator's refund answered at today's gas");
    const excess = s.node.ledger.payouts.forRequest(requestId).filter((p) => p.kind === 'excess');
    expect({ status: r.status, excess }).toEqual({ status: 409, excess: [] });
    expect(r.body.message).toMatch(/withdrawal/);
  });
});
