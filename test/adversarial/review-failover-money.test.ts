// Money review of two nodes on one PostgreSQL ledger (active/standby): what an attacker who times requests against the
// leadership, or a takeover, can make the nodes pay. The leader is the stack's node; a second node on the same ledger is
// a standby until the leader stops (a clean release), then takes over in the same process it served the API from.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createLogger } from '../../src/log.ts';
import { RelayNode } from '../../src/node.ts';
import { fundAppBalance, linkWallet } from '../helpers/appBalance.ts';
import { api, executeSteps, nativeBridge, permitQuote, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
const LEASE = { enabled: true, leaseMs: 3_000, renewMs: 500 };

let s: Stack;
let standby: RelayNode;
let app: { key: string; id: string };
const account = (i: number) => s.devnet.accounts[i]!;
const fresh = () => privateKeyToAccount(generatePrivateKey()).address;
// How many rows of a kind of payout the ledger holds (what a node recorded, whichever node).
const payoutsOfKind = (kind: string) =>
  Number((s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM payouts WHERE kind = ?').get(kind) as { n: number | string }).n);
// 0.01 ETH from A to B for `recipient`, quoted with the app's key: a request it may fast-fill.
const quoteForApp = async (url: string, user: number, recipient: Address) => {
  const q = await api(url, '/quote/v2', { apiKey: app.key, body: nativeBridge(account(user).address, recipient, A, B, '10000000000000000') });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  return q;
};

beforeAll(async () => {
  s = await startStack({ ledger: 'postgres', config: { ha: { ...LEASE, nodeId: 'leader' }, admin: { port: 0 } } });
  await until(() => (s.node.leadership?.role === 'leader' ? true : undefined), 'the stack node to lead');
  // The app: a key sponsored by account 3, its balance funded with 100 USDC (a fast fill of 0.01 ETH holds ~30 USD).
  app = s.node.ledger.apiKeys.create('review-failover app');
  await linkWallet(s, app, 3);
  await fundAppBalance(s, 3, account(3).address, 100_000_000n);
  const c = s.node.config;
  standby = await new RelayNode(
    { ...c, ha: { ...c.ha, nodeId: 'standby' }, api: { ...c.api, port: 0 } },
    { log: createLogger(process.env.RELAY_TEST_LOG ?? 'silent'), onLeaseLost: () => undefined },
  ).start();
  expect(standby.leadership?.role).toBe('standby');
}, 120_000);
afterAll(async () => {
  await standby?.stop().catch(() => {});
  await s?.stop();
});

describe('a standby answers 503 NOT_LEADER for every request that would move value, and records nothing', () => {
  it('fast fill: refused on the standby, no payout and no hold; the leader then fills it once', async () => {
    const recipient = fresh();
    const q = await quoteForApp(standby.url, 1, recipient);
    const id = q.body.steps[0].requestId as Hex;
    const before = s.node.ledger.balances.summary(account(3).address);
    const r = await api(standby.url, '/fast-fill', { apiKey: app.key, body: { requestId: id } });
    expect({ status: r.status, code: r.body.errorCode }).toEqual({ status: 503, code: 'NOT_LEADER' });
    expect(s.node.ledger.payouts.get(`fill:${id}`)).toBeUndefined();
    expect(s.node.ledger.requests.get(id)!.status).toBe('waiting');
    expect(s.node.ledger.balances.summary(account(3).address)).toEqual(before);
    // Nothing the standby did stands in the way: the leader takes the same request.
    expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: id } })).status).toBe(200);
    await waitForStatus(s.url, id, ['success']);
    expect(await s.publicClient(B).getBalance({ address: recipient })).toBeGreaterThan(0n);
  });

  it('gasless relay: refused on the standby, no request and no hold recorded', async () => {
    const relays = payoutsOfKind('relay');
    const held = s.node.ledger.balances.summary(account(3).address).held;
    const r = await api(standby.url, '/execute', {
      apiKey: app.key,
      body: { executionKind: 'rawCalls', data: { chainId: B, to: fresh(), data: '0x', value: '0' }, executionOptions: { referrer: 'x', subsidizeFees: true } },
    });
    expect({ status: r.status, code: r.body.errorCode }).toEqual({ status: 503, code: 'NOT_LEADER' });
    expect(payoutsOfKind('relay')).toBe(relays);
    expect(s.node.ledger.balances.summary(account(3).address).held).toBe(held);
  });

  it('app fee claim: refused on the standby, the nonce it signed left unused', async () => {
    const wallet = privateKeyToAccount(generatePrivateKey());
    const ask = await api(standby.url, `/app-fees/${wallet.address}/claim`, { body: { chainId: B, currency: zeroAddress, recipient: wallet.address } });
    expect(ask.status, JSON.stringify(ask.body)).toBe(200);
    const item = ask.body.steps[0].items[0].data;
    const signature = await wallet.signMessage({ message: item.sign.message });
    const path = `${item.post.endpoint}?signature=${signature}`;
    const r = await api(standby.url, path, { body: item.post.body });
    expect({ status: r.status, code: r.body.errorCode }).toEqual({ status: 503, code: 'NOT_LEADER' });
    const used = s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM signature_nonces WHERE wallet = ?').get(wallet.address) as { n: number | string };
    expect(Number(used.n)).toBe(0);
    // Nothing is owed to this wallet: the leader says so.
    const onLeader = await api(s.url, path, { body: item.post.body });
    expect({ status: onLeader.status, code: onLeader.body.errorCode }).toEqual({ status: 400, code: 'NOTHING_TO_CLAIM' });
  });

  it('signed deposit (usePermit): refused on the standby, nothing submitted; the same permit is taken by the leader', async () => {
    const user = privateKeyToAccount(account(2).privateKey);
    const q = await permitQuote(s, user.address);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    const signature = await user.signTypedData({ ...step.items[0].data.sign, message: step.items[0].data.sign.value });
    const body = step.items[0].data.post.body;
    const r = await api(standby.url, `/permits?signature=${signature}`, { body });
    expect({ status: r.status, code: r.body.errorCode }).toEqual({ status: 503, code: 'NOT_LEADER' });
    expect(s.node.ledger.payouts.get(`deposit:${step.requestId}`)).toBeUndefined();
    expect(s.node.ledger.requests.get(step.requestId)!.status).toBe('waiting');
    expect((await api(s.url, `/permits?signature=${signature}`, { body })).status).toBe(200);
    expect((await waitForStatus(s.url, step.requestId, ['success', 'failure', 'refund'], 60_000)).status).toBe('success');
  });

  it('app balance unlink: taken by the standby (not an act on chains), and the leader stops spending the wallet at once', async () => {
    // A second key, linked through the standby to a wallet of its own (unfunded: still linked, the leader would answer
    // APP_BALANCE_TOO_LOW; unlinked, NO_APP_BALANCE).
    const key = s.node.ledger.apiKeys.create('review-failover unlink');
    const wallet = privateKeyToAccount(generatePrivateKey());
    const link = await api(standby.url, '/app-balance/link', { apiKey: key.key, body: { wallet: wallet.address } });
    const ld = link.body.steps[0].items[0].data;
    expect(
      (
        await api(standby.url, ld.post.endpoint, {
          apiKey: key.key,
          body: { ...ld.post.body, signature: await wallet.signMessage({ message: ld.sign.message }) },
        })
      ).status,
    ).toBe(200);
    expect(s.node.ledger.balances.sponsorOf(key.id)).toBe(wallet.address);
    // The wallet withdraws through the standby.
    const ask = await api(standby.url, '/app-balance/unlink', { body: { wallet: wallet.address, apiKeyId: key.id } });
    const d = ask.body.steps[0].items[0].data;
    const r = await api(standby.url, d.post.endpoint, { body: { ...d.post.body, signature: await wallet.signMessage({ message: d.sign.message }) } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // The key's holder asks the leader for a fast fill on the wallet's balance: refused.
    const q = await api(s.url, '/quote/v2', { apiKey: key.key, body: nativeBridge(account(1).address, fresh(), A, B, '10000000000000000') });
    const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId: q.body.steps[0].requestId } });
    expect({ status: ff.status, code: ff.body.errorCode }).toEqual({ status: 403, code: 'NO_APP_BALANCE' });
  });
});

