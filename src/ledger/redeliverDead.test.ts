// Redelivering a webhook's dead deliveries goes in bounded chunks: one request re-queues at most `limit` of
// them (a key that let a million die cannot have one UPDATE hold the node's only connection for seconds), each
// request's oldest first, and says whether more are left.
import { describe, expect, it } from 'vitest';
import { LEDGER_KINDS, testLedgers } from '../../test/helpers/ledgers.ts';
import { hex, waitingOrder } from '../../test/helpers/statusFixtures.ts';

const ledgers = testLedgers();

describe.each(LEDGER_KINDS)('dead deliveries redelivered in chunks (%s)', (kind) => {
  it('re-queues at most the limit per call, oldest of each request first, until none is left', async () => {
    const ledger = await ledgers.open(kind);
    const key = ledger.apiKeys.create('k').id;
    const other = ledger.apiKeys.create('other').id;
    const w = ledger.events.addWebhook(key, 'https://example.com/hook').id;
    const otherHook = ledger.events.addWebhook(other, 'https://example.com/other').id;
    const now = Date.now();
    // Three requests of the key, the first with two events (waiting, then pending): four deliveries.
    for (let i = 1; i <= 3; i++) ledger.requests.insert({ ...waitingOrder(hex(i), now - 10_000), api_key_id: key });
    ledger.requests.setStatus(hex(1), 'pending');
    ledger.requests.insert({ ...waitingOrder(hex(9), now - 10_000), api_key_id: other });
    const all = (webhook: string) => ledger.events.deliveries(webhook, { limit: 100 });
    for (const d of [...all(w), ...all(otherHook)]) ledger.events.markFailed(d.event_id, d.webhook_id, { status: 500, error: 'down', nextAttemptAt: null });
    expect(ledger.events.deliveryCounts(w)).toMatchObject({ dead: 4, pending: 0 });

    // A request's later event is never pending while its earlier one is still dead.
    const inOrder = () => {
      const byRequest = new Map<string, { seq: number; state: string }[]>();
      for (const d of all(w)) byRequest.set(d.request_id, [...(byRequest.get(d.request_id) ?? []), { seq: d.event_seq, state: d.state }]);
      for (const ds of byRequest.values()) {
        const sorted = ds.sort((a, b) => a.seq - b.seq);
        const firstDead = sorted.findIndex((d) => d.state === 'dead');
        if (firstDead >= 0) expect(sorted.slice(firstDead).every((d) => d.state === 'dead')).toBe(true);
      }
    };
    const calls: { redelivered: number; more: boolean }[] = [];
    for (let i = 0; i < 4; i++) {
      calls.push(ledger.events.redeliverDead(w, { apiKeyId: key, limit: 3, now }));
      inOrder();
    }
    expect(calls).toEqual([
      { redelivered: 3, more: true },
      { redelivered: 1, more: false },
      { redelivered: 0, more: false },
      { redelivered: 0, more: false },
    ]);
    expect(ledger.events.deliveryCounts(w)).toMatchObject({ dead: 0, pending: 4 });
    // Another key's webhook is neither reached through this key nor touched by it.
    expect(ledger.events.redeliverDead(otherHook, { apiKeyId: key, limit: 3, now })).toEqual({ redelivered: 0, more: false });
    expect(ledger.events.deliveryCounts(otherHook)).toMatchObject({ dead: 1, pending: 0 });
  });
});
