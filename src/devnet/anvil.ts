// Local EVM chains: one anvil process per chain, on loopback, from the npm package @foundry-rs/anvil.
// The native binary is spawned directly (not the Node wrapper in node_modules/.bin) so the PID we hold
// is anvil's own and a signal reaches it.

import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { trackChild } from './children.ts';
import { freePort } from './freePort.ts';
import { listensOn } from './listener.ts';
import { errText, RelayNodeError } from '../lib/errors.ts';

export interface StartAnvilOptions {
  chainId: number;
  /** Seconds between blocks; undefined = mine each transaction instantly. */
  blockTime?: number;
  /** Port to bind on 127.0.0.1; a free one is picked when omitted. */
  port?: number;
}

export interface AnvilHandle {
  chainId: number;
  rpcUrl: string;
  port: number;
  pid: number;
  /** SIGTERM, wait for exit, SIGKILL after 3 s. Idempotent. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;
const POLL_INTERVAL_MS = 10;
const KILL_GRACE_MS = 3_000;
const OUTPUT_TAIL_BYTES = 8_192;

class AnvilStartError extends RelayNodeError {
  constructor(
    message: string,
    readonly output: string,
  ) {
    super(message);
    this.name = 'AnvilStartError';
  }
}

/** Package suffix per Node platform/arch, as published by foundry (x64 is `amd64`). */
function platformPackage(): string {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  return `@foundry-rs/anvil-${process.platform}-${arch}`;
}

let cachedBinary: string | undefined;

/** Absolute path of the native anvil binary installed with @foundry-rs/anvil. */
export function anvilBinaryPath(): string {
  if (cachedBinary) return cachedBinary;
  const pkg = platformPackage();
  const exe = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  const require = createRequire(import.meta.url);
  let wrapperManifest: string;
  try {
    wrapperManifest = require.resolve('@foundry-rs/anvil/package.json');
  } catch (err) {
    throw new Error(`@foundry-rs/anvil is not installed: ${errText(err)}`);
  }
  // Resolve the optional platform package from the wrapper's own location, as the wrapper does.
  try {
    cachedBinary = createRequire(wrapperManifest).resolve(`${pkg}/bin/${exe}`);
  } catch {
    throw new Error(`no anvil binary for ${process.platform}/${process.arch}: ${pkg} is not installed (an optional dependency of @foundry-rs/anvil)`);
  }
  return cachedBinary;
}

/** Fails with EADDRINUSE when something already listens on 127.0.0.1:port (so we never talk to it). */
function assertPortFree(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new AnvilStartError(`cannot start anvil on 127.0.0.1:${port}: ${err.code ?? err.message}`, err.code ?? '')),
    );
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve()));
  });
}

class OutputTail {
  private text = '';
  push(chunk: Buffer | string): void {
    this.text += chunk.toString();
    if (this.text.length > OUTPUT_TAIL_BYTES) this.text = this.text.slice(-OUTPUT_TAIL_BYTES);
  }
  toString(): string {
    return this.text.trim();
  }
}

async function rpcChainId(rpcUrl: string): Promise<number | undefined> {
  try {
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      signal: AbortSignal.timeout(1_000),
    });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { result?: string };
    return typeof body.result === 'string' ? Number(BigInt(body.result)) : undefined;
  } catch {
    return undefined;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolve(false);
    }, ms);
    const onExit = () => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', onExit);
  });
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    if (!(await waitForExit(child, KILL_GRACE_MS))) {
      child.kill('SIGKILL');
      await waitForExit(child, KILL_GRACE_MS);
    }
  }
}

async function startOnce(opts: StartAnvilOptions, port: number): Promise<AnvilHandle> {
  const binary = anvilBinaryPath();
  await assertPortFree(port);
  const args = ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(opts.chainId), '--silent'];
  if (opts.blockTime !== undefined) args.push('--block-time', String(opts.blockTime));

  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = new OutputTail();
  child.stdout?.on('data', (c: Buffer) => output.push(c));
  child.stderr?.on('data', (c: Buffer) => output.push(c));

  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError = err;
  });
  if (child.pid === undefined) {
    await new Promise((r) => setImmediate(r));
    throw new Error(`failed to spawn anvil (${binary}): ${spawnError?.message ?? 'unknown error'}`);
  }
  const pid = child.pid;
  trackChild(child, 'anvil');
  // Neither the child nor its pipes keep the parent alive; the exit hook cleans up.
  child.unref();
  for (const stream of [child.stdout, child.stderr]) {
    (stream as unknown as { unref?: () => void } | null)?.unref?.();
  }

  const rpcUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (spawnError || child.exitCode !== null || child.signalCode !== null) {
      const why = spawnError ? spawnError.message : `exited with ${child.exitCode !== null ? `code ${child.exitCode}` : child.signalCode}`;
      throw new AnvilStartError(`anvil (chain ${opts.chainId}, port ${port}) ${why}: ${output.toString() || '(no output)'}`, output.toString());
    }
    const id = await rpcChainId(rpcUrl);
    if (id !== undefined) {
      // An answer while our child is dead came from someone else's node on that port.
      if (child.exitCode !== null || child.signalCode !== null) continue;
      if (id !== opts.chainId) {
        await terminate(child);
        throw new Error(`anvil on ${rpcUrl} reports chain id ${id}, expected ${opts.chainId} (port taken by another node?)`);
      }
      // The same chain id from another process that took the port before our child bound it (a parallel test's
      // devnet): ours will fail to bind; try another port rather than share someone else's chain.
      if (listensOn(pid, port) === false) {
        await terminate(child);
        throw new AnvilStartError(`anvil (chain ${opts.chainId}, port ${port}): another process answered on the port`, 'address already in use');
      }
      break;
    }
    if (Date.now() > deadline) {
      await terminate(child);
      throw new Error(
        `anvil (chain ${opts.chainId}) did not answer eth_chainId on ${rpcUrl} within ${READY_TIMEOUT_MS / 1000} s: ${output.toString() || '(no output)'}`,
      );
    }
    await sleep(POLL_INTERVAL_MS);
  }

  let stopping: Promise<void> | undefined;
  return {
    chainId: opts.chainId,
    rpcUrl,
    port,
    pid,
    stop: () => (stopping ??= terminate(child)),
  };
}

/**
 * Start anvil on 127.0.0.1 with the default mnemonic ("test test ... junk") accounts, and resolve once it
 * answers eth_chainId. Without `port`, a free port is picked (retried if another process grabs it first).
 */
export async function startAnvil(opts: StartAnvilOptions): Promise<AnvilHandle> {
  if (opts.port !== undefined) return startOnce(opts, opts.port);
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(opts, await freePort());
    } catch (err) {
      lastError = err;
      if (!(err instanceof AnvilStartError && /address already in use|AddrInUse|EADDRINUSE/i.test(err.output))) throw err;
    }
  }
  throw lastError;
}
