import { describe, expect, it } from 'vitest';
import { seedRequests } from '../../test/helpers/seedRequests.ts';
import { Ledger } from '../ledger/index.ts';
import { queueSweep } from './sweeps.ts';

describe('queueSweep (the solver books the sweep a deposit address watcher reports)', () => {
  it('queues one sweep per address and currency at a time, for the refund address, and a new one once it is done', () => {
    const ledger = Ledger.open(':memory:');
    seedRequests(ledger.db, 8);
    const r = ledger.db.prepare(`SELECT * FROM requests LIMIT 1`).get() as { id: string; refund_to: string; origin_chain_id: number };
    const f = { requestId: r.id, chainId: r.origin_chain_id, currency: '0x0000000000000000000000000000000000000000', amount: 7_000n };

    expect(ledger.tx(() => queueSweep(ledger, f, 1))).toBe(true);
    // Still open: a second report books nothing.
    expect(ledger.tx(() => queueSweep(ledger, { ...f, amount: 9_000n }, 2))).toBe(false);
    const sweeps = () => ledger.payouts.forRequest(r.id).filter((p) => p.kind === 'sweep');
    expect(sweeps().map((p) => [p.id, p.recipient, p.amount, p.state])).toEqual([[`sweep:${r.id}:${f.currency}:0`, r.refund_to, '7000', 'queued']]);

    ledger.payouts.setState(`sweep:${r.id}:${f.currency}:0`, 'failed', { failReason: 'TRANSACTION_REVERTED' }, 3);
    expect(ledger.tx(() => queueSweep(ledger, { ...f, amount: 9_000n }, 4))).toBe(true);
    expect(sweeps().map((p) => [p.id, p.amount])).toEqual([
      [`sweep:${r.id}:${f.currency}:0`, '7000'],
      [`sweep:${r.id}:${f.currency}:1`, '9000'],
    ]);
    // An unknown request: nothing.
    expect(ledger.tx(() => queueSweep(ledger, { ...f, requestId: `0x${'00'.repeat(32)}` }, 5))).toBe(false);
    ledger.close();
  });
});
