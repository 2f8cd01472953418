import { WalCheckpointer, type CheckpointerLog } from './checkpointer.ts';
import { openDb, migrate, type Db } from './db.ts';
import type { TxOptions } from './ledger.ts';
import { StoreLedger } from './storeLedger.ts';

/** The ledger in SQLite (better-sqlite3): every stage reads its work here and writes its result back in one SQLite transaction. */
export class SqliteLedger extends StoreLedger<Db> {
  #checkpointer: WalCheckpointer | undefined;

  /**
   * Opens (and unless read-only, migrates) the SQLite ledger at `path`. `checkpointThread`: the WAL is checkpointed
   * on a thread of its own (checkpointer.ts), which reports to this log; the node's ledger is opened so.
   */
  static open(path: string, opts: { readonly?: boolean; checkpointThread?: CheckpointerLog } = {}): SqliteLedger {
    const db = openDb(path, opts);
    if (!opts.readonly) migrate(db);
    const ledger = new SqliteLedger(db);
    if (opts.checkpointThread && !opts.readonly && path !== ':memory:') ledger.#checkpointer = new WalCheckpointer(db, path, opts.checkpointThread);
    return ledger;
  }

  /** Whether the WAL is checkpointed on a thread of its own now. */
  get checkpointsOffThread(): boolean {
    return this.#checkpointer?.running ?? false;
  }

  override close(): void {
    void this.closed();
  }

  /** Closes the ledger; resolves once its checkpoint thread, if any, has closed its connection too. */
  closed(): Promise<void> {
    const stopped = this.#checkpointer?.stop();
    if (this.db.open) super.close();
    return stopped ?? Promise.resolve();
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
