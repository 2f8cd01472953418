// Adversarial review: money leaving the depository to the solver (withdrawals) against users' deposits.
// The depository holds users' deposits; the solver may withdraw only what it is owed. Each case below is an ordering
// of events after which the ledger let more leave the depository than the chain holds for the solver (a withdrawal, or
// a refund of a deposit that is not there), or counted as owed what the depository does not hold.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { keccak256, toHex, zeroAddress, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { privateKeyToAccount } from 'viem/accounts';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { auditStack } from '../helpers/audit.ts';
import { seedRequests } from '../helpers/seedRequests.ts';
import { LEDGER_KINDS, testLedgers, type LedgerKind } from '../helpers/ledgers.ts';
import type { OpenedLedger as Ledger } from '../../src/ledger/index.ts';
import type { DepositRow, PayoutRow } from '../../src/ledger/types.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { DepositReorgs } from '../../src/solver/reorgs.ts';
import { Solver } from '../../src/solver/solver.ts';
import { queueWithdrawal } from '../../src/solver/withdrawals.ts';
import { authorize, sendDeposit } from '../helpers/exchangeSteps.ts';

const SOLVER = '0x00000000000000000000000000000000000000a1';
const who = { actor: 'ops', reason: 'review' };

const ledgers = testLedgers();

async function setup(kind: LedgerKind = 'sqlite') {
  const ledger = await ledgers.open(kind);
  seedRequests(ledger.db, 400);
  const metrics = createMetrics();
  const log = createLogger('silent');
  const reorgs = new DepositReorgs(ledger, metrics, log);
  // A handled deposit of a seeded request in the given status, on the given chain.
  const deposit = (status: string, chainId = 8453, skip = 0): DepositRow =>
    ledger.db
      .prepare(
        `SELECT d.* FROM deposits d JOIN requests r ON r.id = d.request_id WHERE r.status = ? AND d.state = 'handled' AND d.chain_id = ? ORDER BY d.id LIMIT 1 OFFSET ?`,
      )
      .get(status, chainId, skip) as DepositRow;
  const owedSum = (chainId: number) => ledger.withdrawals.owed(chainId, zeroAddress).reduce((s, d) => s + d.owed, 0n);
  const owedTotal = (chainId: number) => ledger.withdrawals.owedByCurrency(chainId).get(zeroAddress) ?? 0n;
  return { ledger, metrics, log, reorgs, deposit, owedSum, owedTotal };
}

// A Solver over the ledger with the chains, prices and registry stubbed: one native currency at $3000, refunds cost
// 1 wei. Only its payout hooks are exercised.
async function stubSolver(ledger: Ledger, metrics: ReturnType<typeof createMetrics>, log: ReturnType<typeof createLogger>) {
  const native = (chainId: number) => ({ chainId, address: zeroAddress, symbol: 'ETH', decimals: 18, usdPrice: '3000' });
  const registry = {
    chains: new Map([[8453, {}]]),
    native,
    currency: (chainId: number, address: string) => (address.toLowerCase() === zeroAddress ? native(chainId) : undefined),
    currenciesOf: (chainId: number) => [native(chainId)],
  };
  const chains = {
    ids: () => [8453],
    wallet: () => ({ solver: SOLVER, balance: async () => 10n ** 24n, balanceOf: async () => 10n ** 24n }),
    costs: () => ({ refundCost: async () => 1n }),
    payoutsQueued: () => {},
    signedCalls: () => undefined,
  };
  const prices = { usdPrice: async () => '3000' };
  const solver = new Solver(ledger, registry as never, chains as never, prices as never, metrics, log);
  // Any admin call reads the snapshot (inventory and prices) first; this one then finds no request.
  await solver.manualRefund(`0x${'00'.repeat(32)}`, who).catch(() => undefined);
  return solver;
}

// The describe's devnet stack with the admin API, and an admin key: started before its tests, stopped after them.
function withAdminStack(set: (s: Stack, adminKey: string) => void, opts: { confirmations?: number } = {}): void {
  let started: Stack | undefined;
  beforeAll(async () => {
    started = await startStack({ ...opts, config: { admin: { port: 0 } } });
    set(started, started.node.ledger.operations.createAdminKey('ops-review').key);
  }, 120_000);
  afterAll(async () => {
    await started?.stop();
  });
}

