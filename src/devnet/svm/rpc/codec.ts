// The SVM RPC stand-in's constants and small codecs: program ids, limits, base58/base64, the JSON-RPC
// error, and the parameter parsers every method shares.

import { getBase58Decoder, getBase58Encoder, getTransactionDecoder } from '@solana/kit';
import { RelayNodeError } from '../../../lib/errors.ts';

// ---------------------------------------------------------------------------------------------------------
// Constants

/** The programs the stand-in knows by id: the System Program (native SOL), the token programs, ATA, memo and compute budget. */
export const SYSTEM_PROGRAM = '11111111111111111111111111111111';
export const TOKEN_PROGRAM = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
export const TOKEN_2022_PROGRAM = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb';
export const ATA_PROGRAM = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL';
export const MEMO_V2_PROGRAM = 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr';
export const MEMO_V1_PROGRAM = 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo';
export const COMPUTE_BUDGET_PROGRAM = 'ComputeBudget111111111111111111111111111111';

/** The base fee per signature, in lamports. */
export const LAMPORTS_PER_SIGNATURE = 5000;
/** Blocks a blockhash stays valid for (Solana's MAX_PROCESSING_AGE). */
export const MAX_PROCESSING_AGE = 150;
/** Slots after which a transaction counts as finalized. */
export const FINALIZE_DEPTH = 32;
/** Solana's epoch length, in slots. */
export const SLOTS_PER_EPOCH = 432_000;
/** u64::MAX as the RPC answers an account's rentEpoch. */
// biome-ignore lint/correctness/noPrecisionLoss: the RPC answers u64::MAX as this JSON number, rounded exactly as a client's JSON.parse rounds it.
export const U64_MAX_AS_NUMBER = 18446744073709551615;
/** What the faucet starts with (1M SOL, well inside Number's safe range). */
export const FAUCET_LAMPORTS = 1_000_000_000_000_000n;
/** The Solana version the stand-in answers getVersion with. */
export const SOLANA_CORE_VERSION = '2.2.7';
/** The feature set getVersion answers. */
export const FEATURE_SET = 3294202862;

/** Programs whose instructions reserve 3,000 CUs by default (the rest reserve 200,000). */
export const BUILTIN_PROGRAMS = new Set([
  SYSTEM_PROGRAM,
  COMPUTE_BUDGET_PROGRAM,
  'AddressLookupTab1e1111111111111111111111111',
  'Vote111111111111111111111111111111111111111',
  'Stake11111111111111111111111111111111111111',
  'Config1111111111111111111111111111111111111',
  'BPFLoader1111111111111111111111111111111111',
  'BPFLoader2111111111111111111111111111111111',
  'BPFLoaderUpgradeab1e11111111111111111111111',
  'LoaderV411111111111111111111111111111111111',
  'Ed25519SigVerify111111111111111111111111111',
  'KeccakSecp256k11111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111',
]);

// ---------------------------------------------------------------------------------------------------------
// Small helpers

/** base58 string to bytes. */
export const b58enc = getBase58Encoder();
/** bytes to base58 string. */
export const b58dec = getBase58Decoder();
/** bytes as base58. */
export const toB58 = (bytes: Uint8Array): string => b58dec.decode(bytes);
/** base58 as bytes. */
export const fromB58 = (s: string): Uint8Array => new Uint8Array(b58enc.encode(s));
/** bytes as base64. */
export const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
/** Decodes a wire transaction into @solana/kit's form (for litesvm). */
export const txDecoder = getTransactionDecoder();

/** A JSON-RPC error answer: code, message and optional data, as Solana's RPC spells them. */
export class RpcError extends RelayNodeError {
  override name = 'RpcError';
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}
/** An invalid-params (-32602) error naming what is wrong. */
export const invalidParams = (msg: string) => new RpcError(-32602, msg);

/** Any JSON value the RPC answers. */
export type Json = unknown;
/** A commitment level, as the RPC's `commitment` option names it. */
export type Commitment = 'processed' | 'confirmed' | 'finalized';
/** A method's config object (its last parameter). */
export type Cfg = Record<string, unknown>;

/** A base58 public key parameter, or an invalid-params error. */
export function parsePubkey(v: unknown): string {
  if (typeof v !== 'string') throw invalidParams('Invalid param: Invalid');
  try {
    const k = fromB58(v);
    if (k.length !== 32) throw new Error('len');
  } catch {
    throw invalidParams('Invalid param: Invalid');
  }
  return v;
}

/** A little-endian u64 at `off`. */
export function readU64(d: Uint8Array, off: number): bigint {
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).readBigUInt64LE(off);
}
/** A little-endian u32 at `off`. */
export function readU32(d: Uint8Array, off: number): number {
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).readUInt32LE(off);
}
/** A little-endian u16 at `off`. */
export function readU16(d: Uint8Array, off: number): number {
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).readUInt16LE(off);
}
/** An SPL `COption<Pubkey>` at `off` (4-byte tag, then the key), or null. */
export function readCOptionKey(d: Uint8Array, off: number): string | null {
  return readU32(d, off) === 1 ? toB58(d.subarray(off + 4, off + 36)) : null;
}
/** Whether every byte is zero. */
export function isZero(d: Uint8Array): boolean {
  return d.every((b) => b === 0);
}

/** Solana's `real_number_string_trimmed`. */
export function uiAmountString(amount: bigint, decimals: number): string {
  if (decimals === 0) return amount.toString();
  const s = amount.toString().padStart(decimals + 1, '0');
  const int = s.slice(0, s.length - decimals);
  const frac = s.slice(s.length - decimals).replace(/0+$/, '');
  return frac ? `${int}.${frac}` : int;
}
/** A token amount as the RPC answers it (`uiTokenAmount`). */
export interface UiTokenAmount {
  amount: string;
  decimals: number;
  uiAmount: number | null;
  uiAmountString: string;
}
/** A base-unit amount in the RPC's `uiTokenAmount` shape. */
export function uiTokenAmount(amount: bigint, decimals: number): UiTokenAmount {
  const s = uiAmountString(amount, decimals);
  return { amount: amount.toString(), decimals, uiAmount: Number(s), uiAmountString: s };
}

/** The commitment a config names (finalized when none), or an invalid-params error. */
export function normCommitment(c: unknown): Commitment {
  if (c === undefined || c === null) return 'finalized';
  switch (c) {
    case 'processed':
    case 'recent':
      return 'processed';
    case 'confirmed':
    case 'single':
    case 'singleGossip':
      return 'confirmed';
    case 'finalized':
    case 'max':
    case 'root':
      return 'finalized';
    default:
      throw invalidParams(`Invalid commitment: ${String(c)}`);
  }
}
