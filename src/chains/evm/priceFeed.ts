import { createPublicClient, type Address, type PublicClient } from 'viem';
import { PriceFeedAbi } from '../../../contracts-abi/index.ts';
import type { PriceFeedReader } from '../ports.ts';
import { readTransport } from './readTransport.ts';

/** Reads Chainlink-style aggregators on an EVM chain, over its own client (prices must not wait behind the indexer's calls). */
export class EvmPriceFeedReader implements PriceFeedReader {
  readonly #client: PublicClient;

  constructor(rpcUrl: string) {
    this.#client = createPublicClient({ transport: readTransport(rpcUrl, { timeout: 5000 }) }) as PublicClient;
  }

  decimals(aggregator: string): Promise<number> {
    return this.#client.readContract({ address: aggregator as Address, abi: PriceFeedAbi, functionName: 'decimals' });
  }

  async latestRound(aggregator: string): Promise<{ answer: bigint; updatedAt: bigint }> {
    const [, answer, , updatedAt] = await this.#client.readContract({ address: aggregator as Address, abi: PriceFeedAbi, functionName: 'latestRoundData' });
    return { answer, updatedAt };
  }
}
