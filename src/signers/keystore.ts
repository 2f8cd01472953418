// Web3 Secret Storage (keystore JSON v3): the encrypted key file geth, clef, foundry (`cast wallet
// import`) and web3signer read and write. scrypt or pbkdf2 (hmac-sha256) derives a 32-byte key from the
// passphrase; its first half is the aes-128-ctr key, its second half authenticates the ciphertext
// (MAC = keccak256(dk[16..32] ++ ciphertext)), which tells a wrong passphrase from a right one.
// The same container holds the node's SVM key (64 bytes instead of 32; `address` is its base58 public key).
import { createCipheriv, createDecipheriv, pbkdf2Sync, randomBytes, randomUUID, scryptSync, timingSafeEqual } from 'node:crypto';
import { keccak256 } from 'viem';
import { RelayNodeError } from '../lib/errors.ts';

export class KeystoreError extends RelayNodeError {
  override name = 'KeystoreError';
}

export interface KeystoreV3 {
  version: 3;
  id: string;
  address?: string;
  crypto: {
    cipher: 'aes-128-ctr';
    cipherparams: { iv: string };
    ciphertext: string;
    kdf: 'scrypt' | 'pbkdf2';
    kdfparams: Record<string, unknown>;
    mac: string;
  };
}

export interface EncryptOptions {
  kdf?: 'scrypt' | 'pbkdf2';
  /** scrypt cost (a power of two); geth's "standard" 262144 by default. Tests use a small one for speed. */
  scryptN?: number;
  /** pbkdf2 iterations. */
  pbkdf2Iterations?: number;
  /** Stored in clear beside the ciphertext (lower-case hex without 0x for EVM, base58 for SVM). */
  address?: string;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function fromHex(s: unknown, what: string): Buffer {
  if (typeof s !== 'string' || !/^(0x)?([0-9a-fA-F]{2})*$/.test(s)) throw new KeystoreError(`keystore: ${what} is not hex`);
  return Buffer.from(s.replace(/^0x/, ''), 'hex');
}

function int(v: unknown, what: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw new KeystoreError(`keystore: kdfparams.${what} must be an integer in [${min}, ${max}]`);
  return v;
}

function deriveKey(passphrase: string, kdf: unknown, params: Record<string, unknown>): Buffer {
  const salt = fromHex(params.salt, 'kdfparams.salt');
  const dklen = int(params.dklen, 'dklen', 32, 64);
  const pass = Buffer.from(passphrase.normalize('NFKC'), 'utf8');
  if (kdf === 'scrypt') {
    const n = int(params.n, 'n', 2, 2 ** 22);
    if ((n & (n - 1)) !== 0) throw new KeystoreError('keystore: kdfparams.n must be a power of two');
    const r = int(params.r, 'r', 1, 64);
    const p = int(params.p, 'p', 1, 16);
    // scrypt needs about 128·n·r·p bytes; node's default cap (32 MiB) is below geth's standard cost.
    return scryptSync(pass, salt, dklen, { N: n, r, p, maxmem: 128 * n * r * p + 32 * 1024 * 1024 });
  }
  if (kdf === 'pbkdf2') {
    if (params.prf !== 'hmac-sha256') throw new KeystoreError('keystore: kdfparams.prf must be hmac-sha256');
    const c = int(params.c, 'c', 1, 100_000_000);
    return pbkdf2Sync(pass, salt, c, dklen, 'sha256');
  }
  throw new KeystoreError(`keystore: crypto.kdf must be scrypt or pbkdf2`);
}

function mac(dk: Buffer, ciphertext: Buffer): Buffer {
  return fromHex(keccak256(Buffer.concat([dk.subarray(16, 32), ciphertext])), 'mac');
}

/** Encrypts a secret (an EVM private key or an SVM secret key) into a keystore v3 object. */
export function encryptKeystore(secret: Uint8Array, passphrase: string, opts: EncryptOptions = {}): KeystoreV3 {
  const kdf = opts.kdf ?? 'scrypt';
  const salt = randomBytes(32);
  const kdfparams: Record<string, unknown> =
    kdf === 'scrypt'
      ? { dklen: 32, n: opts.scryptN ?? 262_144, r: 8, p: 1, salt: hex(salt) }
      : { dklen: 32, c: opts.pbkdf2Iterations ?? 262_144, prf: 'hmac-sha256', salt: hex(salt) };
  const dk = deriveKey(passphrase, kdf, kdfparams);
  const iv = randomBytes(16);
  const cipher = createCipheriv('aes-128-ctr', dk.subarray(0, 16), iv);
  const ciphertext = Buffer.concat([cipher.update(secret), cipher.final()]);
  return {
    version: 3,
    id: randomUUID(),
    ...(opts.address ? { address: opts.address } : {}),
    crypto: { cipher: 'aes-128-ctr', cipherparams: { iv: hex(iv) }, ciphertext: hex(ciphertext), kdf, kdfparams, mac: hex(mac(dk, ciphertext)) },
  };
}

/**
 * Decrypts a keystore v3 object (as parsed JSON). Throws a KeystoreError that names what is wrong
 * (the format, or "wrong passphrase") and never carries the passphrase or the key.
 */
export function decryptKeystore(json: unknown, passphrase: string): Uint8Array {
  if (!json || typeof json !== 'object') throw new KeystoreError('keystore: not a JSON object');
  // biome-ignore lint/suspicious/noExplicitAny: a keystore file is untrusted JSON; every field read is checked before use.
  const ks = json as Record<string, any>;
  if (ks.version !== 3) throw new KeystoreError('keystore: version must be 3');
  // geth writes "crypto"; some old tools wrote "Crypto".
  const c = ks.crypto ?? ks.Crypto;
  if (!c || typeof c !== 'object') throw new KeystoreError('keystore: crypto is missing');
  if (c.cipher !== 'aes-128-ctr') throw new KeystoreError('keystore: crypto.cipher must be aes-128-ctr');
  if (!c.kdfparams || typeof c.kdfparams !== 'object') throw new KeystoreError('keystore: crypto.kdfparams is missing');
  const ciphertext = fromHex(c.ciphertext, 'crypto.ciphertext');
  const iv = fromHex(c.cipherparams?.iv, 'crypto.cipherparams.iv');
  if (iv.length !== 16) throw new KeystoreError('keystore: crypto.cipherparams.iv must be 16 bytes');
  const expected = fromHex(c.mac, 'crypto.mac');
  const dk = deriveKey(passphrase, c.kdf, c.kdfparams);
  const actual = mac(dk, ciphertext);
  if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) {
    throw new KeystoreError('keystore: wrong passphrase (the MAC does not match)');
  }
  const decipher = createDecipheriv('aes-128-ctr', dk.subarray(0, 16), iv);
  return new Uint8Array(Buffer.concat([decipher.update(ciphertext), decipher.final()]));
}
