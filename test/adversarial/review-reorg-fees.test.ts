// Adversarial review: app fees earned from a fill whose origin deposit a reorg then took back. The solver paid the
// fill and lost it (DEPOSIT_REORGED); the app's fee on that order was never earned (no value came in), so it must not
// stay claimable: an app that rides (or causes) a reorg would otherwise be paid its fee out of the solver's money.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zeroAddress, type Hex } from 'viem';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { LEDGER_KINDS, pgMigratedFrom, sqliteMigratedFrom, testLedgers } from '../helpers/ledgers.ts';
import { seedRequests } from '../helpers/seedRequests.ts';
import type { DepositRow } from '../../src/ledger/types.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { DepositReorgs } from '../../src/solver/reorgs.ts';
import { claimAppFees, ClaimError } from '../../src/solver/claims.ts';
import { migrations } from '../../src/ledger/migrations.ts';
import type { Currency, Registry } from '../../src/config/registry.ts';

describe('on the devnet: app fees of a fill whose deposit a reorg took back', () => {
  const A = 8453;
  const B = 10;
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ confirmations: 3 });
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });
  const rpc = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as any, params: params as any });
  const feeTo = () => s.devnet.accounts[3]!.address;
  // What the ledger counts as owed to the fee recipient in ETH on B.
  const owed = () => s.node.ledger.appFees.balances(feeTo()).find((b) => b.chainId === B && b.currency === zeroAddress)?.amount ?? 0n;

  // A 0.01 ETH bridge from A to B, with `bps` of it as app fees to account 3, filled.
  async function filledWithFee(account: number, bps: number): Promise<Hex> {
    const user = s.devnet.accounts[account]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000', { appFees: [{ recipient: feeTo(), fee: bps }] }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, account);
    await rpc('anvil_mine', ['0x3']);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    return requestId;
  }

  // The fee recipient's claim of its ETH fees, paid on B: ask, sign, post. Returns the final answer.
  async function claim() {
    const body = { chainId: B, currency: zeroAddress, recipient: feeTo() };
    const ask = await api(s.url, `/app-fees/${feeTo()}/claim`, { body });
    expect(ask.status, JSON.stringify(ask.body)).toBe(200);
    const item = ask.body.steps[0].items[0].data;
    const w = s.wallet(3, B);
    const signature = await w.signMessage({ account: w.account!, message: item.sign.message });
    return api(s.url, `${item.post.endpoint}?signature=${signature}`, { body: item.post.body });
  }

  async function reorgedAway(snapshot: Hex, requestId: Hex): Promise<void> {
    await rpc('evm_revert', [snapshot]);
    await rpc('anvil_mine', ['0x8']);
    await until(() => (s.node.ledger.requests.get(requestId)?.fail_reason === 'DEPOSIT_REORGED' ? true : undefined), 'the deposit taken back', 20_000);
  }

  it('takes the fee back when the reorg is recorded: nothing is left to claim', { timeout: 120_000 }, async () => {
    const snapshot = (await rpc('evm_snapshot')) as Hex;
    const before = owed();
    const requestId = await filledWithFee(1, 500);
    const fee = owed() - before;
    // 5% of 0.01 ETH (at the rate the fill paid at: the same asset, one for one).
    expect(fee).toBeGreaterThan(0n);

    await reorgedAway(snapshot, requestId);

    // Before: the fee stayed owed, and the claim below paid it out of the solver's ETH on B.
    expect(owed()).toBe(before);
    const again = await claim();
    expect(again.status, JSON.stringify(again.body)).toBe(400);
    expect(again.body.errorCode).toBe('NOTHING_TO_CLAIM');
  });

  // A fee claimed before the reorg: refused now while the deposit is not final (pendingAppFees), so no debt is left
  // (test/adversarial/review-app-balances.test.ts). The debt and its repayment are the ledger's tests below.
});

