import { readFileSync } from 'node:fs';
import { privateKeyToAccount, toAccount } from 'viem/accounts';
import { getAddress, toHex, type Address, type Hex, type LocalAccount } from 'viem';
import type { ZodError } from 'zod';
import { configSchema, type ParsedConfig } from './schema.ts';
import { Secret } from './secret.ts';
import { parseSvmSecretKey, svmKeypair } from '../kinds/svm.ts';
import type { EvmSignerSource, SvmSignerSource } from './signerSchema.ts';
import { decryptKeystore, KeystoreError } from '../signers/keystore.ts';
import { remoteAccount } from '../signers/remote.ts';
import { errText, RelayNodeError } from '../lib/errors.ts';

export class ConfigError extends RelayNodeError {
  override name = 'ConfigError';
}

export interface Faults {
  /** Test hooks: kill the process with SIGKILL at a precise point of the fill pipeline. */
  crashAfterFillRecorded?: boolean;
  crashAfterFillBroadcast?: boolean;
  /** Between recording a fee-capped fill's cancel (feeCapPolicy 'cancel') and broadcasting it. */
  crashAfterCancelRecorded?: boolean;
  /** Stop the process (SIGSTOP, as a hung host) between recording a fill and broadcasting it, once: the active/standby tests resume it later. */
  pauseAfterFillRecorded?: boolean;
}

export interface Config
  extends Omit<ParsedConfig, 'solverKey' | 'allocatorKey' | 'svmSolverKey' | 'solverAddress' | 'solverSigner' | 'allocatorSigner' | 'svmSolverSigner'> {
  /**
   * Signs and pays for every EVM payout: a local key (solverKey, or solverSigner kind key/keystore) or
   * a remote signer. On a read-only replica configured with solverAddress alone, a signer that throws.
   */
  solverSigner: LocalAccount;
  /** The solver's EVM address: the signer's, or as configured for a replica without one. */
  solverAddress: Address;
  /** Signs the depository's call requests (refunds). */
  allocatorSigner: LocalAccount;
  /** The solver's key on SVM chains, as given (a base58 secret key or a JSON byte array). */
  svmSolverKey?: Secret<string>;
  /**
   * Whether the config names an allocator (absent: the solver signs call requests, which only
   * the read-only tools and the devnet accept; `start` refuses it, see checkStartKeys).
   */
  allocatorKeyConfigured: boolean;
  faults: Faults;
}

export function formatZodError(err: ZodError, prefix = ''): string {
  return err.issues.map((i) => `${prefix}${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`).join('; ');
}

const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;

// Reads a secret from an environment variable or a file; messages name the field, never the value.
function readSource(source: { env?: string; file?: string }, key: string, env: NodeJS.ProcessEnv, envField = 'env', fileField = 'file'): string {
  if (source.env) {
    const value = env[source.env];
    if (value === undefined) throw new ConfigError(`${key}.${envField}: environment variable ${source.env} is not set`);
    return value;
  }
  try {
    return readFileSync(source.file!, 'utf8');
  } catch (e) {
    throw new ConfigError(`${key}.${fileField}: cannot read ${source.file}: ${(e as NodeJS.ErrnoException).code ?? 'error'}`);
  }
}

function resolveKey(source: { env?: string; file?: string }, key: string, env: NodeJS.ProcessEnv): Secret<Hex> {
  const value = readSource(source, key, env).trim();
  // The message must not echo the value: it is a key, even when malformed.
  if (!PRIVATE_KEY.test(value)) throw new ConfigError(`${key}: the key is not a 0x-prefixed 32-byte hex string`);
  try {
    privateKeyToAccount(value as Hex);
  } catch {
    throw new ConfigError(`${key}: the key is not a valid secp256k1 private key`);
  }
  return new Secret(value as Hex);
}

// A keystore file's content, decrypted with its passphrase (the passphrase file's one trailing newline is not part of it).
function openKeystore(
  source: { path: string; passphraseFile?: string; passphraseEnv?: string },
  key: string,
  env: NodeJS.ProcessEnv,
): { secret: Uint8Array; address?: string } {
  const passphrase = readSource({ env: source.passphraseEnv, file: source.passphraseFile }, key, env, 'passphraseEnv', 'passphraseFile').replace(/\r?\n$/, '');
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(source.path, 'utf8'));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ConfigError(`${key}.path: ${code ? `cannot read ${source.path}: ${code}` : `${source.path} is not valid JSON`}`);
  }
  try {
    const secret = decryptKeystore(json, passphrase);
    const address = (json as { address?: unknown }).address;
    return { secret, address: typeof address === 'string' ? address : undefined };
  } catch (e) {
    if (e instanceof KeystoreError) throw new ConfigError(`${key}: ${source.path}: ${e.message}`);
    throw new ConfigError(`${key}: ${source.path}: cannot decrypt the keystore`);
  }
}

