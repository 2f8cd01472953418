// The API's error answers: a chain that cannot be read is a 503 naming it, not a 500 (the chain failed,
// not the request); the solver's refusals carry codes, not statuses, and the API answers each code with
// its status and the solver's message.
import { LeaseLostError } from '../ledger/leases.ts';
import Fastify from 'fastify';
import { BaseError } from 'viem';
import { describe, expect, it } from 'vitest';
import { PublicKey } from '@solana/web3.js';
import { ProviderPoolError } from '../chains/providers/pool.ts';
import { SvmRpcPool, svmConnection } from '../chains/svm/rpcPool.ts';
import { createLogger } from '../log.ts';
import { FastFillError } from '../solver/fastFill.ts';
import { GaslessRelayError } from '../solver/gaslessRelay.ts';
import { SignedDepositRefusedError } from '../solver/signedDeposits.ts';
import { errorHandler } from './errors.ts';

describe('API errors', () => {
  it('answers 503 CHAIN_UNAVAILABLE when no provider answered, however the client library wrapped it; 500 for anything else', async () => {
    const app = Fastify();
    app.setErrorHandler(errorHandler(createLogger('silent')));
    const pool = new ProviderPoolError('chain 792703809: no provider answered (p0: timeout)');
    app.get('/viem', async () => {
      throw new BaseError('HTTP request failed.', { cause: pool });
    });
    app.get('/web3', async () => {
      throw new Error('failed to get info about account x', { cause: new Error('fetch failed', { cause: pool }) });
    });
    // A real SVM read through the pool, whose one provider refuses connections: web3.js wraps the pool's answer.
    const svm = svmConnection(new SvmRpcPool({ chain: { id: 792703809, rpcUrl: 'http://127.0.0.1:9' }, maxWaitMs: 200, timeoutMs: 200 }), 'confirmed');
    app.get('/svm', async () => svm.getBalance(PublicKey.default));
    app.get('/bug', async () => {
      throw new TypeError('x is undefined');
    });
    for (const path of ['/viem', '/web3', '/svm']) {
      const r = await app.inject({ url: path });
      expect([path, r.statusCode, r.json().errorCode]).toEqual([path, 503, 'CHAIN_UNAVAILABLE']);
      // The provider's name or URL is not the client's business.
      expect(r.body).not.toContain('p0');
    }
    const bug = await app.inject({ url: '/bug' });
    expect([bug.statusCode, bug.json().errorCode]).toEqual([500, 'INTERNAL_ERROR']);
    await app.close();
  });
});

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
      [new GaslessRelayError('SOLVER_BALANCE_TOO_LOW', 'needed by payouts'), 409],
      [new SignedDepositRefusedError('ALREADY_SUBMITTED', 'submitted already'), 409],
      [new SignedDepositRefusedError('PERMIT_ALREADY_USED', 'funds another request'), 409],
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

  it('answers 503 NOT_LEADER for what would act on chains on a standby (active/standby), never a 500', async () => {
    const app = Fastify();
    app.setErrorHandler(errorHandler(createLogger('silent')));
    app.post('/fast-fill', async () => Promise.reject(new LeaseLostError(undefined, 'node-b is a standby')));
    const r = await app.inject({ method: 'POST', url: '/fast-fill' });
    expect([r.statusCode, r.json().errorCode]).toEqual([503, 'NOT_LEADER']);
    expect(r.json().message).toMatch(/standby/);
    await app.close();
  });
});
