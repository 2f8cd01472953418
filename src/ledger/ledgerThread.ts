// A worker thread beside the node's SQLite connection, with a connection of its own (the checkpointer's, the range
// writer's): started at once, never keeping the process alive while idle, stopped by a 'stop' message once what was
// asked of it before is done (it then closes its connection and exits).
import { Worker } from 'node:worker_threads';

/** What a ledger thread reports (a failed step, the thread stopping on an error): the node's logger. */
export interface ThreadLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** A started ledger thread. `onExit(why, unasked)`: once, when it exits; `unasked` when `stop` had not asked it to. */
export class LedgerThread<In, Out> {
  readonly #worker: Worker;
  readonly #exited: Promise<void>;
  #running = true;

  constructor(entry: URL, workerData: unknown, handlers: { onMessage(m: Out): void; onExit(why: string, unasked: boolean): void }) {
    this.#worker = new Worker(entry, { workerData });
    let ended = false;
    const exit = (why: string) => {
      if (ended) return;
      ended = true;
      const unasked = this.#running;
      this.#running = false;
      handlers.onExit(why, unasked);
    };
    this.#exited = new Promise((resolve) => this.#worker.once('exit', () => resolve()));
    this.#worker.on('error', (e) => exit(e.message));
    this.#worker.on('exit', (code) => exit(`exit ${code}`));
    this.#worker.on('message', (m: Out) => handlers.onMessage(m));
    // Idle, the thread never keeps the process alive (after the listeners: a 'message' listener refs the worker again).
    this.#worker.unref();
  }

  /** Whether the thread runs (false once `stop` was asked, or it exited). */
  get running(): boolean {
    return this.#running;
  }

  /** Sends the thread a message. */
  post(m: In): void {
    this.#worker.postMessage(m);
  }

  /** Keeps the process alive while the thread works on something asked of it (`false`: idle again). */
  busy(busy: boolean): void {
    if (busy) this.#worker.ref();
    else this.#worker.unref();
  }

  /** Stops the thread once what was asked before is done; resolves once it has closed its connection and exited. */
  stop(): Promise<void> {
    if (this.#running) {
      this.#running = false;
      // Referenced until it exits: a process with nothing else left to do waits for the connection to close.
      this.#worker.ref();
      this.#worker.postMessage('stop');
    }
    return this.#exited;
  }
}
