// Adversarial review of an app balance's summary (Balances.summary): what the solver reads on its event loop for every
// sponsored quote, relay admission, fast fill and claim. It summed every entry the wallet ever had (a walk of
// balance_entries by wallet), so an app that pays for many requests made each of those reads slower by its own history,
// and a hostile-but-paying app could stall the node's loop. Costs are counted (what a statement's plan reads), never timed.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { runAudit } from '../../src/audit/audit.ts';
import type { Config } from '../../src/config/load.ts';
import { Balances, type BalanceEntry, type BalanceKind } from '../../src/ledger/balances.ts';
import type { OpenedLedger } from '../../src/ledger/index.ts';
import { Ledger } from '../../src/ledger/index.ts';
import { CopyError, copySqliteToPostgres } from '../../src/ledger/pgCopy.ts';
import { PostgresLedger } from '../../src/ledger/postgres/ledger.ts';
import type { SqlDb, SqlStatement } from '../../src/ledger/sqlDb.ts';
import { LEDGER_KINDS, type LedgerKind, pgMigratedFrom, sqliteMigratedFrom, testLedgers } from '../helpers/ledgers.ts';

const ledgers = testLedgers();
const BUSY = '0x00000000000000000000000000000000000b0511';
const OTHER = '0x00000000000000000000000000000000000a11ce';
const HELD: BalanceKind[] = ['hold', 'hold_release'];

