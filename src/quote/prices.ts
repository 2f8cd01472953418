import { createPublicClient, formatUnits, http, type Address, type PublicClient } from 'viem';
import { PriceFeedAbi } from '../../contracts-abi/index.ts';
import type { Currency } from '../config/registry.ts';
import type { ChainConfig } from '../config/schema.ts';
import { errText, RelayNodeError } from '../lib/errors.ts';

// USD prices as decimal strings.
export interface PriceSource {
  usdPrice(currency: Currency): Promise<string>;
}

/** No price the node can trust: it stops quoting (and postpones fills) rather than price wrong. */
export class PriceUnavailableError extends RelayNodeError {
  override name = 'PriceUnavailableError';
}

// The config's fixed prices (the devnet's).
export class StaticPriceSource implements PriceSource {
  async usdPrice(currency: Currency): Promise<string> {
    return currency.usdPrice;
  }
}

const FEED_CACHE_MS = 1000;

// Prices from Chainlink-style aggregators where a currency names one (its `priceFeed`), with a
// staleness bound; fixed prices elsewhere.
export class FeedPriceSource implements PriceSource {
  #clients = new Map<number, PublicClient>();
  #decimals = new Map<string, number>();
  #cache = new Map<string, { at: number; price: string; updatedAt: bigint }>();
  #fallback = new StaticPriceSource();

  constructor(
    chains: ChainConfig[],
    private now: () => number = Date.now,
  ) {
    for (const c of chains) if (c.kind === 'evm') this.#clients.set(c.id, createPublicClient({ transport: http(c.rpcUrl, { timeout: 5000 }) }) as PublicClient);
  }

  async usdPrice(c: Currency): Promise<string> {
    const feed = c.priceFeed;
    if (!feed) return this.#fallback.usdPrice(c);
    const key = `${feed.chainId}:${feed.aggregator}`;
    let hit = this.#cache.get(key);
    if (!hit || this.now() - hit.at > FEED_CACHE_MS) {
      const client = this.#clients.get(feed.chainId);
      if (!client) throw new PriceUnavailableError(`no RPC for the price feed of ${c.symbol} on chain ${feed.chainId}`);
      const address = feed.aggregator as Address;
      let decimals = this.#decimals.get(key);
      try {
        if (decimals === undefined) {
          decimals = await client.readContract({ address, abi: PriceFeedAbi, functionName: 'decimals' });
          this.#decimals.set(key, decimals);
        }
        const [, answer, , updatedAt] = await client.readContract({ address, abi: PriceFeedAbi, functionName: 'latestRoundData' });
        if (answer <= 0n) throw new PriceUnavailableError(`the price feed of ${c.symbol} answers ${answer}`);
        hit = { at: this.now(), price: formatUnits(answer, decimals), updatedAt };
        this.#cache.set(key, hit);
      } catch (e) {
        if (e instanceof PriceUnavailableError) throw e;
        throw new PriceUnavailableError(`the price feed of ${c.symbol} cannot be read: ${errText(e)}`);
      }
    }
    const age = BigInt(Math.floor(this.now() / 1000)) - hit.updatedAt;
    if (age > BigInt(feed.maxAgeSeconds)) {
      throw new PriceUnavailableError(`the price feed of ${c.symbol} is stale: last updated ${age} s ago (at most ${feed.maxAgeSeconds} s)`);
    }
    return hit.price;
  }
}
