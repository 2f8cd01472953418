import { WalCheckpointer } from './checkpointer.ts';
import { openDb, migrate, type Db } from './db.ts';
import type { Recorded } from './deposits.ts';
import type { FinalRange } from './finalRange.ts';
import type { TxOptions } from './ledger.ts';
import type { ThreadLog } from './ledgerThread.ts';
import { RangeWriter } from './rangeWriter.ts';
import { StoreLedger } from './storeLedger.ts';

/**
 * How a SQLite ledger is opened. `checkpointThread`: the WAL is checkpointed on a thread of its own (checkpointer.ts);
 * `writerThread`: ranges of final blocks are written on a thread of their own (rangeWriter.ts); each reports to the log
 * given. The node's ledger is opened with both.
 */
export interface SqliteOpenOptions {
  readonly?: boolean;
  checkpointThread?: ThreadLog;
  writerThread?: ThreadLog;
}

/** The ledger in SQLite (better-sqlite3): every stage reads its work here and writes its result back in one SQLite transaction. */
export class SqliteLedger extends StoreLedger<Db> {
  #checkpointer: WalCheckpointer | undefined;
  #writer: RangeWriter | undefined;

  /** Opens (and unless read-only, migrates) the SQLite ledger at `path`. */
  static open(path: string, opts: SqliteOpenOptions = {}): SqliteLedger {
    const db = openDb(path, opts);
    if (!opts.readonly) migrate(db);
    const ledger = new SqliteLedger(db);
    const file = !opts.readonly && path !== ':memory:';
    if (opts.checkpointThread && file) ledger.#checkpointer = new WalCheckpointer(db, path, opts.checkpointThread);
    if (opts.writerThread && file)
      ledger.#writer = new RangeWriter(path, opts.writerThread, { autocheckpoint: db.pragma('wal_autocheckpoint', { simple: true }) as number });
    return ledger;
  }

  /** Whether the WAL is checkpointed on a thread of its own now. */
  get checkpointsOffThread(): boolean {
    return this.#checkpointer?.running ?? false;
  }

  override close(): void {
    void this.closed();
  }

  /** Whether ranges of final blocks are written on a thread of their own now (the thread has started, and not stopped). */
  get writesOffThread(): boolean {
    return this.#writer?.running ?? false;
  }

  /** Closes the ledger; resolves once its threads, if any, have closed their connections too (the writer's after the writes asked for). */
  async closed(): Promise<void> {
    const writer = this.#writer?.stop();
    if (this.db.open) super.close();
    // One connection after the other: the last to close checkpoints the WAL and deletes it, but two closing at once each
    // saw the other's lock and both left it (a full test run on the busy machine, 1 in 178 files).
    await writer;
    await this.#checkpointer?.stop();
  }

  /** As the Ledger's: on the writer thread while it runs (writesOffThread), else on the caller's. */
  override writeFinalRange(range: FinalRange): Promise<Recorded> {
    if (this.#writer?.running) return this.#writer.write(range);
    return super.writeFinalRange(range);
  }

  /** As StoreLedger's; a lazy commit (TxOptions) skips the disk flush: WAL at synchronous=NORMAL for this commit only. */
  override tx<T>(fn: () => T, opts: TxOptions = {}): T {
    const lazy = opts.lazy === true && !this.db.inTransaction;
    if (!lazy) return super.tx(fn);
    this.db.pragma('synchronous = NORMAL');
    try {
      return super.tx(fn);
    } finally {
      this.db.pragma('synchronous = FULL');
    }
  }

  /** Runs fn in one (deferred) SQLite transaction: its reads see one snapshot, and it takes no write lock unless it writes. */
  read<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }
}
