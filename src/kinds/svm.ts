import { Keypair, PublicKey } from '@solana/web3.js';
import { toHex } from 'viem';
import type { AddressCodec } from './codec.ts';

// What an SVM chain spells: base58 public keys (case matters), base58 transaction signatures, and
// the solver's secret key as wallets export it.

/** The System Program's id stands for native SOL, as the protocol does on SVM chains. */
export const SVM_NATIVE = '11111111111111111111111111111111';

// ------------------------------------------------------------------------------------------ base58

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const INDEX = new Map([...ALPHABET].map((c, i) => [c, i]));

/** Base58 (the Bitcoin alphabet) of some bytes, leading zero bytes as leading 1s. */
export function base58Encode(bytes: Uint8Array): string {
  let n = 0n;
  for (const b of bytes) n = n * 256n + BigInt(b);
  let out = '';
  while (n > 0n) {
    out = ALPHABET[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = `1${out}`;
  }
  return out;
}

/** The bytes of a base58 string, or undefined when it holds a character outside the alphabet. */
export function base58Decode(s: string): Uint8Array | undefined {
  let n = 0n;
  for (const c of s) {
    const v = INDEX.get(c);
    if (v === undefined) return undefined;
    n = n * 58n + BigInt(v);
  }
  const bytes: number[] = [];
  while (n > 0n) {
    bytes.unshift(Number(n % 256n));
    n /= 256n;
  }
  for (const c of s) {
    if (c !== '1') break;
    bytes.unshift(0);
  }
  return Uint8Array.from(bytes);
}

/** A transaction signature as the chain spells it (base58 of 64 bytes), or undefined. */
export function parseSignature(s: string): string | undefined {
  if (!/^[1-9A-HJ-NP-Za-km-z]{64,88}$/.test(s)) return undefined;
  return base58Decode(s)?.length === 64 ? s : undefined;
}

// ------------------------------------------------------------------------------------------ keys

/**
 * The solver's SVM key: a base58 secret key (64 bytes, as wallets export it) or a JSON byte array
 * (as solana-keygen writes it). Errors never echo the value.
 */
export function parseSvmSecretKey(text: string): Uint8Array {
  const s = text.trim();
  let bytes: Uint8Array | undefined;
  if (s.startsWith('[')) {
    let arr: unknown;
    try {
      arr = JSON.parse(s);
    } catch {
      throw new Error('the key is not a valid JSON byte array');
    }
    if (!Array.isArray(arr) || !arr.every((x) => Number.isInteger(x) && x >= 0 && x <= 255)) throw new Error('the key is not a JSON array of bytes');
    bytes = Uint8Array.from(arr as number[]);
  } else {
    bytes = base58Decode(s);
    if (!bytes) throw new Error('the key is neither base58 nor a JSON byte array');
  }
  if (bytes.length !== 64) throw new Error(`the key has ${bytes.length} bytes; an ed25519 secret key has 64`);
  try {
    Keypair.fromSecretKey(bytes);
  } catch {
    throw new Error('the key is not a valid ed25519 secret key (its public half does not match)');
  }
  return bytes;
}

/** The keypair of a secret key in one of the spellings parseSvmSecretKey takes. */
export function svmKeypair(secret: string): Keypair {
  return Keypair.fromSecretKey(parseSvmSecretKey(secret));
}

function svmKey(s: string): PublicKey | undefined {
  if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(s)) return undefined;
  try {
    return new PublicKey(s);
  } catch {
    return undefined;
  }
}

/** SVM chains: base58 public keys, written as they are (case matters); the System Program's id is native SOL. */
export const svmCodec: AddressCodec = {
  canonical: (s) => svmKey(s)?.toBase58(),
  describe: 'a base58 32-byte public key',
  native: SVM_NATIVE,
  bytes: (canonical) => toHex(new PublicKey(canonical).toBytes()),
  api: (canonical) => canonical,
  parseTxId: parseSignature,
  userKind: 'svm',
};
