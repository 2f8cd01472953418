import type { ChainProfile } from '../chains/ports.ts';
import type { DestinationCall } from '../chains/adapter.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { ChainConfig } from '../config/schema.ts';
import { QuoteError } from '../lib/quoteError.ts';
import type { QuoteChains, QuoteInput } from './types.ts';

/** Who sends what from where to whom, with every address checked against its chain's kind. */
export interface Route {
  origin: ChainConfig;
  dest: ChainConfig;
  /** What the quote needs to know of each chain (codec, what it supports). */
  originProfile: ChainProfile;
  destProfile: ChainProfile;
  user: string;
  recipient: string;
  refundTo: string;
  feePayer?: string;
  cin: Currency;
  cout: Currency;
  requestType: RequestType;
  /**
   * Priced and filled as a swap: a spread, a slippage tolerance, and the rate of the fill's moment.
   * A swap is, and so is a Call paid from another asset than the destination's native currency.
   */
  swap: boolean;
  calls?: DestinationCall[];
}

export type RequestType = 'Bridge' | 'Crosschain Swap' | 'Same-chain Swap' | 'Send' | 'Wrap' | 'Unwrap' | 'Call';

/**
 * The same currency is the same symbol (and nativeness); a wrapped native is "W" + its symbol.
 * `nativeIsGas`: whether both chains' native currencies are gas tokens (the exchange's is its perps
 * USD, not a gas token: nativeness tells nothing there).
 */
export function sameCurrency(a: Currency, b: Currency, nativeIsGas = true): boolean {
  return a.symbol === b.symbol && (a.native === b.native || !nativeIsGas);
}

function requestType(sameChain: boolean, cin: Currency, cout: Currency, nativeIsGas: boolean): RequestType {
  if (!sameChain) return sameCurrency(cin, cout, nativeIsGas) ? 'Bridge' : 'Crosschain Swap';
  if (cin.address === cout.address) return 'Send';
  if (cin.native && cout.symbol === `W${cin.symbol}`) return 'Wrap';
  if (cout.native && cin.symbol === `W${cout.symbol}`) return 'Unwrap';
  return 'Same-chain Swap';
}

/** Wrapping and bridging move one asset: no swap, no spread, no price risk. */
export function isSwap(t: RequestType): boolean {
  return t === 'Crosschain Swap' || t === 'Same-chain Swap';
}

/** A field's address in the chain's canonical spelling; a QuoteError naming the field when it is not one. */
export function address(chain: ChainProfile, field: string, value: string): string {
  const a = chain.codec.canonical(value);
  if (a === undefined) throw new QuoteError(`${field}: must be ${chain.codec.describe} on chain ${chain.chainId}`, 'INVALID_INPUT_PARAMETERS');
  return a;
}

/** Checks a quote's chains, currencies and addresses, and names what kind of request it is. */
export function resolveRoute(q: QuoteInput, registry: Registry, chains: Pick<QuoteChains, 'profile'>): Route {
  const origin = registry.chain(q.originChainId);
  const dest = registry.chain(q.destinationChainId);
  if (!origin) throw new QuoteError(`originChainId ${q.originChainId} is not a supported chain`, 'UNSUPPORTED_CHAIN');
  if (!dest) throw new QuoteError(`destinationChainId ${q.destinationChainId} is not a supported chain`, 'UNSUPPORTED_CHAIN');
  if (!origin.depositEnabled) throw new QuoteError(`deposits on chain ${origin.id} are disabled`, 'UNSUPPORTED_CHAIN');
  const originProfile = chains.profile(origin.id)!;
  const destProfile = chains.profile(dest.id)!;
  const user = address(originProfile, 'user', q.user);
  const recipient =
    q.recipient === undefined
      ? originProfile.codec.userKind === destProfile.codec.userKind
        ? address(destProfile, 'recipient', user)
        : undefined
      : address(destProfile, 'recipient', q.recipient);
  if (recipient === undefined)
    throw new QuoteError(`recipient: is required when the destination chain ${dest.id} is of another kind than the origin`, 'INVALID_INPUT_PARAMETERS');
  const refundTo = q.refundTo === undefined ? user : address(originProfile, 'refundTo', q.refundTo);
  const feePayer = q.depositFeePayer === undefined ? undefined : address(originProfile, 'depositFeePayer', q.depositFeePayer);
  if (feePayer !== undefined && feePayer === user) throw new QuoteError('depositFeePayer: must differ from user', 'INVALID_INPUT_PARAMETERS');
  const cin = registry.currency(origin.id, q.originCurrency);
  const cout = registry.currency(dest.id, q.destinationCurrency);
  if (!cin) throw new QuoteError(`originCurrency ${q.originCurrency} is not supported on chain ${origin.id}`, 'UNSUPPORTED_CURRENCY');
  if (!cout) throw new QuoteError(`destinationCurrency ${q.destinationCurrency} is not supported on chain ${dest.id}`, 'UNSUPPORTED_CURRENCY');
  if (origin.id === dest.id && cin.address === cout.address && recipient === user) {
    throw new QuoteError('the route sends a currency to its own sender on the same chain: nothing to do', 'UNSUPPORTED_ROUTE');
  }
  let calls: DestinationCall[] | undefined;
  if (q.txs?.length) {
    if (!destProfile.destinationCalls || !cout.native)
      throw new QuoteError('txs: destination calls are paid in the native currency of an EVM destination', 'UNSUPPORTED_ROUTE');
    calls = q.txs.map((t, i) => ({ to: address(destProfile, `txs.${i}.to`, t.to), value: t.value, data: t.data }));
  }
  const moved = requestType(origin.id === dest.id, cin, cout, originProfile.nativeIsGas && destProfile.nativeIsGas);
  // A Call trades the origin currency for the native currency its calls spend: from another asset,
  // that is a swap, and priced as one, or the quote would be a free option on the solver at a stale rate.
  const type = calls ? 'Call' : moved;
  return { origin, dest, originProfile, destProfile, user, recipient, refundTo, feePayer, cin, cout, calls, requestType: type, swap: isSwap(moved) };
}
