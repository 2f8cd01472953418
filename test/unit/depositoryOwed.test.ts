// What the depository owes the solver (inventory, the withdrawal threshold): kept by the ledger as
// payouts, deposits and withdrawals change, each change an entry, so reading it costs what changed.
import { describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/index.ts';
import { seedRequests } from '../helpers/seedRequests.ts';

// The definition, read the slow way: every handled deposit checked against its payouts.
function reference(db: ReturnType<typeof Ledger.open>['db'], chainId: number): Map<string, bigint> {
  const rows = db
    .prepare(`SELECT d.currency, d.amount, (SELECT x.amount FROM payouts x WHERE x.deposit_id = d.id AND x.kind = 'excess' AND x.state = 'success') AS excess
      FROM deposits d WHERE d.chain_id = ? AND d.state = 'handled'
        AND EXISTS (SELECT 1 FROM payouts f WHERE f.deposit_id = d.id AND f.kind = 'fill' AND f.state = 'success')
        AND NOT EXISTS (SELECT 1 FROM withdrawn_deposits w WHERE w.deposit_id = d.id)
        AND NOT EXISTS (SELECT 1 FROM payouts r WHERE r.deposit_id = d.id AND r.kind = 'refund')
        AND NOT EXISTS (SELECT 1 FROM payouts x WHERE x.deposit_id = d.id AND x.kind = 'excess' AND x.state != 'success')`)
    .all(chainId) as { currency: string; amount: string; excess: string | null }[];
  const out = new Map<string, bigint>();
  for (const r of rows) {
    const owed = BigInt(r.amount) - BigInt(r.excess ?? 0);
    if (owed > 0n) out.set(r.currency.toLowerCase(), (out.get(r.currency.toLowerCase()) ?? 0n) + owed);
  }
  return out;
}

describe('what the depository owes the solver', () => {
  it('follows every change of payouts, deposits and withdrawals, and reads only what changed', () => {
    const ledger = Ledger.open(':memory:');
    const db = ledger.db;
    seedRequests(db, 400);
    const chain = 8453;
    const check = () => {
      const want = reference(db, chain);
      expect(ledger.withdrawals.owedByCurrency(chain)).toEqual(want);
      const listed = ledger.withdrawals.owed(chain);
      expect(listed.reduce((a, d) => a + d.owed, 0n)).toBe([...want.values()].reduce((a, v) => a + v, 0n));
    };
    check();
    expect(reference(db, chain).size).toBeGreaterThan(0);

    const owedDeposit = ledger.withdrawals.owed(chain)[0]!;
    const request = (db.prepare('SELECT request_id FROM deposits WHERE id = ?').get(owedDeposit.id) as { request_id: string }).request_id;
    const insert = db.prepare(`INSERT INTO payouts (id, kind, request_id, deposit_id, chain_id, recipient, currency, amount, state, decided_at, updated_at)
      VALUES (?, ?, ?, ?, ?, '0x0000000000000000000000000000000000000001', '0x0000000000000000000000000000000000000000', ?, ?, 1, 1)`);
    // An excess being returned: not owed until it is paid, then owed less the excess.
    insert.run('excess:1', 'excess', request, owedDeposit.id, chain, '300', 'queued');
    check();
    db.prepare(`UPDATE payouts SET state = 'success' WHERE id = 'excess:1'`).run();
    check();
    // Taken by a withdrawal, then released by its failure.
    db.prepare(`INSERT INTO payouts (id, kind, chain_id, recipient, currency, amount, state, decided_at, updated_at)
      VALUES ('withdrawal:1', 'withdrawal', ?, '0x0000000000000000000000000000000000000001', '0x0000000000000000000000000000000000000000', '700', 'queued', 1, 1)`).run(
      chain,
    );
    ledger.withdrawals.take([owedDeposit.id], 'withdrawal:1');
    check();
    ledger.withdrawals.release('withdrawal:1');
    check();
    // A reorged deposit, a refunded one, and a new fill that succeeds.
    const [a, b] = (
      db.prepare(`SELECT id FROM deposits WHERE chain_id = ? AND state = 'handled' AND id != ? LIMIT 2`).all(chain, owedDeposit.id) as { id: string }[]
    ).map((r) => r.id);
    db.prepare(`UPDATE deposits SET state = 'reorged' WHERE id = ?`).run(a);
    check();
    insert.run('refund:b', 'refund', null, b, chain, '1000', 'queued');
    check();
    const pending = db
      .prepare(`SELECT d.id, d.request_id FROM deposits d WHERE d.chain_id = ? AND d.state = 'handled'
      AND NOT EXISTS (SELECT 1 FROM payouts p WHERE p.deposit_id = d.id) LIMIT 1`)
      .get(chain) as { id: string; request_id: string };
    insert.run('fill:new', 'fill', pending.request_id, pending.id, chain, '990', 'sent');
    check();
    db.prepare(`UPDATE payouts SET state = 'success' WHERE id = 'fill:new'`).run();
    check();

    // A second reader of the same ledger starts from the entries and agrees.
    expect(new (ledger.withdrawals.constructor as new (d: typeof db) => typeof ledger.withdrawals)(db).owedByCurrency(chain)).toEqual(reference(db, chain));
    // Reads by index, not a scan of every payout per deposit (that took minutes on 20,000 requests).
    const plan = (sql: string) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail).join('; ');
    expect(plan(`SELECT * FROM depository_owed_entries WHERE seq > 5 ORDER BY seq`)).not.toMatch(/SCAN depository_owed_entries(?! USING)/);
    expect(plan(`SELECT 1 FROM payouts x WHERE x.deposit_id = 'd' AND x.kind = 'excess' AND x.state != 'success'`)).toMatch(
      /USING (COVERING )?INDEX payouts_deposit/,
    );
    ledger.close();
  });
});