function resolveSigner(source: EvmSignerSource, key: string, env: NodeJS.ProcessEnv): { account: LocalAccount; key?: Secret<Hex> } {
  if (source.kind === 'key') {
    const k = resolveKey(source, key, env);
    return { account: privateKeyToAccount(k.reveal()), key: k };
  }
  if (source.kind === 'keystore') {
    const { secret, address } = openKeystore(source, key, env);
    if (secret.length !== 32) throw new ConfigError(`${key}: ${source.path}: the keystore does not hold a 32-byte EVM key`);
    let account: LocalAccount;
    try {
      account = privateKeyToAccount(toHex(secret));
    } catch {
      throw new ConfigError(`${key}: ${source.path}: the keystore's key is not a valid secp256k1 private key`);
    }
    if (address && /^(0x)?[0-9a-fA-F]{40}$/.test(address) && getAddress(`0x${address.replace(/^0x/, '')}`) !== account.address) {
      throw new ConfigError(`${key}: ${source.path}: the keystore's address field is not the address of its key`);
    }
    return { account, key: new Secret(toHex(secret)) };
  }
  return {
    account: remoteAccount({ url: source.url, chainUrls: source.chainUrls, address: source.address as Address, timeoutMs: source.timeoutMs, label: key }),
  };
}

// The SVM solver key (base58 secret key or JSON byte array), read like solverKey and checked.
function resolveSvmKey(source: { env?: string; file?: string }, key: string, env: NodeJS.ProcessEnv): Secret<string> {
  const value = readSource(source, key, env).trim();
  try {
    parseSvmSecretKey(value);
  } catch (e) {
    // The message describes the problem, never the value.
    throw new ConfigError(`${key}: ${errText(e)}`);
  }
  return new Secret(value);
}

// The SVM solver key from a keystore v3 file holding its 64-byte secret key.
function resolveSvmSigner(source: SvmSignerSource, key: string, env: NodeJS.ProcessEnv): Secret<string> {
  const { secret, address } = openKeystore(source, key, env);
  const text = JSON.stringify(Array.from(secret));
  let pub: string;
  try {
    pub = svmKeypair(text).publicKey.toBase58();
  } catch (e) {
    throw new ConfigError(`${key}: ${source.path}: the keystore does not hold an SVM secret key: ${errText(e)}`);
  }
  if (address && address !== pub) throw new ConfigError(`${key}: ${source.path}: the keystore's address field is not the public key of its key`);
  return new Secret(text);
}

// "//" keys are comments (JSON has none of its own); they are dropped before validation.
function stripComments(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripComments);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => k !== '//')
        .map(([k, x]) => [k, stripComments(x)]),
    );
  }
  return v;
}

// The signer of a read-only replica that has none: the replica never signs, so reaching for it is a bug.
function absentSigner(address: Address): LocalAccount {
  const refuse = async (): Promise<never> => {
    throw new ConfigError('solverKey: not configured (this is a read-only API replica)');
  };
  return toAccount({ address, signMessage: refuse, signTransaction: refuse, signTypedData: refuse });
}

export interface BuildOptions {
  /** `relay-node api`: solverAddress alone is enough, no private key is read. */
  readOnly?: boolean;
}

/** Validates a config object once; everything downstream trusts the result. */
/**
 * `ledger.url` given as `{ "env": NAME }` or `{ "file": PATH }` (the URL carries the database password, which then stays
 * out of the config file) is read here, before validation checks it like a URL written in place.
 */
function withLedgerUrl(raw: unknown, env: NodeJS.ProcessEnv): unknown {
  const ledger = (raw as { ledger?: { url?: unknown } } | null)?.ledger;
  const url = ledger?.url;
  if (!url || typeof url !== 'object') return raw;
  const source = url as { env?: unknown; file?: unknown };
  const keys = Object.keys(source);
  if (keys.length !== 1 || !(typeof source.env === 'string' || typeof source.file === 'string'))
    throw new ConfigError('invalid config: ledger.url: give a postgres:// URL, or exactly one of {"env": NAME} or {"file": PATH}');
  return { ...(raw as object), ledger: { ...ledger, url: readSource(source as { env?: string; file?: string }, 'ledger.url', env).trim() } };
}

