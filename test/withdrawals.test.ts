import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zeroAddress, type Hex } from 'viem';
import { auditStack } from './helpers/audit.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';

// Inventory that comes back: what the depository holds for filled orders is withdrawn to the
// solver's wallet by an allocator-signed call request, on an operator's demand; only what the ledger
// says is owed to the solver may be taken, and the audit still reconciles afterwards.
let s: Stack;
let adminKey: string;
const A = 8453;
const B = 10;

beforeAll(async () => {
  s = await startStack({
    config: {
      admin: { port: 0 },
      // Chain A: a target (skew metric); chain B: anything owed is withdrawn by the node on its own.
      inventory: {
        targets: [
          { chainId: A, currency: zeroAddress, target: '20000000000000000000000' },
          { chainId: B, currency: zeroAddress, withdrawAbove: '0' },
        ],
      },
    },
  });
  adminKey = s.node.ledger.operations.createAdminKey('ops-bob').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const user = (i: number) => s.devnet.accounts[i]!.address;
const admin = (path: string, body?: unknown) =>
  api(s.node.adminUrl, path, { method: body === undefined ? 'GET' : 'POST', body, headers: { authorization: `Bearer ${adminKey}` } });

async function quoteAndDeposit(account: number, amount: bigint): Promise<Hex> {
  const q = await api(s.url, '/quote', {
    body: nativeBridge(user(account), user(account), A, B, amount.toString()),
  });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
  await executeSteps(s, q.body, account);
  return requestId;
}

const depositOf = (requestId: Hex) =>
  until(
    () =>
      s.node.ledger.db.prepare('SELECT id, amount FROM deposits WHERE request_id = ? OR order_ref = ?').get(requestId, requestId) as
        | { id: string; amount: string }
        | undefined,
    `deposit of ${requestId} indexed`,
  );

describe('withdrawals from the depository', () => {
  it("brings a filled order's deposit back to the solver; refuses more than is owed and a deposit still owed to a user; the audit still balances", {
    timeout: 180_000,
  }, async () => {
    const depository = s.devnet.chains.find((c) => c.id === A)!.contracts.depository;
    const client = s.publicClient(A);
    const filled = await quoteAndDeposit(1, 40_000_000_000_000_000n);
    expect((await waitForStatus(s.url, filled, ['success', 'refund', 'failure'])).status).toBe('success');
    const filledDeposit = await depositOf(filled);

    // A deposit the solver has not filled (its destination paused) is still the user's.
    expect((await admin('/admin/pause', { scope: 'chain', chainId: B, reason: 'hold one order' })).status).toBe(200);
    const held = await quoteAndDeposit(2, 30_000_000_000_000_000n);
    const heldDeposit = await depositOf(held);
    await until(() => s.node.ledger.operations.postponement(heldDeposit.id), 'the held deposit postponed');

    const refusedUser = await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, depositIds: [heldDeposit.id], reason: 'try the user deposit' });
    expect(refusedUser.status).toBe(409);
    expect(refusedUser.body.errorCode).toBe('DEPOSIT_NOT_OWED');
    const tooMuch = await admin('/admin/withdrawals', {
      chainId: A,
      currency: zeroAddress,
      amount: (BigInt(filledDeposit.amount) + 1n).toString(),
      reason: 'more than owed',
    });
    expect(tooMuch.status).toBe(409);
    expect(tooMuch.body.errorCode).toBe('AMOUNT_EXCEEDS_OWED');
    expect((await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, reason: 'x', amount: '-1' })).status).toBe(400);
    expect(s.node.ledger.db.prepare(`SELECT COUNT(*) AS n FROM payouts WHERE kind = 'withdrawal'`).get()).toEqual({ n: 0 });

    const inv = (await admin('/admin/inventory')).body.chains.find((c: any) => c.chainId === A).currencies.find((c: any) => c.symbol === 'ETH');
    expect(inv.owedByDepository).toBe(filledDeposit.amount);
    const solverBefore = await client.getBalance({ address: s.devnet.solver });
    const depositoryBefore = await client.getBalance({ address: depository });
    const r = await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, reason: 'inventory back to the wallet' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // Everything owed: the filled order's deposit (and deposits of earlier flows, none here), never the held one.
    expect(r.body.withdrawal.deposits).toEqual([filledDeposit.id]);
    expect(r.body.withdrawal.amount).toBe(filledDeposit.amount);
    const payout = await until(() => {
      const p = s.node.ledger.payouts.get(r.body.withdrawal.payoutId)!;
      return p.state === 'success' || p.state === 'failed' ? p : undefined;
    }, 'the withdrawal settled');
    expect(payout.state).toBe('success');
    const receipt = await client.getTransactionReceipt({ hash: payout.tx_hash as Hex });
    const fee = receipt.gasUsed * receipt.effectiveGasPrice;
    expect(await client.getBalance({ address: depository })).toBe(depositoryBefore - BigInt(filledDeposit.amount));
    expect(await client.getBalance({ address: s.devnet.solver })).toBe(solverBefore + BigInt(filledDeposit.amount) - fee);
    const [action] = (await admin('/admin/actions?target=chain:8453')).body.actions;
    expect(action).toMatchObject({ action: 'withdraw', reason: 'inventory back to the wallet' });
    expect(action.actor).toContain('ops-bob');

    // Taken once: nothing more is owed until another order fills.
    expect((await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, depositIds: [filledDeposit.id], reason: 'again' })).body.errorCode).toBe(
      'DEPOSIT_NOT_OWED',
    );
    expect((await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, reason: 'again' })).body.errorCode).toBe('NOTHING_OWED');

    await admin('/admin/resume', { scope: 'chain', chainId: B, reason: 'release' });
    expect((await waitForStatus(s.url, held, ['success', 'refund', 'failure'])).status).toBe('success');
    const audit = await auditStack(s);
    expect(audit.differences).toEqual([]);
    const withdrawals = audit.chains.find((c) => c.chainId === A)!;
    expect(withdrawals.differences).toEqual([]);
  });

  it('withdraws on its own above the configured threshold, recorded as the node; reports inventory against its target', { timeout: 180_000 }, async () => {
    const q = await api(s.url, '/quote', {
      body: nativeBridge(user(3), user(3), B, A, '25000000000000000'),
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, 3);
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'])).status).toBe('success');
    const dep = await depositOf(id);
    const w = await until(() => {
      const row = s.node.ledger.db
        .prepare(`SELECT p.* FROM payouts p JOIN withdrawn_deposits w ON w.payout_id = p.id WHERE w.deposit_id = ?`)
        .get(dep.id) as any;
      return row?.state === 'success' ? row : undefined;
    }, 'the threshold withdrawal paid');
    expect(w).toMatchObject({ kind: 'withdrawal', chain_id: B, amount: dep.amount });
    const [action] = (await admin('/admin/actions?target=chain:10')).body.actions;
    expect(action).toMatchObject({ action: 'withdraw', actor: 'node' });
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/relay_inventory_target\{chain="8453",currency="ETH"\} 2e\+22/);
    // The devnet solver holds 10,000 ETH against a 20,000 ETH target: about half below it.
    const skew = Number(/relay_inventory_skew\{chain="8453",currency="ETH"\} (\S+)/.exec(metrics)![1]);
    expect(skew).toBeLessThan(-0.49);
    expect(skew).toBeGreaterThan(-0.51);
    expect((await auditStack(s)).differences).toEqual([]);
  });
});
