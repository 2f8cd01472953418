// Attacks on fast fill: a fast fill whose payout fails must neither swallow the user's deposit nor
// charge the app, only the key that quoted a request may fast-fill it (issue 12, item 2), and a quote
// kept until the market moves pays no more than a deposit's fill would (today's rate, within its expiry).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, parseUnits, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { pause, resume } from '../../src/admin/actions.ts';
import { linkWallet } from '../helpers/link.ts';
import { api, executeSteps, holdSubmitter, MovablePrices, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const prices = new MovablePrices();
const A = 8453;
const B = 10;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;
const marker = (credited: Address) => `012345abcdef${credited.slice(2).toLowerCase()}012345abcdef`;
const DENIED = privateKeyToAccount(generatePrivateKey()).address;
let app: { key: string; id: string };
let stranger: { key: string; id: string };

async function fundAndLink(k: { key: string; id: string }, wallet: number, units: bigint) {
  const acct = privateKeyToAccount(account(wallet).privateKey);
  expect((await linkWallet(s.url, k.key, acct)).status).toBe(200);
  const w = s.wallet(wallet, A);
  const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, units] })}${marker(acct.address)}` as Hex;
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc(A), data });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the app balance credit');
}

beforeAll(async () => {
  // One recipient the operator denies: a fast fill must not pay it either.
  s = await startStack({ prices, configure: (c) => ({ ...c, risk: { ...c.risk, denyRecipients: [...(c.risk?.denyRecipients ?? []), DENIED] } }) });
  app = s.node.ledger.apiKeys.create('app');
  stranger = s.node.ledger.apiKeys.create('stranger');
  await fundAndLink(app, 4, 100_000_000n);
  await fundAndLink(stranger, 3, 100_000_000n);
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

// 0.01 ETH from chain A to chain B, paid to `recipient`.
const nativeQuote = (from: number, recipient: Address) => ({
  user: account(from).address,
  recipient,
  originChainId: A,
  destinationChainId: B,
  originCurrency: zeroAddress,
  destinationCurrency: zeroAddress,
  amount: '10000000000000000',
  tradeType: 'EXACT_INPUT',
});

// `amount` USDC (smallest unit) from chain A to chain B for account 2, with `extra` fields.
const usdcQuote = (amount: string, extra: Record<string, unknown>) => ({
  user: account(2).address,
  originChainId: A,
  destinationChainId: B,
  originCurrency: usdc(A),
  destinationCurrency: usdc(B),
  amount,
  tradeType: 'EXACT_INPUT',
  ...extra,
});

// 0.01 ETH for account 1, quoted with the app's key and fast-filled by it, paid; the app's balance before.
async function paidFastFill() {
  const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(1, account(1).address) });
  const requestId = q.body.steps[0].requestId as Hex;
  const before = s.node.ledger.balances.summary(account(4).address);
  expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } })).status).toBe(200);
  await waitForStatus(s.url, requestId, ['success']);
  return { q, requestId, before };
}

// Just past a fast fill's hold deadline (earlier than where previous tests moved the check: a full scan).
const pastDeadline = (requestId: Hex) => s.node.ledger.requests.get(requestId)!.fast_fill_deadline! + 1;

describe('fast fill under attack', () => {
  it('a fast fill whose payout reverts releases its hold, charges the app nothing, and the later deposit is refunded', async () => {
    const wallet = account(4).address;
    // The stablecoin contract has no receive function: a native payout to it reverts.
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(2, usdc(B)) });
    expect(q.status).toBe(200);
    const requestId = q.body.steps[0].requestId as Hex;
    const before = s.node.ledger.balances.summary(wallet);
    const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } });
    expect(ff.status).toBe(200);
    const failed = await waitForStatus(s.url, requestId, ['failure']);
    expect(failed.failReason).toBe('EXECUTION_REVERTED');
    // Nothing was paid: the hold is released whole and the app's balance is what it was.
    await until(() => (s.node.ledger.balances.summary(wallet).held === before.held ? true : undefined), 'the hold release');
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    expect(s.node.ledger.balances.get(`permanent_debit:${requestId}`)).toBeUndefined();
    // The hold's deadline passing later charges nothing either.
    expect(s.node.solver!.expireHolds(Date.now() + 10 ** 9)).toBe(0);

    // The user deposits after all: the deposit is refunded, under the fast fill's failReason.
    const userBefore = await s.publicClient(A).getBalance({ address: account(2).address });
    const [depositTx] = await executeSteps(s, q.body, 2);
    const done = await waitForStatus(s.url, requestId, ['refund', 'success'], 60_000);
    expect(done).toMatchObject({ status: 'refund', failReason: 'EXECUTION_REVERTED' });
    const refund = s.node.ledger.payouts.get(`refund:${requestId}`)!;
    expect(refund).toMatchObject({ state: 'success', recipient: account(2).address, chain_id: A });
    const depositReceipt = await s.publicClient(A).getTransactionReceipt({ hash: depositTx! });
    const userAfter = await s.publicClient(A).getBalance({ address: account(2).address });
    // The user is out only the deposit's own gas and the refund's gas (taken from the refund).
    expect(userAfter - userBefore).toBe(BigInt(refund.amount) - 10n ** 16n - depositReceipt.gasUsed * depositReceipt.effectiveGasPrice);
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
  });

  it('the mirror case: a fast fill that reverts and no deposit ever: the app is not charged', async () => {
    const wallet = account(4).address;
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(1, usdc(B)) });
    const requestId = q.body.steps[0].requestId as Hex;
    const before = s.node.ledger.balances.summary(wallet);
    expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } })).status).toBe(200);
    await waitForStatus(s.url, requestId, ['failure']);
    await until(() => (s.node.ledger.balances.get(`hold_release:${requestId}`) ? true : undefined), 'the hold release');
    s.node.solver!.expireHolds(Date.now() + 10 ** 9);
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    expect(s.node.ledger.balances.ofRequest(requestId).filter((e) => e.kind !== 'hold' && e.kind !== 'hold_release')).toEqual([]);
  });

  it('money held for a fast fill cannot also pay sponsored fees (it already covers a fill the solver paid)', async () => {
    // A fresh wallet credited 10 USD, then a fast fill holding nearly all of it.
    const thin = privateKeyToAccount(generatePrivateKey());
    const k = s.node.ledger.apiKeys.create('thin');
    expect((await linkWallet(s.url, k.key, thin)).status).toBe(200);
    const w = s.wallet(1, A);
    const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 10_000_000n] })}${marker(thin.address)}` as Hex;
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc(A), data });
    await s.publicClient(A).waitForTransactionReceipt({ hash });
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the credit');
    const q = await api(s.url, '/quote/v2', { apiKey: k.key, body: { ...nativeQuote(2, account(2).address), amount: '3333000000000000' } });
    expect((await api(s.url, '/fast-fill', { apiKey: k.key, body: { requestId: q.body.steps[0].requestId } })).status).toBe(200);
    const { balance, available } = s.node.ledger.balances.summary(thin.address);
    expect(balance).toBe(10_000_000n);
    expect(available).toBeLessThan(10_000n);
    // A sponsored quote against the held money is refused: the balance is spoken for.
    const sponsored = await api(s.url, '/quote/v2', {
      apiKey: k.key,
      body: usdcQuote('10000000', { subsidizeFees: true }),
    });
    expect(sponsored.status).toBe(400);
    expect(sponsored.body.errorCode).toBe('SPONSOR_BALANCE_TOO_LOW');
  });

  it("another key cannot fast-fill a request, charging that key's app balance or the request's sponsor: 403", async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(2, account(2).address) });
    const requestId = q.body.steps[0].requestId as Hex;
    const r = await api(s.url, '/fast-fill', { apiKey: stranger.key, body: { requestId } });
    expect(r.status).toBe(403);
    expect(r.body.errorCode).toBe('NOT_QUOTED_BY_KEY');
    // A request quoted without a key has no key to fast-fill it.
    const anon = await api(s.url, '/quote/v2', { body: nativeQuote(2, account(2).address) });
    expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: anon.body.steps[0].requestId } })).status).toBe(403);
    expect(s.node.ledger.payouts.forRequest(requestId)).toEqual([]);
    expect(s.node.ledger.balances.ofRequest(requestId)).toEqual([]);
  });
  it("a deposit landing after its fast fill's hold expired settles the debit: the app is credited back, the user is paid once", async () => {
    const wallet = account(4).address;
    const { q, requestId, before } = await paidFastFill();
    // The hold's deadline passes with no deposit: the app is charged the fill's worth.
    expect(s.node.solver!.expireHolds(pastDeadline(requestId))).toBeGreaterThanOrEqual(1);
    const hold = s.node.ledger.balances.get(`hold:${requestId}`)!;
    expect(s.node.ledger.balances.get(`permanent_debit:${requestId}`)!.amount).toBe(-hold.amount);
    // The deposit comes after all: it brings the value the app was charged for.
    await executeSteps(s, q.body, 1);
    await until(() => (s.node.ledger.deposits.forRequest(requestId).length ? true : undefined), 'the late deposit settled', 60_000);
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    // Paid once: the fast fill's payout only, nothing refunded, the request a success.
    expect(s.node.ledger.payouts.forRequest(requestId).map((p) => `${p.kind}:${p.state}`)).toEqual(['fill:success']);
    expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('success');
    // The solver paid the fill from its own funds: the deposit in the depository is owed to it.
    const d = s.node.ledger.deposits.forRequest(requestId)[0]!;
    expect(s.node.ledger.payouts.get(`fill:${requestId}`)!.deposit_id).toBe(d.id);
    expect(s.node.ledger.withdrawals.owed(A).map((o) => o.id)).toContain(d.id);
    // Settled once: another pass over the hold books nothing more.
    s.node.solver!.expireHolds(pastDeadline(requestId));
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
  });

  it("a deposit short of the fast fill's priced input does not settle it: the user's own deposit after it does, the app is charged nothing", async () => {
    // The user, paid by the fast fill, sends 1000 wei naming the order before its real deposit: settling the
    // fast fill, that charged the app the whole fill (the shortfall), and the real deposit came back to the
    // user as a DOUBLE_SPEND.
    const wallet = account(4).address;
    const { q, requestId, before } = await paidFastFill();
    const item = q.body.steps[0].items[0].data;
    const w = s.wallet(1, A);
    const dustHash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: item.to, data: item.data, value: 1_000n });
    await s.publicClient(A).waitForTransactionReceipt({ hash: dustHash });
    const decided = (amount: string) => () => s.node.ledger.deposits.byOrderRef(requestId).find((d) => d.amount === amount && d.state === 'handled');
    const dust = await until(decided('1000'), 'the short deposit decided', 60_000);
    await executeSteps(s, q.body, 1);
    const real = await until(decided(item.value), 'the real deposit decided', 60_000);
    // The real deposit settled the fast fill: the app's balance is as before, nothing was refunded of it.
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    expect(real.request_id).toBe(requestId);
    expect(s.node.ledger.payouts.forRequest(requestId).map((p) => `${p.kind}:${p.state}`)).toEqual(['fill:success']);
    expect(s.node.ledger.payouts.get(`fill:${requestId}`)!.deposit_id).toBe(real.id);
    // The short one is a request of its own, never the order's.
    expect(dust.request_id).not.toBe(requestId);
    expect(s.node.ledger.requests.get(dust.request_id!)).toMatchObject({ status: 'failure', fail_reason: 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL' });
  });

  it("a fast fill still in flight when its hold expires, whose payout then fails: the expiry's debit is taken back", async () => {
    const wallet = account(4).address;
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(1, usdc(B)) });
    const requestId = q.body.steps[0].requestId as Hex;
    const before = s.node.ledger.balances.summary(wallet);
    // Chain B's submitter held: the fast fill's payout is recorded, not yet sent.
    const release = holdSubmitter(s, B);
    try {
      expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } })).status).toBe(200);
      expect(s.node.solver!.expireHolds(pastDeadline(requestId))).toBeGreaterThanOrEqual(1);
      expect(s.node.ledger.balances.get(`permanent_debit:${requestId}`)).toBeDefined();
    } finally {
      release();
    }
    // The payout to a contract without a receive function reverts: nothing was paid.
    await waitForStatus(s.url, requestId, ['failure']);
    await until(() => (s.node.ledger.balances.summary(wallet).balance === before.balance ? true : undefined), 'the expiry debit taken back');
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
  });
  // The deposit arrives while the fast fill's payout is recorded but not yet made (chain B's
  // submitter held): it waits for the fast fill's outcome, then settles it (paid) or is refunded (failed).
  async function depositWhileInFlight(user: number, recipient: Address) {
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(user, recipient) });
    const requestId = q.body.steps[0].requestId as Hex;
    const before = s.node.ledger.balances.summary(account(4).address);
    const release = holdSubmitter(s, B);
    try {
      expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } })).status).toBe(200);
      await executeSteps(s, q.body, user);
      await until(() => (s.node.ledger.deposits.byOrderRef(requestId)[0]?.state === 'confirmed' ? true : undefined), 'the deposit confirmed');
      // Still in flight: the deposit is not decided, nothing else is paid.
      expect(s.node.ledger.payouts.forRequest(requestId).map((p) => `${p.kind}:${p.state}`)).toEqual(['fill:queued']);
    } finally {
      release();
    }
    return { requestId, before };
  }

  it('a deposit arriving while its fast fill is in flight waits; the fast fill confirms and the deposit settles it: one payout, app credited back, no refund', async () => {
    const { requestId, before } = await depositWhileInFlight(2, account(2).address);
    await waitForStatus(s.url, requestId, ['success']);
    await until(() => (s.node.ledger.deposits.byOrderRef(requestId)[0]?.state === 'handled' ? true : undefined), 'the deposit settling the fast fill');
    const d = s.node.ledger.deposits.byOrderRef(requestId)[0]!;
    expect(s.node.ledger.balances.get(`hold_release:${requestId}`)!.detail).toBe(d.id);
    expect(s.node.ledger.balances.get(`permanent_debit:${requestId}`)).toBeUndefined();
    expect(s.node.ledger.balances.summary(account(4).address)).toEqual(before);
    expect(s.node.ledger.payouts.forRequest(requestId).map((p) => `${p.kind}:${p.state}`)).toEqual(['fill:success']);
    expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('success');
  });

  it('a deposit arriving while its fast fill is in flight, whose payout then fails, is refunded like any other; the app is charged nothing', async () => {
    const { requestId, before } = await depositWhileInFlight(1, usdc(B));
    const done = await waitForStatus(s.url, requestId, ['refund'], 60_000);
    expect(done.failReason).toBe('EXECUTION_REVERTED');
    expect(
      s.node.ledger.payouts
        .forRequest(requestId)
        .map((p) => `${p.kind}:${p.state}`)
        .sort(),
    ).toEqual(['fill:failed', 'refund:success']);
    expect(s.node.ledger.payouts.get(`refund:${requestId}`)!.recipient).toBe(account(1).address);
    expect(s.node.ledger.balances.summary(account(4).address)).toEqual(before);
    expect(s.node.ledger.balances.get(`permanent_debit:${requestId}`)).toBeUndefined();
  });
  it('app fees are earned on the input a fast fill was priced at (solverInputCurrencyAmount), not on the quoted amount', async () => {
    // A quote of 50 USDC with a 50% app fee, fast-filled as if 5 USDC came in: the fill pays under
    // 2.5 USDC and the hold is 5 USD, so the app's fee is at most 2.5 USDC (on the quote's 50, 25).
    const feeTo = privateKeyToAccount(generatePrivateKey()).address;
    const q = await api(s.url, '/quote/v2', {
      apiKey: app.key,
      body: usdcQuote('50000000', { appFees: [{ recipient: feeTo, fee: '5000' }] }),
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId, solverInputCurrencyAmount: '5000000' } });
    expect(ff.status).toBe(200);
    await waitForStatus(s.url, requestId, ['success']);
    const accrued = await until(() => {
      const entries = s.node.ledger.appFees.accruedFor(requestId);
      return entries.length ? entries : undefined;
    }, 'the app fee accrued');
    expect(accrued.map((e) => e.recipient)).toEqual([feeTo]);
    expect(BigInt(accrued[0]!.amount)).toBeLessThanOrEqual(2_500_000n);
    expect(BigInt(accrued[0]!.amount)).toBeGreaterThan(0n);
  });

  it("a sponsored request's fast fill must cover its hold and the sponsored fees: it cannot drive the app balance below zero", async () => {
    // A fresh wallet credited exactly 10 USD, and a 10 USDC request whose fees it sponsors.
    const exact = privateKeyToAccount(generatePrivateKey());
    const k = s.node.ledger.apiKeys.create('exact');
    expect((await linkWallet(s.url, k.key, exact)).status).toBe(200);
    const w = s.wallet(1, A);
    const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 10_000_000n] })}${marker(exact.address)}` as Hex;
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc(A), data });
    await s.publicClient(A).waitForTransactionReceipt({ hash });
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the credit');
    const q = await api(s.url, '/quote/v2', {
      apiKey: k.key,
      body: usdcQuote('10000000', { subsidizeFees: true }),
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    // The hold (10 USD, the input's worth) alone fits the balance; with the sponsored fees it does not.
    const ff = await api(s.url, '/fast-fill', { apiKey: k.key, body: { requestId } });
    expect(ff.status).toBe(402);
    expect(ff.body.errorCode).toBe('APP_BALANCE_TOO_LOW');
    expect(s.node.ledger.balances.summary(exact.address)).toEqual({ balance: 10_000_000n, held: 0n, available: 10_000_000n });
    expect(s.node.ledger.payouts.forRequest(requestId)).toEqual([]);
  });
  it("a fast fill obeys the operator's risk controls like any fill: no payout to a denied recipient, none on a paused route", async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(2, DENIED) });
    expect(q.status).toBe(200);
    const denied = q.body.steps[0].requestId as Hex;
    const r = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: denied } });
    expect(r.status).toBe(403);
    expect(r.body.errorCode).toBe('BLOCKED_WALLET');
    expect(s.node.ledger.payouts.forRequest(denied)).toEqual([]);
    expect(s.node.ledger.balances.ofRequest(denied)).toEqual([]);

    const who = { actor: 'test', reason: 'route incident' };
    const ok = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(2, account(2).address) });
    const paused = ok.body.steps[0].requestId as Hex;
    pause(s.node.ledger, { scope: 'route', originChainId: A, destinationChainId: B }, who);
    try {
      const p = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: paused } });
      expect(p.status).toBe(409);
      expect(p.body.errorCode).toBe('PAUSED_ROUTE');
      expect(s.node.ledger.payouts.forRequest(paused)).toEqual([]);
    } finally {
      resume(s.node.ledger, { scope: 'route', originChainId: A, destinationChainId: B }, who);
    }
  });
  it("a swap's fast fill pays today's rate, never the quote's: after a small fall it pays less than quoted; past the quote's slippage tolerance it is refused, nothing paid or held", async () => {
    // A quote kept until the market moves is an option: filled at its own rate after the input's price fell, it
    // would pay more than the input is now worth (all the hold covers), on whichever quotes the caller picks.
    const swapTo = (recipient: Address) => ({ ...nativeQuote(1, recipient), destinationCurrency: usdc(B) });
    const paidTo = (who: Address) => s.publicClient(B).readContract({ address: usdc(B), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
    const micro = (usd: string) => parseUnits(usd, 6);
    try {
      // Within the tolerance (50 bps): ETH 0.1% lower than quoted. Paid, at today's rate.
      const near = privateKeyToAccount(generatePrivateKey()).address;
      const q1 = await api(s.url, '/quote/v2', { apiKey: app.key, body: swapTo(near) });
      expect(q1.status).toBe(200);
      const id1 = q1.body.steps[0].requestId as Hex;
      prices.set('ETH', '2997');
      const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: id1 } });
      expect(ff.status).toBe(200);
      await waitForStatus(s.url, id1, ['success']);
      const paid = await paidTo(near);
      expect(paid).toBe(BigInt(ff.body.amount));
      expect(paid).toBeLessThan(BigInt(q1.body.details.currencyOut.amount));
      expect(paid).toBeGreaterThanOrEqual(BigInt(q1.body.details.currencyOut.minimumAmount));
      // Worth no more than what it holds: the input's worth now.
      expect(micro(ff.body.amountUsd)).toBeLessThanOrEqual(micro(ff.body.hold.amountUsd));

      // Past the tolerance: ETH 20% lower than quoted. Refused: nothing held or paid, the request still waits for its deposit.
      prices.set('ETH', '3000');
      const far = privateKeyToAccount(generatePrivateKey()).address;
      const q2 = await api(s.url, '/quote/v2', { apiKey: app.key, body: swapTo(far) });
      const id2 = q2.body.steps[0].requestId as Hex;
      prices.set('ETH', '2400');
      const before = s.node.ledger.balances.summary(account(4).address);
      const refused = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: id2 } });
      expect(refused.status).toBe(409);
      expect(refused.body.errorCode).toBe('SLIPPAGE');
      expect(s.node.ledger.balances.summary(account(4).address)).toEqual(before);
      expect(s.node.ledger.payouts.get(`fill:${id2}`)).toBeUndefined();
      expect(s.node.ledger.requests.get(id2)).toMatchObject({ status: 'waiting', fast_fill_deadline: null });
    } finally {
      prices.overrides.delete('ETH');
    }
  });

  it('a quote past its expiry is not fast-filled (ORDER_EXPIRED): nothing paid or held', async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: nativeQuote(1, account(1).address) });
    const requestId = q.body.steps[0].requestId as Hex;
    // The quote's life has run out (10 minutes by default), as for a quote kept since.
    s.node.ledger.db.prepare('UPDATE requests SET expires_at = ? WHERE id = ?').run(Date.now() - 1, requestId);
    const before = s.node.ledger.balances.summary(account(4).address);
    const refused = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } });
    expect(refused.status).toBe(400);
    expect(refused.body.errorCode).toBe('ORDER_EXPIRED');
    expect(s.node.ledger.balances.summary(account(4).address)).toEqual(before);
    expect(s.node.ledger.payouts.get(`fill:${requestId}`)).toBeUndefined();
  });
});
