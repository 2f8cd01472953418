// Fee sponsorship and fast fills over HTTP, with API keys and app balances funded on chain: each of
// the interface's sponsorship rules that applies to EVM routes, and each answer of POST /fast-fill.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, zeroAddress, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { linkWallet } from './helpers/link.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';
import { auditStack } from './helpers/audit.ts';

let s: Stack;
const A = 8453;
const B = 10;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;
const marker = (credited: Address) => `012345abcdef${credited.slice(2).toLowerCase()}012345abcdef`;

// Key "rich": sponsor wallet account 4, funded with 100 USD. Key "poor": account 3, 0.01 USD.
// Key "bare": no linked wallet.
let rich: { key: string; id: string };
let poor: { key: string; id: string };
let bare: { key: string; id: string };

async function fund(from: number, credited: Address, units: bigint) {
  const w = s.wallet(from, A);
  const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, units] });
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc(A), data: `${data}${marker(credited)}` as Hex });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the app balance credit');
}

async function link(k: { key: string; id: string }, wallet: number) {
  const acct = privateKeyToAccount(account(wallet).privateKey);
  const r = await linkWallet(s.url, k.key, acct);
  expect(r.status).toBe(200);
}

// The ledger's own proof: a balance is the sum of its entries.
function entriesSum(wallet: string): bigint {
  const row = s.node.ledger.db
    .prepare(`SELECT COALESCE(SUM(amount), 0) AS n FROM balance_entries WHERE wallet = ? AND kind NOT IN ('hold', 'hold_release')`)
    .safeIntegers(true)
    .get(wallet) as { n: bigint };
  return row.n;
}

