import { describe, expect, it } from 'vitest';
import type { DepositRow, Pricing, RequestRow } from '../ledger/types.ts';
import { outputFor } from '../quote/fillAmount.ts';
import { match } from './match.ts';

const USDC_A = '0x00000000000000000000000000000000000000a1';
const USDC_B = '0x00000000000000000000000000000000000000b1';
// 1:1 between two 6-decimal stablecoins, 10 bps, 0.05 USDC gas.
const pricing: Pricing = { rateNum: '1', rateDen: '1', serviceBps: 10, gasFeeOut: '50000', gasFeeUsd: '0.05' };

function order(over: Partial<RequestRow> = {}): RequestRow {
  return {
    id: `0x${'11'.repeat(32)}`,
    parent_id: null,
    kind: 'order',
    request_type: 'Bridge',
    status: 'waiting',
    fail_reason: null,
    refund_fail_reason: null,
    details: null,
    user: '0xuser',
    recipient: '0xrecipient',
    refund_to: '0xuser',
    origin_chain_id: 8453,
    destination_chain_id: 10,
    origin_currency: USDC_A,
    destination_currency: USDC_B,
    trade_type: 'EXACT_INPUT',
    amount_in: '10000000',
    amount_out: outputFor(10_000_000n, pricing).toString(),
    min_amount_out: outputFor(10_000_000n, pricing).toString(),
    pricing: JSON.stringify(pricing),
    order_data: null,
    quote: null,
    expires_at: 2_000,
    fill_deadline: 10_000,
    created_at: 1_000,
    updated_at: 1_000,
    money: null,
    features: '[]',
    fast_fill_deadline: null,
    ...over,
  } as RequestRow;
}

function deposit(over: Partial<DepositRow> = {}): DepositRow {
  return {
    id: '8453:0xtx:0',
    chain_id: 8453,
    tx_hash: '0xtx',
    log_index: 0,
    block_number: 5,
    block_hash: '0xb',
    depositor: '0xuser',
    currency: USDC_A,
    amount: '10000000',
    order_ref: `0x${'11'.repeat(32)}` as `0x${string}`,
    state: 'confirmed',
    request_id: null,
    seen_at: 1_500,
    confirmed_at: 1_500,
    ...over,
  } as DepositRow;
}

const base = {
  currentRate: () => undefined,
  sponsorCanPay: () => true,
  native: () => '0x0000000000000000000000000000000000000000',
  hasDeposit: () => false,
  fastFillOutcome: () => 'paid' as const,
  otherDeposits: () => [],
  depositInFlight: () => false,
  arrivedAt: (d: DepositRow) => d.seen_at,
};
const plenty = { ...base, now: 1_500, spendable: () => 10n ** 30n };

