import { formatUnits } from 'viem';
import type { PriceFeeds } from '../chains/ports.ts';
import type { SeenPrices } from '../chains/seenPrices.ts';
import type { Currency } from '../config/registry.ts';
import { errText, RelayNodeError } from '../lib/errors.ts';

/** USD prices as decimal strings. */
export interface PriceSource {
  usdPrice(currency: Currency): Promise<string>;
}

/** No price the node can trust: it stops quoting (and postpones fills) rather than price wrong. */
export class PriceUnavailableError extends RelayNodeError {
  override name = 'PriceUnavailableError';
}

/** The config's fixed prices (the devnet's). */
export class StaticPriceSource implements PriceSource {
  async usdPrice(currency: Currency): Promise<string> {
    return currency.usdPrice;
  }
}

const FEED_CACHE_MS = 1000;

/**
 * Prices from Chainlink-style aggregators where a currency names one (its `priceFeed`), with a
 * staleness bound; fixed prices elsewhere. The chains' feed readers come from the chain registry.
 */
export class FeedPriceSource implements PriceSource {
  #decimals = new Map<string, number>();
  #cache = new Map<string, { at: number; price: string; updatedAt: bigint }>();
  #fallback = new StaticPriceSource();

  constructor(
    private feeds: PriceFeeds,
    private now: () => number = Date.now,
  ) {}

  async usdPrice(c: Currency): Promise<string> {
    const feed = c.priceFeed;
    if (!feed) return this.#fallback.usdPrice(c);
    const key = `${feed.chainId}:${feed.aggregator}`;
    let hit = this.#cache.get(key);
    if (!hit || this.now() - hit.at > FEED_CACHE_MS) {
      const reader = this.feeds.priceFeed(feed.chainId);
      if (!reader) throw new PriceUnavailableError(`no RPC for the price feed of ${c.symbol} on chain ${feed.chainId}`);
      let decimals = this.#decimals.get(key);
      try {
        if (decimals === undefined) {
          decimals = await reader.decimals(feed.aggregator);
          this.#decimals.set(key, decimals);
        }
        const { answer, updatedAt } = await reader.latestRound(feed.aggregator);
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

/** `source`, noting each price it answers in `seen` (for the indexers: src/chains/seenPrices.ts). */
export function recordingPrices(source: PriceSource, seen: SeenPrices): PriceSource {
  return {
    usdPrice: async (c) => {
      const price = await source.usdPrice(c);
      seen.set(c.chainId, c.address, price);
      return price;
    },
  };
}
