/**
 * Typed data and currency addressing for the perpetuals exchange (chain id 1337).
 *
 * Pure functions, shared by the devnet stand-in, the node's exchange client and the quote
 * builder. See /work/shared/spec/intent-service-interface.md, "Exchange deposit and withdrawal
 * through the quote".
 *
 * sendAsset typed struct — why it has exactly eight fields:
 * the spec says `eip712Types` is `ExchangeTransaction:SendAsset` "listing the eight fields above:
 * the first seven as string, nonce as uint64", i.e. exchangeChain, destination, sourceDex,
 * destinationDex, token, amount, fromSubAccount (string) and nonce (uint64). That is the
 * Hyperliquid `HyperliquidTransaction:SendAsset` struct with `hyperliquidChain` renamed
 * `exchangeChain`. The signed *message* is "action.parameters plus type and signatureChainId":
 * like Hyperliquid's user-signed actions, `type` and `signatureChainId` travel inside the action
 * object that is posted, but they are NOT members of the EIP-712 struct, so they are not hashed.
 * `signatureChainId` is nevertheless bound by the signature, because it must equal the domain's
 * chainId (the verifier rebuilds the domain from it), and `type` selects the struct.
 */
import { getAddress, hexToBytes, isAddress, isHex, recoverTypedDataAddress, zeroAddress, type Address, type Hex } from 'viem';

export const EXCHANGE_CHAIN_ID = 1337;

export const SEND_ASSET_PRIMARY_TYPE = 'ExchangeTransaction:SendAsset' as const;

export const SEND_ASSET_TYPES = {
  'ExchangeTransaction:SendAsset': [
    { name: 'exchangeChain', type: 'string' },
    { name: 'destination', type: 'string' },
    { name: 'sourceDex', type: 'string' },
    { name: 'destinationDex', type: 'string' },
    { name: 'token', type: 'string' },
    { name: 'amount', type: 'string' },
    { name: 'fromSubAccount', type: 'string' },
    { name: 'nonce', type: 'uint64' },
  ],
} as const;

/** The standard EIP712Domain type (viem derives it from the domain; listed here for API bodies). */
export const EIP712_DOMAIN_TYPE = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
] as const;

export interface SendAssetDomain {
  name: string;
  version: '1';
  chainId: number;
  verifyingContract: Address;
}

export const SEND_ASSET_DOMAIN_NAME = 'ExchangeSignTransaction';

/** `name`: the spec's name unless told (the public SDK signs under the production exchange's name). */
export function sendAssetDomain(chainId: number, name: string = SEND_ASSET_DOMAIN_NAME): SendAssetDomain {
  return { name, version: '1', chainId, verifyingContract: zeroAddress };
}

/** `action.parameters` of the quote's deposit step. */
export interface SendAssetParameters {
  exchangeChain: string;
  destination: string;
  sourceDex: string;
  destinationDex: string;
  token: string;
  /** human-readable decimal string, e.g. "12.5" */
  amount: string;
  fromSubAccount: string;
  nonce: number;
}

/** The signed message, posted as `action`: parameters plus `type` and `signatureChainId`. */
export interface SendAssetAction extends SendAssetParameters {
  type: 'sendAsset';
  /** the signing wallet's chain id as hex, e.g. "0xa4b1" */
  signatureChainId: Hex;
}

export interface SplitSignature {
  r: Hex;
  s: Hex;
  v: number;
}

/** Body of `POST {exchange_url}/exchange`. */
export interface SignedSendAsset {
  action: SendAssetAction;
  nonce: number;
  signature: SplitSignature;
}

export function chainIdToHex(chainId: number): Hex {
  if (!Number.isSafeInteger(chainId) || chainId <= 0) throw new Error(`invalid chain id ${chainId}`);
  return `0x${chainId.toString(16)}`;
}

/** Parses a hex chain id ("0xa4b1"); throws on anything else. */
export function chainIdFromHex(hex: string): number {
  if (typeof hex !== 'string' || !/^0x[0-9a-fA-F]{1,13}$/.test(hex)) {
    throw new Error(`invalid signatureChainId ${JSON.stringify(hex)}`);
  }
  const n = parseInt(hex, 16);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`invalid signatureChainId ${hex}`);
  return n;
}

export function buildSendAssetAction(params: SendAssetParameters, signatureChainId: number): SendAssetAction {
  return { type: 'sendAsset', signatureChainId: chainIdToHex(signatureChainId), ...params };
}

