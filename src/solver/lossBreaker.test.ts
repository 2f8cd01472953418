// Balance drift (the loss breaker's measure where the audit's cannot be read): the solver's balance
// plus what the ledger says left it is constant unless money moved unexplained. Payments sent but
// not yet seen, and open transactions' gas, are allowed for; fees known count as spent.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Currency, Registry } from '../config/registry.ts';
import { Ledger } from '../ledger/index.ts';
import type { PayoutState } from '../ledger/types.ts';
import { BalanceDrift } from './lossBreaker.ts';

const CHAIN = 10;
const SOLVER = '0x00000000000000000000000000000000000000Aa';
// 1 unit = 1 micro-USD (6 decimals at $1).
const USDC = { address: '0x00000000000000000000000000000000000000c1', decimals: 6, usdPrice: '1' } as Currency;
const ETH = { address: '0x0000000000000000000000000000000000000000', decimals: 6, usdPrice: '1' } as Currency;
const registry = { native: () => ETH, currenciesOf: () => [USDC, ETH] } as unknown as Registry;
const held = new Map<string, bigint>();
const wallet = { solver: SOLVER, balance: async () => 0n, balanceOf: async (_owner: string, c: string) => held.get(c) ?? 0n };
const prices = { usdPrice: async (c: Currency) => c.usdPrice };

let dir: string;
let ledger: ReturnType<typeof Ledger.open>;
let drift: BalanceDrift;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'drift-'));
  ledger = Ledger.open(join(dir, 'ledger.db'));
  drift = new BalanceDrift(ledger, registry, { wallet: () => wallet }, prices);
  held.set(USDC.address, 1_000_000n).set(ETH.address, 1_000_000n);
});
afterEach(() => {
  ledger.close();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
function fill(amount: bigint, state: PayoutState, topUp?: bigint): string {
  const id = `p${++n}`;
  const p = { id, kind: 'fill' as const, request_id: null, deposit_id: null, chain_id: CHAIN, recipient: SOLVER, currency: USDC.address, decided_at: n };
  ledger.payouts.insert({ ...p, amount: amount.toString(), native_topup: topUp?.toString() ?? null });
  if (state !== 'queued') ledger.payouts.setState(id, state);
  return id;
}
function tx(payoutId: string, gas: bigint, feeCap: bigint, fee?: bigint): void {
  const hash = `0x${(++n).toString(16)}` as const;
  const t = {
    hash,
    payout_id: payoutId,
    chain_id: CHAIN,
    sender: SOLVER.toLowerCase(),
    nonce: n,
    raw: '0x' as const,
    max_priority_fee_per_gas: '1',
    created_at: n,
  };
  ledger.payouts.insertTx({ ...t, gas_limit: gas.toString(), max_fee_per_gas: feeCap.toString() });
  if (fee !== undefined) ledger.payouts.setTxState(hash, 'included', { fee });
}

describe('BalanceDrift', () => {
  it('allows for payments in flight and fees, and measures what leaves unexplained', async () => {
    expect(await drift.unexplainedLossUsd(CHAIN)).toBe(0n); // the baseline
    // A fill sent (with a native top-up), its transaction open: the wallet already paid it and some gas.
    const p = fill(200_000n, 'sent', 5_000n);
    tx(p, 100n, 30n);
    held.set(USDC.address, 800_000n).set(ETH.address, 1_000_000n - 5_000n - 2_000n);
    expect(await drift.unexplainedLossUsd(CHAIN)).toBe(0n);
    // Made, its fee known: spent, not allowed for.
    ledger.payouts.setState(p, 'success');
    ledger.payouts.setTxState(`0x${n.toString(16)}`, 'included', { fee: 2_000n });
    expect(await drift.unexplainedLossUsd(CHAIN)).toBe(0n);
    // A failed payout is no outflow: 50,000 USDC gone unexplained.
    held.set(USDC.address, 750_000n);
    fill(50_000n, 'failed');
    expect(await drift.unexplainedLossUsd(CHAIN)).toBe(50_000n);
  });
});
