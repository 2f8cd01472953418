// The interface's exact enums (the intent-service interface; the hosted service's published API types).
export { FAIL_REASONS, REFUND_FAIL_REASONS, type FailReason, type RefundFailReason } from '../ledger/reasons.ts';

export const REQUEST_TYPES = ['Bridge', 'Crosschain Swap', 'Same-chain Swap', 'Send', 'Wrap', 'Unwrap', 'Call'] as const;
