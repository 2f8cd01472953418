// The devnet's perpetuals exchange (chain 1337): the loopback stand-in, the solver and the test
// accounts credited with perps USD and spot tokens, and the node's config for it.

import type { Address } from 'viem';
import { EXCHANGE_PERPS_USD } from '../../chains/address.ts';
import { EXCHANGE_CHAIN_ID, formatExchangeCurrency } from '../../chains/exchange/typedData.ts';
import type { ConfigFile } from '../../config/schema.ts';
import { STANDIN_TOKENS, startExchangeStandin, type ExchangeStandin } from './standin.ts';

const usdc = STANDIN_TOKENS.find((t) => t.name === 'USDC')!;
const hype = STANDIN_TOKENS.find((t) => t.name === 'HYPE')!;

/** Currency addresses on the devnet exchange, as the interface spells them. */
export const DEVNET_EXCHANGE_CURRENCIES = {
  // Perps USD (the chain's native currency; micro-USD, 6 decimals).
  perpsUSD: EXCHANGE_PERPS_USD,
  spotUSDC: formatExchangeCurrency({ kind: 'spot', tokenId: usdc.tokenId, dex: '' }),
  spotHYPE: formatExchangeCurrency({ kind: 'spot', tokenId: hype.tokenId, dex: '' }),
  // HYPE on the named DEX "xyz".
  xyzHYPE: formatExchangeCurrency({ kind: 'spot', tokenId: hype.tokenId, dex: 'xyz' }),
} as const;

export interface DevnetExchange {
  id: number;
  url: string;
  standin: ExchangeStandin;
  currencies: typeof DEVNET_EXCHANGE_CURRENCIES;
}

export async function startDevnetExchange(solver: Address, accounts: Address[]): Promise<DevnetExchange> {
  // The public SDK signs sendAsset under the production exchange's domain name; it may ask for it.
  const standin = await startExchangeStandin({ dexes: ['xyz'], extraDomainNames: ['HyperliquidSignTransaction'] });
  standin.credit(solver, { perpsUsd: '1000000' });
  standin.credit(solver, { spot: { token: 'USDC', amount: '1000000' } });
  standin.credit(solver, { spot: { token: 'HYPE', amount: '100000' } });
  standin.credit(solver, { spot: { token: 'HYPE', dex: 'xyz', amount: '100000' } });
  for (const a of accounts) {
    standin.credit(a, { perpsUsd: '10000' });
    standin.credit(a, { spot: { token: 'USDC', amount: '10000' } });
    standin.credit(a, { spot: { token: 'HYPE', amount: '1000' } });
  }
  return { id: EXCHANGE_CHAIN_ID, url: standin.url, standin, currencies: DEVNET_EXCHANGE_CURRENCIES };
}

export function devnetExchangeConfig(ex: DevnetExchange, opts: { pollIntervalMs: number }): ConfigFile['chains'][number] {
  return {
    id: ex.id,
    name: 'Perpetuals exchange (devnet)',
    kind: 'exchange',
    exchangeUrl: ex.url,
    exchangeChain: 'Mainnet',
    signatureChainId: 1,
    pollIntervalMs: opts.pollIntervalMs,
    // The stand-in limits no one: the devnet polls it every 50-100 ms.
    weightPerMinute: 0,
    // A transfer with no authorization is refunded soon on a devnet.
    orphanGraceMs: 2_000,
    nativeCurrency: { symbol: 'USDC', name: 'USD Coin (perps)', decimals: 6, usdPrice: '1' },
    currencies: [
      { address: ex.currencies.spotUSDC, symbol: 'USDC', name: 'USD Coin (spot)', decimals: usdc.weiDecimals, usdPrice: '1' },
      { address: ex.currencies.spotHYPE, symbol: 'HYPE', name: 'Hyperliquid', decimals: hype.weiDecimals, usdPrice: '25' },
      { address: ex.currencies.xyzHYPE, symbol: 'HYPE', name: 'Hyperliquid (xyz DEX)', decimals: hype.weiDecimals, usdPrice: '25' },
    ],
  };
}

export function devnetExchangeDescription(ex: DevnetExchange) {
  return { id: ex.id, kind: 'exchange', url: ex.url, currencies: ex.currencies };
}
