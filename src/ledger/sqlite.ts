import { openDb, migrate, type Db } from './db.ts';
import { StoreLedger } from './storeLedger.ts';

/** The ledger in SQLite (better-sqlite3): every stage reads its work here and writes its result back in one SQLite transaction. */
export class SqliteLedger extends StoreLedger<Db> {
  /** Opens (and unless read-only, migrates) the SQLite ledger at `path`. */
  static open(path: string, opts: { readonly?: boolean } = {}): SqliteLedger {
    const db = openDb(path, opts);
    if (!opts.readonly) migrate(db);
    return new SqliteLedger(db);
  }

  /** Runs fn in one (deferred) SQLite transaction: its reads see one snapshot, and it takes no write lock unless it writes. */
  read<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }
}
