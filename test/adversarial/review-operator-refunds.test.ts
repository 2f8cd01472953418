// Deposits that stayed in the depository for good (review of the operator's refund). (1) A refund whose
// recipient refuses it (a contract refundTo) ends MANUAL_REFUND_REQUIRED, and the operator's refund paid the
// same address again, which refused again: the operator may now name another recipient (`to`). (2) A deposit
// address's excess that failed after its fill succeeded: the operator's refund refused any filled request, so
// once the excess's signed call expired nothing returned it; it now returns the excess (only the excess).
// Both keep the guards: refused while a failed refund's or excess's signed call can still execute, never more
// back than the deposit brought, never a deposit a reorg took back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAddress, parseEther, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AcceptOnceAbi, AcceptOnceBytecode } from '../../contracts-abi/index.ts';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { daysLater } from '../helpers/daysLater.ts';
import { api, holdSubmitter, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
let adminKey: string;
const A = 8453;
const B = 10;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;

beforeAll(async () => {
  s = await startStack({ config: { admin: { port: 0 } } });
  adminKey = s.node.ledger.operations.createAdminKey('ops-bob').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const admin = (path: string, body?: unknown) =>
  api(s.node.adminUrl, path, { method: body === undefined ? 'GET' : 'POST', body, headers: { authorization: `Bearer ${adminKey}` } });
const refundByHand = (id: Hex, extra: Record<string, unknown> = {}) => admin(`/admin/requests/${id}/refund`, { reason: 'refundTo refuses ether', ...extra });
const fresh = () => privateKeyToAccount(generatePrivateKey()).address;
const balance = (who: Address) => s.publicClient(A).getBalance({ address: who });
const settled = (payoutId: string) => {
  const p = s.node.ledger.payouts.get(payoutId);
  return p && (p.state === 'success' || p.state === 'failed') ? p : undefined;
};

const later = <T>(days: number, fn: () => Promise<T>) => daysLater(chain(A).rpcUrl, days, fn);

// A strict deposit address quote of 0.01 ETH A→B, paid 0.013 ETH by a plain transfer.
async function overpaidOrder(o: { recipient: Address; refundTo: Address }): Promise<Hex> {
  const q = await api(s.url, '/quote/v2', {
    body: {
      user: account(1).address,
      recipient: o.recipient,
      refundTo: o.refundTo,
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
  const w = s.wallet(1, A);
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: step.depositAddress, value: parseEther('0.013') });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  return step.requestId as Hex;
}

describe("the operator's refund to another recipient (`to`)", () => {
  // The fill fails (its recipient, a token contract, refuses ether); refundTo (a contract that takes ether once)
  // takes the excess and refuses the refund: left for an operator.
  async function refundRefused(): Promise<{ id: Hex; refundTo: Address }> {
    const deployer = s.wallet(0, A);
    const deployed = await deployer.deployContract({ account: deployer.account!, chain: deployer.chain, abi: AcceptOnceAbi, bytecode: AcceptOnceBytecode });
    const refundTo = getAddress((await s.publicClient(A).waitForTransactionReceipt({ hash: deployed })).contractAddress!);
    const id = await overpaidOrder({ recipient: usdc(B), refundTo });
    await until(() => (s.node.ledger.payouts.get(`excess:${id}`)?.state === 'success' ? true : undefined), 'the excess returned');
    await until(() => (s.node.ledger.payouts.get(`refund:${id}`)?.state === 'failed' ? true : undefined), "the fill's refund refused");
    expect(await waitForStatus(s.url, id, ['failure'])).toMatchObject({ refundFailReason: 'MANUAL_REFUND_REQUIRED' });
    return { id, refundTo };
  }

  it('pays a refused refund to the address the operator names, once its failed call is dead, recorded with who, why and where', async () => {
    const { id, refundTo } = await refundRefused();
    const to = fresh();
    // While the failed refund's signed call can still be executed, a refund by hand (to anyone) could pay twice.
    const early = await refundByHand(id, { to });
    expect(early.status).toBe(409);
    expect(early.body.message).toMatch(/can still be executed until/);

    const r = await later(8, () => refundByHand(id, { to }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const payout = s.node.ledger.payouts.get(r.body.refund.payoutId)!;
    expect(payout).toMatchObject({ kind: 'refund', recipient: to, chain_id: A });
    // The quoted part only: the excess went back to refundTo already.
    const amount = BigInt(r.body.refund.amount);
    expect(amount).toBeLessThan(parseEther('0.01'));
    expect(amount).toBeGreaterThan(parseEther('0.009'));
    expect(amount + BigInt(s.node.ledger.payouts.get(`excess:${id}`)!.amount)).toBeLessThan(parseEther('0.013'));
    const paid = await until(() => settled(payout.id), 'the refund to `to` settled');
    expect(paid.state).toBe('success');
    expect(await balance(to)).toBe(amount);
    expect(await waitForStatus(s.url, id, ['refund'])).toMatchObject({ status: 'refund', failReason: 'MANUAL_ADMIN_REFUND' });

    const [action] = (await admin(`/admin/actions?target=request:${id}`)).body.actions;
    expect(action).toMatchObject({ action: 'refund', reason: 'refundTo refuses ether' });
    expect(action.actor).toContain('ops-bob');
    expect(JSON.parse(action.detail)).toMatchObject({ to, insteadOf: refundTo, kind: 'refund' });
    // Paid: a second one (to anyone) is refused.
    expect((await later(8, () => refundByHand(id, { to: fresh() }))).status).toBe(409);
  });

  it('refuses a `to` that is not an address of the deposit chain, or the zero address (400), and changes nothing', async () => {
    const { id } = await refundRefused();
    for (const to of ['0x1234', 'not an address', zeroAddress, '11111111111111111111111111111111']) {
      const r = await later(8, () => refundByHand(id, { to }));
      expect(r.status, `${to}: ${JSON.stringify(r.body)}`).toBe(400);
      expect(r.body.message).toMatch(/to/);
    }
    expect(s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'refund' && p.state !== 'failed')).toEqual([]);
    expect(await waitForStatus(s.url, id, ['failure'])).toMatchObject({ refundFailReason: 'MANUAL_REFUND_REQUIRED' });
  });

  it('never pays a deposit a reorg took back, whatever `to` says', async () => {
    const { id } = await refundRefused();
    s.node.ledger.db.prepare(`UPDATE deposits SET state = 'reorged' WHERE request_id = ?`).run(id);
    const r = await later(8, () => refundByHand(id, { to: fresh() }));
    expect(r.status).toBe(409);
    expect(r.body.message).toMatch(/no deposit to refund/);
  });
});

describe("a deposit address's excess that failed after the fill", () => {
  // Filled to account 2; refundTo is a token contract, which refuses ether: the excess fails.
  async function excessRefused(): Promise<Hex> {
    const id = await overpaidOrder({ recipient: account(2).address, refundTo: usdc(A) });
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'])).status).toBe('success');
    const excess = await until(() => settled(`excess:${id}`), 'the excess settled');
    expect(excess.state).toBe('failed');
    return id;
  }

  it("returns the excess by the operator's hand once its failed call is dead: only the excess, as an excess payout", async () => {
    const id = await excessRefused();
    const early = await refundByHand(id, { to: fresh() });
    expect(early.status).toBe(409);
    expect(early.body.message).toMatch(/can still be executed until/);

    const to = fresh();
    const r = await later(8, () => refundByHand(id, { to }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const payout = s.node.ledger.payouts.get(r.body.refund.payoutId)!;
    expect(payout).toMatchObject({ kind: 'excess', recipient: to, chain_id: A });
    // The 0.003 overpaid, less the gas of returning it: never any of the 0.01 the fill paid.
    const amount = BigInt(r.body.refund.amount);
    expect(amount).toBeLessThan(parseEther('0.003'));
    expect(amount).toBeGreaterThan(parseEther('0.0025'));
    expect((await until(() => settled(payout.id), 'the excess to `to` settled')).state).toBe('success');
    expect(await balance(to)).toBe(amount);
    // The request stays filled.
    expect((await waitForStatus(s.url, id, ['success'])).status).toBe('success');
    const [action] = (await admin(`/admin/actions?target=request:${id}`)).body.actions;
    expect(JSON.parse(action.detail)).toMatchObject({ to, kind: 'excess' });
    // Returned: a second one is refused.
    const again = await later(8, () => refundByHand(id, { to: fresh() }));
    expect(again.status).toBe(409);
  });

  it('refuses a filled request whose excess was never failed, and one whose deposit a reorg took back', async () => {
    const plain = await overpaidOrder({ recipient: account(2).address, refundTo: account(3).address });
    await until(() => (s.node.ledger.payouts.get(`excess:${plain}`)?.state === 'success' ? true : undefined), 'the excess returned');
    expect((await later(8, () => refundByHand(plain))).status).toBe(409);

    const id = await excessRefused();
    s.node.ledger.db.prepare(`UPDATE deposits SET state = 'reorged' WHERE request_id = ?`).run(id);
    const r = await later(8, () => refundByHand(id, { to: fresh() }));
    expect(r.status).toBe(409);
    expect(s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'excess' && p.state !== 'failed')).toEqual([]);
  });

  // An address whose code refuses ether (PUSH0 PUSH0 REVERT) until the test takes the code away.
  async function refusing(): Promise<Address> {
    const a = fresh();
    await rpc(chain(A).rpcUrl, 'anvil_setCode', [a, '0x5f5ffd']);
    return a;
  }
  const accepting = (a: Address) => rpc(chain(A).rpcUrl, 'anvil_setCode', [a, '0x']);
  async function nodePast(block: bigint): Promise<void> {
    const indexed = () =>
      (s.node.ledger.db.prepare(`SELECT block_number FROM cursors WHERE chain_id = ? AND source = 'depository'`).get(A) as { block_number: number })
        .block_number;
    await until(() => (indexed() >= Number(block) ? true : undefined), `the node past block ${block}`);
  }

  it('never returns an excess whose failed signed call someone executed since: it was returned', async () => {
    const refundTo = await refusing();
    const id = await overpaidOrder({ recipient: account(2).address, refundTo });
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'])).status).toBe('success');
    expect((await until(() => settled(`excess:${id}`), 'the excess settled')).state).toBe('failed');
    // Refused at its simulation, never sent: its signed call is public all the same (the request's failedCallData).
    const call = s.node.ledger.requests.get(id)!.failed_call_data as Hex;
    expect(call).toMatch(/^0x[0-9a-f]+$/i);
    await accepting(refundTo);
    const w = s.wallet(4, A);
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: chain(A).contracts.depository, data: call });
    const executed = await s.publicClient(A).waitForTransactionReceipt({ hash });
    expect(executed.status).toBe('success');
    await nodePast(executed.blockNumber);
    const r = await later(8, () => refundByHand(id, { to: fresh() }));
    expect(r.status).toBe(409);
    expect(r.body.message).toMatch(/returned or being returned/);
    expect(s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'excess')).toHaveLength(1);
  });

  it('returns the excess alone after the fill failed and its refund of the quoted part paid', async () => {
    // refundTo refuses the excess (sent while the fill is held), then accepts the refund of the quoted part.
    const refundTo = await refusing();
    const release = holdSubmitter(s, B);
    let id: Hex;
    try {
      id = await overpaidOrder({ recipient: usdc(B), refundTo });
      expect((await until(() => settled(`excess:${id}`), 'the excess settled')).state).toBe('failed');
      await accepting(refundTo);
    } finally {
      release();
    }
    expect(await waitForStatus(s.url, id, ['refund'])).toMatchObject({ status: 'refund', failReason: 'EXECUTION_REVERTED' });
    const refund = BigInt(s.node.ledger.payouts.get(`refund:${id}`)!.amount);
    expect(refund).toBeLessThan(parseEther('0.01'));
    const to = fresh();
    const r = await later(8, () => refundByHand(id, { to }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(s.node.ledger.payouts.get(r.body.refund.payoutId)).toMatchObject({ kind: 'excess', recipient: to });
    const amount = BigInt(r.body.refund.amount);
    expect(amount).toBeLessThan(parseEther('0.003'));
    expect(refund + amount).toBeLessThan(parseEther('0.013'));
    expect((await until(() => settled(r.body.refund.payoutId), 'the excess to `to` settled')).state).toBe('success');
    expect(await balance(to)).toBe(amount);
    expect((await later(8, () => refundByHand(id, { to: fresh() }))).status).toBe(409);
  });
});
