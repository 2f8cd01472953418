import { PublicKey } from '@solana/web3.js';
import { getAddress, isAddress, toHex, zeroAddress, type Hex } from 'viem';

export type ChainKind = 'evm' | 'svm';

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
  return svmKey(s)?.toBase58();
}

export function describeAddressKind(kind: ChainKind): string {
  return kind === 'evm' ? 'a 0x-prefixed 20-byte hex address' : 'a base58 32-byte public key';
}

export function nativeAddress(kind: ChainKind): string {
  return kind === 'evm' ? zeroAddress : SVM_NATIVE;
}

// An address as the raw bytes the protocol's orderData carries.
export function addressBytes(kind: ChainKind, canonical: string): Hex {
  return kind === 'evm' ? (canonical.toLowerCase() as Hex) : toHex(new PublicKey(canonical).toBytes());
}

// How the API writes an address: lower-case hex on EVM chains (as the interface's examples do).
export function apiAddress(kind: ChainKind, canonical: string): string {
  return kind === 'evm' ? canonical.toLowerCase() : canonical;
}
