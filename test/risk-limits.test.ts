import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWalletClient, http, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

// Limits that hold a deposit back (USD in flight per origin chain, hourly outflow per destination
// chain) and the loss breaker, on the devnet. The breaker is on for the whole file: the ordinary
// fills of the first tests must never trip it.
let s: Stack;
let adminKey: string;
const A = 8453;
const B = 10;

beforeAll(async () => {
  s = await startStack({
    config: {
      admin: { port: 0 },
      risk: {
        // In flight: deposits on A (route A→B); outflow: fills on A (route B→A).
        chains: [{ chainId: A, maxInFlightUsd: '100', outflowUsdPerHour: '100' }],
        lossBreaker: { toleranceUsd: '10' },
      },
    },
  });
  adminKey = s.node.ledger.operations.createAdminKey('ops-bob').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const user = (i: number) => s.devnet.accounts[i]!.address;
const admin = (path: string, body?: unknown) => api(s.node.adminUrl, path, { body, headers: { authorization: `Bearer ${adminKey}` } });
const rpc = (chainId: number, method: string, params: unknown[]) => (s.publicClient(chainId) as any).request({ method, params });

async function quoteAndDeposit(account: number, origin: number, dest: number, amount: bigint): Promise<Hex> {
  const q = await api(s.url, '/quote', {
    body: {
      user: user(account),
      originChainId: origin,
      destinationChainId: dest,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: amount.toString(),
      tradeType: 'EXACT_INPUT',
    },
  });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
  await executeSteps(s, q.body, account);
  return requestId;
}

const waiting = (requestId: Hex) =>
  until(async () => (await admin('/admin/payouts?state=waiting')).body.payouts.find((p: any) => p.requestId === requestId), `request ${requestId} waiting`);

// 0.02 ETH at 3000 USD: 60 USD.
const SIXTY_USD = 20_000_000_000_000_000n;
const THIEF = '0x000000000000000000000000000000000000bEEF' as Address;

describe('limits that hold a deposit back', () => {
  it('USD in flight per origin chain: a second deposit waits until the first is final', async () => {
    const first = await quoteAndDeposit(1, A, B, SIXTY_USD);
    expect((await waitForStatus(s.url, first, ['success', 'refund', 'failure'])).status).toBe('success');
    // The first deposit's block is not below the finality depth yet: 60 + 60 > 100 USD.
    const second = await quoteAndDeposit(2, A, B, SIXTY_USD);
    expect(await waiting(second)).toMatchObject({ reason: 'IN_FLIGHT_LIMIT', chainId: A });
    expect(s.node.ledger.payouts.forRequest(second)).toEqual([]);
    // 64 blocks later the first deposit is final and no longer in flight.
    await rpc(A, 'anvil_mine', [toHex(64)]);
    expect((await waitForStatus(s.url, second, ['success', 'refund', 'failure'])).status).toBe('success');
    await rpc(A, 'anvil_mine', [toHex(64)]);
  });

  it('hourly outflow per destination chain: a fill beyond the budget waits (OUTFLOW_BUDGET)', async () => {
    const first = await quoteAndDeposit(1, B, A, SIXTY_USD);
    expect((await waitForStatus(s.url, first, ['success', 'refund', 'failure'])).status).toBe('success');
    const second = await quoteAndDeposit(2, B, A, SIXTY_USD);
    expect(await waiting(second)).toMatchObject({ reason: 'OUTFLOW_BUDGET', chainId: B });
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/relay_solver_postponed_total\{reason="OUTFLOW_BUDGET"\} [1-9]/);
    // The budget holds for the hour; the operator sends this one back instead.
    const r = await admin(`/admin/requests/${second}/refund`, { reason: 'over budget, returned' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect((await waitForStatus(s.url, second, ['refund'])).failReason).toBe('MANUAL_ADMIN_REFUND');
  });
});

describe('loss breaker', () => {
  it('ordinary fills did not trip it; an unexplained loss pauses payouts on the chain until resumed', async () => {
    expect(s.node.ledger.operations.switches()).toEqual([]);
    // Money leaves the solver's wallet on B without any payout: 1 ETH (3000 USD) > 10 USD tolerance.
    const balance = await s.publicClient(B).getBalance({ address: s.devnet.solver });
    await rpc(B, 'anvil_setBalance', [s.devnet.solver, toHex(balance - 10n ** 18n)]);
    const trip = await until(() => s.node.ledger.operations.switches().find((x) => x.name === `pause:chain:${B}`), 'the breaker to trip');
    expect(trip.actor).toBe('loss-breaker');
    const [action] = s.node.ledger.operations.actions(1, `chain:${B}`);
    expect(action).toMatchObject({ action: 'pause', actor: 'loss-breaker' });
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`relay_loss_breaker_tripped\\{chain="${B}"\\} 1`));

    const id = await quoteAndDeposit(3, A, B, SIXTY_USD);
    expect((await waiting(id)).reason).toBe('LOSS_BREAKER');
    expect(s.node.ledger.payouts.forRequest(id)).toEqual([]);

    const r = await admin('/admin/resume', { scope: 'chain', chainId: B, reason: 'loss explained: test moved funds' });
    expect(r.body.changed).toBe(true);
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'])).status).toBe('success');
    // The balance after the resume is the new baseline: the same loss does not trip it again.
    const checks = s.node.metrics.unexplainedLoss;
    await until(
      async () => ((await checks.get()).values.find((v) => String(v.labels.chain) === String(B))?.value === 0 ? true : undefined),
      'a check after the resume',
    );
    expect(s.node.ledger.operations.switches()).toEqual([]);
  });

  // Money sent straight from the solver's key (a leaked key, a script run by hand): no payout, no
  // ledger entry explains it. 1 ETH (3000 USD) > 10 USD tolerance.
  const leak = async (chainId: number) => {
    const w = createWalletClient({
      account: privateKeyToAccount(s.devnet.keys.solver),
      chain: devnetChain(chainId, s.devnet.chains.find((c) => c.id === chainId)!.rpcUrl),
      transport: http(s.devnet.chains.find((c) => c.id === chainId)!.rpcUrl),
    });
    const hash = await w.sendTransaction({ to: THIEF, value: 10n ** 18n });
    expect((await s.publicClient(chainId).waitForTransactionReceipt({ hash })).status).toBe('success');
  };
  const tripped = (chainId: number) =>
    until(
      () => s.node.ledger.operations.switches().find((x) => x.name === `pause:chain:${chainId}` && x.actor === 'loss-breaker'),
      `the breaker to trip on chain ${chainId}`,
    );
  const lossChecked = (chainId: number, zero: boolean) =>
    until(async () => {
      const v = (await s.node.metrics.unexplainedLoss.get()).values.find((x) => String(x.labels.chain) === String(chainId))?.value;
      return v !== undefined && (v === 0) === zero ? true : undefined;
    }, `a loss check on chain ${chainId}`);

  it('a transfer from the solver key with no ledger entry pauses payouts on the chain until an admin resumes', async () => {
    // Deposits of the earlier tests on A are final: the in-flight limit does not hold this one.
    await rpc(A, 'anvil_mine', [toHex(64)]);
    await leak(B);
    await tripped(B);
    const id = await quoteAndDeposit(3, A, B, SIXTY_USD);
    expect((await waiting(id)).reason).toBe('LOSS_BREAKER');
    expect(s.node.ledger.payouts.forRequest(id)).toEqual([]);
    // The fill the resume releases is still in flight when the resume's loss is accepted (B mines
    // nothing meanwhile): it must be accepted neither as lost nor as spent, or the fill's landing
    // would read as a new loss (60 USD > 10) and trip the breaker again.
    const acceptedBefore = s.node.ledger.operations.actionsOf('loss-accepted', `chain:${B}`).length;
    await rpc(B, 'evm_setAutomine', [false]);
    try {
      const r = await admin('/admin/resume', { scope: 'chain', chainId: B, reason: 'leaked key rotated' });
      expect(r.body.changed).toBe(true);
      await until(() => (s.node.ledger.payouts.forRequest(id)[0]?.state === 'sent' ? true : undefined), 'the fill signed and sent');
      await until(() => (s.node.ledger.operations.actionsOf('loss-accepted', `chain:${B}`).length > acceptedBefore ? true : undefined), 'the loss accepted');
      expect(s.node.ledger.payouts.forRequest(id)[0]?.state).toBe('sent');
    } finally {
      await rpc(B, 'evm_setAutomine', [true]);
    }
    await rpc(B, 'evm_mine', []);
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'], 60_000)).status).toBe('success');
    // A check after the fill landed: nothing missing, nothing paused.
    await until(() => (s.node.ledger.payouts.forRequest(id)[0]?.state === 'success' ? true : undefined), 'the fill settled');
    await s.node.solver!.checkLosses();
    await lossChecked(B, true);
    expect(s.node.ledger.operations.switches()).toEqual([]);
  });

  it('a transfer from the solver key while the node was stopped trips it at the next start; the accepted loss stays accepted', async () => {
    await s.restartNode(undefined, () => leak(B));
    await tripped(B);
    expect((await admin('/admin/resume', { scope: 'chain', chainId: B, reason: 'known: moved by hand during maintenance' })).body.changed).toBe(true);
    await lossChecked(B, true);
    // The resume accepted what was missing: an entry by the admin who resumed, with the amount.
    const accepted = s.node.ledger.operations.actionsOf('loss-accepted', `chain:${B}`).at(-1)!;
    expect(accepted.actor).toContain('ops-bob');
    expect(accepted.reason).toContain('moved by hand during maintenance');
    expect(BigInt(JSON.parse(accepted.detail!).amounts[zeroAddress])).toBeGreaterThanOrEqual(10n ** 18n);
    // Restarted again, the node does not count the accepted loss a second time.
    await s.restartNode();
    await s.node.solver!.checkLosses();
    await lossChecked(B, true);
    expect(s.node.ledger.operations.switches()).toEqual([]);
  });
});
