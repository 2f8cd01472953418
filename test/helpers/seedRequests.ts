import type pg from 'pg';
import { getAddress, keccak256, toHex, zeroAddress } from 'viem';
import type { SqlDb as Db } from '../../src/ledger/sqlDb.ts';

// A large synthetic ledger for listing tests and benchmarks: `rows` requests spread over chains,
// users, statuses and currencies, most with a deposit, the successes with a fill and its transaction.
// Rows are created from `start` (ms), 25 ms apart; their ids are keccak("<prefix>req<i>").
// One definition of the rows (syntheticRows), written two ways: row by row through the ledger's
// connection (seedRequests: SQLite, or any SqlDb) and in bulk, one statement per table and chunk,
// straight to PostgreSQL (seedRequestsPostgres: row by row through the synchronous bridge costs a
// round trip per row, hours for a million).

const CHAINS = [8453, 10, 1, 42161, 137];
const STATUSES = ['success', 'success', 'success', 'success', 'refund', 'failure', 'waiting', 'pending'];
const SYMBOLS = ['ETH', 'USDC', 'WETH'];
const DEFAULT_START = Date.UTC(2026, 0, 1);

/** The wallets the seeded requests belong to. */
export const SEED_USERS = Array.from({ length: 20_000 }, (_, i) => getAddress(`0x${(i + 1).toString(16).padStart(40, '0')}`));

/** One table's row: column name → value (numbers for INTEGER/BIGINT columns, strings, or null). */
type Row = Record<string, string | number | null>;

/** The rows of seeded request number `i`: the request, and (when it has them) its deposit, its fill payout and the fill's transaction. */
export function syntheticRows(
  i: number,
  opts: { prefix?: string; start?: number } = {},
): { requests: Row; deposits?: Row; payouts?: Row; transaction_bytes?: Row; transactions?: Row } {
  const prefix = opts.prefix ?? '';
  const h = (s: string) => keccak256(toHex(`${prefix}${s}`));
  const id = h(`req${i}`);
  const origin = CHAINS[i % CHAINS.length]!;
  const dest = CHAINS[(i * 7 + 1) % CHAINS.length]!;
  const status = STATUSES[i % STATUSES.length]!;
  const user = SEED_USERS[(i * 31) % SEED_USERS.length]!;
  const created = (opts.start ?? DEFAULT_START) + i * 25;
  const hasDeposit = status !== 'waiting';
  const requests: Row = {
    id,
    parent_id: null,
    kind: 'order',
    request_type: 'Bridge',
    status,
    user,
    recipient: user,
    refund_to: user,
    origin_chain_id: origin,
    destination_chain_id: dest,
    origin_currency: zeroAddress,
    destination_currency: zeroAddress,
    trade_type: 'EXACT_INPUT',
    amount_in: '1000',
    amount_out: '990',
    min_amount_out: '980',
    created_at: created,
    updated_at: created + 5000,
    features: '[]',
    amount_usd: 1_000_000 + ((i * 7919) % 5_000_000_000),
    app_fees_usd: 0,
    currency_in_symbol: SYMBOLS[i % 3]!,
    currency_out_symbol: SYMBOLS[(i >> 1) % 3]!,
    sender: hasDeposit ? user : null,
    deposit_block: hasDeposit ? 1000 + i : null,
    fill_time_ms: status === 'success' ? 4000 + (i % 5000) : null,
    fail_reason: status === 'refund' || status === 'failure' ? 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL' : null,
  };
  if (!hasDeposit) return { requests };
  const dep = `${origin}:${prefix}dep${i}`;
  const deposits: Row = {
    id: dep,
    chain_id: origin,
    tx_hash: h(`deptx${i}`),
    log_index: 0,
    block_number: 1000 + i,
    block_hash: h(`blk${i}`),
    depositor: user,
    currency: zeroAddress,
    amount: '1000',
    order_ref: id,
    state: 'handled',
    request_id: id,
    seen_at: created + 1000,
    confirmed_at: created + 2000,
  };
  if (status !== 'success') return { requests, deposits };
  const fillTx = h(`filltx${i}`);
  const payouts: Row = {
    id: `fill:${id}`,
    kind: 'fill',
    request_id: id,
    deposit_id: dep,
    chain_id: dest,
    recipient: user,
    currency: zeroAddress,
    amount: '990',
    state: 'success',
    tx_hash: fillTx,
    decided_at: created + 2000,
    updated_at: created + 5000,
  };
  const transactions: Row = {
    hash: fillTx,
    payout_id: `fill:${id}`,
    chain_id: dest,
    sender: user,
    nonce: i,
    gas_limit: '21000',
    max_fee_per_gas: '1',
    max_priority_fee_per_gas: '1',
    state: 'included',
    block_number: 2000 + i,
    gas_used: '21000',
    fee: '21000',
    created_at: created + 3000,
    updated_at: created + 5000,
  };
  // The transaction's signed bytes, stored once per hash (migration 23).
  const transaction_bytes: Row = { hash: fillTx, raw: '0x' };
  return { requests, deposits, payouts, transaction_bytes, transactions };
}

