// Rows for the Status record's tests (src/ledger/statusRecord.test.ts, src/ledger/postgres/statusCache.test.ts): a
// waiting bridge order and the deposits seen for it, on chain 8453 to 10, from and to one user.
import type { NewDeposit } from '../../src/ledger/deposits.ts';
import type { NewPayout } from '../../src/ledger/payouts.ts';
import type { NewRequest } from '../../src/ledger/requests.ts';

/** `n` as a 0x hex string of `bytes` bytes. */
export const hex = (n: number, bytes = 32) => `0x${n.toString(16).padStart(bytes * 2, '0')}` as `0x${string}`;
export const USER = hex(7, 20);

/** A bridge order `id`, waiting, created at `createdAt`; `expiresAt` set, a pruner may take it once unused. */
export function waitingOrder(id: `0x${string}`, createdAt: number, opts: { kind?: 'order' | 'orphan'; expiresAt?: number } = {}): NewRequest {
  return {
    id,
    parent_id: null,
    kind: opts.kind ?? 'order',
    request_type: 'bridge',
    status: 'waiting',
    user: USER,
    recipient: USER,
    refund_to: USER,
    origin_chain_id: 8453,
    destination_chain_id: 10,
    origin_currency: hex(0, 20),
    destination_currency: hex(0, 20),
    trade_type: 'EXACT_INPUT',
    amount_in: '100',
    amount_out: '99',
    min_amount_out: '98',
    pricing: null,
    order_data: null,
    quote: '{"a large quote":"not read by the status"}',
    expires_at: opts.expiresAt ?? null,
    fill_deadline: null,
    created_at: createdAt,
  };
}

/** A deposit of 100 in transaction `tx` (log `logIndex`, block `block`) for `orderRef`. */
export const depositFor = (tx: number, logIndex: number, block: number, orderRef: `0x${string}`): NewDeposit => ({
  id: `8453:${hex(tx)}:${logIndex}`,
  chain_id: 8453,
  tx_hash: hex(tx),
  log_index: logIndex,
  block_number: block,
  block_hash: hex(1000 + block),
  depositor: USER,
  currency: hex(0, 20),
  amount: '100',
  order_ref: orderRef,
  seen_at: 2_000 + tx,
});

/** A fill of 99 on chain 10 to the user, payout `id` of request `requestId` for `depositId`, decided at `decidedAt`. */
export const fillPayout = (id: string, requestId: `0x${string}`, depositId: string, decidedAt: number): NewPayout => ({
  id,
  kind: 'fill',
  request_id: requestId,
  deposit_id: depositId,
  chain_id: 10,
  recipient: USER,
  currency: hex(0, 20),
  amount: '99',
  decided_at: decidedAt,
});
