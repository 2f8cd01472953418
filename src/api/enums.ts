// The interface's exact enums (../shared/spec/intent-service-interface.md).
export { FAIL_REASONS, REFUND_FAIL_REASONS, type FailReason, type RefundFailReason } from '../ledger/reasons.ts';

export const REQUEST_TYPES = ['Bridge', 'Crosschain Swap', 'Same-chain Swap', 'Send', 'Wrap', 'Unwrap', 'Call'] as const;
