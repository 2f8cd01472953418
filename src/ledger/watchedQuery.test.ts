// The deposit-address watcher's read (Requests.depositAddresses) runs on every head of every EVM chain. On SQLite
// without statistics (the node never runs ANALYZE) it was answered through requests_parent (parent_id=?): every
// top-level request the ledger ever had, read on every head. It seeks an index led by the chain and the quote time
// (requests_watched_chain, migration 39), and still returns exactly the live top-level addresses of the chain.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from './index.ts';
import { type NewRequest, WATCHED_ADDRESSES } from './requests.ts';

const now = 1_700_000_000_000;
const since = now - 24 * 3_600_000;
const hex = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as `0x${string}`;
const address = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;

const request = (n: number, over: Partial<NewRequest>): NewRequest => ({
  id: hex(n),
  parent_id: null,
  kind: 'order',
  request_type: 'Bridge',
  user: address(0xa1),
  recipient: address(0xa1),
  refund_to: address(0xa2),
  origin_chain_id: 1,
  destination_chain_id: 10,
  origin_currency: address(0),
  destination_currency: address(0),
  trade_type: 'EXACT_INPUT',
  amount_in: String(1000 + n),
  amount_out: '990',
  min_amount_out: '990',
  pricing: '{"kind":"bridge"}',
  order_data: null,
  quote: null,
  expires_at: now + 60_000,
  fill_deadline: null,
  created_at: now,
  ...over,
});

describe("the deposit-address watcher's read", () => {
  let ledger: ReturnType<typeof Ledger.open> | undefined;
  afterEach(() => ledger?.close());
  const open = () => (ledger = Ledger.open(join(mkdtempSync(join(tmpdir(), 'relay-watched-')), 'ledger.sqlite')));

  it('seeks an index led by origin_chain_id and created_at, not requests_parent nor a scan', () => {
    const l = open();
    const plan = (l.db.prepare(`EXPLAIN QUERY PLAN ${WATCHED_ADDRESSES}`).all(1, since) as { detail: string }[]).map((r) => r.detail);
    expect(plan).toHaveLength(1);
    const detail = plan[0]!;
    expect(detail).not.toMatch(/^SCAN/);
    expect(detail).not.toContain('requests_parent');
    const m = /^SEARCH requests USING (?:COVERING )?INDEX (\w+) \((.*)\)$/.exec(detail);
    expect(m, detail).not.toBeNull();
    // Both leading columns bound the rows read: the chain by equality, the quote time by its range.
    expect(m![2]).toBe('origin_chain_id=? AND created_at>?');
    const keys = (l.db.prepare('SELECT name FROM pragma_index_info(?) ORDER BY seqno').all(m![1]) as { name: string }[]).map((k) => k.name);
    expect(keys.slice(0, 2)).toEqual(['origin_chain_id', 'created_at']);
  });

  it('returns exactly the live top-level deposit addresses of the chain', () => {
    const l = open();
    const rows = [
      request(1, { deposit_address: address(0xd1) }), // chain 1, new: watched
      request(2, { deposit_address: address(0xd2), created_at: since }), // chain 1, quoted exactly at `since`: watched
      request(3, { deposit_address: address(0xd3), created_at: since - 1 }), // chain 1, old
      request(4, {}), // chain 1, new, no deposit address
      request(5, { deposit_address: address(0xd1), parent_id: hex(1), kind: 'extra', created_at: now + 1 }), // an arrival of 1
      request(6, { deposit_address: address(0xd6), origin_chain_id: 2 }), // chain 2, new
      request(7, { deposit_address: address(0xd7), origin_chain_id: 2, created_at: since - 60_000 }), // chain 2, old
      request(8, { deposit_address: address(0xd8), money: '{"kind":"erc20"}', expires_at: null, created_at: now + 5 }), // chain 1, new
    ];
    for (const r of rows) l.requests.insert(r);
    const ids = (chain: number, from = since) =>
      l.requests
        .depositAddresses(chain, from)
        .map((w) => w.id)
        .sort();
    expect(ids(1)).toEqual([hex(1), hex(2), hex(8)]);
    expect(ids(2)).toEqual([hex(6)]);
    expect(ids(3)).toEqual([]);
    expect(ids(1, now + 1)).toEqual([hex(8)]);
    expect(ids(2, since - 60_000)).toEqual([hex(6), hex(7)]);
    const eight = l.requests.depositAddresses(1, since).find((w) => w.id === hex(8));
    expect(eight).toEqual({
      id: hex(8),
      refund_to: address(0xa2),
      deposit_address: address(0xd8),
      origin_currency: address(0),
      amount_in: '1008',
      money: '{"kind":"erc20"}',
      expires_at: null,
    });
  });
});
