import { canonicalAddress, describeAddressKind, userAddressKind } from '../chains/address.ts';
import type { DestinationCall } from '../chains/adapter.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { ChainConfig } from '../config/schema.ts';
import { QuoteError } from './errors.ts';
import type { QuoteInput } from './types.ts';

// Who sends what from where to whom, with every address checked against its chain's kind.
export interface Route {
  origin: ChainConfig;
  dest: ChainConfig;
  user: string;
  recipient: string;
  refundTo: string;
  feePayer?: string;
  cin: Currency;
  cout: Currency;
  requestType: RequestType;
  calls?: DestinationCall[];
}

export type RequestType = 'Bridge' | 'Crosschain Swap' | 'Same-chain Swap' | 'Send' | 'Wrap' | 'Unwrap' | 'Call';

// The same currency is the same symbol (and nativeness); a wrapped native is "W" + its symbol.
export function sameCurrency(a: Currency, b: Currency): boolean {
  // The exchange's native currency is its perps USD, not a gas token: nativeness tells nothing there.
  return a.symbol === b.symbol && (a.native === b.native || a.kind === 'exchange' || b.kind === 'exchange');
}

function requestType(sameChain: boolean, cin: Currency, cout: Currency): RequestType {
  if (!sameChain) return sameCurrency(cin, cout) ? 'Bridge' : 'Crosschain Swap';
  if (cin.address === cout.address) return 'Send';
  if (cin.native && cout.symbol === `W${cin.symbol}`) return 'Wrap';
  if (cout.native && cin.symbol === `W${cout.symbol}`) return 'Unwrap';
  return 'Same-chain Swap';
}

// Wrapping and bridging move one asset: no swap, no spread, no price risk.
export function isSwap(t: RequestType): boolean {
  return t === 'Crosschain Swap' || t === 'Same-chain Swap';
}

export function address(chain: ChainConfig, field: string, value: string): string {
  const a = canonicalAddress(chain.kind, value);
  if (a === undefined) throw new QuoteError(`${field}: must be ${describeAddressKind(chain.kind)} on chain ${chain.id}`, 'INVALID_INPUT_PARAMETERS');
  return a;
}

export function resolveRoute(q: QuoteInput, registry: Registry): Route {
  const origin = registry.chain(q.originChainId);
  const dest = registry.chain(q.destinationChainId);
  if (!origin) throw new QuoteError(`originChainId ${q.originChainId} is not a supported chain`, 'UNSUPPORTED_CHAIN');
  if (!dest) throw new QuoteError(`destinationChainId ${q.destinationChainId} is not a supported chain`, 'UNSUPPORTED_CHAIN');
  if (!origin.depositEnabled) throw new QuoteError(`deposits on chain ${origin.id} are disabled`, 'UNSUPPORTED_CHAIN');
  const user = address(origin, 'user', q.user);
  const recipient = q.recipient === undefined ? (userAddressKind(origin.kind) === userAddressKind(dest.kind) ? address(dest, 'recipient', user) : undefined) : address(dest, 'recipient', q.recipient);
  if (recipient === undefined) throw new QuoteError(`recipient: is required when the destination chain ${dest.id} is of another kind than the origin`, 'INVALID_INPUT_PARAMETERS');
  const refundTo = q.refundTo === undefined ? user : address(origin, 'refundTo', q.refundTo);
  const feePayer = q.depositFeePayer === undefined ? undefined : address(origin, 'depositFeePayer', q.depositFeePayer);
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
    if (dest.kind !== 'evm' || !cout.native) throw new QuoteError('txs: destination calls are paid in the native currency of an EVM destination', 'UNSUPPORTED_ROUTE');
    calls = q.txs.map((t, i) => ({ to: address(dest, `txs.${i}.to`, t.to), value: t.value, data: t.data }));
  }
  return { origin, dest, user, recipient, refundTo, feePayer, cin, cout, calls, requestType: calls ? 'Call' : requestType(origin.id === dest.id, cin, cout) };
}
