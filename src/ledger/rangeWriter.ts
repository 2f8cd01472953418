// The SQLite ledger's writer thread: ranges of final blocks that an indexer read (a backfill's thousands of
// deposits each) written on a connection and thread of their own (rangeWriterThread.ts). On the node's thread,
// the write of one range and the read of the next took turns: a read's answer is received, parsed and decoded
// on the thread that writes, and the provider's answer waited, undrained, while the write ran (bench/backfill:
// 0.8 s reading and 1 s writing 100,000 deposits, 1.8 s in all). With the write here, the node's thread reads
// the next range meanwhile. Nothing else moves here: every other transaction stays on the node's connection,
// and the write lock still admits one writer at a time (a transaction of the node's waits for a range's commit,
// as it waited for the write itself before).
import type { Recorded } from './deposits.ts';
import type { FinalRange } from './finalRange.ts';
import { LedgerThread, type ThreadLog } from './ledgerThread.ts';

type Reply = { ready: true } | { id: number; recorded: Recorded } | { id: number; error: string };

/** A thread writing final ranges (FinalRange) into the SQLite ledger at `path`, in order, each in one lazy transaction. */
export class RangeWriter {
  readonly #thread: LedgerThread<{ id: number; range: FinalRange } | 'stop', Reply>;
  readonly #pending = new Map<number, { resolve: (w: Recorded) => void; reject: (e: Error) => void }>();
  #seq = 0;
  #ready = false;

  /** `autocheckpoint`: the thread's connection's wal_autocheckpoint (pages), as the node's connection has it. */
  constructor(path: string, log: ThreadLog, opts: { autocheckpoint: number }) {
    this.#thread = new LedgerThread(
      new URL('./rangeWriterWorker.mjs', import.meta.url),
      { path, autocheckpoint: opts.autocheckpoint },
      {
        onMessage: (m) => {
          if ('ready' in m) {
            this.#ready = true;
            return;
          }
          const p = this.#pending.get(m.id);
          if (!p) return;
          this.#pending.delete(m.id);
          if (this.#pending.size === 0) this.#thread.busy(false);
          if ('error' in m) p.reject(new Error(m.error));
          else p.resolve(m.recorded);
        },
        onExit: (why, unasked) => {
          const pending = [...this.#pending.values()];
          this.#pending.clear();
          for (const p of pending) p.reject(new Error(`the ledger writer thread stopped: ${why}`));
          if (unasked) log.error({ err: why }, 'the ledger writer thread stopped: ranges are written on the node thread');
        },
      },
    );
  }

  /** Whether writes go to the thread: it has opened its connection, and has not stopped. */
  get running(): boolean {
    return this.#ready && this.#thread.running;
  }

  /** Writes `range` on the thread; resolves once it is committed, with how many deposits were new (and confirmed). */
  write(range: FinalRange): Promise<Recorded> {
    if (!this.running) return Promise.reject(new Error('the ledger writer thread is not running'));
    const id = ++this.#seq;
    // A write under way keeps the process alive, until its answer.
    if (this.#pending.size === 0) this.#thread.busy(true);
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#thread.post({ id, range });
    });
  }

  /** Stops the thread once the writes already asked for are done; resolves once it has closed its connection. */
  stop(): Promise<void> {
    return this.#thread.stop();
  }
}
