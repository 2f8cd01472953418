// The loss breaker's read of what left the solver's wallet, summed in SQL (Payouts.outflowSums),
// against the row-by-row reading it replaced, on a ledger with mixed rows: every payout kind and
// state, native top-ups or none, amounts past 2^64 (SQLite's SUM would overflow), fees known or
// not, transactions of other senders and chains, a batch (one hash, two rows).
import { beforeEach, describe, expect, it } from 'vitest';
import { LEDGER_KINDS, testLedgers } from '../../test/helpers/ledgers.ts';
import type { OpenedLedger } from './index.ts';
import type { PayoutKind, PayoutState, TxState } from './types.ts';

const CHAIN = 10;
const NATIVE = '0x0000000000000000000000000000000000000000';
const USDC = '0x00000000000000000000000000000000000000c1';
const WETH = '0x00000000000000000000000000000000000000e1';
const SOLVER = '0x00000000000000000000000000000000000000Aa';
const OTHER = '0x00000000000000000000000000000000000000bb';
const HUGE = 2n ** 70n + 12345n;

type Ledgered = OpenedLedger;
type Amounts = Map<string, bigint>;
const add = (m: Amounts, k: string, v: bigint) => m.set(k, (m.get(k) ?? 0n) + v);
// Zero entries and absent ones read the same to the breaker (`?? 0n`): compare without them.
const nonZero = (m: Amounts) => new Map([...m].filter(([, v]) => v !== 0n));

/** The reading the loss breaker did before: every payout and transaction row, summed in JS. */
function rowByRow(ledger: Ledgered, chainId: number, solver: string): { spent: Amounts; allowance: Amounts } {
  const spent: Amounts = new Map();
  const allowance: Amounts = new Map();
  const payouts = ledger.db
    .prepare(`SELECT currency, amount, native_topup, state FROM payouts WHERE chain_id = ? AND kind IN ('fill', 'claim') AND state IN ('success', 'sent')`)
    .all(chainId) as { currency: string; amount: string; native_topup: string | null; state: string }[];
  for (const p of payouts) {
    const m = p.state === 'success' ? spent : allowance;
    add(m, p.currency, BigInt(p.amount));
    if (p.native_topup) add(m, NATIVE, BigInt(p.native_topup));
  }
  const txs = ledger.db
    .prepare(`SELECT state, fee, gas_limit, max_fee_per_gas FROM transactions WHERE chain_id = ? AND lower(sender) = lower(?)`)
    .all(chainId, solver) as { state: string; fee: string | null; gas_limit: string; max_fee_per_gas: string }[];
  for (const t of txs) {
    if (t.fee !== null) add(spent, NATIVE, BigInt(t.fee));
    else if (t.state === 'signed' || t.state === 'broadcast') add(allowance, NATIVE, BigInt(t.gas_limit) * BigInt(t.max_fee_per_gas));
  }
  return { spent, allowance };
}

/** The same, from the sums (as src/solver/lossBreaker.ts reads them). */
function summed(ledger: Ledgered, chainId: number, solver: string): { spent: Amounts; allowance: Amounts } {
  const spent: Amounts = new Map();
  const allowance: Amounts = new Map();
  const out = ledger.payouts.outflowSums(chainId, solver);
  for (const p of out.payouts) {
    const m = p.state === 'success' ? spent : allowance;
    add(m, p.currency, p.amount);
    if (p.nativeTopup) add(m, NATIVE, p.nativeTopup);
  }
  if (out.fees) add(spent, NATIVE, out.fees);
  if (out.openCost) add(allowance, NATIVE, out.openCost);
  return { spent, allowance };
}

const ledgers = testLedgers();
let ledger: Ledgered;

let n = 0;
function payout(chainId: number, kind: PayoutKind, state: PayoutState, currency: string, amount: bigint, nativeTopup?: bigint): string {
  const id = `p${++n}`;
  ledger.payouts.insert({
    id,
    kind,
    request_id: null,
    deposit_id: null,
    chain_id: chainId,
    recipient: OTHER,
    currency,
    amount: amount.toString(),
    decided_at: n,
    native_topup: nativeTopup?.toString() ?? null,
  });
  if (state !== 'queued') ledger.payouts.setState(id, state);
  return id;
}
function tx(
  payoutId: string,
  chainId: number,
  sender: string,
  state: TxState,
  gas: bigint,
  feeCap: bigint,
  fee?: bigint,
  hash = `0x${(++n).toString(16)}`,
): void {
  ledger.payouts.insertTx({
    hash: hash as `0x${string}`,
    payout_id: payoutId,
    chain_id: chainId,
    sender,
    nonce: n,
    raw: '0x',
    gas_limit: gas.toString(),
    max_fee_per_gas: feeCap.toString(),
    max_priority_fee_per_gas: '1',
    created_at: n,
  });
  if (state !== 'signed' || fee !== undefined) ledger.payouts.setTxState(hash, state, fee === undefined ? {} : { fee });
}

