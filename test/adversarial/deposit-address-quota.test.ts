// Deposit addresses piling up: every quote with useDepositAddress makes an address the chain's watcher reads on
// every block for watchHours (its balances, one call each). Anonymous quoting at the per-IP quote limit added about
// 86,000 a day, without bound, so the watcher's work per block grew without bound. Live deposit addresses are now
// capped: node-wide for quotes without an API key, per key for the others (429 beyond, naming the bound); an
// address past its watch window no longer counts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { depositAddressQuote, startStack, until, type Stack } from '../helpers/stack.ts';

let s: Stack;
const A = 8453;

beforeAll(async () => {
  s = await startStack({ config: { depositAddresses: { maxWatchedAnonymous: 3, maxWatchedPerKey: 2 } } });
});
afterAll(async () => {
  await s?.stop();
});

const quote = (apiKey?: string, useDepositAddress = true) => depositAddressQuote(s, { useDepositAddress }, apiKey);

const watched = () => s.node.ledger.requests.depositAddresses(A, Date.now() - 24 * 3_600_000).length;

describe('live deposit addresses are capped', () => {
  it('without an API key: node-wide; a quote without a deposit address is not refused', async () => {
    for (let i = 0; i < 3; i++) expect((await quote()).status).toBe(200);
    const over = await quote();
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({ errorCode: 'RATE_LIMITED' });
    expect(over.body.message).toMatch(/at most 3 deposit addresses watched at once without an API key/);
    expect(watched()).toBe(3);
    expect((await quote(undefined, false)).status).toBe(200);
  });

  it('with an API key: per key, apart from the anonymous ones and from other keys', async () => {
    const one = s.node.ledger.apiKeys.create('quota-one').key;
    const two = s.node.ledger.apiKeys.create('quota-two').key;
    for (let i = 0; i < 2; i++) expect((await quote(one)).status).toBe(200);
    const over = await quote(one);
    expect(over.status).toBe(429);
    expect(over.body.message).toMatch(/at most 2 deposit addresses watched at once for this API key/);
    expect((await quote(two)).status).toBe(200);
    expect(watched()).toBe(3 + 3);
  });

  it('quotes sent at once never pass the cap: the room is counted again with the insert', async () => {
    // Each quote checks for room, then awaits the chains to build itself: all six pass that first check together.
    const key = s.node.ledger.apiKeys.create('quota-burst');
    const answers = await Promise.all(Array.from({ length: 6 }, () => quote(key.key)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 429, 429, 429, 429]);
    expect(s.node.ledger.requests.watchedOf(key.id, Date.now() - 24 * 3_600_000, 100)).toBe(2);
  });

  it('an address past its watch window no longer counts', async () => {
    const oldest = s.node.ledger.db
      .prepare('SELECT id FROM requests WHERE deposit_address IS NOT NULL AND api_key_id IS NULL ORDER BY created_at LIMIT 1')
      .get() as { id: string };
    s.node.ledger.db.prepare('UPDATE requests SET created_at = ? WHERE id = ?').run(Date.now() - 25 * 3_600_000, oldest.id);
    // A caller found at its cap is refused without a recount for a second (FULL_FOR_MS, src/api/routes/quote.ts).
    await until(async () => ((await quote()).status === 200 ? true : undefined), 'the room the old address left');
    expect((await quote()).status).toBe(429);
  });
});
