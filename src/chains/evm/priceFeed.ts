import { createPublicClient, type Address, type PublicClient } from 'viem';
import { PriceFeedAbi } from '../../../contracts-abi/index.ts';
import type { RpcProviderConfig } from '../../config/schema.ts';
import { createLogger, type Logger } from '../../log.ts';
import { createMetrics, type Metrics } from '../../metrics.ts';
import { ProviderPool, providersOf } from '../providers/index.ts';
import { decisionTransport } from '../providers/transport.ts';
import type { PriceFeedReader } from '../ports.ts';

/** The chain fields a feed reader needs: its providers and their quorum. */
export interface FeedChain {
  id: number;
  rpcUrl?: string;
  rpc?: RpcProviderConfig[];
  quorum?: number;
}

/**
 * Reads Chainlink-style aggregators on an EVM chain over a provider pool of its own (prices must not wait behind the
 * indexer's calls), as decision reads: a price decides what every quote pays out, so it is answered by the chain's
 * quorum of providers, read at the head they agree on. Read through one provider (the chain's first), a hostile one
 * priced a currency at ten times the market, and the node quoted and paid at that price.
 */
export class EvmPriceFeedReader implements PriceFeedReader {
  readonly #pool: ProviderPool;
  readonly #client: PublicClient;

  constructor(chain: FeedChain, metrics: Metrics = createMetrics(), log: Logger = createLogger('silent')) {
    this.#pool = new ProviderPool({ chainId: chain.id, providers: providersOf(chain), quorum: chain.quorum, timeoutMs: 5000, maxWaitMs: 5000, metrics, log });
    this.#client = createPublicClient({ transport: decisionTransport(this.#pool) }) as PublicClient;
  }

  async decimals(aggregator: string): Promise<number> {
    await this.#pool.probeHeads();
    return this.#client.readContract({ address: aggregator as Address, abi: PriceFeedAbi, functionName: 'decimals' });
  }

  async latestRound(aggregator: string): Promise<{ answer: bigint; updatedAt: bigint }> {
    // The providers' agreed head first: the quorum's reads are pinned to it, so that honest providers a block apart
    // answer the same round (a provider claiming a head far ahead does not move it).
    await this.#pool.probeHeads();
    const [, answer, , updatedAt] = await this.#client.readContract({ address: aggregator as Address, abi: PriceFeedAbi, functionName: 'latestRoundData' });
    return { answer, updatedAt };
  }
}
