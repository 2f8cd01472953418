import { getAddress, zeroAddress, type Address } from 'viem';
import type { ChainConfig, CurrencyConfig } from './schema.ts';

export interface Currency extends CurrencyConfig {
  chainId: number;
  native: boolean;
}

// Chains and currencies by id and address, built once from the validated config.
export class Registry {
  readonly chains = new Map<number, ChainConfig>();
  #currencies = new Map<string, Currency>();

  constructor(chains: ChainConfig[]) {
    for (const c of chains) {
      this.chains.set(c.id, c);
      this.#add({ ...c.nativeCurrency, address: zeroAddress, chainId: c.id, native: true });
      for (const cur of c.currencies) this.#add({ ...cur, chainId: c.id, native: false });
    }
  }

  #add(c: Currency): void {
    this.#currencies.set(`${c.chainId}:${c.address.toLowerCase()}`, c);
  }

  chain(id: number): ChainConfig | undefined {
    return this.chains.get(id);
  }

  currency(chainId: number, address: string): Currency | undefined {
    return this.#currencies.get(`${chainId}:${address.toLowerCase()}`);
  }

  currenciesOf(chainId: number): Currency[] {
    return [...this.#currencies.values()].filter((c) => c.chainId === chainId);
  }

  native(chainId: number): Currency {
    return this.currency(chainId, zeroAddress)!;
  }
}

export function isNative(address: string): boolean {
  return getAddress(address) === (zeroAddress as Address);
}
