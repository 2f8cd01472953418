import { readFileSync } from 'node:fs';
import { privateKeyToAccount } from 'viem/accounts';
import type { Address, Hex } from 'viem';
import type { ZodError } from 'zod';
import { configSchema, type ParsedConfig } from './schema.ts';
import { Secret } from './secret.ts';
import { parseSvmSecretKey } from '../chains/svm/transactions.ts';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface Faults {
  // Test hooks: kill the process with SIGKILL at a precise point of the fill pipeline.
  crashAfterFillRecorded?: boolean;
  crashAfterFillBroadcast?: boolean;
}

export interface Config extends Omit<ParsedConfig, 'solverKey' | 'allocatorKey' | 'svmSolverKey' | 'solverAddress'> {
  // On a read-only replica configured with solverAddress alone, a key whose reveal() throws.
  solverKey: Secret<Hex>;
  // The solver's EVM address: from solverKey, or as configured for a replica without the key.
  solverAddress: Address;
  allocatorKey: Secret<Hex>;
  // The solver's key on SVM chains, as given (a base58 secret key or a JSON byte array).
  svmSolverKey?: Secret<string>;
  // Whether the config names an allocatorKey (absent: allocatorKey is the solver key, which only
  // the read-only tools and the devnet accept; `start` refuses it, see checkStartKeys).
  allocatorKeyConfigured: boolean;
  faults: Faults;
}

export function formatZodError(err: ZodError, prefix = ''): string {
  return err.issues
    .map((i) => `${prefix}${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}

const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;

function resolveKey(
  source: { env?: string; file?: string },
  key: string,
  env: NodeJS.ProcessEnv,
): Secret<Hex> {
  let value: string | undefined;
  if (source.env) {
    value = env[source.env];
    if (value === undefined) throw new ConfigError(`${key}.env: environment variable ${source.env} is not set`);
  } else {
    try {
      value = readFileSync(source.file!, 'utf8').trim();
    } catch (e) {
      throw new ConfigError(`${key}.file: cannot read ${source.file}: ${(e as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  }
  value = value.trim();
  // The message must not echo the value: it is a key, even when malformed.
  if (!PRIVATE_KEY.test(value)) throw new ConfigError(`${key}: the key is not a 0x-prefixed 32-byte hex string`);
  try {
    privateKeyToAccount(value as Hex);
  } catch {
    throw new ConfigError(`${key}: the key is not a valid secp256k1 private key`);
  }
  return new Secret(value as Hex);
}

// The SVM solver key (base58 secret key or JSON byte array), read like solverKey and checked.
function resolveSvmKey(source: { env?: string; file?: string }, key: string, env: NodeJS.ProcessEnv): Secret<string> {
  let value: string | undefined;
  if (source.env) {
    value = env[source.env];
    if (value === undefined) throw new ConfigError(`${key}.env: environment variable ${source.env} is not set`);
  } else {
    try {
      value = readFileSync(source.file!, 'utf8');
    } catch (e) {
      throw new ConfigError(`${key}.file: cannot read ${source.file}: ${(e as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  }
  value = value.trim();
  try {
    parseSvmSecretKey(value);
  } catch (e) {
    // The message describes the problem, never the value.
    throw new ConfigError(`${key}: ${(e as Error).message}`);
  }
  return new Secret(value);
}

// "//" keys are comments (JSON has none of its own); they are dropped before validation.
function stripComments(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripComments);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).filter(([k]) => k !== '//').map(([k, x]) => [k, stripComments(x)]));
  }
  return v;
}

// The key of a read-only replica that has none: the replica never signs, so reaching for it is a bug.
class AbsentKey extends Secret<Hex> {
  constructor() {
    super('0x' as Hex);
  }
  override reveal(): Hex {
    throw new ConfigError('solverKey: not configured (this is a read-only API replica)');
  }
}

export interface BuildOptions {
  // `relay-node api`: solverAddress alone is enough, no private key is read.
  readOnly?: boolean;
}

/** Validates a config object once; everything downstream trusts the result. */
export function buildConfig(raw: unknown, env: NodeJS.ProcessEnv = process.env, faults: Faults = {}, opts: BuildOptions = {}): Config {
  const parsed = configSchema.safeParse(stripComments(raw));
  if (!parsed.success) throw new ConfigError(`invalid config: ${formatZodError(parsed.error)}`);
  const { solverKey, allocatorKey, svmSolverKey, solverAddress, ...rest } = parsed.data;
  if (!solverKey) {
    if (!opts.readOnly) throw new ConfigError('invalid config: solverKey: is required to run the node (only the read-only `relay-node api` runs with solverAddress alone)');
    return { ...rest, solverKey: new AbsentKey(), solverAddress: solverAddress!, allocatorKey: new AbsentKey(), allocatorKeyConfigured: false, faults };
  }
  const solver = resolveKey(solverKey, 'solverKey', env);
  const derived = privateKeyToAccount(solver.reveal()).address;
  if (solverAddress && solverAddress !== derived) throw new ConfigError('invalid config: solverAddress: is not the address of solverKey');
  return {
    ...rest,
    solverKey: solver,
    solverAddress: derived,
    allocatorKey: allocatorKey ? resolveKey(allocatorKey, 'allocatorKey', env) : solver,
    allocatorKeyConfigured: allocatorKey !== undefined,
    ...(svmSolverKey ? { svmSolverKey: resolveSvmKey(svmSolverKey, 'svmSolverKey', env) } : {}),
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
    throw new ConfigError('allocatorKey: is required by start: give the key that signs refund call requests ({"env": NAME} or {"file": PATH}), another key than solverKey');
  }
  if (config.allocatorKey.reveal().toLowerCase() === config.solverKey.reveal().toLowerCase()) {
    throw new ConfigError('allocatorKey: must not be the solver key: give the allocator a key of its own');
  }
}

// Devnet and tests hand keys over in memory rather than through the environment.
export function buildConfigWithKeys(raw: Record<string, unknown>, keys: { solver: Hex; allocator: Hex; svmSolver?: string }, faults: Faults = {}): Config {
  const env = { RELAY_DEVNET_SOLVER_KEY: keys.solver, RELAY_DEVNET_ALLOCATOR_KEY: keys.allocator, RELAY_DEVNET_SVM_SOLVER_KEY: keys.svmSolver };
  return buildConfig(
    {
      ...raw,
      solverKey: { env: 'RELAY_DEVNET_SOLVER_KEY' },
      allocatorKey: { env: 'RELAY_DEVNET_ALLOCATOR_KEY' },
      ...(keys.svmSolver ? { svmSolverKey: { env: 'RELAY_DEVNET_SVM_SOLVER_KEY' } } : {}),
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
    throw new ConfigError(`config file ${path} is not valid JSON: ${(e as Error).message}`);
  }
  return buildConfig(raw, env, {}, opts);
}