beforeAll(async () => {
  s = await startStack();
  rich = s.node.ledger.apiKeys.create('rich app');
  poor = s.node.ledger.apiKeys.create('poor app');
  bare = s.node.ledger.apiKeys.create('bare app');
  await link(rich, 4);
  await link(poor, 3);
  await fund(1, account(4).address, 100_000_000n);
  await fund(1, account(3).address, 10_000n);
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

const usdcQuote = (extra: Record<string, unknown> = {}, from = 2) => ({
  user: account(from).address,
  recipient: account(from).address,
  originChainId: A,
  destinationChainId: B,
  originCurrency: usdc(A),
  destinationCurrency: usdc(B),
  amount: '10000000',
  tradeType: 'EXACT_INPUT',
  ...extra,
});

async function tokenBalance(chainId: number, who: Address) {
  return s.publicClient(chainId).readContract({ address: usdc(chainId), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
}

describe('fee sponsorship', () => {
  it('rule 1: at or under the cap, the sponsor pays every fee, and its balance pays exactly that', async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: rich.key, body: usdcQuote({ subsidizeFees: true, maxSubsidizationAmount: '5000000' }) });
    expect(q.status).toBe(200);
    const userFees = BigInt(q.body.fees.relayer.amount);
    expect(userFees).toBeGreaterThan(0n);
    expect(BigInt(q.body.fees.subsidized.amount)).toBe(userFees);
    // The user gets the whole amount: 10 USDC in, 10 USDC out.
    expect(q.body.details.currencyOut.amount).toBe('10000000');
    const before = s.node.ledger.balances.summary(account(4).address).balance;
    const recipientBefore = await tokenBalance(B, account(2).address);
    await executeSteps(s, q.body, 2);
    const id = q.body.steps.at(-1).requestId;
    await waitForStatus(s.url, id, ['success']);
    expect(await tokenBalance(B, account(2).address)).toBe(recipientBefore + 10_000_000n);
    const after = s.node.ledger.balances.summary(account(4).address).balance;
    const paid = before - after;
    expect(paid).toBeGreaterThan(0n);
    expect(paid).toBeLessThanOrEqual(5_000_000n);
    expect(after).toBe(entriesSum(account(4).address));
    // The record shows what the quote promised and what the sponsor paid.
    const rec = (await api(s.url, `/requests/v3?id=${id}`, { apiKey: rich.key })).body.requests[0];
    expect(rec.data.feeSponsorship.quoted).toMatchObject({ capHit: false, maxSubsidizationAmount: '5000000', selectedComponents: ['execution', 'platform'] });
    // In the sponsorship currency (USDC at 1 USD): the balance's micro-USD one for one.
    expect(rec.data.feeSponsorship.actual.sponsorPayment).toEqual({ amount: paid.toString(), address: usdc(B).toLowerCase(), chainId: B });
  });

  it('rule 1: over the cap, the sponsor pays up to it and the user pays the rest', async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: rich.key, body: usdcQuote({ subsidizeFees: true, maxSubsidizationAmount: '1000' }) });
    expect(q.status).toBe(200);
    expect(q.body.fees.subsidized.amountUsd).toBe('0.001');
    expect(BigInt(q.body.details.currencyOut.amount)).toBeLessThan(10_000_000n);
    const id = q.body.steps.at(-1).requestId;
    const fs = JSON.parse(s.node.ledger.requests.get(id)!.money!).feeSponsorship;
    expect(fs.capHit).toBe(true);
    expect(fs.sponsoredTotal.amountUsd).toBe('0.001');
  });

  it('sponsoredFeeComponents: only the chosen components are sponsored', async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: rich.key, body: usdcQuote({ subsidizeFees: true, sponsoredFeeComponents: ['execution'] }) });
    expect(q.status).toBe(200);
    expect(BigInt(q.body.fees.relayerService.amount)).toBeGreaterThan(0n);
    expect(q.body.fees.subsidized.amount).toBe(q.body.fees.relayerGas.amount);
    // The platform fee is still the user's.
    expect(10_000_000n - BigInt(q.body.details.currencyOut.amount)).toBe(BigInt(q.body.fees.relayerService.amount));
    const bad = await api(s.url, '/quote/v2', { apiKey: rich.key, body: usdcQuote({ subsidizeFees: true, sponsoredFeeComponents: ['app'] }) });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/app fees cannot be sponsored/);
  });

  it('rule 7: app fees and origin gas are never sponsored', async () => {
    const q = await api(s.url, '/quote/v2', {
      apiKey: rich.key,
      body: usdcQuote({ subsidizeFees: true, appFees: [{ recipient: account(0).address, fee: 100 }] }),
    });
    expect(q.status).toBe(200);
    // 1% app fee of 10 USDC stays with the user; everything else is sponsored.
    expect(q.body.fees.app.amount).toBe('100000');
    expect(q.body.details.currencyOut.amount).toBe('9900000');
    expect(BigInt(q.body.fees.gas.amount)).toBeGreaterThan(0n);
    expect(BigInt(q.body.fees.subsidized.amount)).toBe(BigInt(q.body.fees.relayer.amount));
  });

  it('rule 3: subsidizeRent without subsidizeFees sponsors nothing', async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: rich.key, body: usdcQuote({ subsidizeRent: true }) });
    expect(q.status).toBe(200);
    expect(q.body.fees.subsidized.amount).toBe('0');
    expect(s.node.ledger.requests.get(q.body.steps.at(-1).requestId)!.money).toMatch(/"feeSponsorship":null/);
  });

  it('rule 4: depositFeePayer must differ from the user, and only SVM origins take one', async () => {
    const same = await api(s.url, '/quote/v2', { body: usdcQuote({ depositFeePayer: account(2).address }) });
    expect(same.status).toBe(400);
    expect(same.body.message).toMatch(/depositFeePayer: must differ from user/);
    const evm = await api(s.url, '/quote/v2', { body: usdcQuote({ depositFeePayer: account(3).address }) });
    expect(evm.status).toBe(400);
    expect(evm.body.message).toMatch(/only SVM-origin/);
  });

  it('rule 6: a deposit address takes no sponsoredFeeComponents, and over the cap the user pays every fee', async () => {
    const base = usdcQuote({ subsidizeFees: true, useDepositAddress: true, refundTo: account(2).address });
    const under = await api(s.url, '/quote/v2', { apiKey: rich.key, body: { ...base, maxSubsidizationAmount: '5000000' } });
    expect(under.status).toBe(200);
    expect(BigInt(under.body.fees.subsidized.amount)).toBe(BigInt(under.body.fees.relayer.amount));
    const over = await api(s.url, '/quote/v2', { apiKey: rich.key, body: { ...base, maxSubsidizationAmount: '1000' } });
    expect(over.status).toBe(200);
    // Not a part: nothing at all is sponsored, and the user pays the whole fee.
    expect(over.body.fees.subsidized.amount).toBe('0');
    expect(10_000_000n - BigInt(over.body.details.currencyOut.amount)).toBe(BigInt(over.body.fees.relayer.amount));
    const parts = await api(s.url, '/quote/v2', { apiKey: rich.key, body: { ...base, sponsoredFeeComponents: ['execution'] } });
    expect(parts.status).toBe(400);
  });

  it('needs a key with a linked wallet, and a balance that covers the fees (SPONSOR_BALANCE_TOO_LOW)', async () => {
    expect((await api(s.url, '/quote/v2', { body: usdcQuote({ subsidizeFees: true }) })).status).toBe(401);
    expect((await api(s.url, '/quote/v2', { apiKey: bare.key, body: usdcQuote({ subsidizeFees: true }) })).status).toBe(401);
    const low = await api(s.url, '/quote/v2', { apiKey: poor.key, body: usdcQuote({ subsidizeFees: true }) });
    expect(low.status).toBe(400);
    expect(low.body.errorCode).toBe('SPONSOR_BALANCE_TOO_LOW');
  });

  it('fails the fill with SPONSOR_BALANCE_TOO_LOW, then refunds, when the balance is gone by fill time', async () => {
    // A sponsor with just enough at quote time, drained before the deposit lands.
    const k = s.node.ledger.apiKeys.create('drained app');
    await link(k, 0);
    await fund(1, account(0).address, 1_000_000n);
    const q = await api(s.url, '/quote/v2', { apiKey: k.key, body: usdcQuote({ subsidizeFees: true }, 1) });
    expect(q.status).toBe(200);
    s.node.ledger.tx(() =>
      s.node.ledger.balances.post({ wallet: account(0).address, kind: 'permanent_debit', amount: -1_000_000n, request_id: null, ref: 'test:drain' }),
    );
    await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, q.body.steps.at(-1).requestId, ['refund', 'success']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'SPONSOR_BALANCE_TOO_LOW' });
    expect(s.node.ledger.balances.summary(account(0).address).balance).toBe(0n);
  });
});

