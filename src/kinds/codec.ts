import type { Hex } from 'viem';

// What each kind of chain spells: its addresses, transaction ids and keys. The lowest layer of the
// node (config validates addresses with it, chains and the API read and write them through it): it
// imports nothing of the node. Nothing here branches on a kind: each kind has its own module, and
// the chain registry (src/chains/registry.ts) picks one per chain.

/** The kinds of chain the node serves. */
export type ChainKind = 'evm' | 'svm' | 'exchange';

/** How a chain spells its addresses and transaction ids (static: no RPC, available on a read-only replica). */
export interface AddressCodec {
  /** The one spelling the ledger stores and compares; undefined when `s` is not an address of the chain. */
  canonical(s: string): string | undefined;
  /** What an address of the chain looks like, for error messages. */
  readonly describe: string;
  /** The address that stands for the chain's native currency. */
  readonly native: string;
  /** An address as the raw bytes the protocol's orderData carries. */
  bytes(canonical: string): Hex;
  /** How the API writes an address. */
  api(canonical: string): string;
  /** A transaction id as the chain spells it, or undefined when `s` is not one. */
  parseTxId(s: string): string | undefined;
  /**
   * The kind of the wallets users hold on the chain (exchange accounts are EVM addresses): a
   * recipient defaults to the user only across chains whose users hold the same kind of wallet.
   */
  readonly userKind: ChainKind;
}
