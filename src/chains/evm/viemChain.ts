import { defineChain, type Chain } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';

export function viemChain(chain: EvmChainConfig): Chain {
  return defineChain({
    id: chain.id,
    name: chain.name,
    nativeCurrency: { name: chain.nativeCurrency.name, symbol: chain.nativeCurrency.symbol, decimals: chain.nativeCurrency.decimals },
    rpcUrls: { default: { http: [chain.rpcUrl] } },
  });
}
