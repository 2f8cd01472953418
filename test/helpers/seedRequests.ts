import { getAddress, keccak256, toHex, zeroAddress } from 'viem';
import type { SqlDb as Db } from '../../src/ledger/sqlDb.ts';

// A large synthetic ledger for listing tests and benchmarks: `rows` requests spread over chains,
// users, statuses and currencies, most with a deposit, the successes with a fill and its transaction.
// Rows are created from `start` (ms), 25 ms apart; their ids are keccak("<prefix>req<i>").

const CHAINS = [8453, 10, 1, 42161, 137];
const STATUSES = ['success', 'success', 'success', 'success', 'refund', 'failure', 'waiting', 'pending'];
const SYMBOLS = ['ETH', 'USDC', 'WETH'];

/** The wallets the seeded requests belong to. */
export const SEED_USERS = Array.from({ length: 20_000 }, (_, i) => getAddress(`0x${(i + 1).toString(16).padStart(40, '0')}`));

/** What the seeded request number `i` is: its id, wallet, status and (when it has them) deposit and fill hashes. */
export function seededRequest(i: number, prefix = ''): { id: string; user: string; status: string; depositTx?: string; fillTx?: string } {
  const h = (s: string) => keccak256(toHex(`${prefix}${s}`));
  const status = STATUSES[i % STATUSES.length]!;
  return {
    id: h(`req${i}`),
    user: SEED_USERS[(i * 31) % SEED_USERS.length]!,
    status,
    depositTx: status !== 'waiting' ? h(`deptx${i}`) : undefined,
    fillTx: status === 'success' ? h(`filltx${i}`) : undefined,
  };
}

/** Inserts `rows` synthetic requests (with deposits, fills and transactions) in batches; returns how many. */
export function seedRequests(db: Db, rows: number, opts: { prefix?: string; start?: number } = {}): number {
  const prefix = opts.prefix ?? '';
  const start = opts.start ?? Date.UTC(2026, 0, 1);
  const h = (s: string) => keccak256(toHex(`${prefix}${s}`));
  const insertReq = db.prepare(`INSERT INTO requests (id, parent_id, kind, request_type, status, user, recipient, refund_to,
    origin_chain_id, destination_chain_id, origin_currency, destination_currency, trade_type, amount_in, amount_out, min_amount_out,
    created_at, updated_at, features, amount_usd, app_fees_usd, currency_in_symbol, currency_out_symbol, sender, deposit_block, fill_time_ms, fail_reason)
    VALUES (?, NULL, 'order', 'Bridge', ?, ?, ?, ?, ?, ?, ?, ?, 'EXACT_INPUT', ?, ?, ?, ?, ?, '[]', ?, 0, ?, ?, ?, ?, ?, ?)`);
  const insertDep = db.prepare(`INSERT INTO deposits (id, chain_id, tx_hash, log_index, block_number, block_hash, depositor, currency, amount,
    order_ref, state, request_id, seen_at, confirmed_at) VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, 'handled', ?, ?, ?)`);
  const insertPay = db.prepare(`INSERT INTO payouts (id, kind, request_id, deposit_id, chain_id, recipient, currency, amount, state, tx_hash,
    decided_at, updated_at) VALUES (?, 'fill', ?, ?, ?, ?, ?, ?, 'success', ?, ?, ?)`);
  const insertTx = db.prepare(`INSERT INTO transactions (hash, payout_id, chain_id, sender, nonce, raw, gas_limit, max_fee_per_gas,
    max_priority_fee_per_gas, state, block_number, gas_used, fee, created_at, updated_at) VALUES (?, ?, ?, ?, ?, '0x', '21000', '1', '1', 'included', ?, '21000', '21000', ?, ?)`);
  const BATCH = 20_000;
  for (let b = 0; b < rows; b += BATCH) {
    db.transaction(() => {
      for (let i = b; i < Math.min(rows, b + BATCH); i++) {
        const id = h(`req${i}`);
        const origin = CHAINS[i % CHAINS.length]!;
        const dest = CHAINS[(i * 7 + 1) % CHAINS.length]!;
        const status = STATUSES[i % STATUSES.length]!;
        const user = SEED_USERS[(i * 31) % SEED_USERS.length]!;
        const created = start + i * 25;
        const usd = 1_000_000 + ((i * 7919) % 5_000_000_000);
        const hasDeposit = status !== 'waiting';
        insertReq.run(
          id,
          status,
          user,
          user,
          user,
          origin,
          dest,
          zeroAddress,
          zeroAddress,
          '1000',
          '990',
          '980',
          created,
          created + 5000,
          usd,
          SYMBOLS[i % 3]!,
          SYMBOLS[(i >> 1) % 3]!,
          hasDeposit ? user : null,
          hasDeposit ? 1000 + i : null,
          status === 'success' ? 4000 + (i % 5000) : null,
          status === 'refund' || status === 'failure' ? 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL' : null,
        );
        if (!hasDeposit) continue;
        const dep = `${origin}:${prefix}dep${i}`;
        insertDep.run(dep, origin, h(`deptx${i}`), 1000 + i, h(`blk${i}`), user, zeroAddress, '1000', id, id, created + 1000, created + 2000);
        if (status === 'success') {
          const fillTx = h(`filltx${i}`);
          insertPay.run(`fill:${id}`, id, dep, dest, user, zeroAddress, '990', fillTx, created + 2000, created + 5000);
          insertTx.run(fillTx, `fill:${id}`, dest, user, i, 2000 + i, created + 3000, created + 5000);
        }
      }
    })();
  }
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
