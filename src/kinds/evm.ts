import { getAddress, isAddress, isHash, zeroAddress, type Hex } from 'viem';
import type { AddressCodec } from './codec.ts';

/** EVM chains: EIP-55 checksummed addresses in the ledger, lower-case hex in the API (as the interface's examples write them). */
export const evmCodec: AddressCodec = {
  canonical: (s) => (isAddress(s, { strict: false }) ? getAddress(s) : undefined),
  describe: 'a 0x-prefixed 20-byte hex address',
  native: zeroAddress,
  bytes: (canonical) => canonical.toLowerCase() as Hex,
  api: (canonical) => canonical.toLowerCase(),
  parseTxId: (s) => (isHash(s) ? s.toLowerCase() : undefined),
  userKind: 'evm',
};
