import { BaseError } from 'viem';

/**
 * The base of the node's own errors: a short message for logs and answers, the error that caused it
 * (kept for the log, never shown to a client), and optional details.
 *
 * Modelled on viem's `BaseError` so one `errText` reads both.
 */
export class RelayNodeError extends Error {
  override name = 'RelayNodeError';
  readonly shortMessage: string;
  readonly details?: string;

  constructor(shortMessage: string, options: { cause?: unknown; details?: string } = {}) {
    super(options.details ? `${shortMessage}: ${options.details}` : shortMessage, options.cause === undefined ? undefined : { cause: options.cause });
    this.shortMessage = shortMessage;
    this.details = options.details;
  }
}

/** One line saying what went wrong, for a log field: viem's and the node's errors by their short message. */
export function errText(err: unknown): string {
  if (err instanceof BaseError) return [err.shortMessage, err.details].filter(Boolean).join(': ');
  if (err instanceof RelayNodeError) return err.message;
  return err instanceof Error ? err.message : String(err);
}
