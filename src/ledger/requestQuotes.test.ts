// A request's quote sits in a table of its own (request_quotes, migration 25), written once with the request:
// each status change rewrites the request row only. With the quote on the row (5-70 KB; about 5 KB for a plain
// bridge), the row spanned overflow pages that every change wrote again. An existing ledger migrates with every
// quote kept, on both ledgers.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { LEDGER_KINDS, pgMigratedFrom, sqliteMigratedFrom, testLedgers } from '../../test/helpers/ledgers.ts';
import { Ledger, type OpenedLedger } from './index.ts';
import type { RequestQuery } from './requestSearch.ts';
import type { NewRequest } from './requests.ts';

const now = 1_700_000_000_000;
// About the size of a plain bridge's /quote answer.
const QUOTE = JSON.stringify({ steps: [{ id: 'deposit', data: 'ab'.repeat(1_200) }], fees: { gas: 'x'.repeat(2_500) } });

const request = (id: string, quote: string | null = QUOTE): NewRequest => ({
  id: id as `0x${string}`,
  parent_id: null,
  kind: 'order',
  request_type: 'Bridge',
  user: '0x00000000000000000000000000000000000000a1',
  recipient: '0x00000000000000000000000000000000000000a1',
  refund_to: null,
  origin_chain_id: 1,
  destination_chain_id: 10,
  origin_currency: '0x0000000000000000000000000000000000000000',
  destination_currency: '0x0000000000000000000000000000000000000000',
  trade_type: 'EXACT_INPUT',
  amount_in: '1000',
  amount_out: '990',
  min_amount_out: '990',
  pricing: '{"kind":"bridge"}',
  order_data: 'o'.repeat(1_000),
  quote,
  expires_at: now + 60_000,
  fill_deadline: null,
  created_at: now,
});
const ID = `0x${'a1'.repeat(32)}`;

const ledgers = testLedgers();
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe.each(LEDGER_KINDS)("a request's quote (%s)", (kind) => {
  let ledger: OpenedLedger;
  beforeEach(async () => {
    ledger = await ledgers.open(kind);
  });

  it('is written with the request, read by id, and not part of the request row', () => {
    ledger.tx(() => ledger.requests.insert(request(ID)));
    ledger.tx(() => ledger.requests.insert(request(`0x${'a2'.repeat(32)}`, null)));
    expect(ledger.requests.quoteOf(ID)).toBe(QUOTE);
    expect(ledger.requests.quoteOf(`0x${'a2'.repeat(32)}`)).toBeUndefined();
    expect(Object.keys(ledger.requests.get(ID)!)).not.toContain('quote');
    // The listing's rows carry it.
    const found = ledger.requests.search({ ...SEARCH_ALL });
    expect(new Map(found.rows.map((r) => [r.id, r.quote]))).toEqual(
      new Map([
        [ID, QUOTE],
        [`0x${'a2'.repeat(32)}`, null],
      ]),
    );
  });

  it('goes when its unused request is pruned, and stays with a request that is used', () => {
    ledger.tx(() => ledger.requests.insert(request(ID)));
    ledger.tx(() => ledger.requests.insert(request(`0x${'a3'.repeat(32)}`)));
    ledger.tx(() => ledger.requests.setStatus(`0x${'a3'.repeat(32)}`, 'pending', {}, now + 1));
    expect(ledger.requests.pruneUnusedQuotes(now + 120_000)).toBe(1);
    expect(ledger.requests.get(ID)).toBeUndefined();
    expect(ledger.requests.quoteOf(ID)).toBeUndefined();
    expect(ledger.requests.quoteOf(`0x${'a3'.repeat(32)}`)).toBe(QUOTE);
  });

  it("goes with its 'waiting' event even while that event's webhook delivery is still retried", () => {
    // A key whose receiver never answers keeps each delivery pending for hours of retries: its unused
    // quotes (up to the key's quote rate, 5-70 KB each) stayed that long, and it quotes for nothing.
    const key = ledger.apiKeys.create('tarpit');
    ledger.events.addWebhook(key.id, 'https://hooks.example/relay');
    ledger.tx(() => ledger.requests.insert({ ...request(ID), api_key_id: key.id }));
    expect(ledger.events.pendingCount()).toBe(1);
    expect(ledger.requests.pruneUnusedQuotes(now + 120_000)).toBe(1);
    expect(ledger.requests.get(ID)).toBeUndefined();
    expect(ledger.events.forRequest(ID)).toEqual([]);
    expect(ledger.events.pendingCount()).toBe(0);
  });
});

