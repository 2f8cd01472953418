import type { PayoutRow } from '../ledger/types.ts';
import type { Logger } from '../log.ts';
import type { FailReason, FailReasonOf } from '../ledger/reasons.ts';

/**
 * What the pipeline reports about a payout (the solver implements it). Each hook runs inside the ledger
 * transaction that records the transaction's new state, so the request's status and the transaction never disagree.
 */
export interface PayoutHooks {
  /** The payout's first transaction is signed and recorded; it is about to be broadcast. */
  onSigned(payout: PayoutRow, txHash: string): void;
  /** The payout's transaction is included and succeeded. */
  onPaid(payout: PayoutRow, txHash: string, fee: bigint): void;
  /**
   * The payout cannot be made; reason is the interface's failReason.
   * callData: the calldata of the fill that reverted, for the request record.
   */
  onFailed(payout: PayoutRow, reason: FailReason, txHash?: string, callData?: string): void;
  /**
   * Whether a queued payout may be signed now (absent: always). The chain registry holds a payout of a deposit until the
   * deposit's chain has been read for reorgs since the start (ChainRegistry).
   */
  mayPay?(payout: PayoutRow): boolean;
}

/** Why a payout failed before or after sending: the interface's `failReason` values a sender gives. */
export type PayoutFailReason = FailReasonOf<
  | 'TRANSACTION_SUBMISSION_FAILED'
  | 'TRANSACTION_REVERTED'
  | 'EXECUTION_REVERTED'
  | 'TRANSACTION_TOO_LARGE'
  | 'QUOTED_GAS_LIMIT_EXCEEDED'
  | 'INVALID_SIGNATURE'
  | 'TRANSFER_FROM_FAILED'
  | 'NEW_CALLDATA_INCLUDES_HIGHER_RENT_FEE'
  // A sponsored relay not signed within its chain's relayMaxWaitMs (src/chains/evm/relayTerms.ts, relayExpiry).
  | 'TTL_EXPIRED'
  // A fill still unsigned past its order's output deadline (the request's fill_deadline): the pipeline fails it.
  | 'PROTOCOL_DEADLINE_EXPIRED'
>;

/**
 * Why a payout waits and is tried again later (its log line and metric):
 * `rpc` a provider failed (counted in `relay_rpc_errors_total{method="prepare"}`); `fee-cap` the chain's
 * fee cap holds it (`relay_payout_fee_cap_waits_total{stage="send"}`); `no-funds` the solver lacks funds
 * for it now; `unconfirmed` the chain says it is paid but the payment is not found yet.
 */
export type PostponeReason = 'rpc' | 'fee-cap' | 'no-funds' | 'unconfirmed';

/** Try again after the pipeline's backoff. */
export interface Retry {
  kind: 'retry';
  cause: unknown;
  why: PostponeReason;
}

/** The payout can never be sent: the pipeline fails it with `reason` (one ledger transaction, `onFailed` once). */
export interface Unpayable {
  kind: 'unpayable';
  reason: PayoutFailReason;
  detail: string;
  /** The calldata that reverted, for the request record. */
  callData?: string;
  /**
   * Checked again inside the ledger transaction that fails the payout, on its row as read there: false leaves the
   * payout as it is (a decision read outside that transaction, such as a relay's deadline, holds only if still true).
   */
  stillHolds?: (current: PayoutRow) => boolean;
}

/** What preparing a payout gave: what to sign, or why not now, or never, or nothing to send (`settled`: found paid). */
export type PrepareResult<P> = { kind: 'ready'; prepared: P } | Unpayable | Retry | { kind: 'settled' };

/**
 * What submitting gave: `recorded` the signed transaction is in the ledger with the payout's new state and
 * `onSigned` (one ledger transaction) and is ready to broadcast; `stale` the payout moved on, nothing recorded.
 */
export type SubmitResult<S> = { kind: 'recorded'; txHash: string; signed: S } | { kind: 'stale' } | Unpayable | Retry;

