import type { Hex } from 'viem';
import { codecOf, type ChainKind } from './index.ts';

/**
 * Addresses by kind of chain, for code that holds a kind rather than a chain's profile (the config,
 * audits, a chain's own modules). Each function is its kind's codec (src/kinds/): no branch here.
 */
export type { ChainKind } from './index.ts';
export { EXCHANGE_PERPS_USD, SVM_NATIVE } from './index.ts';

/**
 * The one spelling the ledger stores and compares: EIP-55 checksummed on EVM chains, base58 on SVM
 * chains (where case matters). undefined when `s` is not an address of that kind.
 */
export function canonicalAddress(kind: ChainKind, s: string): string | undefined {
  return codecOf(kind).canonical(s);
}

/** What an address of this kind looks like, for error messages. */
export function describeAddressKind(kind: ChainKind): string {
  return codecOf(kind).describe;
}

/** The address that stands for the native currency on chains of this kind. */
export function nativeAddress(kind: ChainKind): string {
  return codecOf(kind).native;
}

/** An address as the raw bytes the protocol's orderData carries. */
export function addressBytes(kind: ChainKind, canonical: string): Hex {
  return codecOf(kind).bytes(canonical);
}

/** How the API writes an address: lower-case hex on EVM chains (as the interface's examples do). */
export function apiAddress(kind: ChainKind, canonical: string): string {
  return codecOf(kind).api(canonical);
}

/**
 * The kind of address a user holds on a chain of this kind (exchange accounts are EVM addresses),
 * so a recipient can default to the user across kinds that share it.
 */
export function userAddressKind(kind: ChainKind): ChainKind {
  return codecOf(kind).userKind;
}
