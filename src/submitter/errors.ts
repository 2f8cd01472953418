import { RelayNodeError } from '../lib/errors.ts';
import type { PayoutFailReason } from './port.ts';

/**
 * A permanent problem with a payout itself (not with the chain): it can never be sent as it is, so the
 * pipeline fails it (`failReason`: `reason`) instead of trying again.
 */
export class UnpayableError extends RelayNodeError {
  override name = 'UnpayableError';
  readonly reason: PayoutFailReason;

  constructor(shortMessage: string, reason: PayoutFailReason = 'TRANSACTION_SUBMISSION_FAILED', options: { cause?: unknown } = {}) {
    super(shortMessage, options);
    this.reason = reason;
  }
}
