// A transaction's signed bytes are stored once (migration 23), however many payouts it carries: a batched
// fill of 40 orders writes its bytes once, and an update of its state (broadcast, included) rewrites small
// rows only. The rows are read without their bytes, and the bytes by hash (Payouts.rawOf), on both ledgers. An existing
// ledger with batch rows (bytes on every row) migrates with every row and its bytes kept, on both.
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { LEDGER_KINDS, pgMigratedFrom, sqliteMigratedFrom, testLedgers } from '../../test/helpers/ledgers.ts';
import { Ledger, type OpenedLedger } from './index.ts';
import type { NewTransaction } from './payouts.ts';

const CHAIN = 10;
const FILLS = 40;
// About the size of a 40-order fillBatch transaction, hex.
const RAW = `0x${'ab'.repeat(5_000)}` as const;
const HASH = `0x${'b7'.repeat(32)}` as const;
const now = 1_700_000_000_000;

const ledgers = testLedgers();
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Payouts (with their requests) to carry a batch, inserted with foreign keys honoured. */
function payouts(ledger: OpenedLedger, n: number): string[] {
  const ids: string[] = [];
  ledger.tx(() => {
    for (let i = 0; i < n; i++) {
      const id = `0x${i.toString(16).padStart(64, '0')}` as const;
      ledger.db
        .prepare(`INSERT INTO requests (id, kind, request_type, status, origin_chain_id, destination_chain_id, origin_currency,
          destination_currency, amount_in, amount_out, min_amount_out, created_at, updated_at) VALUES (?, 'order', 'bridge', 'waiting', 1, ?, 'a', 'b', '1', '1', '1', ?, ?)`)
        .run(id, CHAIN, now, now);
      ledger.payouts.insert({
        id: `fill:${id}`,
        kind: 'fill',
        request_id: id,
        deposit_id: null,
        chain_id: CHAIN,
        recipient: '0x00000000000000000000000000000000000000c0',
        currency: '0x0000000000000000000000000000000000000000',
        amount: '1000',
        decided_at: now + i,
      });
      ids.push(`fill:${id}`);
    }
  });
  return ids;
}

const row = (payoutId: string, hash: `0x${string}` = HASH, raw: `0x${string}` = RAW): NewTransaction => ({
  hash,
  payout_id: payoutId,
  chain_id: CHAIN,
  sender: '0x00000000000000000000000000000000000000aa',
  nonce: 7,
  raw,
  gas_limit: '2000000',
  max_fee_per_gas: '3000000000',
  max_priority_fee_per_gas: '1000000000',
  created_at: now,
});