// Every request of the ledger, newest first (the listing's query with no filter).
const SEARCH_ALL: RequestQuery = {
  where: [],
  groups: [],
  ranges: {},
  features: [],
  includeChildRequests: true,
  excludedChains: [],
  sortBy: 'createdAt',
  sortDirection: 'desc',
  limit: 10,
  includeTotal: false,
};

describe('a status change on SQLite', () => {
  it("writes the same pages whatever the size of the request's quote", () => {
    const dir = mkdtempSync(join(tmpdir(), 'rq-'));
    dirs.push(dir);
    const ledger = Ledger.open(join(dir, 'ledger.db'));
    const wal = join(dir, 'ledger.db-wal');
    // The pages a status change wrote: the WAL's frames (a 4 KB page and a 24-byte header each, after a 32-byte header).
    const pagesOf = (id: string) => {
      ledger.db.pragma('wal_checkpoint(TRUNCATE)');
      ledger.tx(() => ledger.requests.setStatus(id, 'pending', {}, now + 1));
      return (statSync(wal).size - 32) / (4096 + 24);
    };
    try {
      const big = `0x${'b1'.repeat(32)}`;
      const none = `0x${'b2'.repeat(32)}`;
      ledger.tx(() => {
        ledger.requests.insert(request(big, JSON.stringify({ steps: 'q'.repeat(70_000) })));
        ledger.requests.insert(request(none, null));
      });
      const withQuote = pagesOf(big);
      expect(withQuote).toBeGreaterThan(0);
      // With the quote on the row, its overflow pages were written again: one more page at least.
      expect(withQuote).toBe(pagesOf(none));
    } finally {
      ledger.close();
    }
  });
});

describe('an existing ledger with quotes on its request rows migrates (migration 25)', () => {
  const seed = `INSERT INTO requests (id, kind, request_type, status, origin_chain_id, destination_chain_id, origin_currency, destination_currency,
      amount_in, amount_out, min_amount_out, quote, created_at, updated_at) VALUES
      ('r1', 'order', 'bridge', 'success', 1, 10, 'a', 'b', '1', '1', '1', '${QUOTE}', 0, 0),
      ('r2', 'order', 'bridge', 'waiting', 1, 10, 'a', 'b', '1', '1', '1', NULL, 0, 0);`;

  it('on SQLite', () => {
    sqliteMigratedFrom(
      24,
      seed,
      (db) => {
        expect(db.prepare('SELECT request_id, quote FROM request_quotes').all()).toEqual([{ request_id: 'r1', quote: QUOTE }]);
        expect((db.prepare('SELECT * FROM requests ORDER BY id').all() as object[]).map((r) => 'quote' in r)).toEqual([false, false]);
      },
      (ledger) => expect(ledger.requests.quoteOf('r1')).toBe(QUOTE),
    );
  });

  it('on PostgreSQL', async () => {
    await pgMigratedFrom(await ledgers.url(), 24, seed, async (client) => {
      expect((await client.query('SELECT request_id, quote FROM request_quotes')).rows).toEqual([{ request_id: 'r1', quote: QUOTE }]);
      const column = "SELECT column_name FROM information_schema.columns WHERE table_name = 'requests' AND column_name = 'quote'";
      expect((await client.query(column)).rows).toEqual([]);
    });
  });
});