describe('match', () => {
  it('fills the quoted amount for the quoted deposit', () => {
    const d = match(deposit(), order(), plenty);
    expect(d).toMatchObject({ kind: 'fill' });
    expect(d.kind === 'fill' && d.amount).toBe(10_000_000n - 10_000n - 50_000n);
  });

  it('pays an overpayment forward at the quoted price', () => {
    const d = match(deposit({ amount: '20000000' }), order(), plenty);
    expect(d.kind === 'fill' && d.amount).toBe(outputFor(20_000_000n, pricing));
    expect(d.kind === 'fill' && d.amount).toBeGreaterThan(BigInt(order().amount_out));
  });

  const cases: [string, DepositRow, RequestRow | undefined, string][] = [
    ['no order has the id', deposit(), undefined, 'ORPHANED_DEPOSIT_REFUND'],
    ['the order already has its deposit', deposit(), order({ status: 'success' }), 'DOUBLE_SPEND'],
    ['the deposit is on another chain', deposit({ chain_id: 10 }), order(), 'DEPOSIT_CHAIN_MISMATCH'],
    ['the deposit is another currency', deposit({ currency: '0x0000000000000000000000000000000000000000' }), order(), 'INCORRECT_DEPOSIT_CURRENCY'],
    ['the quote expired before the deposit', deposit({ seen_at: 2_001 }), order(), 'ORDER_EXPIRED'],
    ['fees exceed what the deposit is worth', deposit({ amount: '50000' }), order(), 'NEGATIVE_NEW_AMOUNT_AFTER_FEES'],
    ['the deposit is short of the quote', deposit({ amount: '9999999' }), order(), 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL'],
  ];
  for (const [what, d, o, reason] of cases) {
    it(`fails with ${reason} when ${what}`, () => {
      expect(match(d, o, plenty)).toMatchObject({ kind: 'fail', reason });
    });
  }

  it('fails with SOLVER_BALANCE_TOO_LOW when inventory is one unit short', () => {
    const need = BigInt(order().amount_out);
    const short = { ...base, now: 1_500, spendable: () => need - 1n };
    expect(match(deposit(), order(), short)).toMatchObject({ kind: 'fail', reason: 'SOLVER_BALANCE_TOO_LOW' });
    expect(match(deposit(), order(), { ...base, now: 1_500, spendable: () => need })).toMatchObject({ kind: 'fill' });
  });

  it('fails with SPONSOR_BALANCE_TOO_LOW when the sponsor cannot pay what it promised', () => {
    const sponsored = { ...pricing, sponsor: { components: ['execution' as const, 'platform' as const], capOut: '1000000000' } };
    const o = order({ pricing: JSON.stringify(sponsored), min_amount_out: '10000000' });
    expect(match(deposit(), o, { ...plenty, sponsorCanPay: () => false })).toMatchObject({ kind: 'fail', reason: 'SPONSOR_BALANCE_TOO_LOW' });
    const paid = match(deposit(), o, plenty);
    // The sponsor pays the service and gas fees: the recipient gets the whole deposit.
    expect(paid.kind === 'fill' && paid.amount).toBe(10_000_000n);
    expect(paid.kind === 'fill' && paid.fees.sponsored).toBe(60_000n);
  });

  it('lets the deposit of a fast-filled order settle its hold instead of paying again', () => {
    const o = order({ status: 'success', fast_fill_deadline: 9_999 });
    expect(match(deposit(), o, plenty)).toMatchObject({ kind: 'settle' });
    // A second deposit after the first settled it is a double spend.
    expect(match(deposit(), o, { ...plenty, hasDeposit: () => true })).toMatchObject({ kind: 'fail', reason: 'DOUBLE_SPEND' });
  });

  it('settles a fast fill only when it paid: a failed one has its deposit refunded, one in flight makes the deposit wait', () => {
    const failed = order({ status: 'failure', fail_reason: 'EXECUTION_REVERTED', fast_fill_deadline: 9_999 });
    expect(match(deposit(), failed, { ...plenty, fastFillOutcome: () => 'failed' })).toMatchObject({
      kind: 'fail',
      reason: 'EXECUTION_REVERTED',
      request: failed,
    });
    const inFlight = order({ status: 'submitted', fast_fill_deadline: 9_999 });
    expect(match(deposit(), inFlight, { ...plenty, fastFillOutcome: () => 'pending' })).toMatchObject({ kind: 'wait' });
  });

  it('a deposit that cannot pay waits while another deposit of the order would pay it, or the node submits its deposit', () => {
    const dust = deposit({ id: '8453:0xdust:0', amount: '1000' });
    const paying = deposit({ id: '8453:0xreal:0' });
    expect(match(dust, order(), plenty)).toMatchObject({ kind: 'fail', reason: 'NEGATIVE_NEW_AMOUNT_AFTER_FEES' });
    expect(match(dust, order(), { ...plenty, otherDeposits: () => [paying] })).toMatchObject({ kind: 'wait', reason: 'ANOTHER_DEPOSIT_PAYS' });
    expect(match(dust, order(), { ...plenty, depositInFlight: () => true })).toMatchObject({ kind: 'wait', reason: 'ANOTHER_DEPOSIT_PAYS' });
    // Two that cannot pay: neither waits for the other (each is judged alone when it is the other).
    const alsoDust = deposit({ id: '8453:0xdust2:0', amount: '2000' });
    expect(match(dust, order(), { ...plenty, otherDeposits: () => [alsoDust] })).toMatchObject({ kind: 'fail' });
    // A failure of the solver's own making does not wait: the other deposit would fail alike.
    expect(match(paying, order(), { ...plenty, spendable: () => 0n, otherDeposits: () => [paying] })).toMatchObject({ reason: 'SOLVER_BALANCE_TOO_LOW' });
  });

  it('pays a swap at the price of the moment, and refunds it below the minimum (SLIPPAGE)', () => {
    const swap = { ...pricing, gasFeeOut: '0', serviceBps: 0, swap: { spreadBps: 0 } };
    const o = order({ pricing: JSON.stringify(swap), min_amount_out: '9950000' });
    // The price rose: the user gets more than quoted.
    const up = match(deposit(), o, { ...plenty, currentRate: () => ({ num: 11n, den: 10n }) });
    expect(up.kind === 'fill' && up.amount).toBe(11_000_000n);
    // Within the tolerance: filled at the lower price.
    const within = match(deposit(), o, { ...plenty, currentRate: () => ({ num: 996n, den: 1000n }) });
    expect(within.kind === 'fill' && within.amount).toBe(9_960_000n);
    // Below it: not filled.
    expect(match(deposit(), o, { ...plenty, currentRate: () => ({ num: 99n, den: 100n }) })).toMatchObject({ kind: 'fail', reason: 'SLIPPAGE' });
  });

  it('gives a second deposit to an order a request of its own', () => {
    expect(match(deposit(), order({ status: 'pending' }), plenty)).toEqual({
      kind: 'fail',
      reason: 'DOUBLE_SPEND',
      request: expect.objectContaining({ id: order().id }),
      extra: true,
    });
  });
});