describe.each(LEDGER_KINDS)('signed bytes stored once per transaction (%s)', (kind) => {
  let ledger: OpenedLedger;
  beforeEach(async () => {
    ledger = await ledgers.open(kind);
  });

  it("writes a batch's bytes once, reads every row and the bytes by hash, and updates its state in small rows", () => {
    const ids = payouts(ledger, FILLS);
    ledger.tx(() => {
      for (const id of ids) ledger.payouts.insertTx(row(id));
    });
    // One copy of the bytes, not one per payout.
    expect(ledger.db.prepare('SELECT COUNT(*) AS n, SUM(LENGTH(raw)) AS bytes FROM transaction_bytes').get()).toEqual({ n: 1, bytes: RAW.length });
    const cols = ledger.db.prepare('SELECT * FROM transactions LIMIT 1').get() as Record<string, unknown>;
    expect(Object.keys(cols)).not.toContain('raw');
    // Every reader gets each row (without the bytes), and the bytes by hash.
    const rows = ledger.payouts.rowsOfTx(HASH);
    expect(rows).toHaveLength(FILLS);
    expect(rows.every((r) => r.state === 'signed' && !('raw' in r))).toBe(true);
    expect(ledger.payouts.txsOf(ids[3]!)).toEqual([expect.objectContaining({ hash: HASH, payout_id: ids[3] })]);
    expect(ledger.payouts.openTxs(CHAIN)).toHaveLength(FILLS);
    expect(ledger.payouts.txsOfChain(CHAIN)).toHaveLength(FILLS);
    expect(ledger.payouts.rawOf(HASH)).toBe(RAW);

    ledger.payouts.setTxState(HASH, 'broadcast', { broadcastAt: now + 1, sentBlock: 5 });
    ledger.payouts.setTxState(HASH, 'included', { blockNumber: 6, gasUsed: 1_000_000n, fee: 3n * 10n ** 15n });
    const after = ledger.payouts.rowsOfTx(HASH);
    expect(after.every((r) => r.state === 'included' && r.block_number === 6 && r.broadcast_at === now + 1)).toBe(true);
    expect(ledger.payouts.openTxs(CHAIN)).toEqual([]);
  });

  it("records a batch's later rows without the bytes, reads rows bare, and refuses a row whose bytes nobody recorded", () => {
    const ids = payouts(ledger, 3);
    ledger.tx(() => {
      ids.forEach((id, i) => ledger.payouts.insertTx({ ...row(id), raw: i === 0 ? RAW : undefined }));
    });
    expect(ledger.payouts.rowsOfTx(HASH)).toHaveLength(3);
    expect(ledger.payouts.rawOf(HASH)).toBe(RAW);
    expect(() => ledger.payouts.rawOf('0xnone')).toThrow(/0xnone has no recorded bytes/);
    const bare = ledger.payouts.openTxs(CHAIN);
    expect(bare.map((t) => t.payout_id)).toEqual(ids);
    expect(bare.every((t) => !('raw' in t))).toBe(true);
    expect(ledger.payouts.txsOf(ids[0]!)).toEqual([expect.not.objectContaining({ raw: expect.anything() })]);
    const orphan = `0x${'d9'.repeat(32)}` as const;
    expect(() => ledger.tx(() => ledger.payouts.insertTx({ ...row(ids[0]!, orphan), raw: undefined }))).toThrow(/foreign key/i);
    expect(ledger.payouts.txsOf(ids[0]!).map((t) => t.hash)).toEqual([HASH]);
  });

  it("reads a batch's payouts in one call (getMany), the ones not found left out", () => {
    const ids = payouts(ledger, 3);
    expect(
      ledger.payouts
        .getMany([ids[2]!, 'fill:none', ids[0]!])
        .map((p) => p.id)
        .sort(),
    ).toEqual([ids[0], ids[2]].sort());
    expect(ledger.payouts.getMany([ids[1]!]).map((p) => p.id)).toEqual([ids[1]]);
    expect(ledger.payouts.getMany([])).toEqual([]);
  });

  it("marks a batch's payouts sent in one call (setStateMany), the others untouched", () => {
    const ids = payouts(ledger, 4);
    ledger.payouts.setStateMany(ids.slice(0, 3), 'sent', { txHash: HASH }, now + 5);
    expect(ids.map((id) => ledger.payouts.get(id)).map((p) => [p?.state, p?.tx_hash, p?.updated_at])).toEqual([
      ['sent', HASH, now + 5],
      ['sent', HASH, now + 5],
      ['sent', HASH, now + 5],
      ['queued', null, now + 3],
    ]);
    ledger.payouts.setStateMany([ids[3]!], 'sent', { txHash: HASH }, now + 6);
    expect(ledger.payouts.get(ids[3]!)).toMatchObject({ state: 'sent', tx_hash: HASH, updated_at: now + 6 });
  });

  it('keeps a replacement at the same nonce (another hash) with its own bytes', () => {
    const ids = payouts(ledger, 2);
    const other = `0x${'c8'.repeat(32)}` as const;
    ledger.tx(() => {
      for (const id of ids) ledger.payouts.insertTx(row(id));
      for (const id of ids) ledger.payouts.insertTx(row(id, other, '0x01'));
    });
    expect(ledger.payouts.txsOf(ids[1]!).map((t) => [t.hash, ledger.payouts.rawOf(t.hash)])).toEqual([
      [HASH, RAW],
      [other, '0x01'],
    ]);
    expect(ledger.db.prepare('SELECT COUNT(*) AS n FROM transaction_bytes').get()).toEqual({ n: 2 });
  });
});

describe('a state update of a batch on SQLite', () => {
  it('writes a few pages, not the bytes of every row', () => {
    const dir = mkdtempSync(join(tmpdir(), 'txbytes-'));
    dirs.push(dir);
    const ledger = Ledger.open(join(dir, 'ledger.db'));
    try {
      const ids = payouts(ledger, FILLS);
      ledger.tx(() => {
        for (const id of ids) ledger.payouts.insertTx(row(id));
      });
      ledger.db.pragma('wal_checkpoint(TRUNCATE)');
      const wal = join(dir, 'ledger.db-wal');
      expect(existsSync(wal) ? statSync(wal).size : 0).toBe(0);
      ledger.tx(() => ledger.payouts.setTxState(HASH, 'broadcast', { broadcastAt: now + 1, sentBlock: 5 }));
      // The rows of 40 fills with their bytes made ~200 KB of pages; without them a few pages (4 KB each).
      expect(statSync(wal).size).toBeLessThan(10 * 4096);
      expect(statSync(wal).size).toBeGreaterThan(0);
    } finally {
      ledger.close();
    }
  });
});