describe('on the devnet: a fill signed before the reorg and landing after it', () => {
  const A = 8453;
  const B = 10;
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ confirmations: 3 });
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });
  const rpc = (chainId: number, method: string, params: unknown[] = []) => s.publicClient(chainId).request({ method: method as any, params: params as any });
  const feeTo = () => s.devnet.accounts[3]!.address;
  const owed = () => s.node.ledger.appFees.balances(feeTo()).find((b) => b.chainId === B && b.currency === zeroAddress)?.amount ?? 0n;

  it('accrues its fee when it lands and takes it back at once', { timeout: 120_000 }, async () => {
    const user = s.devnet.accounts[1]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000', { appFees: [{ recipient: feeTo(), fee: 500 }] }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    const snapshot = (await rpc(A, 'evm_snapshot')) as Hex;
    // B holds its blocks: the fill is signed and sent, and does not land yet.
    await rpc(B, 'evm_setAutomine', [false]);
    try {
      await executeSteps(s, q.body, 1);
      await rpc(A, 'anvil_mine', ['0x3']);
      await until(() => (s.node.ledger.payouts.get(`fill:${requestId}`)?.state === 'sent' ? true : undefined), 'the fill sent');
      await rpc(A, 'evm_revert', [snapshot]);
      await rpc(A, 'anvil_mine', ['0x8']);
      await until(() => (s.node.ledger.requests.get(requestId)?.fail_reason === 'DEPOSIT_REORGED' ? true : undefined), 'the deposit taken back', 20_000);
      // Signed, so kept; not landed, so nothing accrued yet.
      expect(s.node.ledger.payouts.get(`fill:${requestId}`)?.state).toBe('sent');
      expect(owed()).toBe(0n);
    } finally {
      await rpc(B, 'evm_setAutomine', [true]);
    }
    await rpc(B, 'anvil_mine', ['0x1']);
    await until(() => (s.node.ledger.payouts.get(`fill:${requestId}`)?.state === 'success' ? true : undefined), 'the fill landed');
    // The accrual is booked with the fill, and taken back in the same transaction (before: 5% of 0.01 ETH owed).
    expect(s.node.ledger.appFees.accruedFor(requestId).length).toBe(1);
    expect(owed()).toBe(0n);
  });
});

// The books on both ledgers: once per order, a debt repaid by later fees of the same currency on any chain, a debt in
// another currency refusing claims, and the migration of the kind on a ledger holding entries.
const ledgers = testLedgers();
const APP = '0x00000000000000000000000000000000000a9901';
const USDC = '0x00000000000000000000000000000000000000c5';
// ETH (native) on every chain; USDC at USDC on every chain.
const registry = {
  // No chain whose deposits wait for finality: the claims below take every fee the ledger owes.
  chains: new Map(),
  currency: (chainId: number, address: string): Currency | undefined =>
    address === zeroAddress
      ? ({ chainId, address, symbol: 'ETH', native: true, decimals: 18, usdPrice: '3000' } as Currency)
      : address === USDC
        ? ({ chainId, address, symbol: 'USDC', native: false, decimals: 6, usdPrice: '1' } as Currency)
        : undefined,
} as unknown as Registry;
const eth = (chainId: number) => registry.currency(chainId, zeroAddress)!;

