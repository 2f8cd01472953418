import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEventLogs, type Address, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { ANVIL_MNEMONIC } from '../src/devnet/devnet.ts';
import { OrderFillerAbi } from '../contracts-abi/index.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';
import { stalledRequest } from './helpers/stalledRequest.ts';
import { ledgerArgs } from './helpers/cliConfig.ts';

// Risk limits that end an order (route's largest order, wallet lists) and the admin surface
// (pause/resume, dry run, stuck payouts, manual refund), on the devnet with the node's admin API.
let s: Stack;
let adminKey: string;
const A = 8453;
const B = 10;
const BLOCKED_RECIPIENT = '0x00000000000000000000000000000000000b10C7' as Address;
// Devnet account 4 (anvil's mnemonic): its deposits are neither filled nor refunded on their own.
const BLOCKED_DEPOSITOR = 4;

beforeAll(async () => {
  s = await startStack({
    config: {
      admin: { port: 0 },
      // Short bounds on receiving a request, so the stalled-request test below ends soon.
      api: { requestTimeoutMs: 2_000, headersTimeoutMs: 2_000 },
      risk: {
        routes: [{ originChainId: A, destinationChainId: B, maxOrderUsd: '1000' }],
        denyRecipients: [BLOCKED_RECIPIENT.toLowerCase()],
        denyDepositors: [mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: BLOCKED_DEPOSITOR }).address],
      },
    },
  });
  adminKey = s.node.ledger.operations.createAdminKey('ops-alice').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const user = (i: number) => s.devnet.accounts[i]!.address;
const admin = (path: string, init: { method?: string; body?: unknown; key?: string | null } = {}) =>
  api(s.node.adminUrl, path, { method: init.method, body: init.body, headers: init.key === null ? {} : { authorization: `Bearer ${init.key ?? adminKey}` } });

async function quoteAndDeposit(account: number, origin: number, dest: number, amount: bigint, recipient: Address = user(account)): Promise<Hex> {
  const q = await api(s.url, '/quote', {
    body: nativeBridge(user(account), recipient, origin, dest, amount.toString()),
  });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
  await executeSteps(s, q.body, account);
  return requestId;
}

async function fillsOnChain(chainId: number, id: Hex) {
  const c = s.devnet.chains.find((x) => x.id === chainId)!;
  const logs = await s.publicClient(chainId).getLogs({ address: c.contracts.filler, fromBlock: 0n, toBlock: 'latest' });
  return parseEventLogs({ abi: OrderFillerAbi, logs, eventName: 'OrderFilled' }).filter((l) => l.args.orderId === id);
}

const waitingItem = (requestId: Hex) =>
  until(async () => {
    const r = await admin('/admin/payouts?state=waiting');
    return r.body.payouts.find((p: any) => p.requestId === requestId);
  }, `request ${requestId} listed as waiting`);

describe('admin API authentication', () => {
  it('needs an admin key: none is 401, an integrator API key is 403', async () => {
    expect((await admin('/admin/switches', { key: null })).status).toBe(401);
    const integrator = s.node.ledger.apiKeys.create('integrator').key;
    const r = await admin('/admin/switches', { key: integrator });
    expect(r.status).toBe(403);
    expect(r.body.errorCode).toBe('FORBIDDEN');
    expect((await admin('/admin/switches')).status).toBe(200);
  });

  it('closes a connection whose request body stalls, as the API does (api.requestTimeoutMs)', async () => {
    // A key, so the listener waits for the body: it held the socket for good.
    expect(await stalledRequest(s.node.adminUrl, '/admin/pause', { Authorization: `Bearer ${adminKey}` })).toMatch(/^HTTP\/1\.1 408/);
  });

  it('closes a connection that never sends a byte, as the API does (api.headersTimeoutMs)', async () => {
    const { hostname, port } = new URL(s.node.adminUrl);
    const silent = await new Promise<Socket>((resolve, reject) => {
      const c = connect(Number(port), hostname, () => resolve(c));
      c.once('error', reject);
    });
    let closed = false;
    silent.on('close', () => {
      closed = true;
    });
    silent.on('error', () => {});
    try {
      // Before: it stayed open for good (Node's header clock starts at a request's first byte).
      await until(() => (closed ? true : undefined), 'the silent connection closed by the admin listener', 20_000);
      expect(closed).toBe(true);
    } finally {
      silent.destroy();
    }
  });

  it('refuses an action without a reason (400 naming it)', async () => {
    const r = await admin('/admin/pause', { body: { scope: 'chain', chainId: B } });
    expect(r.status).toBe(400);
    expect(r.body.message).toContain('reason');
    expect(s.node.ledger.operations.switches()).toEqual([]);
  });
});