describe('POST /fast-fill', () => {
  const nativeQuote = (from: number, amount = '10000000000000000') => ({
    user: account(from).address,
    recipient: account(from).address,
    originChainId: A,
    destinationChainId: B,
    originCurrency: zeroAddress,
    destinationCurrency: zeroAddress,
    amount,
    tradeType: 'EXACT_INPUT',
  });

  it('answers 400, 401, 403, 404 and the maxFillAmountUsd refusal', async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: rich.key, body: nativeQuote(2) });
    const requestId = q.body.steps[0].requestId;
    expect((await api(s.url, '/fast-fill', { body: { requestId } })).status).toBe(401);
    expect((await api(s.url, '/fast-fill', { apiKey: 'rn_nope', body: { requestId } })).status).toBe(403);
    expect((await api(s.url, '/fast-fill', { apiKey: bare.key, body: { requestId } })).status).toBe(403);
    expect((await api(s.url, '/fast-fill', { apiKey: rich.key, body: { requestId: 'x' } })).status).toBe(400);
    expect((await api(s.url, '/fast-fill', { apiKey: rich.key, body: { requestId, extra: 1 } })).status).toBe(400);
    expect((await api(s.url, '/fast-fill', { apiKey: rich.key, body: { requestId: `0x${'ab'.repeat(32)}` } })).status).toBe(404);
    const capped = await api(s.url, '/fast-fill', { apiKey: rich.key, body: { requestId, maxFillAmountUsd: '1' } });
    expect(capped.status).toBe(400);
    expect(capped.body.errorCode).toBe('MAX_FILL_AMOUNT_EXCEEDED');
    // Only the key that quoted the request (or sponsors it) may fast-fill it.
    const other = await api(s.url, '/fast-fill', { apiKey: poor.key, body: { requestId } });
    expect(other.status).toBe(403);
    expect(other.body.errorCode).toBe('NOT_QUOTED_BY_KEY');
    const mine = await api(s.url, '/quote/v2', { apiKey: poor.key, body: nativeQuote(2) });
    const short = await api(s.url, '/fast-fill', { apiKey: poor.key, body: { requestId: mine.body.steps[0].requestId } });
    expect(short.status).toBe(402);
    expect(short.body.errorCode).toBe('APP_BALANCE_TOO_LOW');
  });

  it('fills before the deposit, holds then releases, and pays once when the deposit lands (409 after)', async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: rich.key, body: nativeQuote(3) });
    const requestId = q.body.steps[0].requestId as Hex;
    const wallet = account(4).address;
    const before = s.node.ledger.balances.summary(wallet);
    const ff = await api(s.url, '/fast-fill', { apiKey: rich.key, body: { requestId } });
    expect(ff.status).toBe(200);
    expect(s.node.ledger.balances.summary(wallet).held).toBeGreaterThan(before.held);
    await waitForStatus(s.url, requestId, ['success']);
    const again = await api(s.url, '/fast-fill', { apiKey: rich.key, body: { requestId } });
    expect(again.status).toBe(409);
    // Now the deposit lands: the hold is released and nothing is paid twice.
    await executeSteps(s, q.body, 3);
    await until(() => (s.node.ledger.balances.summary(wallet).held === before.held ? true : undefined), 'the hold release');
    const fills = s.node.ledger.payouts.forRequest(requestId).filter((p) => p.kind === 'fill');
    expect(fills).toHaveLength(1);
    const rec = (await api(s.url, `/requests/v3?id=${requestId}`, { apiKey: rich.key })).body.requests[0];
    expect(rec.features).toContain('fast_fill');
    expect(rec.data.triggeredByFastFill).toBe(true);
    expect(s.node.ledger.balances.summary(wallet).balance).toBe(entriesSum(wallet));
  });

  it('races its own deposit: one fill, never two', async () => {
    const q = await api(s.url, '/quote/v2', { apiKey: rich.key, body: nativeQuote(2) });
    const requestId = q.body.steps[0].requestId as Hex;
    const w = s.wallet(2, A);
    const deposit = w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: chain(A).contracts.depository,
      value: 10_000_000_000_000_000n,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [account(2).address, requestId] }),
    });
    const [ff] = await Promise.all([api(s.url, '/fast-fill', { apiKey: rich.key, body: { requestId } }), deposit]);
    expect([200, 409]).toContain(ff.status);
    await waitForStatus(s.url, requestId, ['success']);
    // Let any second decision surface: the deposit is handled once it is confirmed.
    // (Indexed first: an empty list is "every deposit handled" too, and the fast fill may succeed before the deposit is seen.)
    await until(() => {
      const deps = s.node.ledger.deposits.byOrderRef(requestId);
      return deps.length > 0 && deps.every((d) => d.state === 'handled') ? true : undefined;
    }, 'the deposit indexed and handled');
    expect(s.node.ledger.payouts.forRequest(requestId).filter((p) => p.kind === 'fill')).toHaveLength(1);
    expect(s.node.ledger.balances.summary(account(4).address).held).toBe(0n);
  });

  it('keeps every balance equal to the sum of its entries under concurrent movements', async () => {
    const wallet = account(4).address;
    // Five fast fills of 3 USD each, three sponsored quotes and the fills' own debits, all at once.
    const quotes = await Promise.all([2, 3, 1, 2, 3].map((i) => api(s.url, '/quote/v2', { apiKey: rich.key, body: nativeQuote(i, '1000000000000000') })));
    const sponsored = Promise.all([1, 2, 3].map(() => api(s.url, '/quote/v2', { apiKey: rich.key, body: usdcQuote({ subsidizeFees: true }) })));
    const results = await Promise.all(quotes.map((q) => api(s.url, '/fast-fill', { apiKey: rich.key, body: { requestId: q.body.steps[0].requestId } })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    await sponsored;
    for (const q of quotes) await waitForStatus(s.url, q.body.steps[0].requestId, ['success']);
    const { balance, held } = s.node.ledger.balances.summary(wallet);
    expect(balance).toBe(entriesSum(wallet));
    const heldSum = s.node.ledger.db
      .prepare(`SELECT COALESCE(SUM(amount), 0) AS n FROM balance_entries WHERE wallet = ? AND kind IN ('hold', 'hold_release')`)
      .safeIntegers(true)
      .get(wallet) as { n: bigint };
    expect(held).toBe(heldSum.n);
    expect(held).toBeGreaterThan(0n);
  });
});

describe('books', () => {
  // relay-node audit after every flow above: the ledger reconciles with the chains to the smallest unit.
  it('reconcile with the chains (relay-node audit: no difference)', async () => {
    const r = await auditStack(s);
    expect(r.differences).toEqual([]);
    expect(r.chains.map((c) => c.chainId).sort()).toEqual([10, 1337, 8453]);
  }, 120_000);
});
