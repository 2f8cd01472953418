// Accounts: read from litesvm, encoded in the RPC's encodings (base64, base58, jsonParsed for token
// accounts and mints), and the balances a transaction record keeps before and after.

import { address as kitAddress } from '@solana/kit';
import type { ChainState } from './chainState.ts';
import { b64, invalidParams, type Json, toB58, TOKEN_PROGRAM, U64_MAX_AS_NUMBER, uiTokenAmount } from './codec.ts';
import type { TokenBalance } from './records.ts';
import { isTokenProgram, parseExtensions, parseMint, parseTokenAccount } from './tokenState.ts';

/** An account as the RPC methods read it. */
export interface Acct {
  lamports: number;
  owner: string;
  data: Uint8Array;
  executable: boolean;
}

/** Account reads and encodings over the chain's litesvm. */
export function createAccounts(chain: ChainState) {
  const { svm } = chain;
  // ------------------------------------------------------------------ accounts

  function getAcct(pubkey: string): Acct | null {
    const a = svm.getAccount(kitAddress(pubkey));
    if (!a.exists) return null;
    return { lamports: Number(a.lamports), owner: a.programAddress, data: a.data, executable: a.executable };
  }

  function encodeAccount(pubkey: string, a: Acct, encoding: string, dataSlice?: { offset?: number; length?: number }): Json {
    let data = a.data;
    if (dataSlice && encoding !== 'jsonParsed') {
      const o = dataSlice.offset ?? 0;
      data = data.subarray(o, o + (dataSlice.length ?? data.length));
    }
    let encoded: Json;
    switch (encoding) {
      case 'base64':
        encoded = [b64(data), 'base64'];
        break;
      case 'base58':
        encoded = [toB58(data), 'base58'];
        break;
      case 'binary':
        encoded = toB58(data);
        break;
      case 'jsonParsed':
        encoded = parsedAccountData(pubkey, a) ?? [b64(data), 'base64'];
        break;
      default:
        throw invalidParams(`Invalid param: unsupported encoding ${encoding}`);
    }
    return {
      data: encoded,
      executable: a.executable,
      lamports: a.lamports,
      owner: a.owner,
      rentEpoch: U64_MAX_AS_NUMBER,
      space: a.data.length,
    };
  }

  function mintDecimals(mint: string): number {
    const m = getAcct(mint);
    const ms = m && parseMint(m.owner, m.data);
    return ms ? ms.decimals : 0;
  }

  function parsedAccountData(_pubkey: string, a: Acct): Json | null {
    if (!isTokenProgram(a.owner)) return null;
    const program = a.owner === TOKEN_PROGRAM ? 'spl-token' : 'spl-token-2022';
    const ta = parseTokenAccount(a.owner, a.data);
    if (ta) {
      const decimals = mintDecimals(ta.mint);
      const info: Record<string, Json> = {
        isNative: ta.isNative !== null,
        mint: ta.mint,
        owner: ta.owner,
        state: ta.state === 2 ? 'frozen' : 'initialized',
        tokenAmount: uiTokenAmount(ta.amount, decimals),
      };
      if (ta.delegate) {
        info.delegate = ta.delegate;
        info.delegatedAmount = uiTokenAmount(ta.delegatedAmount, decimals);
      }
      if (ta.isNative !== null) info.rentExemptReserve = uiTokenAmount(ta.isNative, decimals);
      if (ta.closeAuthority) info.closeAuthority = ta.closeAuthority;
      const ext = parseExtensions(ta.extensions);
      if (ext) info.extensions = ext;
      return { program, parsed: { info, type: 'account' }, space: a.data.length };
    }
    const ms = parseMint(a.owner, a.data);
    if (ms) {
      const info: Record<string, Json> = {
        decimals: ms.decimals,
        freezeAuthority: ms.freezeAuthority,
        isInitialized: ms.isInitialized,
        mintAuthority: ms.mintAuthority,
        supply: ms.supply.toString(),
      };
      const ext = parseExtensions(ms.extensions);
      if (ext) info.extensions = ext;
      return { program, parsed: { info, type: 'mint' }, space: a.data.length };
    }
    return null;
  }

  function tokenBalanceOf(index: number, a: Acct | null): TokenBalance | null {
    if (!a) return null;
    const ta = parseTokenAccount(a.owner, a.data);
    if (!ta) return null;
    return {
      accountIndex: index,
      mint: ta.mint,
      owner: ta.owner,
      programId: a.owner,
      uiTokenAmount: uiTokenAmount(ta.amount, mintDecimals(ta.mint)),
    };
  }

  function snapshot(keys: string[]): { balances: number[]; tokens: TokenBalance[] } {
    const balances: number[] = [];
    const tokens: TokenBalance[] = [];
    keys.forEach((k, i) => {
      const a = getAcct(k);
      balances.push(a ? a.lamports : 0);
      const tb = tokenBalanceOf(i, a);
      if (tb) tokens.push(tb);
    });
    return { balances, tokens };
  }

  return { getAcct, encodeAccount, mintDecimals, parsedAccountData, tokenBalanceOf, snapshot };
}

/** What createAccounts returns. */
export type Accounts = ReturnType<typeof createAccounts>;