describe.each(LEDGER_KINDS)('a withdrawal against a reorg of the deposit it took (%s)', (kind) => {
  it('a deposit withdrawn, then taken back by a reorg: later withdrawals leave its amount in the depository for the users', async () => {
    const { ledger, reorgs, deposit, owedSum, owedTotal } = await setup(kind);
    const chain = 8453;
    const d = deposit('success', chain);
    const before = owedSum(chain);
    expect(ledger.withdrawals.owed(chain).map((o) => o.id)).toContain(d.id);

    // The operator withdraws the filled deposit; the withdrawal lands.
    const w = queueWithdrawal(ledger, { chainId: chain, currency: zeroAddress, solver: SOLVER, depositIds: [d.id] }, who);
    ledger.payouts.setState(w.id, 'sent', { txHash: `0x${'11'.repeat(32)}` });
    ledger.payouts.setState(w.id, 'success', { txHash: `0x${'11'.repeat(32)}` });
    const rest = before - BigInt(d.amount);
    expect(owedSum(chain)).toBe(rest);

    // A reorg deeper than its confirmations takes the deposit back; the withdrawal (the solver's own transaction,
    // back in the mempool) lands again on the new chain: the depository paid the solver 1000 it never received.
    ledger.tx(() => reorgs.onDepositReorged(ledger.deposits.get(d.id)!, 10));

    // What the depository now holds for the solver is the rest less what the withdrawal took of other deposits.
    const next = queueWithdrawal(ledger, { chainId: chain, currency: zeroAddress, solver: SOLVER }, who);
    // Before: the whole rest (the depository then holds 1000 less than its users' deposits: a refund fails).
    expect(BigInt(next.amount)).toBeLessThanOrEqual(rest - BigInt(d.amount));
    // The inventory's figure (owedByDepository, the threshold) says the same.
    ledger.payouts.setState(next.id, 'failed', { failReason: 'TRANSACTION_REVERTED' });
    ledger.withdrawals.release(next.id);
    expect(owedTotal(chain)).toBe(rest - BigInt(d.amount));
  });
});

describe.each(LEDGER_KINDS)('what the depository owes the solver after a reorg of a deposit whose payout was on its way (%s)', (kind) => {
  it('a deposit taken back while its fill was signed is not counted owed once the fill lands', async () => {
    const { ledger, reorgs, deposit, owedSum, owedTotal } = await setup(kind);
    const chain = 8453;
    const d = deposit('success', chain);
    const fill = ledger.payouts.forDeposit(d.id).find((p) => p.kind === 'fill')!;
    // The fill was signed and sent, not yet confirmed.
    ledger.db.prepare(`UPDATE payouts SET state = 'sent' WHERE id = ?`).run(fill.id);
    expect(owedTotal(chain)).toBe(owedSum(chain));

    ledger.tx(() => reorgs.onDepositReorged(ledger.deposits.get(d.id)!, 10));
    // Its fill lands on the destination: the solver paid, the depository never got the deposit.
    ledger.payouts.setState(fill.id, 'success', { txHash: fill.tx_hash! });

    // Withdrawals leave it out (DEPOSIT_REORGED), and the inventory's total must too: before, it counted it
    // (the owed trigger recomputed the deposit's row on the fill's success), 1000 above what can be withdrawn.
    expect(ledger.withdrawals.owed(chain).map((o) => o.id)).not.toContain(d.id);
    expect(owedTotal(chain)).toBe(owedSum(chain));
  });

  it('a deposit taken back while a withdrawal of it was on its way is not owed again when that withdrawal fails', async () => {
    const { ledger, reorgs, deposit, owedSum, owedTotal } = await setup(kind);
    const chain = 8453;
    const d = deposit('success', chain);
    const w = queueWithdrawal(ledger, { chainId: chain, currency: zeroAddress, solver: SOLVER, depositIds: [d.id] }, who);
    ledger.payouts.setState(w.id, 'sent', { txHash: `0x${'22'.repeat(32)}` });

    ledger.tx(() => reorgs.onDepositReorged(ledger.deposits.get(d.id)!, 10));
    // The withdrawal reverts (the depository is short: the deposit is gone): its deposits are released.
    ledger.payouts.setState(w.id, 'failed', { failReason: 'TRANSACTION_REVERTED' });
    ledger.withdrawals.release(w.id);

    expect(ledger.withdrawals.owed(chain).map((o) => o.id)).not.toContain(d.id);
    expect(owedTotal(chain)).toBe(owedSum(chain));
  });
});