export function buildConfig(raw: unknown, env: NodeJS.ProcessEnv = process.env, faults: Faults = {}, opts: BuildOptions = {}): Config {
  const parsed = configSchema.safeParse(withLedgerUrl(stripComments(raw), env));
  if (!parsed.success) throw new ConfigError(`invalid config: ${formatZodError(parsed.error)}`);
  const {
    solverKey,
    allocatorKey,
    svmSolverKey,
    solverAddress,
    solverSigner: solverSource,
    allocatorSigner: allocatorSource,
    svmSolverSigner,
    ...rest
  } = parsed.data;
  if (!solverKey && !solverSource) {
    if (!opts.readOnly)
      throw new ConfigError(
        'invalid config: solverKey: is required to run the node (or solverSigner; only the read-only `relay-node api` runs with solverAddress alone)',
      );
    const absent = absentSigner(solverAddress!);
    return { ...rest, solverSigner: absent, solverAddress: solverAddress!, allocatorSigner: absent, allocatorKeyConfigured: false, faults };
  }
  const solver = solverSource ? resolveSigner(solverSource, 'solverSigner', env) : resolveSigner({ kind: 'key', ...solverKey! }, 'solverKey', env);
  const derived = solver.account.address;
  if (solverAddress && getAddress(solverAddress) !== derived)
    throw new ConfigError(`invalid config: solverAddress: is not the address of ${solverSource ? 'solverSigner' : 'solverKey'}`);
  const allocator = allocatorSource
    ? resolveSigner(allocatorSource, 'allocatorSigner', env)
    : allocatorKey
      ? resolveSigner({ kind: 'key', ...allocatorKey }, 'allocatorKey', env)
      : solver;
  return {
    ...rest,
    solverSigner: solver.account,
    solverAddress: derived,
    allocatorSigner: allocator.account,
    allocatorKeyConfigured: allocatorKey !== undefined || allocatorSource !== undefined,
    ...(svmSolverKey ? { svmSolverKey: resolveSvmKey(svmSolverKey, 'svmSolverKey', env) } : {}),
    ...(svmSolverSigner ? { svmSolverKey: resolveSvmSigner(svmSolverSigner, 'svmSolverSigner', env) } : {}),
    faults,
  };
}

/**
 * The keys a production node (`relay-node start`) runs with: an allocator key of its own, other
 * than the solver's. One hot key that both pays fills and signs refunds' call requests puts
 * both at risk at once. Throws a ConfigError that never shows either key.
 */
export function checkStartKeys(config: Config): void {
  if (!config.allocatorKeyConfigured) {
    throw new ConfigError(
      'allocatorKey: is required by start: give the key that signs refund call requests ({"env": NAME} or {"file": PATH}, or allocatorSigner), another key than solverKey',
    );
  }
  if (config.allocatorSigner.address === config.solverSigner.address) {
    throw new ConfigError('allocatorKey: must not be the solver key: give the allocator a key of its own');
  }
}

/** Devnet and tests hand keys over in memory rather than through the environment. */
export function buildConfigWithKeys(raw: Record<string, unknown>, keys: { solver: Hex; allocator: Hex; svmSolver?: string }, faults: Faults = {}): Config {
  const env = { ...process.env, RELAY_DEVNET_SOLVER_KEY: keys.solver, RELAY_DEVNET_ALLOCATOR_KEY: keys.allocator, RELAY_DEVNET_SVM_SOLVER_KEY: keys.svmSolver };
  // A config that names its own signers (a test of keystores or remote signers) keeps them.
  return buildConfig(
    {
      ...raw,
      ...(raw.solverSigner ? {} : { solverKey: { env: 'RELAY_DEVNET_SOLVER_KEY' } }),
      ...(raw.allocatorSigner ? {} : { allocatorKey: { env: 'RELAY_DEVNET_ALLOCATOR_KEY' } }),
      ...(keys.svmSolver && !raw.svmSolverSigner ? { svmSolverKey: { env: 'RELAY_DEVNET_SVM_SOLVER_KEY' } } : {}),
    },
    env,
    faults,
  );
}

/** Reads and validates a config file (see buildConfig). */
export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env, opts: BuildOptions = {}): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read config file ${path}: ${(e as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`config file ${path} is not valid JSON: ${errText(e)}`);
  }
  return buildConfig(raw, env, {}, opts);
}
