// `relay-node start` as its own process (bin/relay-node.js) for the tests that kill, pause or stop a
// node by its PID: the crash tests and the active/standby tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { killTracked, trackChild } from '../../src/devnet/children.ts';
import { freePort } from '../../src/devnet/freePort.ts';
import { listensOn } from '../../src/devnet/listener.ts';
import { api, until } from './stack.ts';

/** A started node process. `exited` resolves with its signal, or its exit code. */
export interface NodeProcess {
  child: ChildProcess;
  url: string;
  exited: Promise<NodeJS.Signals | number | null>;
  /** What it wrote to stderr so far. */
  stderr(): string;
  /** The end of what it wrote to stdout (its log lines), for a failure's message. */
  logTail(): string;
}

// The name node processes are tracked under (src/devnet/children.ts), which killAllNodeProcesses kills.
const NODE = 'relay-node';

/**
 * Starts `relay-node start --config configPath` on a free port (with `--fault` when given) and waits
 * until its /health answers (a standby answers too) from the port this child holds: another test's node
 * that took the port meanwhile is not taken for it. A child that exits first fails the start at once, with
 * its stderr.
 */
export async function startNodeProcess(configPath: string, env: NodeJS.ProcessEnv, opts: { fault?: string } = {}): Promise<NodeProcess> {
  const port = await freePort();
  const args = ['bin/relay-node.js', 'start', '--config', configPath, '--port', String(port)];
  if (opts.fault) args.push('--fault', opts.fault);
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  trackChild(child, NODE);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  let stdout = '';
  child.stdout!.on('data', (d) => (stdout = (stdout + d).slice(-16_000)));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
  const url = `http://127.0.0.1:${port}`;
  let dead = false;
  const answered = until(
    async () => {
      if (dead) return true; // ends the polling; the exit is the answer
      const ok = (await api(url, '/health').catch(() => ({ status: 0 }))).status === 200;
      return ok && listensOn(child.pid!, port) !== false ? true : undefined;
    },
    'the node to start',
    60_000,
  );
  const died = exited.then((e) => {
    dead = true;
    throw new Error(`the node exited (${e}) before it answered`);
  });
  died.catch(() => {}); // it loses the race when the node starts, and may reject later
  try {
    await Promise.race([answered, died]);
  } catch (e) {
    child.kill('SIGKILL');
    throw new Error(`${(e as Error).message}; its stderr: ${stderr || '(empty)'}`);
  }
  return { child, url, exited, stderr: () => stderr, logTail: () => stdout };
}

/** A graceful stop (SIGTERM: drain, then stop), waited for. */
export async function stopNodeProcess(n: { child: ChildProcess; exited: Promise<unknown> }): Promise<void> {
  n.child.kill('SIGTERM');
  await n.exited;
}

/** SIGKILLs every node process still running (a test's afterAll). */
export function killAllNodeProcesses(): void {
  killTracked(NODE);
}
