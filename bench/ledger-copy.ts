// relay-node db copy's throughput: a synthetic SQLite ledger of N requests (with their deposits,
// fills and transactions; 100,000 by default) copied into a fresh, durable (fsync on) PostgreSQL and
// verified, timed from the first read to the commit.
// Usage: npx tsx bench/ledger-copy.ts [requests]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startPostgres } from '../src/devnet/postgres.ts';
import { openDb } from '../src/ledger/db.ts';
import { Ledger } from '../src/ledger/index.ts';
import { copySqliteToPostgres } from '../src/ledger/pgCopy.ts';
import { seedRequests } from '../test/helpers/seedRequests.ts';

const n = Number(process.argv[2] ?? 100_000);
const dir = mkdtempSync(join(tmpdir(), 'relay-copy-bench-'));
const file = join(dir, 'ledger.sqlite');
const server = await startPostgres({ durable: true });
try {
  const seeded = Ledger.open(file);
  seedRequests(seeded.db, n);
  seeded.close();
  const client = new pg.Client({ connectionString: await server.createDatabase() });
  await client.connect();
  const source = openDb(file, { readonly: true });
  try {
    const t0 = performance.now();
    const r = await copySqliteToPostgres(source, client);
    const s = (performance.now() - t0) / 1000;
    const rows = r.tables.reduce((a, t) => a + t.rows, 0);
    console.log(`${n} requests: ${rows} rows in ${r.tables.length} tables copied and verified in ${s.toFixed(1)} s (${Math.round(rows / s)} rows/s)`);
  } finally {
    source.close();
    await client.end();
  }
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
