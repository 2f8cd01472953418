// SPL Token and Token-2022 account and mint layouts, with their extensions, parsed from account data.

import { isZero, type Json, readCOptionKey, readU16, readU32, readU64, toB58, TOKEN_2022_PROGRAM, TOKEN_PROGRAM } from './codec.ts';

// ---------------------------------------------------------------------------------------------------------
// Token account / mint parsing

/** An SPL token account's fields. */
export interface TokenAccountState {
  mint: string;
  owner: string;
  amount: bigint;
  delegate: string | null;
  state: number; // 1 initialized, 2 frozen
  isNative: bigint | null;
  delegatedAmount: bigint;
  closeAuthority: string | null;
  extensions: Uint8Array | null;
}
/** An SPL mint's fields. */
export interface MintState {
  mintAuthority: string | null;
  supply: bigint;
  decimals: number;
  isInitialized: boolean;
  freezeAuthority: string | null;
  extensions: Uint8Array | null;
}

/** Whether a program is SPL Token or Token-2022. */
export function isTokenProgram(owner: string): boolean {
  return owner === TOKEN_PROGRAM || owner === TOKEN_2022_PROGRAM;
}

/** A token account's fields from its data, or null when it is not one. */
export function parseTokenAccount(owner: string, data: Uint8Array): TokenAccountState | null {
  if (!isTokenProgram(owner) || data.length < 165) return null;
  if (data.length > 165 && (owner !== TOKEN_2022_PROGRAM || data[165] !== 2)) return null;
  const state = data[108]!;
  if (state === 0) return null;
  return {
    mint: toB58(data.subarray(0, 32)),
    owner: toB58(data.subarray(32, 64)),
    amount: readU64(data, 64),
    delegate: readCOptionKey(data, 72),
    state,
    isNative: readU32(data, 109) === 1 ? readU64(data, 113) : null,
    delegatedAmount: readU64(data, 121),
    closeAuthority: readCOptionKey(data, 129),
    extensions: data.length > 166 ? data.subarray(166) : null,
  };
}

/** A mint's fields from its data, or null when it is not one. */
export function parseMint(owner: string, data: Uint8Array): MintState | null {
  if (!isTokenProgram(owner)) return null;
  if (data.length !== 82 && !(owner === TOKEN_2022_PROGRAM && data.length > 165 && data[165] === 1)) return null;
  return {
    mintAuthority: readCOptionKey(data, 0),
    supply: readU64(data, 36),
    decimals: data[44]!,
    isInitialized: data[45] === 1,
    freezeAuthority: readCOptionKey(data, 46),
    extensions: data.length > 166 ? data.subarray(166) : null,
  };
}

/** Token-2022 extension names by type, as jsonParsed spells them. */
export const EXTENSION_NAMES: Record<number, string> = {
  1: 'transferFeeConfig',
  2: 'transferFeeAmount',
  3: 'mintCloseAuthority',
  4: 'confidentialTransferMint',
  5: 'confidentialTransferAccount',
  6: 'defaultAccountState',
  7: 'immutableOwner',
  8: 'memoTransfer',
  9: 'nonTransferable',
  10: 'interestBearingConfig',
  11: 'cpiGuard',
  12: 'permanentDelegate',
  13: 'nonTransferableAccount',
  14: 'transferHook',
  15: 'transferHookAccount',
  18: 'metadataPointer',
  19: 'tokenMetadata',
  20: 'groupPointer',
  21: 'tokenGroup',
  22: 'groupMemberPointer',
  23: 'tokenGroupMember',
};

/** A key, or null when it is all zeros (an unset optional key). */
export function optKey(d: Uint8Array): string | null {
  return isZero(d) ? null : toB58(d);
}

/** Token-2022 extensions (TLV) in the jsonParsed shape, or undefined when there are none. */
export function parseExtensions(tlv: Uint8Array | null): Json[] | undefined {
  if (!tlv) return undefined;
  const out: Json[] = [];
  let off = 0;
  while (off + 4 <= tlv.length) {
    const type = readU16(tlv, off);
    const len = readU16(tlv, off + 2);
    const v = tlv.subarray(off + 4, off + 4 + len);
    off += 4 + len;
    if (type === 0) break;
    const name = EXTENSION_NAMES[type];
    const fee = (o: number) => ({
      epoch: Number(readU64(v, o)),
      maximumFee: Number(readU64(v, o + 8)),
      transferFeeBasisPoints: readU16(v, o + 16),
    });
    switch (type) {
      case 1:
        out.push({
          extension: name,
          state: {
            transferFeeConfigAuthority: optKey(v.subarray(0, 32)),
            withdrawWithheldAuthority: optKey(v.subarray(32, 64)),
            withheldAmount: Number(readU64(v, 64)),
            olderTransferFee: fee(72),
            newerTransferFee: fee(90),
          },
        });
        break;
      case 2:
        out.push({ extension: name, state: { withheldAmount: Number(readU64(v, 0)) } });
        break;
      case 3:
        out.push({ extension: name, state: { closeAuthority: optKey(v.subarray(0, 32)) } });
        break;
      case 7:
      case 9:
      case 13:
        out.push({ extension: name });
        break;
      case 8:
        out.push({ extension: name, state: { requireIncomingTransferMemos: v[0] === 1 } });
        break;
      case 12:
        out.push({ extension: name, state: { delegate: optKey(v.subarray(0, 32)) } });
        break;
      case 18:
        out.push({
          extension: name,
          state: { authority: optKey(v.subarray(0, 32)), metadataAddress: optKey(v.subarray(32, 64)) },
        });
        break;
      default:
        out.push({ extension: 'unparseableExtension' });
    }
  }
  return out;
}
