import { RelayNodeError } from './errors.ts';

/** A quote the node will not give, with the 4xx status and errorCode the API answers. */
export class QuoteError extends RelayNodeError {
  override name = 'QuoteError';
  constructor(
    message: string,
    readonly errorCode: string,
    readonly status = 400,
  ) {
    super(message);
  }
}
