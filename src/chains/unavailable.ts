import { ProviderPoolError } from './providers/pool.ts';
import { SVM_UNAVAILABLE_PREFIX } from './svm/rpcPool.ts';
import { ExchangeHttpError } from './exchange/client.ts';
import { ExchangeBudgetError } from './exchange/requestWeight.ts';

/**
 * Whether an error means a chain could not be read now (no provider answered, or none at the newest
 * block or slot seen), however the client library wrapped it: viem and web3.js keep the transport's
 * error as a `cause`; web3.js rethrows the SVM pool's error answer with its text in the message only. On the exchange:
 * no answer, a 429 or a 5xx, or the node's request budget there spent for now.
 */
export function isChainUnavailable(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && depth < 8; depth++) {
    if (e instanceof ProviderPoolError || e instanceof ExchangeBudgetError) return true;
    if (e instanceof ExchangeHttpError && (e.status === undefined || e.status === 429 || e.status >= 500)) return true;
    if (e.message.includes(SVM_UNAVAILABLE_PREFIX)) return true;
    e = e.cause;
  }
  return false;
}