describe('an existing ledger with batch rows migrates (migration 23)', () => {
  // Rows as they were before migration 23: the bytes on every row of a batch.
  const oldRows = (hash: string, raw: string, payoutIds: string[], state: string) =>
    payoutIds.map(
      (p) => `INSERT INTO transactions (hash, payout_id, chain_id, sender, nonce, raw, gas_limit, max_fee_per_gas, max_priority_fee_per_gas,
        state, sent_block, block_number, gas_used, fee, error, created_at, broadcast_at, updated_at, cancel)
        VALUES ('${hash}', '${p}', ${CHAIN}, '0xaa', 7, '${raw}', '21000', '3', '1', '${state}', 4, 6, '20000', '60000', NULL, ${now}, ${now + 1}, ${now + 2}, 0);`,
    );
  const seed = (payoutIds: string[]) => {
    const reqs = payoutIds.map(
      (p, i) => `INSERT INTO requests (id, kind, request_type, status, origin_chain_id, destination_chain_id, origin_currency, destination_currency,
        amount_in, amount_out, min_amount_out, created_at, updated_at) VALUES ('r${i}', 'order', 'bridge', 'waiting', 1, ${CHAIN}, 'a', 'b', '1', '1', '1', 0, 0);
      INSERT INTO payouts (id, kind, request_id, chain_id, recipient, currency, amount, state, decided_at, updated_at)
        VALUES ('${p}', 'fill', 'r${i}', ${CHAIN}, 'x', 'c', '5', 'sent', 0, 0);`,
    );
    return [...reqs, ...oldRows(HASH, RAW, payoutIds, 'included'), ...oldRows(`0x${'c8'.repeat(32)}`, '0x02', payoutIds.slice(0, 1), 'replaced')].join('\n');
  };
  const ids = ['p0', 'p1', 'p2'];
  const expectMigrated = (all: (sql: string) => unknown[]) => {
    expect(all('SELECT hash, raw FROM transaction_bytes ORDER BY hash')).toEqual([
      { hash: HASH, raw: RAW },
      { hash: `0x${'c8'.repeat(32)}`, raw: '0x02' },
    ]);
    expect(
      all(`SELECT t.payout_id, t.state, t.fee, t.broadcast_at, b.raw = '${RAW}' AS same FROM transactions t JOIN transaction_bytes b ON b.hash = t.hash
        WHERE t.hash = '${HASH}' ORDER BY t.payout_id`).map((r) => ({ ...(r as object), same: Boolean((r as { same: unknown }).same) })),
    ).toEqual(ids.map((p) => ({ payout_id: p, state: 'included', fee: '60000', broadcast_at: now + 1, same: true })));
    expect(all('SELECT COUNT(*) AS n FROM transactions').map((r) => Number((r as { n: unknown }).n))).toEqual([4]);
  };

  it('on SQLite', () => {
    sqliteMigratedFrom(
      22,
      seed(ids),
      (db) => expectMigrated((sql) => db.prepare(sql).all()),
      // The node's own reads, on the migrated file.
      (ledger) =>
        expect(ledger.payouts.txsOf('p0').map((t) => [t.state, ledger.payouts.rawOf(t.hash)])).toEqual([
          ['included', RAW],
          ['replaced', '0x02'],
        ]),
    );
  });

  it('on PostgreSQL', async () => {
    await pgMigratedFrom(await ledgers.url(), 22, seed(ids), async (client) => {
      const rows: unknown[][] = [];
      for (const sql of [
        'SELECT hash, raw FROM transaction_bytes ORDER BY hash',
        `SELECT t.payout_id, t.state, t.fee, t.broadcast_at::int8 AS broadcast_at, b.raw = '${RAW}' AS same FROM transactions t JOIN transaction_bytes b ON b.hash = t.hash WHERE t.hash = '${HASH}' ORDER BY t.payout_id`,
        'SELECT COUNT(*) AS n FROM transactions',
      ]) {
        rows.push((await client.query(sql)).rows.map((r) => ('broadcast_at' in r ? { ...r, broadcast_at: Number(r.broadcast_at) } : r)));
      }
      let i = 0;
      expectMigrated(() => rows[i++]!);
    });
  });
});