describe.each(LEDGER_KINDS)('Payouts.outflowSums (%s)', (kind) => {
  beforeEach(async () => {
    ledger = await ledgers.open(kind);
  });
  it('gives what the row-by-row reading gave, on a ledger with mixed rows', () => {
    const kinds: PayoutKind[] = ['fill', 'claim', 'refund', 'withdrawal', 'sweep', 'excess'];
    const states: PayoutState[] = ['queued', 'sent', 'success', 'failed'];
    let i = 0;
    for (const kind of kinds)
      for (const state of states)
        for (const currency of [USDC, WETH, NATIVE]) {
          i++;
          const amount = i % 5 === 0 || currency === USDC ? HUGE + BigInt(i) : BigInt(1_000 * i);
          const id = payout(CHAIN, kind, state, currency, amount, i % 3 === 0 ? BigInt(7 * i) : undefined);
          payout(CHAIN + 1, kind, state, currency, amount, 5n); // another chain: never counted
          const txStates: TxState[] = ['signed', 'broadcast', 'included', 'reverted', 'replaced', 'dropped'];
          const s = txStates[i % txStates.length]!;
          // Fees known on included and reverted ones (some past 2^64), not on the others.
          const fee = s === 'included' || s === 'reverted' ? (i % 4 === 0 ? HUGE : BigInt(21_000 * i)) : undefined;
          tx(id, CHAIN, i % 2 ? SOLVER : SOLVER.toLowerCase(), s, 21_000n + BigInt(i), 10n ** 12n + BigInt(i), fee);
          tx(id, CHAIN, OTHER, 'signed', 50_000n, 10n ** 9n); // another sender: never counted
        }
    // A batch: one transaction carrying two payouts, a row each (each row counts, as before).
    const a = payout(CHAIN, 'fill', 'sent', USDC, 11n);
    const b = payout(CHAIN, 'fill', 'sent', USDC, 13n);
    tx(a, CHAIN, SOLVER, 'broadcast', 90_000n, 3n * 10n ** 12n, undefined, '0xba7c');
    tx(b, CHAIN, SOLVER, 'broadcast', 90_000n, 3n * 10n ** 12n, undefined, '0xba7c');

    const before = rowByRow(ledger, CHAIN, SOLVER);
    const after = summed(ledger, CHAIN, SOLVER);
    expect(nonZero(after.spent)).toEqual(nonZero(before.spent));
    expect(nonZero(after.allowance)).toEqual(nonZero(before.allowance));
    // The mix reached every branch: amounts made and in flight, fees known and open costs, past 2^64.
    expect(before.spent.get(USDC)! > 2n ** 64n).toBe(true);
    expect(before.allowance.get(WETH)! > 0n).toBe(true);
    expect(before.spent.get(NATIVE)! > 2n ** 64n).toBe(true);
    expect(before.allowance.get(NATIVE)! > 0n).toBe(true);
  });

  it('is zero on a chain with nothing recorded', () => {
    expect(ledger.payouts.outflowSums(CHAIN, SOLVER)).toEqual({ payouts: [], fees: 0n, openCost: 0n });
  });
});

// depository_owed is recomputed by a trigger on a payout's state: only a change into or out of 'success'
// can change it (migration 24). A fill moving queued → sent → queued (recorded, then requeued) runs it no
// more: before, each such change rewrote the deposit's owed row as a net-zero pair of entries.
describe.each(LEDGER_KINDS)('depository_owed on payout state changes (%s)', (kind) => {
  beforeEach(async () => {
    ledger = await ledgers.open(kind);
  });
  it('is recomputed where a payout enters or leaves success, and only there', () => {
    const db = ledger.db;
    const now = 1_700_000_000_000;
    db.prepare(`INSERT INTO requests (id, kind, request_type, status, origin_chain_id, destination_chain_id, origin_currency,
      destination_currency, amount_in, amount_out, min_amount_out, created_at, updated_at) VALUES ('r-owed', 'order', 'bridge', 'waiting', 1, ?, 'a', 'b', '1', '1', '1', ?, ?)`).run(
      CHAIN,
      now,
      now,
    );
    db.prepare(`INSERT INTO deposits (id, chain_id, tx_hash, log_index, block_number, block_hash, depositor, currency, amount, order_ref, state, seen_at, request_id)
      VALUES ('d-owed', 1, '0xd', 0, 1, '0xb', '0xdep', ?, '500', 'r-owed', 'handled', ?, 'r-owed')`).run(USDC, now);
    const entries = () =>
      Number((db.prepare(`SELECT COUNT(*) AS n FROM depository_owed_entries WHERE deposit_id = 'd-owed'`).get() as { n: number | string }).n);
    const owed = () => db.prepare(`SELECT amount FROM depository_owed WHERE deposit_id = 'd-owed'`).all();
    const fill = (id: string) =>
      ledger.payouts.insert({
        id,
        kind: 'fill',
        request_id: 'r-owed' as `0x${string}`,
        deposit_id: 'd-owed',
        chain_id: CHAIN,
        recipient: SOLVER,
        currency: USDC,
        amount: '490',
        decided_at: now,
      });
    fill('f-owed-1');
    ledger.payouts.setState('f-owed-1', 'sent');
    ledger.payouts.setState('f-owed-1', 'success');
    expect(owed()).toEqual([{ amount: '500' }]);
    const written = entries();
    expect(written).toBeGreaterThan(0);
    // A second payout of the deposit moving between states other than success: the owed row is as it was,
    // and no entries are written for it.
    fill('f-owed-2');
    const afterInsert = entries();
    for (const s of ['sent', 'queued', 'sent', 'failed'] as const) ledger.payouts.setState('f-owed-2', s);
    expect(entries()).toBe(afterInsert);
    expect(owed()).toEqual([{ amount: '500' }]);
    // Leaving success still recomputes (an operator's correction, say): the deposit is no longer owed.
    ledger.payouts.setState('f-owed-1', 'failed');
    expect(owed()).toEqual([]);
    expect(entries()).toBe(afterInsert + 1);
  });
});
