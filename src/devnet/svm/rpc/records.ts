// Decoded transactions and the records the stand-in keeps of each executed one, with the compute
// budget, memo and signature checks read off a transaction.

import crypto from 'node:crypto';
import type { Transaction as KitTransaction } from '@solana/kit';
import type { VersionedTransaction } from '@solana/web3.js';
import { BUILTIN_PROGRAMS, COMPUTE_BUDGET_PROGRAM, MEMO_V1_PROGRAM, MEMO_V2_PROGRAM, readU32, readU64, type UiTokenAmount } from './codec.ts';
import type { TxErrJson } from './txErrors.ts';

// ---------------------------------------------------------------------------------------------------------
// Decoded transactions and records

/** A wire transaction, decoded once: keys, signers, instructions, fee and memo. */
export interface DecodedTx {
  wire: Uint8Array;
  vtx: VersionedTransaction;
  kitTx: KitTransaction;
  signature: string;
  signatures: string[];
  version: 'legacy' | 0;
  staticKeys: string[];
  loaded: { writable: string[]; readonly: string[] };
  /** static keys, then loaded writable, then loaded readonly */
  keys: string[];
  writable: boolean[];
  signer: boolean[];
  recentBlockhash: string;
  instructions: { programIdIndex: number; accounts: number[]; data: Uint8Array }[];
  cuPrice: bigint;
  cuLimit: number;
  fee: number;
  memo: string | null;
}

/** A token account's balance in a transaction's pre/post token balances. */
export interface TokenBalance {
  accountIndex: number;
  mint: string;
  owner: string;
  programId: string;
  uiTokenAmount: UiTokenAmount;
}

/** An executed transaction as the history methods answer it. */
export interface TxRecord {
  tx: DecodedTx;
  slot: number;
  blockTime: number;
  index: number;
  preBalances: number[];
  postBalances: number[];
  preTokenBalances: TokenBalance[];
  postTokenBalances: TokenBalance[];
  logs: string[];
  fee: number;
  err: TxErrJson | null;
  computeUnitsConsumed: number;
  innerInstructions: { index: number; instructions: { programIdIndex: number; accounts: number[]; data: string; stackHeight: number }[] }[];
  returnData: { programId: string; data: [string, 'base64'] } | null;
}

/** The compute unit price and limit a transaction's ComputeBudget instructions set (or the default limits). */
export function computeBudget(programIds: string[], instructions: DecodedTx['instructions']): { price: bigint; limit: number } {
  let price = 0n;
  let limit: number | null = null;
  let defaultLimit = 0;
  instructions.forEach((ix, i) => {
    const pid = programIds[i]!;
    if (pid === COMPUTE_BUDGET_PROGRAM) {
      const d = ix.data;
      if (d[0] === 2 && d.length >= 5) limit = readU32(d, 1);
      if (d[0] === 3 && d.length >= 9) price = readU64(d, 1);
    }
    defaultLimit += BUILTIN_PROGRAMS.has(pid) ? 3_000 : 200_000;
  });
  return { price, limit: Math.min(limit ?? defaultLimit, 1_400_000) };
}

/** The memos of a transaction, as getSignaturesForAddress answers them (`[len] text; ...`), or null. */
export function memoOf(programIds: string[], instructions: DecodedTx['instructions']): string | null {
  const memos: string[] = [];
  instructions.forEach((ix, i) => {
    const pid = programIds[i];
    if (pid === MEMO_V2_PROGRAM || pid === MEMO_V1_PROGRAM) {
      memos.push(`[${ix.data.length}] ${Buffer.from(ix.data).toString('utf8')}`);
    }
  });
  return memos.length ? memos.join('; ') : null;
}

/** The DER prefix of an Ed25519 public key (SPKI), for node:crypto. */
export const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** Whether `sig` is the key's Ed25519 signature of `msg`. */
export function verifyEd25519(pubkey: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean {
  try {
    const key = crypto.createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, pubkey]), format: 'der', type: 'spki' });
    return crypto.verify(null, msg, key, sig);
  } catch {
    return false;
  }
}
