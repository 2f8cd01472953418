// The loss breaker's ledger read per chain check (every 2 s per chain), on a large synthetic ledger:
// the audit's difference (src/audit/auditDifference.ts: the books of the solver's wallet) beside
// balance drift's read. It runs on the event loop, so it is what a check costs the node.
// Usage: npx tsx bench/loss-breaker-books.ts [requests]   (100,000 by default: 10,000 payouts per chain)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger } from '../src/ledger/index.ts';
import { seedRequests } from '../test/helpers/seedRequests.ts';
import { solverBooks } from '../src/audit/evmAudit.ts';
import type { PayoutRow } from '../src/ledger/types.ts';
const dir = mkdtempSync(join(tmpdir(), 'relay-bench-books-'));
const ledger = Ledger.open(join(dir, 'l.db'));
const n = Number(process.argv[2] ?? 100000);
seedRequests(ledger.db, n);
const chain = 10;
const cnt = ledger.db.prepare(`SELECT COUNT(*) AS c FROM payouts WHERE chain_id = ?`).get(chain) as { c: number };
const sender = (ledger.db.prepare(`SELECT sender FROM transactions WHERE chain_id = ? LIMIT 1`).get(chain) as { sender: string }).sender;
const currencies = (ledger.db.prepare(`SELECT DISTINCT currency FROM payouts WHERE chain_id = ?`).all(chain) as { currency: string }[]).map((r) => r.currency);
function audit() {
  const payouts = ledger.db
    .prepare(
      `SELECT id, kind, currency, amount, native_topup, CASE WHEN calls IS NULL THEN NULL ELSE '1' END AS calls, state FROM payouts WHERE chain_id = ? AND state IN ('success', 'sent')`,
    )
    .all(chain) as PayoutRow[];
  const credits = ledger.funding.all().filter((c) => c.chain_id === chain);
  const txs = ledger.db
    .prepare(
      `SELECT hash, MAX(state) AS state, MAX(fee) AS fee, MAX(gas_limit) AS gas_limit, MAX(max_fee_per_gas) AS m FROM transactions WHERE chain_id = ? AND lower(sender) = lower(?) GROUP BY hash`,
    )
    .all(chain, sender);
  const paid = payouts.filter((p) => p.state === 'success');
  for (const c of currencies) solverBooks(paid, credits, c);
  return txs.length;
}
function drift() {
  ledger.db
    .prepare(`SELECT currency, amount, native_topup, state FROM payouts WHERE chain_id = ? AND kind IN ('fill', 'claim') AND state IN ('success', 'sent')`)
    .all(chain);
  return ledger.db.prepare(`SELECT state, fee, gas_limit, max_fee_per_gas FROM transactions WHERE chain_id = ? AND lower(sender) = lower(?)`).all(chain, sender)
    .length;
}
for (const [name, f] of [
  ['BalanceDrift ledger read', drift],
  ['AuditDifference books', audit],
] as const) {
  f();
  const t = performance.now();
  for (let i = 0; i < 10; i++) f();
  console.log(
    `${name}: ${((performance.now() - t) / 10).toFixed(1)} ms per check of chain ${chain} (${cnt.c} payouts on it, ${n} requests seeded, ${currencies.length} currencies)`,
  );
}
ledger.close();
rmSync(dir, { recursive: true, force: true });
