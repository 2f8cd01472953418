// The deposit store's bulk write and lookup, against the one-row statements they stand in for.
import { describe, expect, it } from 'vitest';
import { LEDGER_KINDS, testLedgers, withoutForeignKeys } from '../../test/helpers/ledgers.ts';
import type { OpenedLedger } from './index.ts';
import { bindDeposits, type NewDeposit, orderRefIs } from './deposits.ts';
import { STATUS_BY_ID } from './statusRecord.ts';

const ledgers = testLedgers();

const hex = (n: number, bytes = 32) => `0x${n.toString(16).padStart(bytes * 2, '0')}` as `0x${string}`;
const deposit = (i: number, tx = Math.floor(i / 7)): NewDeposit => ({
  id: `8453:${hex(tx)}:${i}`,
  chain_id: 8453,
  tx_hash: hex(tx),
  log_index: i,
  block_number: 10 + tx,
  block_hash: hex(1000 + tx),
  depositor: hex(5, 20),
  currency: hex(0, 20),
  amount: String(i + 1),
  order_ref: hex(50_000 + i),
  seen_at: 1_000 + i,
});

describe.each(LEDGER_KINDS)('Deposits.insertMany (%s)', (kind) => {
  it('writes the same rows as insert, one at a time, and names only the new or revived ones, in order', async () => {
    const bulk = await ledgers.open(kind);
    const single = await ledgers.open(kind);
    // 250 rows: two full statements of a hundred and a shorter one.
    const ds = Array.from({ length: 250 }, (_, i) => deposit(i));
    const fresh = ds.filter((d) => single.deposits.insert(d)).map((d) => d.id);
    expect(bulk.deposits.insertMany(ds)).toEqual(fresh);
    expect(fresh).toHaveLength(250);
    const all = (l: OpenedLedger) => l.db.prepare('SELECT * FROM deposits ORDER BY id').all();
    expect(all(bulk)).toEqual(all(single));

    // Written again (a re-read): nothing new, nothing changed.
    expect(bulk.deposits.insertMany(ds.slice(0, 120))).toEqual([]);
    expect(all(bulk)).toEqual(all(single));

    // A deposit listed twice in one call is written once.
    const twice = deposit(900, 900);
    expect(bulk.deposits.insertMany([twice, deposit(901, 900), twice])).toEqual([twice.id, deposit(901, 900).id]);

    // Reorged rows come back with their new block; the others stay as they are.
    bulk.deposits.reorgAbove(8453, 20);
    const moved = ds.filter((d) => d.block_number > 20).map((d) => ({ ...d, block_number: d.block_number + 1, block_hash: hex(7) }));
    const revived = bulk.deposits.insertMany([...ds.slice(0, 5), ...moved]);
    expect(revived).toEqual(moved.map((d) => d.id));
    const row = bulk.deposits.get(moved[0]!.id)!;
    expect(row.state).toBe('unconfirmed');
    expect(row.block_hash).toBe(hex(7));
    expect(bulk.deposits.get(ds[0]!.id)!.block_hash).toBe(ds[0]!.block_hash);
    expect(bulk.deposits.insertMany([])).toEqual([]);
  });

  it('writes rows given a confirmation time confirmed, as insert then confirmUpTo in one transaction would', async () => {
    const bulk = await ledgers.open(kind);
    const single = await ledgers.open(kind);
    const ds = Array.from({ length: 150 }, (_, i) => deposit(i)); // blocks 10 .. 31
    single.tx(() => {
      for (const d of ds) single.deposits.insert(d);
      single.deposits.confirmUpTo(8453, 20, 77);
    });
    bulk.tx(() => bulk.deposits.insertMany(ds.map((d) => (d.block_number <= 20 ? { ...d, confirmed_at: 77 } : d))));
    const all = (l: OpenedLedger) => l.db.prepare('SELECT * FROM deposits ORDER BY id').all();
    expect(all(bulk)).toEqual(all(single));
    expect(bulk.deposits.unconfirmed(8453, 1_000).length).toBeGreaterThan(0);

    // A reorged row that comes back confirmed is revived confirmed, at the new time.
    bulk.deposits.reorgAbove(8453, 15);
    const back = { ...ds[100]!, block_hash: hex(8), confirmed_at: 99 };
    expect(bulk.deposits.insertMany([back])).toEqual([back.id]);
    expect(bulk.deposits.get(back.id)).toMatchObject({ state: 'confirmed', confirmed_at: 99, block_hash: hex(8) });
    // Revived unconfirmed: unconfirmed, as insert revives it.
    const later = { ...ds[140]!, block_hash: hex(9) };
    expect(bulk.deposits.insertMany([later])).toEqual([later.id]);
    expect(bulk.deposits.get(later.id)).toMatchObject({ state: 'unconfirmed', block_hash: hex(9) });
  });
});

