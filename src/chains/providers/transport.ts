import { custom, RpcRequestError, type Transport } from 'viem';
import { DECISION_METHODS, RpcAnswerError, type ProviderPool } from './pool.ts';

// A JSON-RPC error answer becomes viem's RpcRequestError (as from its http transport), so that
// callers tell reverts and nonce errors apart as before. The "URL" it names is the provider's name.
async function answer(pool: ProviderPool, run: () => Promise<unknown>, body: { method: string; params: unknown[] }): Promise<unknown> {
  try {
    return await run();
  } catch (e) {
    if (e instanceof RpcAnswerError) throw new RpcRequestError({ body, error: e.error, url: `provider ${e.provider} of chain ${pool.chainId}` });
    throw e;
  }
}

/** A viem transport over the pool: every call goes to the best provider (see ProviderPool.request). */
export function poolTransport(pool: ProviderPool): Transport {
  return custom(
    {
      request: ({ method, params }: { method: string; params?: unknown[] }) => {
        const body = { method, params: params ?? [] };
        return answer(pool, () => pool.request(body), body);
      },
    },
    { retryCount: 0, name: `providers of chain ${pool.chainId}` },
  );
}

/**
 * A viem transport for the reads that decide money: those (DECISION_METHODS) are answered by a
 * quorum of providers (see ProviderPool.quorum), a gas estimate by providers agreeing within a
 * tolerance (ProviderPool.estimate); other calls route as in poolTransport.
 */
export function decisionTransport(pool: ProviderPool): Transport {
  return custom(
    {
      request: ({ method, params }: { method: string; params?: unknown[] }) => {
        const body = { method, params: params ?? [] };
        return answer(
          pool,
          () => (DECISION_METHODS.has(method) ? pool.quorum(body) : method === 'eth_estimateGas' ? pool.estimate(body) : pool.request(body)),
          body,
        );
      },
    },
    { retryCount: 0, name: `decision providers of chain ${pool.chainId}` },
  );
}
