// The SQLite ledger's writer thread: ranges of final blocks that an indexer read (a backfill's thousands of
// deposits each) written on a connection and thread of their own (rangeWriterThread.ts). On the node's thread,
// the write of one range and the read of the next took turns: a read's answer is received, parsed and decoded
// on the thread that writes, and the provider's answer waited, undrained, while the write ran (bench/backfill:
// 0.8 s reading and 1 s writing 100,000 deposits, 1.8 s in all). With the write here, the node's thread reads
// the next range meanwhile. Nothing else moves here: every other transaction stays on the node's connection,
// and the write lock still admits one writer at a time (a transaction of the node's waits for a range's commit,
// as it waited for the write itself before).
import { Worker } from 'node:worker_threads';
import type { CheckpointerLog } from './checkpointer.ts';
import { bindDeposits, type BoundDeposits, type Recorded } from './deposits.ts';
import type { FinalRange } from './finalRange.ts';

type Reply = { ready: true } | { id: number; recorded: Recorded } | { id: number; error: string };

/**
 * A FinalRange as it crosses to the thread: its deposits as the bulk insert binds them, one flat array. One array of
 * strings and numbers is copied to a thread at about half the cost of as many objects, and the thread binds it as it
 * is (at 100,000 deposits, some 70 ms less here and 100 ms less there).
 */
export interface RangeMessage extends Omit<FinalRange, 'deposits'> {
  values: BoundDeposits;
}

/** A thread writing final ranges (FinalRange) into the SQLite ledger at `path`, in order, each in one lazy transaction. */
export class RangeWriter {
  readonly #worker: Worker;
  readonly #exited: Promise<void>;
  readonly #pending = new Map<number, { resolve: (w: Recorded) => void; reject: (e: Error) => void }>();
  #seq = 0;
  #ready = false;
  #running = true;

  /** `autocheckpoint`: the thread's connection's wal_autocheckpoint (pages), as the node's connection has it. */
  constructor(path: string, log: CheckpointerLog, opts: { autocheckpoint: number }) {
    this.#worker = new Worker(new URL('./rangeWriterWorker.mjs', import.meta.url), { workerData: { path, autocheckpoint: opts.autocheckpoint } });
    this.#exited = new Promise((resolve) => this.#worker.once('exit', () => resolve()));
    const stopped = (err: unknown) => {
      const pending = [...this.#pending.values()];
      this.#pending.clear();
      const why = `the ledger writer thread stopped: ${String((err as Error)?.message ?? err)}`;
      for (const p of pending) p.reject(new Error(why));
      if (!this.#running) return;
      this.#running = false;
      log.error({ err: why }, 'the ledger writer thread stopped: ranges are written on the node thread');
    };
    this.#worker.on('error', stopped);
    this.#worker.on('exit', (code) => stopped(`exit ${code}`));
    this.#worker.on('message', (m: Reply) => {
      if ('ready' in m) {
        this.#ready = true;
        return;
      }
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      if (this.#pending.size === 0) this.#worker.unref();
      if ('error' in m) p.reject(new Error(m.error));
      else p.resolve(m.recorded);
    });
    // Idle, the thread never keeps the process alive (after the listeners: a 'message' listener refs the worker
    // again); a write under way does, until its answer.
    this.#worker.unref();
  }

  /** Whether writes go to the thread: it has opened its connection, and has not stopped. */
  get running(): boolean {
    return this.#ready && this.#running;
  }

  /** Writes `range` on the thread; resolves once it is committed, with how many deposits were new (and confirmed). */
  write(range: FinalRange): Promise<Recorded> {
    if (!this.running) return Promise.reject(new Error('the ledger writer thread is not running'));
    const id = ++this.#seq;
    if (this.#pending.size === 0) this.#worker.ref();
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      const { deposits, ...rest } = range;
      this.#worker.postMessage({ id, range: { ...rest, values: bindDeposits(deposits) } satisfies RangeMessage });
    });
  }

  /** Stops the thread once the writes already asked for are done; resolves once it has closed its connection. */
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
