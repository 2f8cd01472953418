import { describe, expect, it } from 'vitest';
import { seedRequests } from '../../test/helpers/seedRequests.ts';
import { Ledger } from '../ledger/index.ts';
import type { DepositRow } from '../ledger/types.ts';
import { createLogger } from '../log.ts';
import { createMetrics } from '../metrics.ts';
import { DepositReorgs } from './reorgs.ts';

function setup() {
  const ledger = Ledger.open(':memory:');
  seedRequests(ledger.db, 40);
  const reorgs = new DepositReorgs(ledger, createMetrics(), createLogger('silent'));
  // A handled deposit of a request in the given status, with its fill payouts as the seed made them.
  const deposit = (status: string): DepositRow =>
    ledger.db
      .prepare(`SELECT d.* FROM deposits d JOIN requests r ON r.id = d.request_id WHERE r.status = ? AND d.state = 'handled' LIMIT 1`)
      .get(status) as DepositRow;
  return { ledger, reorgs, deposit };
}

describe('DepositReorgs (the solver decides what a reorg means)', () => {
  it('cancels the payouts not yet signed, gives the sponsor its money back, and fails the request with DEPOSIT_REORGED', () => {
    const { ledger, reorgs, deposit } = setup();
    const d = deposit('pending');
    const r = ledger.requests.get(d.request_id!)!;
    ledger.payouts.insert({
      id: `fill:${r.id}`,
      kind: 'fill',
      request_id: r.id,
      deposit_id: d.id,
      chain_id: r.destination_chain_id,
      recipient: r.recipient!,
      currency: r.destination_currency,
      amount: '1000',
      decided_at: 1,
    });
    ledger.balances.post({ wallet: r.user!, kind: 'sponsorship', amount: -500n, request_id: r.id, ref: `sponsorship:${r.id}` });
    expect(reorgs.reorgDecided(d)).toBe(false);

    ledger.tx(() => reorgs.onDepositReorged(d, 2));

    expect(ledger.payouts.get(`fill:${r.id}`)).toMatchObject({ state: 'failed', fail_reason: 'DEPOSIT_REORGED' });
    expect(ledger.deposits.get(d.id)?.state).toBe('reorged');
    expect(ledger.requests.get(r.id)).toMatchObject({ status: 'failure', fail_reason: 'DEPOSIT_REORGED' });
    expect(ledger.balances.get(`sponsorship_reversal:${r.id}`)?.amount).toBe(500n);
    expect(reorgs.reorgDecided(d)).toBe(true);
    ledger.close();
  });

  it('leaves a request whose payout was already signed on its course, with the reason recorded, and its deposit handled', () => {
    const { ledger, reorgs, deposit } = setup();
    const d = deposit('success');
    const [fill] = ledger.payouts.forDeposit(d.id);
    expect(fill?.state).toBe('success');

    ledger.tx(() => reorgs.onDepositReorged(d, 2));

    expect(ledger.payouts.get(fill!.id)?.state).toBe('success');
    expect(ledger.deposits.get(d.id)?.state).toBe('handled');
    expect(ledger.requests.get(d.request_id!)).toMatchObject({ status: 'success', fail_reason: 'DEPOSIT_REORGED' });
    expect(reorgs.reorgDecided(d)).toBe(true);
    ledger.close();
  });

  it('a paid deposit that a reorg removed is no longer owed to the solver: a withdrawal would take other deposits', () => {
    const { ledger, reorgs, deposit } = setup();
    const d = deposit('success');
    const owed = () => ledger.withdrawals.owed(d.chain_id).map((o) => o.id);
    const total = () => ledger.withdrawals.owedByCurrency(d.chain_id).get(d.currency.toLowerCase()) ?? 0n;
    expect(owed()).toContain(d.id);
    const before = total();

    ledger.tx(() => reorgs.onDepositReorged(d, 2));

    expect(owed()).not.toContain(d.id);
    // Nor counted in what the depository owes the solver (the inventory's figure), by a new entry.
    expect(total()).toBe(before - BigInt(d.amount));
    ledger.close();
  });

  // Untied: a fast fill settled before its payout was tied to the deposit (deposit_id NULL).
  it.each(['tied to the deposit', 'untied'])(
    'a reorg removing the deposit that settled a fast fill (its payout %s) charges the app the hold, as if the deposit never landed; the fill stays paid',
    (tie) => {
      const { ledger, reorgs, deposit } = setup();
      const d = deposit('success');
      const r = ledger.requests.get(d.request_id!)!;
      if (tie === 'untied') ledger.db.prepare('UPDATE payouts SET deposit_id = NULL WHERE id = ?').run(`fill:${r.id}`);
      // The request was fast-filled: its deposit settled the 700 micro-USD hold (a 100 shortfall debited).
      const wallet = '0x00000000000000000000000000000000000000aa';
      ledger.balances.post({ wallet, kind: 'credit', amount: 1_000n, request_id: null, ref: 'credit:test' });
      ledger.balances.post({ wallet, kind: 'hold', amount: 700n, request_id: r.id, ref: `hold:${r.id}` });
      ledger.balances.post({ wallet, kind: 'hold_release', amount: -700n, request_id: r.id, ref: `hold_release:${r.id}`, detail: d.id });
      ledger.balances.post({ wallet, kind: 'permanent_debit', amount: -100n, request_id: r.id, ref: `permanent_debit:${r.id}` });
      ledger.db.prepare('UPDATE requests SET fast_fill_deadline = 1 WHERE id = ?').run(r.id);
      expect(ledger.balances.summary(wallet)).toEqual({ balance: 900n, held: 0n, available: 900n });

      ledger.tx(() => reorgs.onDepositReorged(d, 2));

      // Charged the whole hold in all: the 600 the deposit had covered on top of the 100.
      expect(ledger.balances.summary(wallet)).toEqual({ balance: 300n, held: 0n, available: 300n });
      expect(ledger.requests.get(r.id)).toMatchObject({ status: 'success', fail_reason: 'DEPOSIT_REORGED' });
      expect(ledger.deposits.get(d.id)?.state).toBe('handled');
      // Decided once: the same report again charges nothing more.
      ledger.tx(() => reorgs.onDepositReorged(d, 3));
      expect(ledger.balances.summary(wallet).balance).toBe(300n);
      ledger.close();
    },
  );
});
