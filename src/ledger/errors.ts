import { RelayNodeError } from '../lib/errors.ts';

/**
 * The ledger's database did not answer in time or the connection to it failed. The operation's outcome is unknown
 * when it was a COMMIT (as after a crash): the caller must not perform the effect it was about to announce, and
 * reads the ledger again once it answers.
 */
export class LedgerUnavailable extends RelayNodeError {
  override name = 'LedgerUnavailable';
}

/** A statement the database refused (a constraint, a syntax error...): PostgreSQL's message and SQLSTATE code. */
export class LedgerQueryError extends RelayNodeError {
  override name = 'LedgerQueryError';
  constructor(
    message: string,
    readonly code: string | undefined,
    readonly detail?: string,
    readonly constraint?: string,
  ) {
    super(message);
  }
}
