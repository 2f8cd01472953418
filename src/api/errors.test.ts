// The API's answer when a chain cannot be read: 503 naming it, not a 500 (the chain failed, not the request).
import Fastify from 'fastify';
import { BaseError } from 'viem';
import { describe, expect, it } from 'vitest';
import { errorHandler } from './errors.ts';
import { ProviderPoolError } from '../chains/providers/pool.ts';
import { PublicKey } from '@solana/web3.js';
import { SvmRpcPool, svmConnection } from '../chains/svm/rpcPool.ts';
import { createLogger } from '../log.ts';

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
