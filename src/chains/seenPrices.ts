/**
 * The newest USD price the node's price source gave for each currency, kept for what must decide without waiting on
 * a feed read: how many blocks a deposit or an app balance funding waits (confirmationsByValue), judged as each log is
 * read. The node's price source writes here (recordingPrices in src/quote/prices.ts).
 */
export class SeenPrices {
  #prices = new Map<string, string>();

  /** The newest price seen for a currency (its chain and canonical address); undefined before any. */
  get(chainId: number, address: string): string | undefined {
    return this.#prices.get(`${chainId}:${address}`);
  }

  set(chainId: number, address: string, price: string): void {
    this.#prices.set(`${chainId}:${address}`, price);
  }
}