/** The struct members of the action (exactly the eight typed fields). */
export function sendAssetMessage(action: SendAssetParameters) {
  return {
    exchangeChain: action.exchangeChain,
    destination: action.destination,
    sourceDex: action.sourceDex,
    destinationDex: action.destinationDex,
    token: action.token,
    amount: action.amount,
    fromSubAccount: action.fromSubAccount,
    nonce: BigInt(action.nonce),
  };
}

/** Full typed-data definition for signing/verifying a sendAsset action. */
export function sendAssetTypedData(action: SendAssetAction, domainName?: string) {
  return {
    domain: sendAssetDomain(chainIdFromHex(action.signatureChainId), domainName),
    types: SEND_ASSET_TYPES,
    primaryType: SEND_ASSET_PRIMARY_TYPE,
    message: sendAssetMessage(action),
  } as const;
}

/** Splits a 65-byte signature into r, s and a numeric v (27/28). */
export function splitSignature(signature: Hex): SplitSignature {
  if (!isHex(signature)) throw new Error('signature is not hex');
  const bytes = hexToBytes(signature);
  if (bytes.length !== 65) throw new Error(`signature must be 65 bytes, got ${bytes.length}`);
  const r = `0x${signature.slice(2, 66)}` as Hex;
  const s = `0x${signature.slice(66, 130)}` as Hex;
  let v = bytes[64]!;
  if (v < 27) v += 27;
  if (v !== 27 && v !== 28) throw new Error(`invalid signature v ${bytes[64]}`);
  return { r, s, v };
}

/** Joins r, s, v back into a 65-byte signature. */
export function joinSignature(sig: SplitSignature): Hex {
  const hex32 = /^0x[0-9a-fA-F]{64}$/;
  if (typeof sig?.r !== 'string' || !hex32.test(sig.r)) throw new Error('signature.r must be 32 bytes hex');
  if (typeof sig?.s !== 'string' || !hex32.test(sig.s)) throw new Error('signature.s must be 32 bytes hex');
  if (typeof sig.v !== 'number' || !Number.isInteger(sig.v)) throw new Error('signature.v must be a number');
  const v = sig.v < 27 ? sig.v + 27 : sig.v;
  if (v !== 27 && v !== 28) throw new Error(`invalid signature v ${sig.v}`);
  return `${sig.r}${sig.s.slice(2)}${v.toString(16).padStart(2, '0')}` as Hex;
}

/** Recovers the address that signed `action` (rebuilding the typed data as the spec describes). */
export async function recoverSendAssetSigner(action: SendAssetAction, signature: SplitSignature, domainName?: string): Promise<Address> {
  return recoverTypedDataAddress({ ...sendAssetTypedData(action, domainName), signature: joinSignature(signature) });
}

// ---------------------------------------------------------------------------------------------
// Nonce mapping (the withdrawal quote's `authorize` step)

export interface NonceMappingInput {
  chainId: number;
  wallet: Address;
  depositor: Address;
  id: Hex;
  nonce: number | bigint;
}

export const NONCE_MAPPING_TYPES = {
  NonceMapping: [
    { name: 'chainId', type: 'string' },
    { name: 'wallet', type: 'address' },
    { name: 'depositor', type: 'address' },
    { name: 'id', type: 'bytes32' },
    { name: 'nonce', type: 'uint256' },
  ],
} as const;

export function nonceMappingTypedData(input: NonceMappingInput) {
  return {
    domain: {
      name: 'ServiceNonceMapping',
      version: '2',
      chainId: input.chainId,
      verifyingContract: zeroAddress,
    },
    types: NONCE_MAPPING_TYPES,
    primaryType: 'NonceMapping',
    message: {
      chainId: 'exchange',
      wallet: input.wallet,
      depositor: input.depositor,
      nonce: typeof input.nonce === 'bigint' ? input.nonce : BigInt(input.nonce),
      id: input.id,
    },
  } as const;
}

// ---------------------------------------------------------------------------------------------
// Currency addresses on chain 1337

/** Perps USD: all-zero 16-byte address (32 hex zeros). */
export const PERPS_USD_CURRENCY = `0x${'0'.repeat(32)}` as Hex;

export type ExchangeCurrency = { kind: 'perps' } | { kind: 'spot'; tokenId: Hex; dex: string /* '' = the spot DEX, else a named DEX */ };

/**
 * `0x` + 32 hex zeros → perps USD; `0x` + 32 hex (tokenId) → spot; tokenId + hex(dexName) →
 * that token on the named DEX. Lower-cases the tokenId.
 */
