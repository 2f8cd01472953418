// The Status record read by id in one statement (Requests.status, GET /intents/status), on both ledgers, for the
// cases that shape it — deposits seen for a waiting order (one transaction carrying two,
// one reorged, one from an earlier block written later), deposits handled for the request, payouts decided out of
// their written order and one not yet signed, the reasons' details, a change read right after it, no such request; the API's
// read (Ledger.statusOf: on PostgreSQL, a pooled connection of its own) gives the same records, and so does the events
// outbox, whose event of a change is the record read in the change's transaction.
import { describe, expect, it } from 'vitest';
import { LEDGER_KINDS, testLedgers } from '../../test/helpers/ledgers.ts';
import { depositFor, fillPayout, hex, USER, waitingOrder } from '../../test/helpers/statusFixtures.ts';
import type { OpenedLedger } from './index.ts';

const ledgers = testLedgers();
function request(l: OpenedLedger, n: number, kind: 'order' | 'orphan' = 'order') {
  const id = hex(0x5000 + n);
  l.requests.insert(waitingOrder(id, 1_000 + n, { kind }));
  return id;
}

const deposit = depositFor;

/** The record of the request's latest status event in the outbox (what the stream and the webhooks send). */
const lastEvent = (l: OpenedLedger, id: string) => JSON.parse(l.events.forRequest(id).at(-1)!.payload);