describe('limits that end an order', () => {
  it('refunds an order above the route limit with SOLVER_CAPACITY_EXCEEDED; the other direction has no limit', async () => {
    // 0.5 ETH at 3000 USD: 1500 USD, above the A→B limit of 1000.
    const big = await quoteAndDeposit(1, A, B, 500_000_000_000_000_000n);
    const done = await waitForStatus(s.url, big, ['refund', 'success']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'SOLVER_CAPACITY_EXCEEDED' });
    expect(await fillsOnChain(B, big)).toHaveLength(0);
    const back = await quoteAndDeposit(1, B, A, 500_000_000_000_000_000n);
    expect((await waitForStatus(s.url, back, ['refund', 'success', 'failure'])).status).toBe('success');
  });

  it('refunds a fill to a denied recipient with BLOCKED_WALLET', async () => {
    const id = await quoteAndDeposit(2, A, B, 10_000_000_000_000_000n, BLOCKED_RECIPIENT);
    const done = await waitForStatus(s.url, id, ['refund', 'success']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'BLOCKED_WALLET' });
    expect(await s.publicClient(B).getBalance({ address: BLOCKED_RECIPIENT })).toBe(0n);
  });
});

describe('a blocked depositor', () => {
  it('fails with BLOCKED_WALLET and no automatic refund; listed as failed; refunded by hand', async () => {
    const depositor = user(BLOCKED_DEPOSITOR);
    const id = await quoteAndDeposit(BLOCKED_DEPOSITOR, A, B, 50_000_000_000_000_000n, user(1));
    const failed = await waitForStatus(s.url, id, ['failure', 'refund', 'success']);
    expect(failed).toMatchObject({ status: 'failure', failReason: 'BLOCKED_WALLET', refundFailReason: 'MANUAL_REFUND_REQUIRED' });
    expect(s.node.ledger.payouts.forRequest(id)).toEqual([]);
    const listed = (await admin('/admin/payouts?state=failed')).body.payouts.find((p: any) => p.requestId === id);
    expect(listed).toMatchObject({ state: 'failed', reason: 'BLOCKED_WALLET', chainId: A, amount: '50000000000000000' });
    const before = await s.publicClient(A).getBalance({ address: depositor });
    const r = await admin(`/admin/requests/${id}/refund`, { body: { reason: 'cleared by compliance' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const done = await waitForStatus(s.url, id, ['refund']);
    expect(done.failReason).toBe('MANUAL_ADMIN_REFUND');
    const back = (await s.publicClient(A).getBalance({ address: depositor })) - before;
    expect(back).toBe(BigInt(r.body.refund.amount));
    expect(back).toBeGreaterThan(0n);
  });
});

describe('pause and resume', () => {
  it('a paused chain holds a fill (PAUSED_CHAIN, with its age); resume releases it', async () => {
    const p = await admin('/admin/pause', { body: { scope: 'chain', chainId: B, reason: 'provider incident' } });
    expect(p.status).toBe(200);
    const id = await quoteAndDeposit(3, A, B, 20_000_000_000_000_000n);
    const item = await waitingItem(id);
    expect(item).toMatchObject({ state: 'waiting', reason: 'PAUSED_CHAIN', chainId: A });
    expect(item.ageMs).toBeGreaterThanOrEqual(0);
    // Held across several solver passes: the deposit stays undecided and nothing reaches the chain.
    await until(() => {
      const p = s.node.ledger.operations.postponement(item.depositId)!;
      return p.last_at > p.first_at ? true : undefined;
    }, 'the deposit judged again by a later pass');
    expect(s.node.ledger.payouts.forRequest(id)).toEqual([]);
    expect(await fillsOnChain(B, id)).toHaveLength(0);
    expect((await api(s.url, `/intents/status/v3?requestId=${id}`)).body.status).not.toBe('success');
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/relay_solver_postponed_total\{reason="PAUSED_CHAIN"\} [1-9]/);

    const r = await admin('/admin/resume', { body: { scope: 'chain', chainId: B, reason: 'provider back' } });
    expect(r.body).toMatchObject({ paused: false, changed: true });
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'])).status).toBe('success');
    expect(await fillsOnChain(B, id)).toHaveLength(1);
    const actions = (await admin('/admin/actions?target=chain:10')).body.actions;
    expect(actions.slice(0, 2).map((a: any) => [a.action, a.actor, a.reason])).toEqual([
      ['resume', expect.stringContaining('ops-alice'), 'provider back'],
      ['pause', expect.stringContaining('ops-alice'), 'provider incident'],
    ]);
  });

  it('all payouts paused holds a refund too; a route pause holds only its route', async () => {
    await admin('/admin/pause', { body: { scope: 'route', originChainId: A, destinationChainId: B, reason: 'route review' } });
    const held = await quoteAndDeposit(1, A, B, 20_000_000_000_000_000n);
    expect((await waitingItem(held)).reason).toBe('PAUSED_ROUTE');
    const other = await quoteAndDeposit(1, B, A, 20_000_000_000_000_000n);
    expect((await waitForStatus(s.url, other, ['success', 'refund', 'failure'])).status).toBe('success');
    await admin('/admin/resume', { body: { scope: 'route', originChainId: A, destinationChainId: B, reason: 'reviewed' } });
    expect((await waitForStatus(s.url, held, ['success', 'refund', 'failure'])).status).toBe('success');
  });
});

describe('manual refund', () => {
  it('refunds a held deposit by hand with MANUAL_ADMIN_REFUND, recorded with who and why', async () => {
    await admin('/admin/pause', { body: { scope: 'all', reason: 'incident' } });
    const id = await quoteAndDeposit(2, A, B, 30_000_000_000_000_000n);
    expect((await waitingItem(id)).reason).toBe('PAUSED_ALL');
    const r = await admin(`/admin/requests/${id}/refund`, { body: { reason: 'user asked for their money back' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // A second refund of the same request is refused: it is being paid already.
    const again = await admin(`/admin/requests/${id}/refund`, { body: { reason: 'twice' } });
    expect(again.status).toBe(409);
    // Still paused: the refund is queued, not sent.
    expect(s.node.ledger.payouts.forRequest(id).map((p) => [p.kind, p.state])).toEqual([['refund', 'queued']]);
    await admin('/admin/resume', { body: { scope: 'all', reason: 'incident over' } });
    const done = await waitForStatus(s.url, id, ['refund']);
    expect(done.failReason).toBe('MANUAL_ADMIN_REFUND');
    expect(await fillsOnChain(B, id)).toHaveLength(0);
    const [action] = (await admin(`/admin/actions?target=request:${id}`)).body.actions;
    expect(action).toMatchObject({ action: 'refund', reason: 'user asked for their money back' });
    expect(action.actor).toContain('ops-alice');
  });

  it('refuses to refund a request that was filled, and names an unknown one', async () => {
    const id = await quoteAndDeposit(3, A, B, 10_000_000_000_000_000n);
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'])).status).toBe('success');
    expect((await admin(`/admin/requests/${id}/refund`, { body: { reason: 'x' } })).status).toBe(409);
    expect((await admin(`/admin/requests/0x${'ab'.repeat(32)}/refund`, { body: { reason: 'x' } })).status).toBe(404);
    expect((await admin(`/admin/requests/nope/refund`, { body: { reason: 'x' } })).status).toBe(400);
  });
});

describe('inventory', () => {
  it("reports the solver's holdings per chain: held, reserved, spendable", async () => {
    const r = await admin('/admin/inventory');
    const eth = r.body.chains.find((c: any) => c.chainId === B).currencies.find((c: any) => c.symbol === 'ETH');
    const held = await s.publicClient(B).getBalance({ address: s.devnet.solver });
    expect(BigInt(eth.held)).toBeLessThanOrEqual(held);
    expect(BigInt(eth.spendable)).toBe(BigInt(eth.held) - BigInt(eth.reserved));
  });
});

describe('dry run', () => {
  it('indexes and decides, records what it would do, sends nothing; turned off, it acts', async () => {
    const nonceBefore = await s.publicClient(B).getTransactionCount({ address: s.devnet.solver });
    expect((await admin('/admin/dry-run', { body: { enabled: true, reason: 'rehearsal' } })).status).toBe(200);
    const id = await quoteAndDeposit(2, A, B, 10_000_000_000_000_000n);
    const decision = await until(
      async () => (await admin('/admin/dry-run')).body.decisions.find((d: any) => JSON.parse(d.detail).request === id),
      'a dry-run decision',
    );
    expect(decision.decision).toBe('fill');
    expect(JSON.parse(decision.detail)).toMatchObject({ chain: B, recipient: user(2) });
    expect(s.node.ledger.payouts.forRequest(id)).toEqual([]);
    expect((await waitingItem(id)).reason).toBe('DRY_RUN');
    expect(await s.publicClient(B).getTransactionCount({ address: s.devnet.solver })).toBe(nonceBefore);
    await admin('/admin/dry-run', { body: { enabled: false, reason: 'rehearsal over' } });
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'])).status).toBe('success');
  });
});

describe('relay-node admin (CLI)', () => {
  // Asynchronous: the node answering the CLI runs in this process.
  const cli = async (args: string[], env: Record<string, string> = {}) => {
    try {
      const r = await promisify(execFile)(process.execPath, ['bin/relay-node.js', 'admin', ...args], { env: { ...process.env, ...env }, timeout: 60_000 });
      return { code: 0, out: r.stdout + r.stderr };
    } catch (e: any) {
      return { code: e.code as number, out: `${e.stdout}${e.stderr}` };
    }
  };

  // Each CLI run starts tsx: slow on a loaded machine, hence the bound.
  it('creates an admin key on the ledger, then pauses and resumes a chain through the admin API, recorded under its name', { timeout: 180_000 }, async () => {
    const ledger = ledgerArgs(s);
    const made = await cli(['keys', 'create', '--name', 'ops-carol', ...ledger.args], ledger.env);
    expect(made.code, made.out).toBe(0);
    const key = made.out.split('\n')[1]!;
    expect(key, made.out).toMatch(/^rnadm_/);
    const env = { RELAY_ADMIN_KEY: key, RELAY_ADMIN_URL: s.node.adminUrl };
    const paused = await cli(['pause', '--chain', String(B), '--reason', 'cli drill'], env);
    expect(paused.code, paused.out).toBe(0);
    expect(s.node.ledger.operations.switches().map((x) => [x.name, x.actor])).toEqual([[`pause:chain:${B}`, expect.stringContaining('ops-carol')]]);
    expect((await cli(['resume', '--chain', String(B), '--reason', 'cli drill over'], env)).code).toBe(0);
    expect(s.node.ledger.operations.switches()).toEqual([]);
    expect(made.out + paused.out).not.toContain(adminKey);
  });
});
