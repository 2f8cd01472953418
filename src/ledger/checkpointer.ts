// The SQLite ledger's WAL checkpoints, moved off the node's thread (checkpointWorker.mjs). SQLite runs a checkpoint
// inside the commit that takes the log past 1,000 pages: copying them into the database file and syncing it, on the
// one thread that also decides and pays. A backfill writing 100,000 deposits spent about a fifth of its write time
// there (bench/backfill). The node's connection runs none while the thread keeps the log short (only past a backstop
// of 10,000 pages); should the thread fail, it takes the checkpoints back.
import type { Db } from './db.ts';
import { LedgerThread, type ThreadLog } from './ledgerThread.ts';

/** SQLite's own threshold (pages), restored on the node's connection should the thread stop. */
const AUTOCHECKPOINT_PAGES = 1000;
/**
 * The node's connection's threshold while the thread runs: a backstop. A checkpoint from another connection copies
 * what was committed when it began; under writes without a pause, the log would never be wholly copied, so never
 * restarted, and would grow without bound. Past this many pages (about 40 MB), the node's commit checkpoints, as before.
 */
const BACKSTOP_PAGES = 10_000;

/** A thread checkpointing the WAL of the SQLite ledger at `path` every `intervalMs`, beside the connection `db`. */
export class WalCheckpointer {
  readonly #thread: LedgerThread<'stop', { failed?: string }>;

  constructor(db: Db, path: string, log: ThreadLog, intervalMs = 200) {
    db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
    this.#thread = new LedgerThread(
      new URL('./checkpointWorker.mjs', import.meta.url),
      { path, intervalMs },
      {
        onMessage: (m) => {
          if (m.failed !== undefined) log.warn({ err: m.failed }, 'ledger checkpoint failed; trying again');
        },
        onExit: (why, unasked) => {
          if (!unasked) return;
          if (db.open) db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
          log.error({ err: why }, 'the ledger checkpoint thread stopped: checkpoints are back on the node thread');
        },
      },
    );
  }

  /** Whether the thread is checkpointing (false once it stopped, by `stop` or on an error). */
  get running(): boolean {
    return this.#thread.running;
  }

  /**
   * Stops the thread; resolves once it has closed its connection (the last one closed checkpoints what is left
   * and removes the log).
   */
  stop(): Promise<void> {
    return this.#thread.stop();
  }
}