/** What each statement run through `db` was (its text and values), in order. Statements chain (safeIntegers) as they do. */
function tracing(db: SqlDb, ran: { sql: string; params: unknown[] }[]): SqlDb {
  const wrap = (stmt: SqlStatement, sql: string): SqlStatement => {
    const proxy: SqlStatement = new Proxy(stmt, {
      get(t, p) {
        const v = Reflect.get(t, p, t);
        if (typeof v !== 'function') return v;
        if (p === 'run' || p === 'get' || p === 'all' || p === 'iterate')
          return (...params: unknown[]) => {
            ran.push({ sql, params });
            return v.apply(t, params);
          };
        return (...a: unknown[]) => {
          const r = v.apply(t, a);
          return r === t ? proxy : r;
        };
      },
    });
    return proxy;
  };
  return new Proxy(db, {
    get(t, p) {
      if (p === 'prepare') return (sql: string) => wrap(t.prepare(sql), sql);
      const v = Reflect.get(t, p, t);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}

/** The plan of one statement as the ledger's engine would run it, as one line of text. */
function planOf(ledger: OpenedLedger, sql: string, params: unknown[]): string {
  if (ledger instanceof PostgresLedger)
    return (ledger.db.prepare(`EXPLAIN ${sql}`).all(...params) as Record<string, string>[]).map((r) => r['QUERY PLAN']).join(' | ');
  return (ledger.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail).join(' | ');
}

/** A mixed history for `wallet`: credits, holds (half released), sponsorships and their reversals; and its expected sums. */
function history(wallet: string, n: number, tag: string): { entries: BalanceEntry[]; balance: bigint; held: bigint } {
  const entries: BalanceEntry[] = [];
  const add = (kind: BalanceKind, amount: bigint, i: number) => entries.push({ wallet, kind, amount, request_id: `${tag}-r${i}`, ref: `${tag}:${kind}:${i}` });
  for (let i = 0; i < n; i++) {
    if (i % 4 === 0) add('credit', 1_000_000n + BigInt(i), i);
    else if (i % 4 === 1) add('hold', 7_000n, i);
    else if (i % 4 === 2) add('hold_release', -7_000n, i - 1);
    else add('sponsorship', -3_000n, i);
  }
  add('sponsorship_reversal', 3_000n, 3);
  let balance = 0n;
  let held = 0n;
  for (const e of entries) {
    if (HELD.includes(e.kind)) held += e.amount;
    else balance += e.amount;
  }
  return { entries, balance, held };
}

const summaryOf = (s: { balance: bigint; held: bigint }) => ({ balance: s.balance, held: s.held, available: s.balance - s.held });

// The audit with no chain to reconcile: its differences about the totals (the test's credits name no transfer).
const totalsAudit = async (ledger: OpenedLedger) =>
  (await runAudit({ chains: [], solverAddress: '0x0000000000000000000000000000000000000001' } as unknown as Config, ledger)).differences.filter((d) =>
    d.startsWith('app balance totals'),
  );

describe.each(LEDGER_KINDS)('an app balance summary on %s', (kind: LedgerKind) => {
  it("reads the wallet's totals row, not its entries, however many it has", async () => {
    const ledger = await ledgers.open(kind);
    const busy = history(BUSY, 2_000, 'busy');
    const other = history(OTHER, 40, 'other');
    ledger.tx(() => {
      for (const e of [...busy.entries, ...other.entries]) expect(ledger.balances.post(e)).toBe(true);
    });

    // Every statement the summary runs, with its values, then each one's plan on the ledger's own engine.
    const ran: { sql: string; params: unknown[] }[] = [];
    const traced = new Balances(tracing(ledger.db as SqlDb, ran));
    expect(traced.summary(BUSY)).toEqual(summaryOf(busy));
    expect(ran.length).toBeGreaterThan(0);
    const plans = ran.map((r) => planOf(ledger, r.sql, r.params));
    // Before: SQLite 'SEARCH balance_entries USING INDEX balance_entries_wallet (wallet=?)', PostgreSQL a scan of
    // balance_entries: every one of the wallet's 2,000 entries read on each summary.
    for (const plan of plans) expect(plan).not.toMatch(/balance_entries/);
    if (kind === 'sqlite') expect(plans.join(' | ')).toMatch(/SEARCH balance_totals USING (INDEX \w+|PRIMARY KEY) \(wallet=\?\)/);
    // One row at most, by its key: the wallet's totals.
    for (const r of ran) expect(ledger.db.prepare(r.sql).all(...r.params).length).toBeLessThanOrEqual(1);

    // The node's own store answers alike, and a wallet without entries has nothing.
    expect(ledger.balances.summary(BUSY)).toEqual(summaryOf(busy));
    expect(ledger.balances.summary(OTHER)).toEqual(summaryOf(other));
    expect(ledger.balances.summary('0x00000000000000000000000000000000000000e7')).toEqual({ balance: 0n, held: 0n, available: 0n });
  });

  it('keeps the totals in the transaction of each entry: once per ref, rolled back with it, and checked by the audit', async () => {
    const ledger = await ledgers.open(kind);
    const h = history(BUSY, 41, 'mix');
    ledger.tx(() => {
      for (const e of h.entries) ledger.balances.post(e);
    });
    expect(ledger.balances.summary(BUSY)).toEqual(summaryOf(h));
    // The same refs again (a retried booking) change nothing: no entry, no total.
    ledger.tx(() => {
      for (const e of h.entries) expect(ledger.balances.post({ ...e, amount: e.amount * 5n })).toBe(false);
    });
    expect(ledger.balances.summary(BUSY)).toEqual(summaryOf(h));
    // An entry whose transaction fails leaves no total behind.
    expect(() =>
      ledger.tx(() => {
        ledger.balances.post({ wallet: BUSY, kind: 'credit', amount: 5_000_000n, request_id: null, ref: 'mix:rolled-back' });
        throw new Error('the booking fails after the entry');
      }),
    ).toThrow(/booking fails/);
    expect(ledger.balances.summary(BUSY)).toEqual(summaryOf(h));
    // Amounts past 2^53 stay exact (bigint).
    const big = 9_007_199_254_740_993n;
    ledger.tx(() => ledger.balances.post({ wallet: OTHER, kind: 'credit', amount: big, request_id: null, ref: 'mix:big' }));
    expect(ledger.balances.summary(OTHER)).toEqual({ balance: big, held: 0n, available: big });
    // A total past 64 bits is refused with its entry (SQLite's + would turn it into an inexact REAL without its CHECK).
    const huge = 2n ** 63n - 1n - big + 1n;
    expect(() => ledger.tx(() => ledger.balances.post({ wallet: OTHER, kind: 'credit', amount: huge, request_id: null, ref: 'mix:overflow' }))).toThrow();
    expect(ledger.balances.get('mix:overflow')).toBeUndefined();
    expect(ledger.balances.summary(OTHER)).toEqual({ balance: big, held: 0n, available: big });

    // The entries stay the truth: the audit compares every wallet's totals with its entries' sums.
    expect(await totalsAudit(ledger)).toEqual([]);
    ledger.tx(() => ledger.db.prepare('UPDATE balance_totals SET held = held - 7000 WHERE wallet = ?').run(BUSY));
    ledger.tx(() => ledger.db.prepare('DELETE FROM balance_totals WHERE wallet = ?').run(OTHER));
    const differences = await totalsAudit(ledger);
    expect(differences).toHaveLength(2);
    expect(differences.join('\n')).toContain(`app balance totals of ${BUSY}`);
    expect(differences.join('\n')).toContain(`app balance totals of ${OTHER}`);
  });
});

describe('the totals of a ledger that had entries before them', () => {
  // Two wallets' entries as a ledger at migration 37 holds them (no totals yet); a third wallet holds only holds.
  const SEED = `INSERT INTO balance_entries (wallet, kind, amount, request_id, ref, detail, created_at) VALUES
    ('w1', 'credit', 5000000, NULL, 'c1', NULL, 1), ('w1', 'hold', 300000, 'r1', 'hold:r1', NULL, 2),
    ('w1', 'sponsorship', -120000, 'r2', 's2', NULL, 3), ('w1', 'hold', 50000, 'r3', 'hold:r3', NULL, 4),
    ('w1', 'hold_release', -50000, 'r3', 'hold_release:r3', NULL, 5), ('w2', 'credit', 9007199254740993, NULL, 'c2', NULL, 6),
    ('w2', 'credit_reversal', -1, NULL, 'c2r', NULL, 7), ('w3', 'hold', 10, 'r4', 'hold:r4', NULL, 8);`;
  const EXPECTED = [
    { wallet: 'w1', balance: '4880000', held: '300000' },
    { wallet: 'w2', balance: '9007199254740992', held: '0' },
    { wallet: 'w3', balance: '0', held: '10' },
  ];

  it('are backfilled from the entries by the migration on SQLite', () => {
    sqliteMigratedFrom(
      37,
      SEED,
      (db) => {
        const rows = db.prepare('SELECT wallet, balance, held FROM balance_totals ORDER BY wallet').safeIntegers(true).all() as Record<string, bigint>[];
        expect(rows.map((r) => ({ wallet: r.wallet, balance: String(r.balance), held: String(r.held) }))).toEqual(EXPECTED);
      },
      (ledger) => {
        expect(ledger.balances.summary('w1')).toEqual({ balance: 4_880_000n, held: 300_000n, available: 4_580_000n });
        expect(ledger.balances.summary('w2').balance).toBe(9_007_199_254_740_992n);
        // The next entry adds to the backfilled row.
        ledger.tx(() => ledger.balances.post({ wallet: 'w1', kind: 'hold_release', amount: -300_000n, request_id: 'r1', ref: 'hold_release:r1' }));
        expect(ledger.balances.summary('w1')).toEqual({ balance: 4_880_000n, held: 0n, available: 4_880_000n });
      },
    );
  });

  it('are backfilled from the entries by the migration on PostgreSQL, and kept by its trigger after', async () => {
    await pgMigratedFrom(await ledgers.url(), 37, SEED, async (client) => {
      const rows = async () => (await client.query('SELECT wallet, balance::text, held::text FROM balance_totals ORDER BY wallet')).rows;
      expect(await rows()).toEqual(EXPECTED);
      await client.query(
        `INSERT INTO balance_entries (wallet, kind, amount, request_id, ref, created_at) VALUES ('w1', 'hold_release', -300000, 'r1', 'hold_release:r1', 9)`,
      );
      await client.query(
        `INSERT INTO balance_entries (wallet, kind, amount, request_id, ref, created_at) VALUES ('w4', 'credit', 7, NULL, 'c4', 10) ON CONFLICT (ref) DO NOTHING`,
      );
      await client.query(
        `INSERT INTO balance_entries (wallet, kind, amount, request_id, ref, created_at) VALUES ('w4', 'credit', 7, NULL, 'c4', 11) ON CONFLICT (ref) DO NOTHING`,
      );
      expect(await rows()).toEqual([{ wallet: 'w1', balance: '4880000', held: '0' }, EXPECTED[1], EXPECTED[2], { wallet: 'w4', balance: '7', held: '0' }]);
    });
  });

  it('are carried by the ledger copy to PostgreSQL, which refuses totals that differ from the entries', async () => {
    const source = Ledger.open(':memory:');
    try {
      const h = history(BUSY, 200, 'copy');
      source.tx(() => {
        for (const e of h.entries) source.balances.post(e);
      });
      const url = await ledgers.url();
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const report = await copySqliteToPostgres(source.db, client);
        expect(report.tables.find((t) => t.table === 'balance_totals')).toEqual({ table: 'balance_totals', rows: 1 });
      } finally {
        await client.end();
      }
      const copied = PostgresLedger.open(url);
      try {
        expect(copied.balances.summary(BUSY)).toEqual(summaryOf(h));
        expect(await totalsAudit(copied)).toEqual([]);
      } finally {
        copied.close();
      }

      // A source whose totals drifted from its entries is not copied as it is: the copy names the table.
      source.tx(() => source.db.prepare('UPDATE balance_totals SET balance = balance + 1 WHERE wallet = ?').run(BUSY));
      const second = new pg.Client({ connectionString: await ledgers.url() });
      await second.connect();
      try {
        const refused = await copySqliteToPostgres(source.db, second).catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(CopyError);
        expect((refused as CopyError).table).toBe('balance_totals');
        expect((refused as CopyError).message).toMatch(/balance_totals of .* differ from its entries/);
      } finally {
        await second.end();
      }
    } finally {
      source.close();
    }
  });
});