export function parseExchangeCurrency(address: string): ExchangeCurrency {
  if (typeof address !== 'string' || !/^0x[0-9a-fA-F]*$/.test(address)) {
    throw new Error(`invalid exchange currency ${JSON.stringify(address)}`);
  }
  const body = address.slice(2).toLowerCase();
  if (body.length < 32 || body.length % 2 !== 0) throw new Error(`invalid exchange currency ${address}`);
  const tokenId = `0x${body.slice(0, 32)}` as Hex;
  const dexHex = body.slice(32);
  if (dexHex.length === 0 && tokenId === PERPS_USD_CURRENCY) return { kind: 'perps' };
  if (tokenId === PERPS_USD_CURRENCY) throw new Error(`invalid exchange currency ${address}: perps USD has no DEX`);
  let dex = '';
  if (dexHex.length > 0) {
    dex = Buffer.from(dexHex, 'hex').toString('utf8');
    if (Buffer.from(dex, 'utf8').toString('hex') !== dexHex || dex === 'spot') {
      throw new Error(`invalid exchange currency ${address}: bad DEX name`);
    }
  }
  return { kind: 'spot', tokenId, dex };
}

export function formatExchangeCurrency(currency: ExchangeCurrency): Hex {
  if (currency.kind === 'perps') return PERPS_USD_CURRENCY;
  if (!/^0x[0-9a-fA-F]{32}$/.test(currency.tokenId)) throw new Error(`invalid tokenId ${currency.tokenId}`);
  const dexHex = currency.dex ? Buffer.from(currency.dex, 'utf8').toString('hex') : '';
  return `${currency.tokenId.toLowerCase()}${dexHex}` as Hex;
}

/**
 * The `sourceDex`/`destinationDex` name that sendAsset uses for a currency's balance:
 * '' = perps (default USDC perp DEX), 'spot' = spot balance, else the named DEX.
 */
export function sendAssetDexFor(currency: ExchangeCurrency): string {
  if (currency.kind === 'perps') return '';
  return currency.dex === '' ? 'spot' : currency.dex;
}

/** sendAsset token string, Hyperliquid style: `NAME:0x<tokenId>`. */
export function sendAssetToken(name: string, tokenId: Hex): string {
  return `${name}:${tokenId.toLowerCase()}`;
}

export function isExchangeUser(value: unknown): value is Address {
  return typeof value === 'string' && isAddress(value, { strict: false });
}

export function normalizeUser(value: string): Address {
  return getAddress(value);
}

// ---------------------------------------------------------------------------------------------
// Decimal helpers (no floats)

/** Parses a non-negative decimal string into integer units with `decimals` places; throws if more precise. */
export function parseUnitsStrict(value: string, decimals: number): bigint {
  if (typeof value !== 'string' || !/^\d+(\.\d+)?$/.test(value)) {
    throw new Error(`invalid decimal amount ${JSON.stringify(value)}`);
  }
  const [whole, frac = ''] = value.split('.') as [string, string?];
  const trimmed = frac.replace(/0+$/, '');
  if (trimmed.length > decimals) throw new Error(`amount ${value} has more than ${decimals} decimals`);
  return BigInt(whole) * 10n ** BigInt(decimals) + BigInt(trimmed.padEnd(decimals, '0') || '0');
}

/** Formats integer units as a decimal string ("12.5", "0.0", "-3.25"). */
export function formatUnitsDecimal(value: bigint, decimals: number): string {
  const neg = value < 0n;
  const abs = neg ? -value : value;
  const base = 10n ** BigInt(decimals);
  const whole = abs / base;
  let frac = decimals > 0 ? (abs % base).toString().padStart(decimals, '0').replace(/0+$/, '') : '';
  if (frac === '') frac = '0';
  return `${neg ? '-' : ''}${whole}.${frac}`;
}

/** `exchangeChain` value the devnet stand-in accepts by default (Hyperliquid's `hyperliquidChain`). */
export const DEFAULT_EXCHANGE_CHAIN = 'Mainnet';

/** Keys allowed in a posted sendAsset action (the signed message), in signing order. */
export const SEND_ASSET_ACTION_KEYS = [
  'type',
  'signatureChainId',
  'exchangeChain',
  'destination',
  'sourceDex',
  'destinationDex',
  'token',
  'amount',
  'fromSubAccount',
  'nonce',
] as const;
