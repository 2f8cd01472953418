// Adversarial review of the public API as a hostile client (no key, or a free API key): what one client could make
// the node do per call, or per event, without bound. (Its chain reads' share of the providers: test/providers.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcProvider } from '../../src/chains/providers/provider.ts';
import { api, nativeBridge, startStack, until, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;

beforeAll(async () => {
  s = await startStack({ config: { events: { pollIntervalMs: 1_000 } } });
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

describe("a key's webhook backlog", () => {
  // A key's webhooks get one delivery per event of its requests, a quote's 'waiting' included, and a receiver that
  // never answers keeps them pending until the quote is pruned (70 min by default): ten webhooks and quotes at the
  // key's limit (6,000 a minute) are a million pending deliveries in 17 minutes. The deliverer counted the whole
  // outbox (its gauge, relay_events_outbox_depth) on every pass, and a pass follows every commit that appends an
  // event and every delivery that ends: about 40 ms of the node's event loop per status change of anyone's request
  // at a million (an adversarial review's run: 40 events took 3.4 s, the loop busy throughout).
  it('is counted every so often, not on every pass the events appended wake', async () => {
    const events = s.node.ledger.events;
    const { due, pendingCount } = events;
    let passes = 0;
    let counts = 0;
    events.due = (...a) => {
      passes++;
      return due.apply(events, a);
    };
    events.pendingCount = () => {
      counts++;
      return pendingCount.apply(events);
    };
    try {
      const q = await api(s.url, '/quote/v2', { body: nativeBridge(s.devnet.accounts[1]!.address, s.devnet.accounts[1]!.address, A, B, '10000000000000000') });
      expect(q.status).toBe(200);
      const requestId = q.body.steps.at(-1).requestId as string;
      const ledger = s.node.ledger;
      // Each append wakes a pass of its own; the next is appended once it ran.
      const from = passes;
      const counted = counts;
      for (let i = 1; i <= 40; i++) {
        ledger.tx(() => ledger.events.record(requestId));
        await until(() => (passes >= from + i ? true : undefined), `pass ${i}`);
      }
      // Forty passes: the outbox counted once at the most (its interval is 15 s), not forty times.
      expect(passes - from).toBeGreaterThanOrEqual(40);
      expect(counts - counted).toBeLessThanOrEqual(1);
    } finally {
      events.due = due;
      events.pendingCount = pendingCount;
    }
  });
});

describe("the API's chain reads", () => {
  // A read for the public API yields to the node's own (test/providers.test.ts shows the budget kept for them): every
  // request a client makes is served as such, and nothing of the node's own work is.
  it('are the only reads that yield to the node', async () => {
    const { waitFor } = RpcProvider.prototype;
    let yielding = 0;
    let own = 0;
    RpcProvider.prototype.waitFor = function (this: RpcProvider, n: number, now?: number, y?: boolean) {
      if (y) yielding++;
      else own++;
      return waitFor.call(this, n, now, y);
    };
    try {
      const liquidity = await api(s.url, `/chains/liquidity?chainId=${B}`);
      expect(liquidity.status).toBe(200);
      expect(yielding).toBeGreaterThan(0);
      // The node's own reads meanwhile (its indexers poll the heads) did not yield.
      const before = yielding;
      await until(() => (own > 0 ? true : undefined), "the node's own reads");
      expect(yielding).toBe(before);
    } finally {
      RpcProvider.prototype.waitFor = waitFor;
    }
  });
});
