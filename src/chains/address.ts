import { PublicKey } from '@solana/web3.js';
import { getAddress, isAddress, toHex, zeroAddress, type Hex } from 'viem';

export type ChainKind = 'evm' | 'svm' | 'exchange';

// The System Program's id stands for native SOL, as the protocol does on SVM chains.
export const SVM_NATIVE = '11111111111111111111111111111111';

function svmKey(s: string): PublicKey | undefined {
  if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(s)) return undefined;
  try {
    return new PublicKey(s);
  } catch {
    return undefined;
  }
}

// The one spelling the ledger stores and compares: EIP-55 checksummed on EVM chains, base58 on SVM
// chains (where case matters). undefined when `s` is not an address of that kind.
export function canonicalAddress(kind: ChainKind, s: string): string | undefined {
  if (kind === 'evm') return isAddress(s, { strict: false }) ? getAddress(s) : undefined;
  if (kind === 'exchange') return exchangeAddress(s);
  return svmKey(s)?.toBase58();
}

export function describeAddressKind(kind: ChainKind): string {
  if (kind === 'exchange') return 'a 0x-prefixed 20-byte hex address (an account) or an exchange currency (0x + 32 hex, + the hex DEX name)';
  return kind === 'evm' ? 'a 0x-prefixed 20-byte hex address' : 'a base58 32-byte public key';
}

export function nativeAddress(kind: ChainKind): string {
  if (kind === 'exchange') return EXCHANGE_PERPS_USD;
  return kind === 'evm' ? zeroAddress : SVM_NATIVE;
}

// An address as the raw bytes the protocol's orderData carries.
export function addressBytes(kind: ChainKind, canonical: string): Hex {
  if (kind === 'exchange') return canonical.toLowerCase() as Hex;
  return kind === 'evm' ? (canonical.toLowerCase() as Hex) : toHex(new PublicKey(canonical).toBytes());
}

// How the API writes an address: lower-case hex on EVM chains (as the interface's examples do).
export function apiAddress(kind: ChainKind, canonical: string): string {
  if (kind === 'exchange') return canonical.toLowerCase();
  return kind === 'evm' ? canonical.toLowerCase() : canonical;
}

// The perpetuals exchange (chain 1337): accounts are EVM addresses (EIP-55 checksummed, as on EVM
// chains); currencies are 16-byte token ids, 32 hex zeros for perps USD (the chain's native
// currency), with the hex-encoded name of a non-spot DEX appended (lower-case). A 20-byte string is
// always read as an account.
export const EXCHANGE_PERPS_USD = `0x${'0'.repeat(32)}`;

function exchangeAddress(s: string): string | undefined {
  if (isAddress(s, { strict: false })) return getAddress(s);
  if (typeof s !== 'string' || !/^0x([0-9a-fA-F]{2}){16,48}$/.test(s)) return undefined;
  const body = s.slice(2).toLowerCase();
  const dexHex = body.slice(32);
  if (dexHex.length > 0) {
    if (body.slice(0, 32) === EXCHANGE_PERPS_USD.slice(2)) return undefined;
    const dex = Buffer.from(dexHex, 'hex').toString('utf8');
    if (Buffer.from(dex, 'utf8').toString('hex') !== dexHex || dex === 'spot' || !/^[a-z0-9]+$/.test(dex)) return undefined;
  }
  return `0x${body}`;
}

// The kind of address a user holds on a chain of this kind (exchange accounts are EVM addresses),
// so a recipient can default to the user across kinds that share it.
export function userAddressKind(kind: ChainKind): ChainKind {
  return kind === 'exchange' ? 'evm' : kind;
}
