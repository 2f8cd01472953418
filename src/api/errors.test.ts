// The solver's refusals carry codes, not statuses: the API answers each code with its status and
// the solver's message, as the routes answered them when the errors carried HTTP statuses.
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../log.ts';
import { FastFillError } from '../solver/fastFill.ts';
import { GaslessRelayError } from '../solver/gaslessRelay.ts';
import { SignedDepositRefusedError } from '../solver/signedDeposits.ts';
import { errorHandler } from './errors.ts';

describe('solver refusals in the API', () => {
  it('answers each code with its status, message and errorCode (with the error field on /execute)', async () => {
    const app = Fastify();
    app.setErrorHandler(errorHandler(createLogger('silent')));
    const cases: [Error, number][] = [
      [new FastFillError('REQUEST_NOT_FOUND', 'no request with id 0x1'), 404],
      [new FastFillError('NOT_QUOTED_BY_KEY', 'not quoted with this key'), 403],
      [new FastFillError('BLOCKED_WALLET', 'blocked'), 403],
      [new FastFillError('APP_BALANCE_TOO_LOW', 'short'), 402],
      [new FastFillError('ALREADY_FILLED', 'filled'), 409],
      [new FastFillError('PAUSED_CHAIN', 'held back'), 409],
      [new FastFillError('SOLVER_CAPACITY_EXCEEDED', 'over the limit'), 400],
      [new GaslessRelayError('DRY_RUN', 'not relaying now'), 503],
      [new GaslessRelayError('AUTHORIZATION_USED', 'relayed already'), 409],
      [new GaslessRelayError('INSUFFICIENT_APP_BALANCE', 'short'), 402],
      [new SignedDepositRefusedError('ALREADY_SUBMITTED', 'submitted already'), 409],
      [new SignedDepositRefusedError('ORDER_EXPIRED', 'expired'), 400],
    ];
    cases.forEach(([err], i) => app.get(`/${i}`, async () => Promise.reject(err)));
    app.post('/execute', async () => Promise.reject(new GaslessRelayError('PAUSED', 'not relaying on chain 1 now')));
    for (const [i, [err, status]] of cases.entries()) {
      const r = await app.inject({ url: `/${i}` });
      expect([r.statusCode, r.json()]).toEqual([status, { message: err.message, errorCode: (err as FastFillError).errorCode }]);
    }
    const execute = await app.inject({ method: 'POST', url: '/execute' });
    const message = 'not relaying on chain 1 now';
    expect([execute.statusCode, execute.json()]).toEqual([503, { error: message, message, errorCode: 'PAUSED' }]);
    await app.close();
  });
});