describe('a fill that fails after a reorg took its deposit back', () => {
  it('refunds nothing out of the depository: the deposit is not there', async () => {
    const { ledger, metrics, log, reorgs, deposit } = await setup();
    const chain = 8453;
    const d = deposit('success', chain);
    const fill = ledger.payouts.forDeposit(d.id).find((p) => p.kind === 'fill')!;
    ledger.db.prepare(`UPDATE payouts SET state = 'sent' WHERE id = ?`).run(fill.id);
    ledger.tx(() => reorgs.onDepositReorged(ledger.deposits.get(d.id)!, 10));
    expect(ledger.requests.get(d.request_id!)?.fail_reason).toBe('DEPOSIT_REORGED');

    // The signed fill then reverts on the destination (its recipient refuses it): the submitter fails it.
    const solver = await stubSolver(ledger, metrics, log);
    ledger.tx(() => {
      ledger.payouts.setState(fill.id, 'failed', { failReason: 'TRANSACTION_REVERTED' });
      solver.onFailed({ ...(ledger.payouts.get(fill.id) as PayoutRow), state: 'sent' }, 'TRANSACTION_REVERTED');
    });

    // Before: a refund of 999 was queued on the origin, paid out of other users' deposits, and the request no longer
    // recorded DEPOSIT_REORGED (the audit then looked for the deposit on chain).
    expect(ledger.payouts.forDeposit(d.id).filter((p) => p.kind === 'refund')).toEqual([]);
    expect(ledger.requests.get(d.request_id!)).toMatchObject({
      status: 'failure',
      fail_reason: 'DEPOSIT_REORGED',
      refund_fail_reason: null,
    });
    // Nor by an operator's hand: the failed request invites a manual refund, which paid the deposit (still 'handled':
    // the reorg left it so, its fill signed) out of other users' deposits.
    await expect(solver.manualRefund(d.request_id! as `0x${string}`, who)).rejects.toMatchObject({ status: 409 });
    expect(ledger.payouts.forDeposit(d.id).filter((p) => p.kind === 'refund')).toEqual([]);
  });
});

