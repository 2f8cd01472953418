// Adversarial review, "never losing a deposit": deposits that could end nowhere (never matched, never refunded,
// not listed for an operator), and what the public status API and the operator see of them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, parseEther, zeroAddress, type Hex } from 'viem';
import { RelayDepositoryAbi, TestStablecoinAbi, TestStablecoinBytecode } from '../../contracts-abi/index.ts';
import { pause, resume, stuck } from '../../src/admin/actions.ts';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
const HOUR = 3_600_000;
let s: Stack;

beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  await s?.stop();
});

const who = { actor: 'test-operator', reason: 'maintenance' };
const address = (i: number) => s.devnet.accounts[i]!.address;

describe('a deposit held back while its quote is pruned', () => {
  it('an order whose deposit the node holds (paused past its expiry and the prune grace) is kept and filled on resume, not pruned into an orphan', async () => {
    // The quote (10 minutes by default) is deposited against in time, but the node holds the deposit: the operator
    // paused payouts (or the loss breaker did, or a limit an attacker can fill: IN_FLIGHT_LIMIT, OUTFLOW_BUDGET, or
    // dry run). The pruner deletes quotes still 'waiting' an hour after their expiry with no deposit whose
    // request_id names them; a held deposit's request_id is set only once it is decided, so the user's order went
    // with its 'waiting' event: the status API answered 404 for the request the user holds, the operator's manual
    // refund of the request the admin listing names answered 404 too, and on resume the deposit was decided as an
    // orphan (ORPHANED_DEPOSIT_REFUND) and refunded, less gas, to the depositor instead of being filled (or sent to
    // the order's refundTo).
    const q = await api(s.url, '/quote', { body: nativeBridge(address(3), address(4), A, B, parseEther('0.01').toString(), { refundTo: address(2) }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps[0].requestId as Hex;

    expect(pause(s.node.ledger, { scope: 'all' }, who)).toBe(true);
    await executeSteps(s, q.body, 3);
    const held = await until(() => stuck(s.node.ledger).find((i) => i.requestId === id && i.state === 'waiting'), 'the deposit held back');
    expect(held.reason).toBe('PAUSED_ALL');

    // The pruner's pass two hours later (past the quote's expiry and the default grace of an hour).
    s.node.ledger.requests.pruneUnusedQuotes(Date.now() + 2 * HOUR);
    expect(s.node.ledger.requests.get(id), 'the order of a held deposit was pruned').toBeDefined();
    const during = await api(s.url, `/intents/status/v3?requestId=${id}`);
    expect(during.status).toBe(200);
    // The operator still finds the deposit under the request the listing names.
    expect(stuck(s.node.ledger).find((i) => i.requestId === id && i.state === 'waiting')).toBeDefined();

    const before = await s.publicClient(B).getBalance({ address: address(4) });
    expect(resume(s.node.ledger, { scope: 'all' }, who)).toBe(true);
    s.node.solver!.wake();
    const done = await waitForStatus(s.url, id, ['success', 'refund', 'failure']);
    expect(done.status).toBe('success');
    expect(await s.publicClient(B).getBalance({ address: address(4) })).toBeGreaterThan(before);
    // Nothing of the deposit went back as an orphan's refund.
    const orphans = s.node.ledger.db
      .prepare(`SELECT COUNT(*) AS n FROM requests WHERE kind = 'orphan' AND user = ? AND origin_currency = ?`)
      .get(address(3), zeroAddress) as { n: number };
    expect(orphans.n).toBe(0);
  });
});

describe('a deposit in a currency the node does not configure', () => {
  it('is held for an operator (MANUAL_REFUND_REQUIRED, listed) and the admin refund returns it', async () => {
    // A user's honest mistake: a quote for USDC, deposited in another token (a look-alike or bridged version) through
    // the depository with the quote's order id. The node records it (every token's deposit event is read), cannot
    // price its refund (no refund cost, no price), and ends it MANUAL_REFUND_REQUIRED for an operator. The operator's
    // only tool, the admin refund, answered 409 "cannot pay its own refund" for the same reason: the deposit stayed
    // in the depository for good, listed, with nothing the operator could do through the node.
    const user = s.devnet.accounts[1]!;
    const w = s.wallet(1, A);
    const pc = s.publicClient(A);
    const chain = s.devnet.chains.find((c) => c.id === A)!;
    const deployed = await pc.waitForTransactionReceipt({
      hash: await w.deployContract({ account: w.account!, chain: w.chain, abi: TestStablecoinAbi, bytecode: TestStablecoinBytecode, args: [user.address] }),
    });
    const token = deployed.contractAddress!;
    const amount = 25_000_000n;
    const send = async (to: Hex, data: Hex) =>
      pc.waitForTransactionReceipt({ hash: await w.sendTransaction({ account: w.account!, chain: w.chain, to, data }) });
    await send(token, encodeFunctionData({ abi: TestStablecoinAbi, functionName: 'mint', args: [user.address, amount] }));
    await send(token, encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [chain.contracts.depository, amount] }));

    const q = await api(s.url, '/quote', {
      body: {
        user: user.address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: chain.contracts.stablecoin,
        destinationCurrency: s.devnet.chains.find((c) => c.id === B)!.contracts.stablecoin,
        amount: amount.toString(),
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    await send(
      chain.contracts.depository,
      encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositErc20', args: [user.address, token, amount, id] }),
    );

    // Seen, decided, and held for an operator with a reason both the user and the operator see.
    const status = await waitForStatus(s.url, id, ['failure', 'refund', 'success']);
    expect(status.status).toBe('failure');
    expect(status.refundFailReason ?? status.refundFailureReason ?? JSON.stringify(status)).toMatch(/MANUAL_REFUND_REQUIRED/);
    expect(stuck(s.node.ledger).find((i) => i.requestId === id && i.state === 'failed')).toBeDefined();

    // The operator refunds it by hand: the whole deposit goes back to the user.
    const before = await pc.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [user.address] });
    const r = await s.node.solver!.manualRefund(id, { actor: 'test-operator', reason: 'wrong token deposited' });
    expect(r.chainId).toBe(A);
    await waitForStatus(s.url, id, ['refund']);
    const after = await pc.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [user.address] });
    expect(after - before).toBe(amount);
  });
});

