import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ZodError } from 'zod';
import { formatZodError } from '../config/load.ts';
import { isChainUnavailable } from '../chains/unavailable.ts';
import type { Logger } from '../log.ts';
import { PriceUnavailableError } from '../quote/prices.ts';
import { QuoteError } from '../quote/quote.ts';
import { RelayNodeError } from '../lib/errors.ts';

/**
 * Every error the API answers has { message, errorCode }. Internals never leak: a 5xx says only
 * that something failed, and the detail goes to the log.
 */
export class ApiError extends RelayNodeError {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    readonly errorCode: string,
    message: string,
  ) {
    super(message);
  }
}

// Routes whose published errors also carry the message as `error` (the hosted POST /execute).
const WITH_ERROR_FIELD = new Set(['/execute']);

export function errorHandler(log: Logger) {
  return (err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply) => {
    const send = (status: number, message: string, errorCode: string) =>
      reply.status(status).send(WITH_ERROR_FIELD.has(req.routeOptions?.url ?? '') ? { error: message, message, errorCode } : { message, errorCode });
    if (err instanceof ApiError || err instanceof QuoteError) return send(err.status, err.message, err.errorCode);
    if (err instanceof PriceUnavailableError) return send(503, `not quoting: ${err.message}`, 'PRICE_UNAVAILABLE');
    if (err instanceof ZodError) return send(400, `invalid request: ${formatZodError(err)}`, 'INVALID_INPUT_PARAMETERS');
    if (isChainUnavailable(err)) {
      // No provider of a chain answered (the client library may have wrapped it): the chain, not the request, failed.
      log.warn({ err: err.message, url: req.url }, 'a chain could not be read for a request');
      return send(503, 'a chain this request needs could not be read; try again shortly', 'CHAIN_UNAVAILABLE');
    }
    const fe = err as FastifyError;
    if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
      // Fastify's own rejections: malformed JSON, body too large, wrong content type.
      return send(fe.statusCode, fe.message, fe.code ?? 'BAD_REQUEST');
    }
    log.error({ err: err.message, stack: err.stack, url: req.url }, 'request failed');
    return send(500, 'internal error', 'INTERNAL_ERROR');
  };
}