// The SDK reports each deposit on POST /transactions/index, to whichever node answers its base URL. A standby's indexer
// does not run (it acts on no chain): the report waited for it to reach the deposit's block, and hung until a takeover.
describe('a deposit reported to the standby', () => {
  it('is answered at once: there is no running indexer to wait for, and the leader reads the deposit', async () => {
    const user = account(1).address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps[0].requestId as Hex;
    const [txHash] = await executeSteps(s, q.body, 1);
    const report = api(standby.url, '/transactions/index', { body: { txHash, chainId: A } });
    const answer = await Promise.race([report, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 15_000))]);
    expect(answer === 'hung' ? 'hung' : { status: answer.status, deposits: answer.body.deposits }).toEqual({ status: 200, deposits: 1 });
    expect((await waitForStatus(s.url, id, ['success', 'failure', 'refund'])).status).toBe('success');
  });
});

// The takeover, as the standby above makes it: the leader recorded a fast fill (its hold placed, the payout queued) and
// a fill out of a deposit that a reorg then took back, unseen by it; it stops (a clean release), and the standby leads.
// Every payout records the epoch it was decided under (README "Fenced writes"): an operator's withdrawal was written
// through the unfenced ledger, its epoch NULL, and a standby took it as well.
describe("an operator's withdrawal of what the depository owes the solver", () => {
  it("is recorded under the leader's epoch, as the solver's own payouts are", async () => {
    const user = account(0).address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps[0].requestId as Hex;
    await executeSteps(s, q.body, 0);
    expect((await waitForStatus(s.url, id, ['success', 'failure', 'refund'])).status).toBe('success');
    const depositId = s.node.ledger.deposits.byOrderRef(id)[0]!.id;
    const key = s.node.ledger.operations.createAdminKey('failover review').key;
    const r = await api(s.node.adminUrl, '/admin/withdrawals', {
      body: { chainId: A, currency: zeroAddress, depositIds: [depositId], reason: 'review' },
      headers: { authorization: `Bearer ${key}` },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(s.node.ledger.payouts.get(r.body.withdrawal.payoutId)).toMatchObject({ kind: 'withdrawal', epoch: s.node.leadership!.epoch });
  });
});

describe('a takeover by the standby, with payouts the old leader recorded', () => {
  const rpcA = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as never, params: params as never });
  const settled = (node: RelayNode, id: string) =>
    until(
      () => {
        const p = node.ledger.payouts.get(id);
        return p && (p.state === 'success' || p.state === 'failed') ? p : undefined;
      },
      `${id} settled`,
      90_000,
    );

  it('the new leader pays the fast fill once and settles its hold on the deposit, and pays nothing out of the reorged deposit', async () => {
    const epoch = s.node.leadership!.epoch!;
    // The leader's submitter on B stops: what it records there stays queued, as at a crash. (holdSubmitter's patch does
    // not reach a fenced ledger, which keeps the store methods it wrapped.)
    await s.node.adapters.get(B)!.stop();
    // The fast fill: decided by the leader, its hold placed, its payout queued.
    const ffRecipient = fresh();
    const ff = await quoteForApp(s.url, 1, ffRecipient);
    const ffId = ff.body.steps[0].requestId as Hex;
    expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: ffId } })).status).toBe(200);
    expect(s.node.ledger.payouts.get(`fill:${ffId}`)).toMatchObject({ state: 'queued', epoch });
    const heldBefore = s.node.ledger.balances.summary(account(3).address).held;
    expect(heldBefore).toBeGreaterThan(0n);

    // A deposit's fill, queued; then the leader's indexer of A stops (it never sees what follows), and a reorg on A
    // takes the deposit back.
    const recipient = '0x00000000000000000000000000000000000fa110' as Address;
    const q = await api(s.url, '/quote', { body: nativeBridge(account(4).address, recipient, A, B, '10000000000000000') });
    const id = q.body.steps[0].requestId as Hex;
    const snapshot = (await rpcA('evm_snapshot')) as Hex;
    await executeSteps(s, q.body, 4);
    await until(() => (s.node.ledger.payouts.get(`fill:${id}`)?.state === 'queued' ? true : undefined), 'the fill queued');
    await s.node.adapters.get(A)!.stop();
    await rpcA('evm_revert', [snapshot]);
    await rpcA('anvil_mine', ['0x5']);

    // The leader stops (releases the lease); the standby takes over.
    await s.node.stop();
    await until(() => (standby.leadership?.role === 'leader' ? true : undefined), 'the standby to take over');
    expect(standby.leadership!.epoch).toBe(epoch + 1);

    const reorged = await settled(standby, `fill:${id}`);
    expect({ state: reorged.state, failReason: reorged.fail_reason, paid: await s.publicClient(B).getBalance({ address: recipient }) }).toEqual({
      state: 'failed',
      failReason: 'DEPOSIT_REORGED',
      paid: 0n,
    });
    const fastFill = await settled(standby, `fill:${ffId}`);
    expect(fastFill.state).toBe('success');

    // The fast-filled request's deposit lands: the new leader settles the hold the old one placed, and refunds nothing.
    await executeSteps(s, ff.body, 1);
    await until(() => (standby.ledger.balances.get(`hold_release:${ffId}`) ? true : undefined), 'the hold released by the deposit', 60_000);
    const payouts = standby.ledger.payouts.forRequest(ffId).map((p) => `${p.kind}:${p.state}`);
    expect(payouts).toEqual(['fill:success']);
    expect(standby.ledger.balances.ofRequest(ffId).filter((e) => e.kind === 'permanent_debit')).toEqual([]);
    const fills = await s.publicClient(B).getBalance({ address: ffRecipient });
    expect(fills).toBeGreaterThan(0n);
  }, 240_000);
});