describe.each(LEDGER_KINDS)('app fees against reorged deposits, in the ledger (%s)', (kind) => {
  it('takes a paid fill’s fees back once; a claimed fee becomes a debt that later fees repay first', async () => {
    const ledger = await ledgers.open(kind);
    seedRequests(ledger.db, 40);
    const reorgs = new DepositReorgs(ledger, createMetrics(), createLogger('silent'));
    const paid = (skip: number) =>
      ledger.db
        .prepare(
          `SELECT d.* FROM deposits d JOIN requests r ON r.id = d.request_id WHERE r.status = 'success' AND d.state = 'handled' ORDER BY d.id LIMIT 1 OFFSET ?`,
        )
        .get(skip) as DepositRow;
    const accrue = (requestId: string, chainId: number, amount: bigint, currency: string = zeroAddress) =>
      ledger.appFees.post({ recipient: APP, chain_id: chainId, currency, amount, kind: 'accrual', request_id: requestId, ref: `app_fee:${requestId}:0` });
    const owed = (chainId: number, currency: string = zeroAddress) =>
      ledger.appFees.balances(APP).find((b) => b.chainId === chainId && b.currency === currency)?.amount ?? 0n;
    const claim = (chainId: number) => claimAppFees(ledger, registry, { wallet: APP, target: eth(chainId), recipient: APP }, 10n);
    const refused = (chainId: number) => {
      try {
        claim(chainId);
      } catch (e) {
        return e instanceof ClaimError ? e.errorCode : e;
      }
      return 'claimed';
    };

    const d = paid(0);
    accrue(d.request_id!, 10, 1_000n);
    expect(BigInt(claim(10).amount)).toBe(990n);
    expect(owed(10)).toBe(0n);

    // Reported twice (a restart, a second pass): taken back once, by an entry of its own; the accrual stays.
    ledger.tx(() => reorgs.onDepositReorged(d, 2));
    ledger.tx(() => reorgs.onDepositReorged(ledger.deposits.get(d.id)!, 3));
    expect(ledger.appFees.accruedFor(d.request_id!).map((e) => e.amount)).toEqual(['1000']);
    expect(owed(10)).toBe(-1_000n);
    expect(refused(10)).toBe('NOTHING_TO_CLAIM');

    // Fees of the same currency on another chain repay the debt first.
    accrue(paid(1).request_id!, 8453, 600n);
    expect(refused(8453)).toBe('NOTHING_TO_CLAIM');
    accrue(paid(2).request_id!, 8453 + 1, 1_500n);
    expect(BigInt(claim(8453).amount)).toBe(600n + 1_500n - 1_000n - 10n);
    expect(ledger.appFees.balances(APP).every((b) => b.amount === 0n)).toBe(true);

    // A debt in another currency refuses any claim until it is repaid.
    const u = paid(3);
    accrue(u.request_id!, 10, 5_000_000n, USDC);
    claimAppFees(ledger, registry, { wallet: APP, target: registry.currency(10, USDC)!, recipient: APP }, 10n);
    ledger.tx(() => reorgs.onDepositReorged(u, 4));
    expect(owed(10, USDC)).toBe(-5_000_000n);
    accrue(paid(4).request_id!, 10, 1_000n);
    expect(refused(10)).toBe('NOTHING_TO_CLAIM');
    expect(owed(10)).toBe(1_000n);
  });
});

describe('migration 35: app_fee_entries gains accrual_reversal, its rows kept', () => {
  const seed = `INSERT INTO app_fee_entries (id, recipient, chain_id, currency, amount, kind, request_id, ref, created_at)
    VALUES (7, '${APP}', 10, '${zeroAddress}', '1000', 'accrual', '0x01', 'app_fee:0x01:0', 1)`;
  const reversal = `INSERT INTO app_fee_entries (recipient, chain_id, currency, amount, kind, request_id, ref, created_at)
    VALUES ('${APP}', 10, '${zeroAddress}', '-1000', 'accrual_reversal', '0x01', 'app_fee:0x01:0:reorged', 2)`;
  it('SQLite', () => {
    expect(migrations.some((m) => m.version === 35)).toBe(true);
    sqliteMigratedFrom(
      34,
      seed,
      (db) => {
        db.exec(reversal);
        expect(db.prepare('SELECT id, kind FROM app_fee_entries ORDER BY id').all()).toEqual([
          { id: 7, kind: 'accrual' },
          { id: 8, kind: 'accrual_reversal' },
        ]);
        expect(() => db.exec(reversal.replace(':reorged', ':x').replace("'accrual_reversal'", "'nonsense'"))).toThrow();
      },
      (ledger) => expect(ledger.appFees.balances(APP)).toEqual([{ chainId: 10, currency: zeroAddress, amount: 0n }]),
    );
  });
  it('PostgreSQL', async () => {
    await pgMigratedFrom(await ledgers.url(), 34, seed, async (client) => {
      await client.query(reversal);
      expect((await client.query('SELECT ref, kind FROM app_fee_entries ORDER BY ref')).rows).toEqual([
        { ref: 'app_fee:0x01:0', kind: 'accrual' },
        { ref: 'app_fee:0x01:0:reorged', kind: 'accrual_reversal' },
      ]);
      await expect(client.query(reversal.replace(':reorged', ':x').replace("'accrual_reversal'", "'nonsense'"))).rejects.toThrow();
    });
  });
});