/** What broadcasting a recorded transaction gave: `sent` (or left to the confirm pass), or `requeued` (the chain refused it for now). */
export type BroadcastResult = { kind: 'sent' } | { kind: 'requeued'; payoutId: string; cause: unknown; why: PostponeReason };

/**
 * What a confirm pass decided about one open transaction: `paid` the payout settled; `pending` still open;
 * `reverted` failed on chain; `dropped` can never land (the payout stays sent while another transaction may);
 * `requeued` can never land and the payout is queued again (to be retried after backoff when `cause` is given).
 */
export type TxStatus =
  | { kind: 'paid' | 'pending' | 'reverted' | 'dropped'; payoutId: string; txHash: string }
  | { kind: 'requeued'; payoutId: string; txHash: string; cause?: unknown; why?: PostponeReason };

/**
 * What submitting several payouts as one transaction gave: `recorded` (for every payout, in one ledger
 * transaction, before broadcast); `alone` send each on its own (the batch reverts, or waits on a cap);
 * `split` too big: send these smaller batches one after the other; `stale` a payout moved on, nothing
 * recorded; `retry` all of them later.
 */
export type BatchResult<S> =
  | { kind: 'recorded'; txHash: string; signed: S }
  | { kind: 'alone' }
  | { kind: 'split'; parts: PayoutRow[][] }
  | { kind: 'stale' }
  | Retry;

/**
 * Payouts that wait together leave together (the EVM's fill batches). A batch is never waited for: a
 * batchable payout leaves at once when one of `slots` is free, and those arriving while all are busy leave
 * together, up to `maxPayouts`, in the next one.
 */
export interface BatchSending<S> {
  readonly maxPayouts: number;
  readonly slots: number;
  /** Whether this payout may ride in a batch. */
  batchable(payout: PayoutRow): boolean;
  /** Throws UnpayableError when the payout can never be sent (it then fails alone, before the batch). */
  check(payout: PayoutRow): void;
  /** Prepares, signs and records two or more checked payouts as one transaction. */
  submitBatch(payouts: PayoutRow[], ctx: StepContext): Promise<BatchResult<S>>;
}

/** What the pipeline hands a sender's steps: a logger naming the payout, and whether the pipeline is stopping. */
export interface StepContext {
  log: Logger;
  stopped(): boolean;
}

/**
 * One chain's way of paying (the port the payout pipeline drives, in the shape of Hyperlane's relayer:
 * prepare → submit → confirm). The sender builds, signs and records; the pipeline decides when, how often,
 * and what a failure means.
 *
 * Ledger rule: `submit` records the signed transaction, the payout's `sent` state and `onSigned` in one
 * ledger transaction before returning `recorded`; nothing reaches the chain before `broadcast`.
 */
export interface PayoutSender<P, S> {
  readonly chainId: number;
  /** The solver's address on the chain (the sender of its transactions). */
  readonly address: string;
  /** For log lines ('svm', 'exchange', ...). */
  readonly label: string;
  /** Before anything else (nonces, caches). */
  init?(): Promise<void>;
  /** After the first confirm pass and before the first payout is sent (the EVM's allowances). */
  ready?(): Promise<void>;
  /** Reads what the payout needs and checks it can be paid; takes no nonce and writes nothing. */
  prepare(payout: PayoutRow, ctx: StepContext): Promise<PrepareResult<P>>;
  /** Signs and records (see the ledger rule above). */
  submit(payout: PayoutRow, prepared: P, ctx: StepContext): Promise<SubmitResult<S>>;
  /** Sends what `submit` recorded, and only that. */
  broadcast(signed: S, ctx: StepContext): Promise<BroadcastResult>;
  /** One confirm pass over the chain's open transactions: settles, rebroadcasts, replaces, requeues. */
  confirm(ctx: StepContext): Promise<TxStatus[]>;
  /** Sends several payouts in one transaction, when the chain can. */
  readonly batch?: BatchSending<S>;
  /** How a thrown error of a step is counted (default `rpc`). */
  classify?(err: unknown): PostponeReason;
}
