import type { Hex } from 'viem';
import type { FailReason, RefundFailReason } from './reasons.ts';

export const STATUSES = ['waiting', 'depositing', 'pending', 'submitted', 'success', 'failure', 'refund'] as const;
export type Status = (typeof STATUSES)[number];

export type RequestKind = 'order' | 'orphan' | 'extra';

/** What the quote fixed, so the solver can price whatever amount actually arrives the same way. */
export interface Pricing {
  /** output = input * rateNum / rateDen, in smallest units */
  rateNum: string;
  rateDen: string;
  serviceBps: number;
  /** destination gas for the fill, already converted to output currency units */
  gasFeeOut: string;
  gasFeeUsd: string;
  /**
   * Account rent the quote charged for the fill (the destination's native smallest unit; part of
   * gasFeeOut): '0' when the fill was quoted to create no account, so its payout may create none.
   * Absent on requests priced before it was recorded.
   */
  rent?: string;
  /** App fees: each recipient's share of the output value, in basis points. */
  appFees?: { recipient: string; bps: number }[];
  /** Gas top-up: the native amount delivered with the fill, and its price in output units. */
  topUpNative?: string;
  topUpOut?: string;
  /** Swaps: the rate is re-read at fill time (prices move), less the node's spread. */
  swap?: { spreadBps: number };
  /** Fee sponsorship: which components the sponsor pays, up to capOut (output units). */
  sponsor?: { components: ('execution' | 'platform')[]; capOut: string };
  /**
   * An open deposit address's template: the gas its fee priced, in native units (the fill's on the destination, at
   * `feePerGas` where it has a gas market; the sweep's on the origin), so that each arrival is charged today's.
   * `fillNative` includes `l1Native`, an L1 data fee (OP-stack chains) that moves with the chain's reference L1 fee
   * (`l1Reference` then), not with the fee per gas.
   */
  openGas?: { fillNative: string; feePerGas?: string; sweepNative: string; l1Native?: string; l1Reference?: string };
}

export interface RequestRow {
  id: Hex;
  parent_id: Hex | null;
  kind: RequestKind;
  request_type: string;
  status: Status;
  fail_reason: FailReason | null;
  refund_fail_reason: RefundFailReason | null;
  details: string | null;
  user: string | null;
  recipient: string | null;
  refund_to: string | null;
  origin_chain_id: number;
  destination_chain_id: number;
  origin_currency: string;
  destination_currency: string;
  trade_type: string | null;
  amount_in: string;
  amount_out: string;
  min_amount_out: string;
  pricing: string | null;
  order_data: string | null;
  expires_at: number | null;
  fill_deadline: number | null;
  created_at: number;
  updated_at: number;
  /** JSON: what the quote fixed about sponsorship, app fees and top-up (migration 6). */
  money: string | null;
  /** JSON array of the interface's feature flags. */
  features: string;
  fast_fill_deadline: number | null;
  /**
   * The origin amount a fast fill was priced at (the caller's solverInputCurrencyAmount, or the quote's
   * amount_in), in the smallest unit; null until fast-filled (migration 27).
   */
  fast_fill_input: string | null;
  failed_call_data: string | null;
  /** The API key that quoted the request, and the referrer the quote named (migration 2). */
  api_key_id: string | null;
  referrer: string | null;
  /** Search columns (migration 3). */
  amount_usd: number | null;
  app_fees_usd: number | null;
  currency_in_symbol: string | null;
  currency_out_symbol: string | null;
  sender: string | null;
  deposit_block: number | null;
  deposit_address: string | null;
  fill_time_ms: number | null;
}

export type DepositState = 'unconfirmed' | 'confirmed' | 'handled' | 'reorged';

export interface DepositRow {
  id: string;
  chain_id: number;
  tx_hash: Hex;
  log_index: number;
  block_number: number;
  block_hash: Hex;
  depositor: string;
  currency: string;
  amount: string;
  order_ref: Hex;
  state: DepositState;
  request_id: Hex | null;
  seen_at: number;
  confirmed_at: number | null;
  /** The deposit transaction's fee in the origin chain's native smallest unit, once read. */
  tx_fee?: string | null;
}

export type PayoutKind = 'fill' | 'refund' | 'claim' | 'sweep' | 'excess' | 'deposit' | 'withdrawal' | 'relay';
export type PayoutState = 'queued' | 'sent' | 'success' | 'failed';

export interface PayoutRow {
  id: string;
  kind: PayoutKind;
  /** null for claims of app fees */
  request_id: Hex | null;
  deposit_id: string | null;
  chain_id: number;
  recipient: string;
  currency: string;
  amount: string;
  state: PayoutState;
  tx_hash: Hex | null;
  fail_reason: FailReason | null;
  decided_at: number;
  updated_at: number;
  native_topup: string | null;
  calls: string | null;
  max_gas: string | null;
  /** JSON: what authorizes a node-submitted deposit (migration 7). */
  authorization: string | null;
  /** The leader lease's epoch the payout was recorded under (migration 21); null without a lease (a single node). */
  epoch?: number | null;
  /** A swap's fill: the rate it paid at (fillAmount.ts rateText, migration 32); null: the quote's. */
  rate?: string | null;
  /**
   * A sponsored relay's: the most it may be signed at per gas (wei), the fee cap its sponsor's hold was computed with
   * (migration 36); null: no cap of its own (the chain's alone).
   */
  max_fee_per_gas?: string | null;
}

export type TxState = 'signed' | 'broadcast' | 'included' | 'reverted' | 'replaced' | 'dropped';

/** A row of `transactions`: one per payout a transaction carries. Its signed bytes are stored once per hash (Payouts.rawOf). */
export interface TransactionRow {
  hash: Hex;
  payout_id: string;
  chain_id: number;
  sender: string;
  nonce: number;
  gas_limit: string;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  state: TxState;
  sent_block: number | null;
  block_number: number | null;
  gas_used: string | null;
  fee: string | null;
  error: string | null;
  created_at: number;
  broadcast_at: number | null;
  updated_at: number;
  /** 1: a cancel of a fee-capped transaction at its nonce (a zero-value transfer to the solver), never the payout's payment. */
  cancel: 0 | 1;
}
