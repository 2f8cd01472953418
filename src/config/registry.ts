import { canonicalAddress, nativeAddress, type ChainKind } from '../kinds/address.ts';
import type { ChainConfig } from './schema.ts';

export interface Currency {
  chainId: number;
  kind: ChainKind;
  /** Canonical spelling for the chain's kind (see kinds/address.ts). */
  address: string;
  symbol: string;
  name: string;
  decimals: number;
  usdPrice: string;
  priceFeed?: { chainId: number; aggregator: string; maxAgeSeconds: number };
  logoURI?: string;
  native: boolean;
}

/** Chains and currencies by id and address, built once from the validated config. */
export class Registry {
  readonly chains = new Map<number, ChainConfig>();
  #currencies = new Map<string, Currency>();

  constructor(chains: ChainConfig[]) {
    for (const c of chains) {
      this.chains.set(c.id, c);
      this.#add({ ...c.nativeCurrency, address: nativeAddress(c.kind), chainId: c.id, kind: c.kind, native: true });
      for (const cur of c.currencies) {
        const { symbol, name, decimals, usdPrice, priceFeed, logoURI, address } = cur;
        this.#add({ symbol, name, decimals, usdPrice, priceFeed, logoURI, address, chainId: c.id, kind: c.kind, native: false });
      }
    }
  }

  #add(c: Currency): void {
    this.#currencies.set(`${c.chainId}:${c.address}`, c);
  }

  chain(id: number): ChainConfig | undefined {
    return this.chains.get(id);
  }

  /** Looks a currency up by any accepted spelling of its address. */
  currency(chainId: number, address: string): Currency | undefined {
    const chain = this.chains.get(chainId);
    const canonical = chain && canonicalAddress(chain.kind, address);
    return canonical === undefined ? undefined : this.#currencies.get(`${chainId}:${canonical}`);
  }

  currenciesOf(chainId: number): Currency[] {
    return [...this.#currencies.values()].filter((c) => c.chainId === chainId);
  }

  native(chainId: number): Currency {
    const chain = this.chains.get(chainId)!;
    return this.#currencies.get(`${chainId}:${nativeAddress(chain.kind)}`)!;
  }
}