describe.each(LEDGER_KINDS)('Deposits.recordCount (%s)', (kind) => {
  it('counts what record names: the new or revived deposits, and those of them written confirmed', async () => {
    const counted = await ledgers.open(kind);
    const named = await ledgers.open(kind);
    const ds = Array.from({ length: 250 }, (_, i) => deposit(i)); // blocks 10 .. 45
    const both = (rows: (NewDeposit & { confirmed_at?: number })[]) => {
      const ids = named.tx(() => named.deposits.record(8453, rows));
      const confirmedIds = new Set(rows.filter((r) => r.confirmed_at !== undefined).map((r) => r.id));
      expect(counted.tx(() => counted.deposits.recordCount(8453, bindDeposits(rows)))).toEqual({
        fresh: ids.length,
        confirmed: ids.filter((id) => confirmedIds.has(id)).length,
      });
      return ids.length;
    };
    // All confirmed (a backfill), then none: counted by the statement; a re-read counts nothing.
    expect(both(ds.slice(0, 100).map((d) => ({ ...d, confirmed_at: 77 })))).toBe(100);
    expect(both(ds.slice(100, 200))).toBe(100);
    expect(both(ds.slice(0, 200))).toBe(0);
    // Mixed, with rows written already and one listed twice.
    expect(both([...ds.slice(190, 250).map((d) => (d.block_number <= 40 ? { ...d, confirmed_at: 78 } : d)), ds[249]!])).toBe(50);
    // Revived after a reorg, confirmed.
    counted.deposits.reorgAbove(8453, 40);
    named.deposits.reorgAbove(8453, 40);
    expect(both(ds.filter((d) => d.block_number > 40).map((d) => ({ ...d, block_hash: hex(7), confirmed_at: 79 })))).toBeGreaterThan(0);
    const all = (l: OpenedLedger) => l.db.prepare('SELECT * FROM deposits ORDER BY id').all();
    expect(all(counted)).toEqual(all(named));
  });
});

describe.each(LEDGER_KINDS)('Deposits.handledOfTxs (%s)', (kind) => {
  it("lists the chain's handled deposits of the given transactions only", async () => {
    const l = await ledgers.open(kind);
    const ds = Array.from({ length: 21 }, (_, i) => deposit(i)); // transactions 0, 1, 2
    l.deposits.insertMany([...ds, { ...deposit(30, 1), chain_id: 10, id: `10:${hex(1)}:30` }]);
    l.deposits.confirmUpTo(8453, 1_000);
    l.deposits.confirmUpTo(10, 1_000);
    withoutForeignKeys(l); // a store test: no request rows behind request_id
    for (const i of [3, 8, 15]) l.deposits.markHandled(ds[i]!.id, hex(1));
    l.deposits.markHandled(`10:${hex(1)}:30`, hex(1));
    expect(l.deposits.handledOfTxs(8453, [hex(1), hex(2), hex(99)]).map((d) => d.id)).toEqual([ds[8]!.id, ds[15]!.id]);
    expect(l.deposits.handledOfTxs(8453, [])).toEqual([]);
  });
});

describe.each(LEDGER_KINDS)('Deposits.byOrderRef (%s)', (kind) => {
  it('lists the deposits of the ref itself, not those of refs alike in the digits its index holds', async () => {
    const l = await ledgers.open(kind);
    const ref = `0x${'ab'.repeat(28)}12345678` as const;
    const twin = `0x${'cd'.repeat(28)}12345678` as const; // the same last 8 digits
    const near = `0x${'ab'.repeat(28)}12345679` as const;
    l.deposits.insertMany([
      { ...deposit(1), order_ref: ref },
      { ...deposit(2), order_ref: twin },
      { ...deposit(3), order_ref: near },
      { ...deposit(4), order_ref: ref },
    ]);
    expect(l.deposits.byOrderRef(ref).map((d) => d.id)).toEqual([deposit(1).id, deposit(4).id]);
    expect(l.deposits.byOrderRef(twin).map((d) => d.id)).toEqual([deposit(2).id]);
    expect(l.deposits.byOrderRef(`0x${'ef'.repeat(28)}12345678`)).toEqual([]);
  });
});

describe('the deposits index by order ref (sqlite)', () => {
  it("is short (the last 8 digits of the ref) and serves each lookup by ref: the order's deposits, and a waiting order's status", async () => {
    const l = await ledgers.open('sqlite');
    const plan = (sql: string, ...params: unknown[]) =>
      (l.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail).join('; ');
    const index = l.db.prepare(`SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'deposits' AND sql LIKE '%order_ref%'`).all();
    expect(index).toEqual([{ sql: 'CREATE INDEX deposits_order_key ON deposits(substr(order_ref, 59))' }]);
    expect(plan(`SELECT * FROM deposits WHERE ${orderRefIs('order_ref', '@ref')}`, { ref: '0x01' })).toMatch(/USING INDEX deposits_order_key/);
    expect(plan(STATUS_BY_ID, '0x01')).toMatch(/SEARCH d USING INDEX deposits_order_key/);
  });
});