// The exchange (chain 1337) has no depository: a user's deposit there is a sendAsset to the solver's own account, so
// the solver's wallet holds it from the moment it lands. Counted again as "owed by the depository", the inventory
// there (/admin/inventory's owedByDepository, relay_inventory and its skew) was the wallet plus every filled deposit
// ever, growing without bound.
describe('on the devnet: the exchange, which has no depository, and the audit of what is owed', () => {
  const EX = 1337;
  const BASE = 8453;
  const PERPS = `0x${'0'.repeat(32)}`;
  let s: Stack;
  let adminKey: string;
  withAdminStack((x, k) => ((s = x), (adminKey = k)));

  it('a filled order from the exchange is not counted owed by a depository on top of the wallet that holds it', { timeout: 120_000 }, async () => {
    const user = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const usdc = s.devnet.chains.find((c) => c.id === BASE)!.contracts.stablecoin;
    const q = await api(s.url, '/quote/v2', {
      body: {
        user: user.address,
        recipient: s.devnet.accounts[4]!.address,
        originChainId: EX,
        destinationChainId: BASE,
        originCurrency: PERPS,
        destinationCurrency: usdc,
        amount: '20000000',
        tradeType: 'EXACT_INPUT',
        protocolVersion: 'v2',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps[0].requestId as Hex;
    // The authorize step (the nonce mapping), then the user's sendAsset to the solver on the exchange.
    const a = await authorize(s, q.body, user, BASE);
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect((await sendDeposit(s, q.body, user, BASE)).status).toBe(200);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');

    // The deposit is in the solver's exchange account already: nothing more is owed to it by a depository.
    // Before: owedByDepository 20,000,000 on 1337 (and relay_inventory as much above the wallet), on top of the
    // wallet that holds them. (The admin API refuses the exchange's perps currency spelling for a withdrawal, and the
    // config's inventory targets likewise: no withdrawal of it is reachable.)
    const inv = await api(s.node.adminUrl, '/admin/inventory', { headers: { authorization: `Bearer ${adminKey}` } });
    expect(inv.status).toBe(200);
    const lines = (inv.body.chains ?? inv.body).find((c: any) => c.chainId === EX).currencies as { currency: string; owedByDepository: string; held: string }[];
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l.owedByDepository, l.currency).toBe('0');
  });

  it('the audit names a drift of what the depository owes the solver from the deposits that make it up', { timeout: 120_000 }, async () => {
    const q = await api(s.url, '/quote', { body: nativeBridge(s.devnet.accounts[2]!.address, s.devnet.accounts[2]!.address, BASE, 10, '20000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, 2);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect((await auditStack(s)).chains.find((c) => c.chainId === BASE)!.differences).toEqual([]);
    // The running total counts a deposit the depository does not hold for the solver (as a trigger firing after a
    // reorg's write-off did): before, the audit reconciled the depository's balance only and saw nothing.
    const d = s.node.ledger.withdrawals.owed(BASE, zeroAddress)[0]!;
    const entry = s.node.ledger.db.prepare(
      `INSERT INTO depository_owed_entries (deposit_id, chain_id, currency, sign, amount, excess) VALUES (?, ?, ?, ?, ?, NULL)`,
    );
    entry.run(d.id, BASE, zeroAddress, 1, d.owed.toString());
    try {
      const differences = (await auditStack(s)).chains.find((c) => c.chainId === BASE)!.differences;
      expect(differences.join('\n')).toMatch(/owed to the solver \d+ by its running total, \d+ by its deposits/);
    } finally {
      entry.run(d.id, BASE, zeroAddress, -1, d.owed.toString());
    }
  });
});

// End to end on the devnet: a withdrawn deposit taken back by a reorg (the withdrawal, the solver's own transaction,
// lands again on the new chain out of the other deposits), then a later withdrawal of all that is owed, then a user's
// deposit held in the depository is refunded by the operator.
describe('on the devnet: a reorg of a deposit already withdrawn', () => {
  const A = 8453;
  let s: Stack;
  let adminKey: string;
  const blocked = () => s.devnet.accounts[3]!.address;
  withAdminStack((x, k) => ((s = x), (adminKey = k)), { confirmations: 3 });
  const rpc = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as any, params: params as any });
  const admin = (path: string, body: unknown) => api(s.node.adminUrl, path, { body, headers: { authorization: `Bearer ${adminKey}` } });

  async function filledOrder(account: number): Promise<{ requestId: Hex; depositId: string }> {
    const q = await api(s.url, '/quote', {
      body: nativeBridge(s.devnet.accounts[account]!.address, s.devnet.accounts[account]!.address, A, 10, '10000000000000000'),
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, account);
    await rpc('anvil_mine', ['0x3']);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    return { requestId, depositId: s.node.ledger.deposits.byOrderRef(requestId)[0]!.id };
  }

  it("the solver never withdraws what a user's refund needs", { timeout: 180_000 }, async () => {
    // A user's deposit the node holds for an operator (its depositor blocked, as risk.denyDepositors does: not refunded
    // on its own): the user's money in the depository.
    const risk = s.node.solver!.risk;
    risk.blocked = (w: string | null, role: 'recipient' | 'depositor') => role === 'depositor' && w?.toLowerCase() === blocked().toLowerCase();
    const depository = s.devnet.chains.find((c) => c.id === A)!.contracts.depository;
    const w5 = s.wallet(3, A);
    const hash = await w5.writeContract({
      address: depository,
      abi: RelayDepositoryAbi,
      functionName: 'depositNative',
      args: [blocked(), keccak256(toHex('review: no such order'))],
      value: 10n ** 16n,
      chain: w5.chain,
      account: w5.account!,
    });
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    const logIndex = receipt.logs.find((l) => l.address.toLowerCase() === depository.toLowerCase())!.logIndex;
    const held = keccak256(toHex(`deposit:${A}:${hash}:${logIndex}`));
    await rpc('anvil_mine', ['0x3']);
    await until(() => (s.node.ledger.requests.get(held)?.refund_fail_reason === 'MANUAL_REFUND_REQUIRED' ? true : undefined), 'the blocked deposit held');

    // A filled order's deposit, withdrawn; then a reorg deeper than its confirmations takes the deposit back, and the
    // withdrawal's signed transaction lands again on the new chain (out of the held deposit).
    const snapshot = (await rpc('evm_snapshot')) as Hex;
    const first = await filledOrder(1);
    const w = await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, depositIds: [first.depositId], reason: 'review' });
    expect(w.status, JSON.stringify(w.body)).toBe(200);
    const payoutId = w.body.withdrawal.payoutId as string;
    await until(() => (s.node.ledger.payouts.get(payoutId)?.state === 'success' ? true : undefined), 'the withdrawal paid');
    const tx = s.node.ledger.payouts.txsOf(payoutId).find((t) => t.state === 'included')!;
    const raw = (s.node.ledger.db.prepare('SELECT raw FROM transaction_bytes WHERE hash = ?').get(tx.hash) as { raw: Hex }).raw;
    await rpc('evm_revert', [snapshot]);
    await rpc('eth_sendRawTransaction', [raw]);
    await rpc('anvil_mine', ['0x8']);
    await until(
      () => (s.node.ledger.requests.get(first.requestId)?.fail_reason === 'DEPOSIT_REORGED' ? true : undefined),
      'the withdrawn deposit taken back',
      20_000,
    );

    // Another order filled; then the operator withdraws all that is owed.
    await filledOrder(2);
    const all = await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, reason: 'review: everything owed' });
    if (all.status === 200) {
      const id = all.body.withdrawal.payoutId as string;
      await until(() => (['success', 'failed'].includes(s.node.ledger.payouts.get(id)?.state ?? '') ? true : undefined), 'the second withdrawal settled');
    }
    // The held user's deposit is refunded by the operator. Before: the second withdrawal took the filled order's deposit
    // too, and the depository held 0.01 ETH less than the held deposit: the refund failed (TRANSACTION_REVERTED).
    const refund = await admin(`/admin/requests/${held}/refund`, { reason: 'review: refund the held deposit' });
    expect(refund.status, JSON.stringify(refund.body)).toBe(200);
    const paid = await until(() => {
      const p = s.node.ledger.payouts.get(refund.body.refund.payoutId);
      return p && (p.state === 'success' || p.state === 'failed') ? p : undefined;
    }, 'the refund settled');
    expect(paid.state).toBe('success');
    // The withdrawal of all that is owed was refused: the one owed deposit stands in for the one the reorg took back.
    expect(all.status, JSON.stringify(all.body)).toBe(409);
  });
});