/** The tables in the order their rows reference one another. */
const TABLES = ['requests', 'deposits', 'payouts', 'transaction_bytes', 'transactions'] as const;

/** A column list, quoted: `user` is a reserved word in PostgreSQL (and quoting is the same in SQLite). */
const columnList = (row: Row) =>
  Object.keys(row)
    .map((c) => `"${c}"`)
    .join(', ');

/** What the seeded request number `i` is: its id, wallet, status and (when it has them) deposit and fill hashes. */
export function seededRequest(i: number, prefix = ''): { id: string; user: string; status: string; depositTx?: string; fillTx?: string } {
  const r = syntheticRows(i, { prefix });
  return {
    id: r.requests.id as string,
    user: r.requests.user as string,
    status: r.requests.status as string,
    depositTx: (r.deposits?.tx_hash as string | undefined) ?? undefined,
    fillTx: (r.payouts?.tx_hash as string | undefined) ?? undefined,
  };
}

/** Inserts `rows` synthetic requests (with deposits, fills and transactions) row by row, in transactions of 20,000; returns how many. */
export function seedRequests(db: Db, rows: number, opts: { prefix?: string; start?: number } = {}): number {
  const sample = syntheticRows(0, opts); // request 0 is a success: it has a row in every table
  const insert = Object.fromEntries(
    TABLES.map((t) => {
      const row = sample[t]!;
      const values = Object.keys(row)
        .map((c) => `@${c}`)
        .join(', ');
      return [t, db.prepare(`INSERT INTO ${t} (${columnList(row)}) VALUES (${values})`)];
    }),
  );
  const BATCH = 20_000;
  for (let b = 0; b < rows; b += BATCH) {
    db.transaction(() => {
      for (let i = b; i < Math.min(rows, b + BATCH); i++) {
        const r = syntheticRows(i, opts);
        for (const t of TABLES) if (r[t]) insert[t]!.run(r[t]);
      }
    })();
  }
  return rows;
}

/**
 * Inserts the same rows as seedRequests into a migrated PostgreSQL ledger, in bulk: per chunk of requests one
 * statement per table (json_populate_recordset: the table's own column types read the values). The next chunk is
 * generated while the server inserts this one. Run ANALYZE afterwards. Returns how many requests.
 */
export async function seedRequestsPostgres(client: pg.Client, rows: number, opts: { prefix?: string; start?: number; chunk?: number } = {}): Promise<number> {
  const sample = syntheticRows(0, opts);
  const CHUNK = opts.chunk ?? 10_000;
  let inserting: Promise<unknown> = Promise.resolve();
  for (let b = 0; b < rows; b += CHUNK) {
    const chunk: Record<(typeof TABLES)[number], Row[]> = { requests: [], deposits: [], payouts: [], transaction_bytes: [], transactions: [] };
    for (let i = b; i < Math.min(rows, b + CHUNK); i++) {
      const r = syntheticRows(i, opts);
      for (const t of TABLES) if (r[t]) chunk[t].push(r[t]);
    }
    await inserting;
    // Each table's statement after the one its rows reference, while this loop generates the next chunk.
    inserting = (async () => {
      for (const t of TABLES) {
        if (!chunk[t].length) continue;
        const cols = columnList(sample[t]!);
        await client.query(`INSERT INTO ${t} (${cols}) SELECT ${cols} FROM json_populate_recordset(NULL::${t}, $1::json)`, [JSON.stringify(chunk[t])]);
      }
    })();
  }
  await inserting;
  return rows;
}

/**
 * The heaviest listing the cost bound allows: `term` (the costliest field: seven subqueries per
 * value) with as many wallet values as fit in maxGroups groups, maxValuesPerField per field,
 * maxFilterValues in all and maxFiltersLength characters; the total counted; sorted by amount.
 */
export function heaviestListing(bounds: { maxGroups: number; maxValuesPerField: number; maxFilterValues: number; maxFiltersLength: number }, salt = 0): string {
  const groups: { term: string[] }[] = [];
  let n = 0;
  const fits = (next: unknown) => JSON.stringify(next).length <= bounds.maxFiltersLength;
  outer: for (let g = 0; g < bounds.maxGroups; g++) {
    groups.push({ term: [] });
    for (let v = 0; v < bounds.maxValuesPerField; v++) {
      if (n >= bounds.maxFilterValues) break outer;
      const value = SEED_USERS[(salt * 997 + n * 131) % SEED_USERS.length]!.toLowerCase();
      groups[g]!.term.push(value);
      if (!fits(groups)) {
        groups[g]!.term.pop();
        if (groups[g]!.term.length === 0) groups.pop();
        break outer;
      }
      n++;
    }
  }
  return `filters=${encodeURIComponent(JSON.stringify(groups))}&includeTotal=true&sortBy=amountUsd&limit=50`;
}
