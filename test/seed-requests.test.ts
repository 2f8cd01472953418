// The synthetic ledger the request-listing benchmark runs on is the same on both ledgers: seedRequests row by row
// (SQLite, and PostgreSQL through the ledger's connection) and seedRequestsPostgres in bulk write the same rows,
// and the triggers derive the same depository_owed from them.
import { afterAll, describe, expect, it } from 'vitest';
import { Ledger, type OpenedLedger } from '../src/ledger/index.ts';
import { withPostgres } from '../src/ledger/pgUrl.ts';
import { PostgresLedger } from '../src/ledger/postgres/ledger.ts';
import { testLedgers } from './helpers/ledgers.ts';
import { seededRequest, seedRequests, seedRequestsPostgres } from './helpers/seedRequests.ts';

const ledgers = testLedgers();
const opened: OpenedLedger[] = [];
afterAll(() => {
  for (const l of opened.splice(0)) l.close();
});

// 45 requests: every status several times over, in chunks of 7 for the bulk seeder (the last one short).
const N = 45;
const TABLES: [table: string, order: string, leaveOut?: string][] = [
  ['requests', 'id'],
  ['deposits', 'id'],
  ['payouts', 'id'],
  ['transactions', 'hash'],
  ['depository_owed', 'deposit_id'],
  ['depository_owed_entries', 'deposit_id, sign', 'seq'],
];

// Every value as text (or null): SQLite integers and PostgreSQL BIGINT strings compare alike.
function contents(l: OpenedLedger): Record<string, string[][][]> {
  return Object.fromEntries(
    TABLES.map(([t, order, leaveOut]) => [
      t,
      (l.db.prepare(`SELECT * FROM ${t} ORDER BY ${order}`).all() as Record<string, unknown>[]).map((r) =>
        Object.entries(r)
          .filter(([k]) => k !== leaveOut)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([k, v]) => [k, v === null ? null : String(v)] as string[]),
      ),
    ]),
  );
}

describe('the synthetic request ledger', () => {
  it('is the same rows on SQLite, on PostgreSQL row by row and on PostgreSQL in bulk', async () => {
    const sqlite = Ledger.open(':memory:');
    opened.push(sqlite);
    seedRequests(sqlite.db, N);

    const byRow = PostgresLedger.open(await ledgers.url());
    opened.push(byRow);
    seedRequests(byRow.db, N);

    const url = await ledgers.url();
    const bulk = PostgresLedger.open(url);
    opened.push(bulk);
    await withPostgres(url, (client) => seedRequestsPostgres(client, N, { chunk: 7 }));

    const expected = contents(sqlite);
    expect(expected.requests).toHaveLength(N);
    expect(expected.payouts!.length).toBe(Array.from({ length: N }, (_, i) => seededRequest(i)).filter((r) => r.fillTx).length);
    expect(expected.depository_owed!.length).toBe(expected.payouts!.length);
    expect(contents(byRow)).toEqual(expected);
    expect(contents(bulk)).toEqual(expected);

    // What the listing benchmark looks up is there, the same on both.
    const { id, fillTx } = seededRequest(16); // a success
    for (const l of [sqlite, bulk]) {
      expect(l.requests.get(id)?.status).toBe('success');
      expect((l.db.prepare('SELECT tx_hash FROM payouts WHERE request_id = ?').get(id) as { tx_hash: string }).tx_hash).toBe(fillTx);
    }
  }, 120_000);
});
