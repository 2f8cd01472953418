import { LeaseLostError } from '../ledger/leases.ts';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ZodError } from 'zod';
import { formatZodError } from '../config/load.ts';
import { isChainUnavailable } from '../chains/unavailable.ts';
import { loggedUrl } from './loggedUrl.ts';
import type { Logger } from '../log.ts';
import { PriceUnavailableError } from '../quote/prices.ts';
import { QuoteError } from '../quote/quote.ts';
import { RelayNodeError } from '../lib/errors.ts';
import { FastFillError, type FastFillCode } from '../solver/fastFill.ts';
import { GaslessRelayError, type GaslessRelayCode } from '../solver/gaslessRelay.ts';
import { SignedDepositRefusedError, type SignedDepositRefusal } from '../solver/signedDeposits.ts';

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

// The solver's refusals carry codes, not statuses: the API names the status of each here.

/** The status of each fast fill refusal: a request or key that does not qualify, a balance short, a fill held back by the risk controls. */
export const FAST_FILL_STATUS: Record<FastFillCode, number> = {
  REQUEST_NOT_FOUND: 404,
  NOT_QUOTED_BY_KEY: 403,
  NO_APP_BALANCE: 403,
  BLOCKED_WALLET: 403,
  NEGATIVE_NEW_AMOUNT_AFTER_FEES: 400,
  MAX_FILL_AMOUNT_EXCEEDED: 400,
  SOLVER_CAPACITY_EXCEEDED: 400,
  ORDER_EXPIRED: 400,
  OPEN_DEPOSIT_ADDRESS: 400,
  SPONSOR_BALANCE_TOO_LOW: 402,
  APP_BALANCE_TOO_LOW: 402,
  SOLVER_BALANCE_TOO_LOW: 409,
  // The price moved since the quote: a new quote may be filled.
  SLIPPAGE: 409,
  ALREADY_FAST_FILLED: 409,
  ALREADY_FILLED: 409,
  // Held back now (a pause, dry run or limit): the caller may try again.
  DRY_RUN: 409,
  PAUSED_ALL: 409,
  PAUSED_CHAIN: 409,
  PAUSED_ROUTE: 409,
  LOSS_BREAKER: 409,
  IN_FLIGHT_LIMIT: 409,
  OUTFLOW_BUDGET: 409,
};

/** The status of each gasless relay refusal: the operator's switches are the node's (503), a replay conflicts, a short balance is 402. */
export const GASLESS_RELAY_STATUS: Record<GaslessRelayCode, number> = {
  DRY_RUN: 503,
  PAUSED: 503,
  ALREADY_SUBMITTED: 409,
  AUTHORIZATION_USED: 409,
  NO_SPONSOR_WALLET: 403,
  INSUFFICIENT_APP_BALANCE: 402,
  SOLVER_BALANCE_TOO_LOW: 409,
  OUTFLOW_BUDGET: 409,
};

/** The status of each refusal of a signed deposit (POST /permits, /execute). */
export const SIGNED_DEPOSIT_STATUS: Record<SignedDepositRefusal, number> = {
  ALREADY_SUBMITTED: 409,
  PERMIT_ALREADY_USED: 409,
  SPONSOR_BALANCE_TOO_LOW: 400,
  ORDER_EXPIRED: 400,
};

// Routes whose published errors also carry the message as `error` (the hosted POST /execute).
const WITH_ERROR_FIELD = new Set(['/execute']);

export function errorHandler(log: Logger) {
  return (err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply) => {
    const send = (status: number, message: string, errorCode: string) =>
      reply.status(status).send(WITH_ERROR_FIELD.has(req.routeOptions?.url ?? '') ? { error: message, message, errorCode } : { message, errorCode });
    if (err instanceof ApiError || err instanceof QuoteError) return send(err.status, err.message, err.errorCode);
    if (err instanceof FastFillError) return send(FAST_FILL_STATUS[err.errorCode], err.message, err.errorCode);
    if (err instanceof GaslessRelayError) return send(GASLESS_RELAY_STATUS[err.errorCode], err.message, err.errorCode);
    if (err instanceof SignedDepositRefusedError) return send(SIGNED_DEPOSIT_STATUS[err.errorCode], err.message, err.errorCode);
    if (err instanceof PriceUnavailableError) return send(503, `not quoting: ${err.message}`, 'PRICE_UNAVAILABLE');
    // Active/standby: what would act on chains (a fast fill, a claim, a relay) is the leader's to do.
    if (err instanceof LeaseLostError) return send(503, 'this node is a standby: it does not act on chains now; try the leader', 'NOT_LEADER');
    if (err instanceof ZodError) return send(400, `invalid request: ${formatZodError(err)}`, 'INVALID_INPUT_PARAMETERS');
    if (isChainUnavailable(err)) {
      // No provider of a chain answered (the client library may have wrapped it): the chain, not the request, failed.
      log.warn({ err: err.message, url: loggedUrl(req.url) }, 'a chain could not be read for a request');
      return send(503, 'a chain this request needs could not be read; try again shortly', 'CHAIN_UNAVAILABLE');
    }
    const fe = err as FastifyError;
    if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
      // Fastify's own rejections: malformed JSON, body too large, wrong content type.
      return send(fe.statusCode, fe.message, fe.code ?? 'BAD_REQUEST');
    }
    log.error({ err: err.message, stack: err.stack, url: loggedUrl(req.url) }, 'request failed');
    return send(500, 'internal error', 'INTERNAL_ERROR');
  };
}
