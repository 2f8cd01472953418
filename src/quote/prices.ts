import type { Currency } from '../config/registry.ts';

// USD prices as decimal strings. A live feed implements the same interface.
export interface PriceSource {
  usdPrice(currency: Currency): Promise<string>;
}

// The devnet's prices: fixed per currency in the config.
export class StaticPriceSource implements PriceSource {
  async usdPrice(currency: Currency): Promise<string> {
    return currency.usdPrice;
  }
}
