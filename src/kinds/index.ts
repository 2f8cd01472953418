import type { AddressCodec, ChainKind } from './codec.ts';
import { evmCodec } from './evm.ts';
import { exchangeCodec } from './exchange.ts';
import { svmCodec } from './svm.ts';

export type { AddressCodec, ChainKind } from './codec.ts';
export { evmCodec } from './evm.ts';
export { EXCHANGE_PERPS_USD, exchangeCodec } from './exchange.ts';
export { SVM_NATIVE, svmCodec } from './svm.ts';

const CODECS: Record<ChainKind, AddressCodec> = { evm: evmCodec, svm: svmCodec, exchange: exchangeCodec };

/**
 * The address codec of a kind of chain: a table, not a branch. Here, below the config (which
 * validates addresses with it); the chain registry (src/chains/registry.ts) hands each chain's
 * codec to the API and the quote in its ChainProfile.
 */
export function codecOf(kind: ChainKind): AddressCodec {
  return CODECS[kind];
}
