import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ZodError } from 'zod';
import { formatZodError } from '../config/load.ts';
import { ProviderPoolError } from '../chains/providers/pool.ts';
import type { Logger } from '../log.ts';
import { PriceUnavailableError } from '../quote/prices.ts';
import { QuoteError } from '../quote/quote.ts';

// Every error the API answers has { message, errorCode }. Internals never leak: a 5xx says only
// that something failed, and the detail goes to the log.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: string,
    message: string,
  ) {
    super(message);
  }
}

export function errorHandler(log: Logger) {
  return (err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof ApiError || err instanceof QuoteError) {
      return reply.status(err instanceof ApiError ? err.status : err.status).send({ message: err.message, errorCode: err.errorCode });
    }
    if (err instanceof PriceUnavailableError) {
      return reply.status(503).send({ message: `not quoting: ${err.message}`, errorCode: 'PRICE_UNAVAILABLE' });
    }
    if (err instanceof ZodError) {
      return reply.status(400).send({ message: `invalid request: ${formatZodError(err)}`, errorCode: 'INVALID_INPUT_PARAMETERS' });
    }
    if (causedBy(err, ProviderPoolError)) {
      // No provider of a chain answered (the client library may have wrapped it): the chain, not the request, failed.
      log.warn({ err: err.message, url: req.url }, 'a chain could not be read for a request');
      return reply.status(503).send({ message: 'a chain this request needs could not be read; try again shortly', errorCode: 'CHAIN_UNAVAILABLE' });
    }
    const fe = err as FastifyError;
    if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
      // Fastify's own rejections: malformed JSON, body too large, wrong content type.
      return reply.status(fe.statusCode).send({ message: fe.message, errorCode: fe.code ?? 'BAD_REQUEST' });
    }
    log.error({ err: err.message, stack: err.stack, url: req.url }, 'request failed');
    return reply.status(500).send({ message: 'internal error', errorCode: 'INTERNAL_ERROR' });
  };
}

// Whether an error, or one of its causes (viem and web3.js wrap what the transport threw), is of a class.
function causedBy(err: unknown, cls: new (...args: never[]) => Error): boolean {
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && depth < 8; depth++) {
    if (e instanceof cls) return true;
    e = (e as Error).cause;
  }
  return false;
}
