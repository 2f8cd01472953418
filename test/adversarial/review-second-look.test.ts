// Second look at the day's money-safety fixes. f81ea89 (#mayPay) counts a failed refund or excess on an EVM chain as
// paying, except one "a reorg cancelled while queued: never sent". A payout is 'queued' again after it was sent when
// its transaction can no longer land and nothing paid (a cancel at its nonce, a drop: #settleOrRequeue): its signed
// depository call (same payout, same call request, same nonce) was broadcast, so it is public and executable for
// 7 days by anyone. A reorg then treats it as never signed: it cancels it (DEPOSIT_REORGED) and unhandles the
// deposit, which is decided afresh when it comes back and refunded again (#returned no longer counts the old one),
// while the old call still pays: the deposit twice (or once, out of other deposits, if the deposit never comes back).
import { describe, expect, it } from 'vitest';
import { seedRequests } from '../helpers/seedRequests.ts';
import { Ledger } from '../../src/ledger/index.ts';
import type { DepositRow } from '../../src/ledger/types.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { DepositReorgs } from '../../src/solver/reorgs.ts';

describe('a reorg and a refund queued again after it was broadcast', () => {
  it('a refund whose signed call was broadcast (a transaction on record) is not cancelled as never signed, and its deposit stays handled', () => {
    const ledger = Ledger.open(':memory:');
    seedRequests(ledger.db, 40);
    const reorgs = new DepositReorgs(ledger, createMetrics(), createLogger('silent'));
    // A failed order's deposit, handled, its refund queued.
    const d = ledger.db
      .prepare(`SELECT d.* FROM deposits d JOIN requests r ON r.id = d.request_id WHERE r.status = 'pending' AND d.state = 'handled' LIMIT 1`)
      .get() as DepositRow;
    const id = d.request_id!;
    ledger.db.prepare('DELETE FROM payouts WHERE deposit_id = ?').run(d.id);
    ledger.requests.setStatus(id, 'failure', { failReason: 'EXECUTION_REVERTED' }, 1);
    ledger.payouts.insert({
      id: `refund:${id}`,
      kind: 'refund',
      request_id: id,
      deposit_id: d.id,
      chain_id: d.chain_id,
      recipient: d.depositor,
      currency: d.currency,
      amount: d.amount,
      decided_at: 1,
    });
    // It was signed and broadcast (its bytes, with the depository call, went to the mempool), then its nonce was taken
    // by a cancel and nothing paid: the payout is queued again (#settleOrRequeue), its transaction closed.
    const hash = `0x${'ab'.repeat(32)}` as const;
    ledger.payouts.setState(`refund:${id}`, 'sent');
    ledger.payouts.insertTx({
      hash,
      payout_id: `refund:${id}`,
      chain_id: d.chain_id,
      sender: d.depositor,
      nonce: 7,
      raw: '0x02',
      gas_limit: '100000',
      max_fee_per_gas: '1',
      max_priority_fee_per_gas: '1',
      created_at: 2,
    });
    ledger.payouts.setTxState(hash, 'replaced');
    ledger.payouts.setState(`refund:${id}`, 'queued');
    expect(ledger.payouts.txsOf(`refund:${id}`)).toHaveLength(1);

    ledger.tx(() => reorgs.onDepositReorged(d, 3));

    // Before: cancelled as never sent and the deposit unhandled (state 'reorged'), so its return is decided again and
    // refunded again while the broadcast call can still execute.
    expect(ledger.deposits.get(d.id)?.state).toBe('handled');
    expect(ledger.payouts.get(`refund:${id}`)?.fail_reason).not.toBe('DEPOSIT_REORGED');
    ledger.close();
  });
});
