// The reasons the node records and reports: the interface's failReason and refundFailReason enums
// (exact names, intent-service-interface.md), and the node's own reasons for holding a deposit back.
// They live with the ledger, which stores them, so that the ledger, the solver, the chains and the
// API (which re-exports them from src/api/enums.ts) all check against the one list.

/** Every failReason the interface names, in its order. */
export const FAIL_REASONS = [
  'UNKNOWN',
  'SLIPPAGE',
  'AMOUNT_TOO_LOW_TO_REFUND',
  'DEPOSIT_ADDRESS_MISMATCH',
  'DEPOSIT_CHAIN_MISMATCH',
  'INCORRECT_DEPOSIT_CURRENCY',
  'DOUBLE_SPEND',
  'SOLVER_CAPACITY_EXCEEDED',
  'SOLVER_BALANCE_TOO_LOW',
  'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL',
  'NEGATIVE_NEW_AMOUNT_AFTER_FEES',
  'NO_QUOTES',
  'MISSING_REVERT_DATA',
  'REVERSE_SWAP_FAILED',
  'GENERATE_SWAP_FAILED',
  'TOO_LITTLE_RECEIVED',
  'EXECUTION_REVERTED',
  'NEW_CALLDATA_INCLUDES_HIGHER_RENT_FEE',
  'TRANSACTION_REVERTED',
  'TRANSACTION_TOO_LARGE',
  'ORIGIN_CURRENCY_MISMATCH',
  'NO_INTERNAL_SWAP_ROUTES_FOUND',
  'SWAP_USES_TOO_MUCH_GAS',
  'INSUFFICIENT_FUNDS_FOR_RENT',
  'SPONSOR_BALANCE_TOO_LOW',
  'ORDER_EXPIRED',
  'ORDER_IS_CANCELLED',
  'TRANSFER_FROM_FAILED',
  'TRANSFER_FAILED',
  'SIGNATURE_EXPIRED',
  'INVALID_SIGNATURE',
  'INSUFFICIENT_NATIVE_TOKENS_SUPPLIED',
  'TRANSFER_AMOUNT_EXCEEDS_ALLOWANCE',
  'TRANSFER_AMOUNT_EXCEEDS_BALANCE',
  'INVALID_SENDER',
  'ACCOUNT_ABSTRACTION_INVALID_NONCE',
  'ACCOUNT_ABSTRACTION_SIGNATURE_ERROR',
  'SEAPORT_INEXACT_FRACTION',
  'TOKEN_NOT_TRANSFERABLE',
  'ZERO_SELL_AMOUNT',
  'MINT_NOT_ACTIVE',
  'ERC_1155_TOO_MANY_REQUESTED',
  'INCORRECT_PAYMENT',
  'INVALID_GAS_PRICE',
  'FLUID_DEX_ERROR',
  'ORDER_ALREADY_FILLED',
  'SEAPORT_INVALID_FULFILLER',
  'INVALID_SIGNER',
  'MINT_QUANTITY_EXCEEDS_MAX_PER_WALLET',
  'MINT_QUANTITY_EXCEEDS_MAX_SUPPLY',
  'JUPITER_INVALID_TOKEN_ACCOUNT',
  'INVALID_NONCE',
  'ACCOUNT_ABSTRACTION_GAS_LIMIT',
  'CONTRACT_PAUSED',
  'SWAP_IMPACT_TOO_HIGH',
  'INSUFFICIENT_POOL_LIQUIDITY',
  'TTL_EXPIRED',
  'DEPOSIT_CONFIRMATION_TIMEOUT',
  'ORPHANED_DEPOSIT_REFUND',
  'GASLESS_PERMIT_BALANCE_TOO_LOW',
  'MANUAL_ADMIN_REFUND',
  'QUOTED_GAS_LIMIT_EXCEEDED',
  'DESTINATION_TOKEN_TRANSFER_REJECTED',
  'DEPOSIT_REORGED',
  'BLOCKED_WALLET',
  'PROTOCOL_DEADLINE_EXPIRED',
  'TRANSACTION_NOT_INCLUDED',
  'TRANSACTION_SUBMISSION_FAILED',
  'N/A',
] as const;
/** Why an order (or one of its payouts) failed, in the interface's words. */
export type FailReason = (typeof FAIL_REASONS)[number];

/** Every refundFailReason the interface names. */
export const REFUND_FAIL_REASONS = [
  'AMOUNT_TOO_LOW_TO_REFUND',
  'NEGATIVE_NEW_AMOUNT_AFTER_FEES',
  'SWAP_CURRENCY_NOT_ON_ORIGIN',
  'REFUND_RECIPIENT_IS_VASP',
  'MANUAL_REFUND_REQUIRED',
] as const;
/** Why a failed order's deposit was not (or not automatically) refunded. */
export type RefundFailReason = (typeof REFUND_FAIL_REASONS)[number];

/**
 * Why the solver holds a confirmed deposit back: it stays confirmed and is decided again on a later
 * pass. Recorded in the postponements table (the risk limits, pauses and dry run) and counted by
 * relay_solver_postponed_total{reason}.
 */
export const POSTPONE_REASONS = [
  // Risk limits, pauses and dry-run mode (src/solver/risk.ts); recorded for the admin listing.
  'DRY_RUN',
  'PAUSED_ALL',
  'PAUSED_CHAIN',
  'PAUSED_ROUTE',
  'LOSS_BREAKER',
  'IN_FLIGHT_LIMIT',
  'OUTFLOW_BUDGET',
  // Counted only (the deposit is not recorded as held back): the order was fast-filled and that payout
  // is still in flight, so the deposit is decided once it is paid or failed;
  'FAST_FILL_PENDING',
  // or a deposit that cannot pay its order waits while another would pay it (one naming the order, seen
  // and not reorged, or the node's own submission of the order's permit deposit), which goes first;
  'ANOTHER_DEPOSIT_PAYS',
  // or the solver could not read inventory and prices, so nothing of the batch was decided.
  'INVENTORY_UNREADABLE',
  // Its decision threw (a bug, or a config that no longer names its chain): recorded, so that the operator's listing
  // shows it while it is retried on every pass.
  'DECISION_FAILED',
] as const;
/** Why the solver holds a confirmed deposit back (it is decided again later). */
export type PostponeReason = (typeof POSTPONE_REASONS)[number];

/** A subset of FailReason, checked: `FailReasonOf<'A' | 'B'>` does not compile when a name is not the interface's. */
export type FailReasonOf<T extends FailReason> = T;
