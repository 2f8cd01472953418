import { openDb, migrate, type Db } from './db.ts';
import type { TxOptions } from './ledger.ts';
import { StoreLedger } from './storeLedger.ts';

/** The ledger in SQLite (better-sqlite3): every stage reads its work here and writes its result back in one SQLite transaction. */
export class SqliteLedger extends StoreLedger<Db> {
  /** Opens (and unless read-only, migrates) the SQLite ledger at `path`. */
  static open(path: string, opts: { readonly?: boolean } = {}): SqliteLedger {
    const db = openDb(path, opts);
    if (!opts.readonly) migrate(db);
    return new SqliteLedger(db);
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
