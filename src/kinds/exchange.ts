import { getAddress, isAddress, type Hex } from 'viem';
import type { AddressCodec } from './codec.ts';

/**
 * The perpetuals exchange (chain 1337): accounts are EVM addresses (EIP-55 checksummed, as on EVM
 * chains); currencies are 16-byte token ids, 32 hex zeros for perps USD (the chain's native
 * currency), with the hex-encoded name of a non-spot DEX appended (lower-case). A 20-byte string is
 * always read as an account.
 */
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

/** The perpetuals exchange: EVM accounts, 16-byte currency ids, 32-byte transfer hashes; users hold EVM wallets. */
export const exchangeCodec: AddressCodec = {
  canonical: exchangeAddress,
  describe: 'a 0x-prefixed 20-byte hex address (an account) or an exchange currency (0x + 32 hex, + the hex DEX name)',
  native: EXCHANGE_PERPS_USD,
  bytes: (canonical) => canonical.toLowerCase() as Hex,
  api: (canonical) => canonical.toLowerCase(),
  parseTxId: (s) => (/^0x[0-9a-fA-F]{64}$/.test(s) ? s.toLowerCase() : undefined),
  userKind: 'evm',
};
