// `relay-node keystore create`: turns a raw key (from the environment or a file) into an encrypted
// keystore v3 file the node's solverSigner / allocatorSigner / svmSolverSigner read. EVM keystores
// can also come from geth, clef or `cast wallet import`; the SVM one (the 64-byte secret key in the
// same container) is made here.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { privateKeyToAccount } from 'viem/accounts';
import type { Hex } from 'viem';
import { parseSvmSecretKey, svmKeypair } from '../kinds/svm.ts';
import { encryptKeystore } from './keystore.ts';
import { errText } from '../lib/errors.ts';

export interface CreateKeystoreOptions {
  kind: 'evm' | 'svm';
  key: string;
  passphrase: string;
  out: string;
  scryptN?: number;
}

/** Encrypts a key into a new keystore file (mode 0600; an existing file is never overwritten); returns its address. */
export function createKeystoreFile(opts: CreateKeystoreOptions): string {
  if (existsSync(opts.out)) throw new Error(`keystore create: ${opts.out} exists; it is not overwritten`);
  if (opts.passphrase.length < 8) throw new Error('keystore create: the passphrase must have at least 8 characters');
  const key = opts.key.trim();
  let secret: Uint8Array;
  let address: string;
  if (opts.kind === 'evm') {
    // Messages describe the problem, never the key.
    if (!/^0x[0-9a-fA-F]{64}$/.test(key)) throw new Error('keystore create: the key is not a 0x-prefixed 32-byte hex string');
    address = privateKeyToAccount(key as Hex).address;
    secret = Buffer.from(key.slice(2), 'hex');
  } else {
    try {
      secret = parseSvmSecretKey(key);
      address = svmKeypair(key).publicKey.toBase58();
    } catch (e) {
      throw new Error(`keystore create: ${errText(e)}`);
    }
  }
  const ks = encryptKeystore(secret, opts.passphrase, { scryptN: opts.scryptN, address: opts.kind === 'evm' ? address.slice(2).toLowerCase() : address });
  writeFileSync(opts.out, `${JSON.stringify(ks, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  return address;
}

/** Reads a secret given as an environment variable name or a file path (for the CLI). */
export function readSecretArg(what: string, envName: string | undefined, file: string | undefined): string {
  if (Boolean(envName) === Boolean(file)) throw new Error(`keystore create: give exactly one of --${what}-env or --${what}-file`);
  if (envName) {
    const v = process.env[envName];
    if (v === undefined) throw new Error(`keystore create: environment variable ${envName} (--${what}-env) is not set`);
    return v;
  }
  try {
    return readFileSync(file!, 'utf8').replace(/\r?\n$/, '');
  } catch (e) {
    throw new Error(`keystore create: cannot read ${file} (--${what}-file): ${(e as NodeJS.ErrnoException).code ?? 'error'}`);
  }
}
