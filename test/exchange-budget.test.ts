// The node's request weight on the exchange (chain 1337): Hyperliquid answers 429 past 1,200 a minute per IP address,
// reads and actions together, and a preTransferCheck (every quote of a fill to the exchange) weighs 20. Against the
// stand-in with that limit on (scaled down), over real HTTP.
import { afterEach, describe, expect, it } from 'vitest';
import { privateKeyToAccount } from 'viem/accounts';
import { ExchangeClient } from '../src/chains/exchange/client.ts';
import { ExchangeBudgetError, requestWeight } from '../src/chains/exchange/requestWeight.ts';
import { isChainUnavailable } from '../src/chains/unavailable.ts';
import { startExchangeStandin, type ExchangeStandin } from '../src/devnet/exchange/standin.ts';
import { apiReads } from '../src/lib/apiReads.ts';
import { anvilKey } from './helpers/anvilKeys.ts';

const solver = privateKeyToAccount(anvilKey(1)).address;
const recipient = (i: number) => `0x${(i + 1).toString(16).padStart(40, '0')}` as const;
let standin: ExchangeStandin | undefined;

afterEach(async () => {
  await standin?.stop();
  standin = undefined;
});

describe("the node's request weight on the exchange", () => {
  it('weighs requests as the exchange does', () => {
    expect(requestWeight('/info', { type: 'clearinghouseState', user: solver })).toBe(2);
    expect(requestWeight('/info', { type: 'spotClearinghouseState', user: solver })).toBe(2);
    expect(requestWeight('/info', { type: 'preTransferCheck', user: solver, source: solver })).toBe(20);
    expect(requestWeight('/info', { type: 'userNonFundingLedgerUpdates', user: solver, startTime: 0 })).toBe(20);
    expect(requestWeight('/info', { type: 'userRole', user: solver })).toBe(60);
    expect(requestWeight('/exchange', { action: { type: 'sendAsset' }, nonce: 1 })).toBe(1);
    expect(requestWeight('/exchange', { action: { type: 'order', orders: new Array(79).fill({}) }, nonce: 1 })).toBe(2);
  });

  it("quotes asked as fast as they are answered never spend the node's own reads: the exchange answers it no 429", async () => {
    standin = await startExchangeStandin({ weightPerMinute: 200 });
    const client = new ExchangeClient({ url: standin.url, weightPerMinute: 200 });
    // A client asking for quotes of fills to new recipients: a preTransferCheck each, 20 of weight, 30 at once.
    const quotes = Array.from({ length: 30 }, (_, i) =>
      apiReads
        .run(true, () => client.activationFee(recipient(i), solver))
        .then(
          () => 'answered',
          (e: unknown) => e,
        ),
    );
    // The node's indexer reads the solver's ledger meanwhile.
    const read = await client.ledgerUpdates(solver, 0).then(
      () => 'answered',
      (e: unknown) => e,
    );
    const outcomes = await Promise.all(quotes);
    expect(read).toBe('answered');
    // The API took no more than its half: the rest of its reads were refused by the node, as a chain unavailable
    // (503 CHAIN_UNAVAILABLE to the client: retry), before the exchange saw them.
    const refused = outcomes.filter((o) => o !== 'answered');
    expect(refused.length).toBeGreaterThan(0);
    for (const e of refused) {
      expect(e).toBeInstanceOf(ExchangeBudgetError);
      expect(isChainUnavailable(e)).toBe(true);
    }
    expect(outcomes.filter((o) => o === 'answered').length).toBeLessThanOrEqual(5);
    expect(standin.rateLimited).toBe(0);
  });

  it('a 429 from the exchange (another client on the address) pauses every request rather than answer more 429s', async () => {
    // The node's budget set above what the exchange gives this address.
    standin = await startExchangeStandin({ weightPerMinute: 40 });
    const client = new ExchangeClient({ url: standin.url, weightPerMinute: 1_200 });
    await client.ledgerUpdates(solver, 0);
    await client.ledgerUpdates(solver, 0);
    const third = await client.ledgerUpdates(solver, 0).catch((e: unknown) => e);
    expect(isChainUnavailable(third)).toBe(true);
    expect(standin.rateLimited).toBe(1);
    // Paused: the next read waits instead of being refused again at once.
    let settled = false;
    const next = client.ledgerUpdates(solver, 0).finally(() => (settled = true));
    next.catch(() => undefined);
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    expect(standin.rateLimited).toBe(1);
  });
});