describe('on the devnet: a withdrawal that reverted on chain', () => {
  const A = 8453;
  let s: Stack;
  let adminKey: string;
  withAdminStack((x, k) => ((s = x), (adminKey = k)));
  const rpc = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as any, params: params as any });
  const admin = (path: string, body: unknown) => api(s.node.adminUrl, path, { body, headers: { authorization: `Bearer ${adminKey}` } });

  it('keeps its deposits taken while its signed call can still be executed: withdrawn again, they would leave twice', { timeout: 180_000 }, async () => {
    const account = s.devnet.accounts[1]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(account, account, A, 10, '10000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, 1);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    const depositId = s.node.ledger.deposits.byOrderRef(requestId)[0]!.id;
    const depository = s.devnet.chains.find((c) => c.id === A)!.contracts.depository;

    // The withdrawal is sent; before its block is mined the depository is emptied (as a shortfall would leave it), so it
    // reverts; then the depository holds its deposits again.
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
    expect((await s.publicClient(A).getTransactionReceipt({ hash: sent!.hash as Hex })).status).toBe('reverted');
    await rpc('anvil_mine', ['0x4']);
    await until(() => (s.node.ledger.payouts.get(payoutId)?.state === 'failed' ? true : undefined), 'the withdrawal failed');

    // Its depository call is public (the input of its reverted transaction) and valid for days: anyone may submit it
    // once the depository holds enough. Released, the deposit was withdrawn again by the next withdrawal, and the
    // old call then took it a second time out of other users' deposits.
    expect(s.node.ledger.withdrawals.depositsOf(payoutId)).toEqual([depositId]);
    const again = await admin('/admin/withdrawals', { chainId: A, currency: zeroAddress, depositIds: [depositId], reason: 'review: again' });
    expect(again.body.errorCode).toBe('DEPOSIT_NOT_OWED');

    // Past the call's expiry (7 days, on the node's clock: Date only, and on the chain's: a block mined 8 days on, the
    // chain's confirmations deep), unexecuted: the deposit is the solver's to withdraw again.
    await rpc('evm_increaseTime', [8 * 86_400]);
    await rpc('evm_mine');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 8 * 86_400_000);
    try {
      await until(() => (s.node.ledger.withdrawals.depositsOf(payoutId).length === 0 ? true : undefined), 'the expired withdrawal released');
    } finally {
      vi.useRealTimers();
    }
    expect(s.node.ledger.withdrawals.owed(A).map((d) => d.id)).toContain(depositId);
  });
});