describe('a held deposit on a chain then removed from the config', () => {
  let t: Stack;
  let dropB = false;
  beforeAll(async () => {
    t = await startStack({ configure: (c) => (dropB ? { ...c, chains: c.chains.filter((ch: { id: number }) => ch.id !== B) } : c) });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('ends MANUAL_REFUND_REQUIRED, listed for the operator, rather than failing its decision on every pass for good', async () => {
    // An orphan deposit on chain B (a ref no quote made) is refunded on B. B is paused (an incident), so the refund's
    // decision is held; the operator then takes B out of the config and resumes. The decision priced the refund
    // through the registry's native currency of B, which threw for a chain the registry no longer has: the deposit
    // stayed confirmed, its decision failing on every solver pass (an error line every 2 s), the admin listing
    // still naming the pause it was held for, the status API nothing at all.
    const chainB = t.devnet.chains.find((c) => c.id === B)!;
    const w = t.wallet(1, B);
    expect(pause(t.node.ledger, { scope: 'chain', chainId: B }, who)).toBe(true);
    const ref = `0x${'5e'.repeat(32)}` as Hex;
    const hash = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: chainB.contracts.depository,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [w.account!.address, ref] }),
      value: parseEther('0.01'),
    });
    await t.publicClient(B).waitForTransactionReceipt({ hash });
    const held = await until(() => stuck(t.node.ledger).find((i) => i.requestId === ref && i.state === 'waiting'), 'the refund held back');
    expect(held.reason).toBe('PAUSED_CHAIN');

    dropB = true;
    await t.restartNode();
    expect(resume(t.node.ledger, { scope: 'chain', chainId: B }, who)).toBe(true);
    t.node.solver!.wake();
    const depositId = held.depositId!;
    const handled = await until(() => (t.node.ledger.deposits.get(depositId)?.state === 'handled' ? true : undefined), 'the deposit decided', 10_000).catch(
      () => false,
    );
    expect(handled, `deposit left ${t.node.ledger.deposits.get(depositId)?.state}`).toBe(true);
    const item = stuck(t.node.ledger).find((i) => i.depositId === depositId);
    expect(item).toMatchObject({ state: 'failed', reason: 'ORPHANED_DEPOSIT_REFUND' });
    const rid = t.node.ledger.deposits.get(depositId)!.request_id!;
    expect(t.node.ledger.requests.get(rid)?.refund_fail_reason).toBe('MANUAL_REFUND_REQUIRED');
  });
});

describe('a deposit whose decision throws', () => {
  it('is listed for the operator (DECISION_FAILED) while it is retried, and decided once it can be: it was in the log only', async () => {
    const q = await api(s.url, '/quote', { body: nativeBridge(address(4), address(4), A, B, parseEther('0.01').toString()) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps[0].requestId as Hex;
    // The decision of this order's deposit throws (a bug, or a config that no longer names what it needs).
    const risk = s.node.solver!.risk;
    const judge = risk.judge.bind(risk);
    risk.judge = (d, ...rest) => {
      if (d.order_ref === id) throw new Error('a decision that fails');
      return judge(d, ...rest);
    };
    try {
      await executeSteps(s, q.body, 4);
      const listed = await until(() => stuck(s.node.ledger).find((i) => i.requestId === id), 'the deposit listed for the operator');
      expect(listed).toMatchObject({ state: 'waiting', reason: 'DECISION_FAILED' });
    } finally {
      risk.judge = judge;
    }
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'])).status).toBe('success');
    expect(stuck(s.node.ledger).find((i) => i.requestId === id)).toBeUndefined();
  });
});
