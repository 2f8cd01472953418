// The chaos harness's node process: started, killed and restarted on the same config, ledger and port, by the
// monkey, the watchdog (single node) or the supervisor (two nodes), which may ask for a start at the same moment.
// Never two processes on one ledger and port: a second one left running (an orphan the harness no longer tracks)
// answered the next starts' readiness probe, and each of those starts then exited on the taken port, counted as
// the node exiting by itself.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { trackChild } from '../../src/devnet/children.ts';
import { listensOn } from '../../src/devnet/listener.ts';
import type { FaultPoint } from './ha.ts';

/** A node that exited before it answered /health (an RPC fault at startup, say): started again by `start`. */
export class StartExit extends Error {}

/** How to run the node: its command line (with a fault point to die at, if any) and environment. */
export interface NodeCommand {
  args(fault?: FaultPoint): string[];
  env: NodeJS.ProcessEnv;
  cwd?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const STARTS = 5;

export class NodeProcess {
  child: ChildProcess | undefined;
  exited: Promise<NodeJS.Signals | number | null> = Promise.resolve(null);
  output: string[] = [];
  starts = 0;
  unexpectedExits = 0;
  /** The last output of each unexpected exit, for the report. */
  unexpectedExitTails: string[] = [];
  // Exits with code 75: the node lost the leader lease and stopped acting (a standby took over).
  leaseLostExits = 0;
  startFailures: string[] = [];
  restarting = false;
  #expectExit = false;
  #started = false;
  #starting: Promise<void> | undefined;
  #startingFault: FaultPoint | undefined;
  #log;
  constructor(
    private command: NodeCommand,
    readonly port: number,
    logFile: string,
    readonly nodeId = 'node',
    private startTimeoutMs = 180_000,
  ) {
    this.#log = createWriteStream(logFile);
  }

  /** Its /health role (leader or standby); undefined if it does not answer. */
  async role(): Promise<string | undefined> {
    return fetch(`${this.url}/health`, { signal: AbortSignal.timeout(2_000) })
      .then((r) => r.json() as Promise<{ role?: string }>)
      .then(
        (b) => b.role,
        () => undefined,
      );
  }
  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * Starts the node; a node that exits while starting (an RPC fault at startup) is started again, a few times, and
   * counted. One start at a time: a caller asking while a start is under way joins it (a fault it asks for that
   * the start under way does not carry is refused: it would be lost), and a node already running is left as it is.
   */
  start(fault?: FaultPoint): Promise<void> {
    if (this.#starting && fault !== this.#startingFault) {
      return Promise.reject(new Error(`a start with fault ${this.#startingFault ?? 'none'} is under way; ${fault ?? 'none'} would be lost`));
    }
    this.#startingFault = fault;
    this.#starting ??= this.#start(fault).finally(() => (this.#starting = undefined));
    return this.#starting;
  }

  async #start(fault?: FaultPoint): Promise<void> {
    if (this.alive()) return;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#startOnce(fault);
      } catch (e) {
        if (!(e instanceof StartExit) || attempt >= STARTS) throw e;
        this.startFailures.push(e.message.slice(0, 400));
      }
    }
  }

  async #startOnce(fault?: FaultPoint): Promise<void> {
    const child = spawn(process.execPath, this.command.args(fault), { env: this.command.env, cwd: this.command.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    trackChild(child, 'relay-node');
    this.child = child;
    this.starts++;
    this.#started = false;
    this.#expectExit = Boolean(fault);
    const sink = (d: Buffer) => {
      const s = d.toString();
      this.output.push(s);
      this.#log.write(s);
    };
    child.stdout!.on('data', sink);
    child.stderr!.on('data', sink);
    this.exited = new Promise((resolve) =>
      child.on('exit', (code, signal) => {
        if (code === 75) this.leaseLostExits++;
        else if (this.child === child && !this.#expectExit && this.#started) {
          this.unexpectedExits++;
          this.unexpectedExitTails.push(`exit ${signal ?? code}: ${this.output.slice(-3).join('').slice(-1500)}`);
        }
        resolve(signal ?? code);
      }),
    );
    // Generous: on a 2-core machine shared with other work, loading the sources alone can take a minute.
    const end = Date.now() + this.startTimeoutMs;
    for (;;) {
      // Started at a fault point, it may reach its first fill (and kill itself there) before it
      // answers: that is the crash asked for, not a failure to start.
      if (fault && child.signalCode === 'SIGKILL') return;
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new StartExit(`the node exited while starting: ${this.output.slice(-3).join('').slice(-1500)}`);
      }
      const ok = await fetch(`${this.url}/health`, { signal: AbortSignal.timeout(2_000) }).then(
        (r) => r.status === 200,
        () => false,
      );
      // Only our child's answer counts: another process on the port is not this node started.
      if (ok && listensOn(child.pid!, this.port) !== false) break;
      if (Date.now() > end) {
        // Counted as a failure to start, and started again (by start()).
        this.#expectExit = true;
        child.kill('SIGKILL');
        await this.exited;
        throw new StartExit(`the node did not answer /health within ${this.startTimeoutMs / 1000} s: ${this.output.slice(-3).join('').slice(-1500)}`);
      }
      await sleep(50);
    }
    this.#started = true;
  }

  alive(): boolean {
    return Boolean(this.child && this.child.exitCode === null && this.child.signalCode === null);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.alive()) return;
    this.#expectExit = true;
    this.child!.kill(signal);
    await this.exited;
  }

  close() {
    this.#log.end();
  }
}
