// The risk limits' verdicts on the matcher's decisions: which hold a deposit back (and why), which
// end it (and whether it goes back), read from the ledger's switches and the configured limits.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getAddress } from 'viem';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pause } from '../admin/actions.ts';
import type { RiskConfig } from '../config/schema.ts';
import type { Registry } from '../config/registry.ts';
import { Ledger } from '../ledger/index.ts';
import { switchName } from '../ledger/operations.ts';
import type { DepositRow, RequestRow } from '../ledger/types.ts';
import type { Decision } from './match.ts';
import { LOSS_BREAKER_ACTOR, RiskPolicy, type UsdOf } from './risk.ts';

// The ledger keeps addresses canonical (EIP-55); operators write them in any case.
const RECIPIENT = getAddress('0x00000000000000000000000000000000000000aa');
const DEPOSITOR = getAddress('0x00000000000000000000000000000000000000bb');
const who = { actor: 'test', reason: 'test' };
// 1 unit = 1 micro-USD: amounts read as their USD worth.
const usd: UsdOf = (_chain, _currency, amount) => amount;

const request = { id: '0x01', origin_chain_id: 8453, destination_chain_id: 10, recipient: RECIPIENT, destination_currency: '0xc' } as unknown as RequestRow;
const deposit = (amount: bigint) => ({ id: 'd1', chain_id: 8453, currency: '0xc', amount: amount.toString(), depositor: DEPOSITOR }) as unknown as DepositRow;
const fill = (amount: bigint): Decision => ({ kind: 'fill', request, amount, fees: {} as never, topUp: 0n, excess: 0n });
const refund: Decision = { kind: 'fail', reason: 'ORDER_EXPIRED', request };

let dir: string;
let ledger: Ledger;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'risk-'));
  ledger = Ledger.open(join(dir, 'ledger.db'));
});
afterEach(() => {
  ledger.close();
  rmSync(dir, { recursive: true, force: true });
});

function policy(over: Partial<RiskConfig> = {}): RiskPolicy {
  const config = { routes: [], chains: [], denyRecipients: [], denyDepositors: [], dryRun: false, ...over } as RiskConfig;
  // No chain limits are configured, so the registry (read only for them) is never asked.
  return new RiskPolicy(config, ledger, {} as Registry);
}

describe('RiskPolicy.judge', () => {
  it('lets a fill within every limit go', () => {
    expect(policy({ maxOrderUsd: '1' }).judge(deposit(1_000_000n), fill(1_000_000n), usd)).toEqual({ kind: 'go' });
  });

  it('fails an order above the largest order with SOLVER_CAPACITY_EXCEEDED and refunds it; a route may allow more', () => {
    expect(policy({ maxOrderUsd: '1' }).judge(deposit(1_000_001n), fill(1_000_001n), usd)).toEqual({
      kind: 'fail',
      reason: 'SOLVER_CAPACITY_EXCEEDED',
      refund: true,
    });
    const route = { originChainId: 8453, destinationChainId: 10, maxOrderUsd: '2' };
    expect(policy({ maxOrderUsd: '1', routes: [route] }).judge(deposit(1_500_000n), fill(1_500_000n), usd)).toEqual({ kind: 'go' });
  });

  it('blocks a denied recipient (refunded) and a denied depositor (not refunded), whatever the address case', () => {
    expect(policy({ denyRecipients: [RECIPIENT.toLowerCase()] }).judge(deposit(1n), fill(1n), usd)).toEqual({
      kind: 'fail',
      reason: 'BLOCKED_WALLET',
      refund: true,
    });
    expect(policy({ denyDepositors: [`0x${DEPOSITOR.slice(2).toUpperCase()}`] }).judge(deposit(1n), refund, usd)).toEqual({
      kind: 'fail',
      reason: 'BLOCKED_WALLET',
      refund: false,
    });
    // An allow list refuses everyone not on it.
    expect(policy({ allowRecipients: [DEPOSITOR] }).judge(deposit(1n), fill(1n), usd)).toMatchObject({ kind: 'fail', reason: 'BLOCKED_WALLET' });
  });

  it('postpones under dry run, a pause of all, of the payout chain (or the loss breaker) and of the route', () => {
    const p = policy();
    ledger.operations.switchOn(switchName.route(8453, 10), 'test', 'test');
    expect(p.judge(deposit(1n), fill(1n), usd)).toEqual({ kind: 'postpone', reason: 'PAUSED_ROUTE' });
    // A refund is paid on the origin chain: the route's pause does not hold it.
    expect(p.judge(deposit(1n), refund, usd)).toEqual({ kind: 'go' });
    ledger.operations.switchOn(switchName.chain(8453), LOSS_BREAKER_ACTOR, 'loss');
    expect(p.judge(deposit(1n), refund, usd)).toEqual({ kind: 'postpone', reason: 'LOSS_BREAKER' });
    pause(ledger, { scope: 'chain', chainId: 10 }, who);
    expect(p.judge(deposit(1n), fill(1n), usd)).toEqual({ kind: 'postpone', reason: 'PAUSED_CHAIN' });
    pause(ledger, { scope: 'all' }, who);
    expect(p.judge(deposit(1n), fill(1n), usd)).toEqual({ kind: 'postpone', reason: 'PAUSED_ALL' });
    ledger.operations.switchOn(switchName.dryRun, 'test', 'test');
    expect(p.dryRun()).toBe(true);
    expect(p.judge(deposit(1n), fill(1n), usd)).toEqual({ kind: 'postpone', reason: 'DRY_RUN' });
  });

  it('never holds back a deposit that settles a fast fill already paid', () => {
    ledger.operations.switchOn(switchName.dryRun, 'test', 'test');
    expect(policy().judge(deposit(1n), { kind: 'settle', request }, usd)).toEqual({ kind: 'go' });
  });
});