describe.each(LEDGER_KINDS)('Requests.status (%s)', (kind) => {
  it("shows a waiting order's seen deposits: in block order, each transaction once, the reorged one not", async () => {
    const l = await ledgers.open(kind);
    const id = request(l, 1);
    expect(l.requests.status(id)).toMatchObject({ status: 'waiting', inTxHashes: [], txHashes: [] });
    // Written in this order; block 30's two logs are one transaction, and block 40's is reorged out.
    l.deposits.insert(deposit(3, 0, 30, id));
    l.deposits.insert(deposit(3, 1, 30, id));
    l.deposits.insert(deposit(2, 5, 20, id));
    l.deposits.insert(deposit(4, 0, 40, id));
    l.deposits.insert(deposit(9, 0, 25, hex(0xdead))); // another order's
    l.deposits.reorgAbove(8453, 35);
    const s = l.requests.status(id)!;
    expect(s.inTxHashes).toEqual([hex(2), hex(3)]);
    expect(await l.statusOf(id)).toEqual(s);
    expect(s).toEqual({
      status: 'waiting',
      details: 'Waiting for the deposit to be confirmed',
      inTxHashes: [hex(2), hex(3)],
      txHashes: [],
      updatedAt: 1_001,
      originChainId: 8453,
      destinationChainId: 10,
      quoteCreatedAt: 1_001,
      failReason: null,
      refundFailReason: null,
    });
  });

  it("shows a filled request's own deposits and its payouts' hashes in decision order, and a change read right after it", async () => {
    const l = await ledgers.open(kind);
    const id = request(l, 2);
    l.deposits.insert(deposit(12, 0, 50, id));
    l.deposits.insert(deposit(11, 3, 45, id));
    l.deposits.insert(deposit(13, 0, 46, id)); // seen for the order, never handled: not shown once it is pending
    l.deposits.confirmUpTo(8453, 100, 3_000);
    l.deposits.markHandled(`8453:${hex(12)}:0`, id);
    l.deposits.markHandled(`8453:${hex(11)}:3`, id);
    l.requests.setStatus(id, 'pending', {}, 4_000);
    // The change's event: the deposits seen for the waiting order are no longer listed, only those handled.
    expect(lastEvent(l, id)).toEqual(l.requests.status(id));
    expect(lastEvent(l, id).inTxHashes).toEqual([hex(11), hex(12)]);
    const payout = (n: number, decidedAt: number) => l.payouts.insert(fillPayout(`p${n}`, id, `8453:${hex(12)}:0`, decidedAt));
    payout(1, 5_002);
    payout(2, 5_001);
    payout(3, 5_003); // decided, not signed: no hash yet
    l.payouts.setState('p1', 'sent', { txHash: hex(0xf1) });
    l.payouts.setState('p2', 'failed', { txHash: hex(0xf2), failReason: 'TRANSACTION_REVERTED' });
    let s = l.requests.status(id)!;
    expect(s).toMatchObject({ status: 'pending', inTxHashes: [hex(11), hex(12)], txHashes: [hex(0xf2), hex(0xf1)], updatedAt: 4_000 });
    // The API's read (PostgreSQL: on a pooled connection of its own) gives the same record.
    expect(await l.statusOf(id)).toEqual(s);

    // The next read shows the next change (nothing between the ledger and the answer).
    l.payouts.setState('p3', 'sent', { txHash: hex(0xf3) });
    l.requests.setStatus(id, 'success', {}, 6_000);
    s = l.requests.status(id)!;
    expect(s).toMatchObject({ status: 'success', details: 'Filled', txHashes: [hex(0xf2), hex(0xf1), hex(0xf3)], updatedAt: 6_000 });
    // The change's event carries the record as the change left it.
    expect(lastEvent(l, id)).toEqual(s);
    expect(await l.statusOf(id)).toEqual(s);
  });

  it("gives the reasons' details, a recorded detail as it is, and nothing for an unknown id", async () => {
    const l = await ledgers.open(kind);
    const failed = request(l, 3);
    l.requests.setStatus(failed, 'failure', { failReason: 'SOLVER_CAPACITY_EXCEEDED', refundFailReason: 'AMOUNT_TOO_LOW_TO_REFUND' }, 7_000);
    expect(l.requests.status(failed)).toMatchObject({
      status: 'failure',
      details: 'Failed (SOLVER_CAPACITY_EXCEEDED); refund not possible: AMOUNT_TOO_LOW_TO_REFUND',
      failReason: 'SOLVER_CAPACITY_EXCEEDED',
      refundFailReason: 'AMOUNT_TOO_LOW_TO_REFUND',
    });
    expect(lastEvent(l, failed)).toEqual(l.requests.status(failed));
    const orphan = request(l, 4, 'orphan');
    l.deposits.insert(deposit(21, 0, 60, orphan)); // an orphan shows no deposits seen by reference
    l.requests.setStatus(orphan, 'refund', { failReason: 'ORDER_EXPIRED', details: 'refunded by the operator' }, 8_000);
    expect(l.requests.status(orphan)).toMatchObject({ status: 'refund', details: 'refunded by the operator', inTxHashes: [] });
    expect(lastEvent(l, orphan)).toEqual(l.requests.status(orphan));
    expect(l.requests.status(hex(0x9999))).toBeUndefined();
    expect(await l.statusOf(hex(0x9999))).toBeUndefined();
  });

  it("gives a user's latest requests' records in one read, oldest first, each as read by id", async () => {
    const l = await ledgers.open(kind);
    const ids = [5, 6, 7].map((n) => request(l, n));
    l.deposits.insert(deposit(31, 0, 70, ids[1]!));
    l.requests.setStatus(ids[2]!, 'failure', { failReason: 'ORDER_EXPIRED' }, 9_000);
    const other = hex(0x6000);
    l.requests.insert({ ...waitingOrder(other, 2_000), user: hex(8, 20) });
    const all = l.requests.latestStatusesOfUser(USER, 10);
    expect(all.map((r) => r.id)).toEqual(ids);
    for (const r of all) expect(r.record).toEqual(l.requests.status(r.id));
    expect(all[1]!.record.inTxHashes).toEqual([hex(31)]);
    // The latest two, still oldest first.
    expect(l.requests.latestStatusesOfUser(USER, 2).map((r) => r.id)).toEqual(ids.slice(1));
    expect(l.requests.latestStatusesOfUser(hex(9, 20), 10)).toEqual([]);
  });
});
