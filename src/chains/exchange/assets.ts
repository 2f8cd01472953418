// What a currency of the exchange (chain 1337) is in sendAsset terms: its DEX, its `NAME:0x<tokenId>`
// token string and its decimals, from the config and the exchange's spot metadata.

import { canonicalAddress, EXCHANGE_PERPS_USD } from '../address.ts';
import type { ExchangeChainConfig } from '../../config/schema.ts';
import { type ExchangeClient, ExchangeHttpError, type SpotMeta, type SpotMetaToken } from './client.ts';
import { formatExchangeCurrency, parseExchangeCurrency, sendAssetDexFor, sendAssetToken } from './typedData.ts';
import { backoffMs } from '../../lib/backoff.ts';
import { errText, RelayNodeError } from '../../lib/errors.ts';

export interface ExchangeAsset {
  /** Canonical currency address on the chain (chains/address.ts). */
  currency: string;
  /** sendAsset's sourceDex / destinationDex: '' perps, 'spot', or a named DEX. */
  dex: string;
  /** sendAsset's token: `NAME:0x<tokenId>`. */
  token: string;
  tokenName: string;
  tokenIndex: number;
  decimals: number;
  perps: boolean;
}

export class UnknownAssetError extends RelayNodeError {
  override name = 'UnknownAssetError';
}

// The start's read of the exchange, asked again on a transient failure (no answer, a 5xx, a 429): a node that starts,
// or a new leader that starts its chain stages, gave up on one such answer (a new leader gave up its lease and cost a
// takeover). A refusal or a configuration error fails at once. 4 attempts, 250 ms then doubling: under 2 s.
const START_ATTEMPTS = 4;
const START_BACKOFF = { baseMs: 250, maxMs: 1_000 };
async function startRead<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (e) {
      const transient = e instanceof ExchangeHttpError && (e.status === undefined || e.status >= 500 || e.status === 429);
      if (!transient || attempt >= START_ATTEMPTS) throw e;
      await new Promise((r) =>
        setTimeout(
          r,
          backoffMs(attempt, START_BACKOFF, () => 1),
        ),
      );
    }
  }
}

export class ExchangeAssets {
  #meta: SpotMeta | undefined;
  #loading: Promise<SpotMeta> | undefined;

  constructor(
    private chain: ExchangeChainConfig,
    private client: ExchangeClient,
  ) {}

  async meta(force = false): Promise<SpotMeta> {
    if (this.#meta && !force) return this.#meta;
    this.#loading ??= this.client.spotMeta().finally(() => (this.#loading = undefined));
    this.#meta = await this.#loading;
    return this.#meta;
  }

  /**
   * Checks the configured currencies against the exchange: each spot token must exist there with
   * the configured decimals (amounts are converted with them).
   */
  async check(): Promise<void> {
    const meta = await startRead(() => this.meta(true));
    if (!usdToken(meta)) throw new Error(`chain ${this.chain.id}: the exchange's spotMeta lists no USDC token (index 0)`);
    this.chain.currencies.forEach((c, i) => {
      const parsed = parseExchangeCurrency(c.address);
      if (parsed.kind !== 'spot') return;
      const t = meta.tokens.find((x) => x.tokenId.toLowerCase() === parsed.tokenId);
      if (!t) throw new Error(`chains.${this.chain.id}.currencies.${i}.address: token id ${parsed.tokenId} is not listed by the exchange's spotMeta`);
      if (t.weiDecimals !== c.decimals) {
        throw new Error(`chains.${this.chain.id}.currencies.${i}.decimals: ${c.symbol} has weiDecimals ${t.weiDecimals} on the exchange, not ${c.decimals}`);
      }
    });
  }

  #decimals(currency: string, token: SpotMetaToken | undefined, perps: boolean): number {
    if (perps) return this.chain.nativeCurrency.decimals;
    return this.chain.currencies.find((c) => c.address === currency)?.decimals ?? token!.weiDecimals;
  }

  /** Throws UnknownAssetError for a currency the exchange does not list. */
  async asset(currency: string): Promise<ExchangeAsset> {
    let parsed;
    try {
      parsed = parseExchangeCurrency(currency);
    } catch (e) {
      throw new UnknownAssetError(errText(e));
    }
    const canonical = canonicalAddress('exchange', formatExchangeCurrency(parsed));
    if (canonical === undefined) throw new UnknownAssetError(`currency ${currency}: not an exchange currency`);
    const find = (m: SpotMeta) => (parsed.kind === 'perps' ? usdToken(m) : m.tokens.find((t) => t.tokenId.toLowerCase() === parsed.tokenId));
    let token = find(await this.meta());
    if (!token) token = find(await this.meta(true));
    if (!token) throw new UnknownAssetError(`currency ${currency}: token not listed by the exchange`);
    const perps = parsed.kind === 'perps';
    return {
      currency: canonical,
      dex: sendAssetDexFor(parsed),
      token: sendAssetToken(token.name, token.tokenId),
      tokenName: token.name,
      tokenIndex: token.index,
      decimals: this.#decimals(canonical, token, perps),
      perps,
    };
  }

  /**
   * The currency a transfer credited, from a ledger update's token name and destination DEX;
   * undefined when the exchange does not list the token.
   */
  async ofTransfer(tokenName: string, dex: string): Promise<ExchangeAsset | undefined> {
    if (dex === '') return this.asset(EXCHANGE_PERPS_USD);
    const ref = tokenName.includes(':') ? tokenName.slice(0, tokenName.indexOf(':')) : tokenName;
    let token = (await this.meta()).tokens.find((t) => t.name === ref);
    if (!token) token = (await this.meta(true)).tokens.find((t) => t.name === ref);
    if (!token) return undefined;
    return this.asset(formatExchangeCurrency({ kind: 'spot', tokenId: token.tokenId.toLowerCase() as `0x${string}`, dex: dex === 'spot' ? '' : dex }));
  }
}

// The perps collateral: USDC, token index 0 in spotMeta.
function usdToken(meta: SpotMeta): SpotMetaToken | undefined {
  return meta.tokens.find((t) => t.index === 0) ?? meta.tokens.find((t) => t.name === 'USDC');
}
