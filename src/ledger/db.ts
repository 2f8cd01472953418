import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { migrations } from './migrations.ts';

export type Db = Database.Database;

export function openDb(path: string, opts: { readonly?: boolean } = {}): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
  if (!opts.readonly) {
    db.pragma('journal_mode = WAL');
    // FULL: a transaction reported committed survives power loss, which a payment ledger needs.
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
  }
  db.pragma('busy_timeout = 5000');
  // Statement journals and savepoints' sub-journals in memory, not in temp files: every statement that fires a trigger
  // or changes several rows inside a transaction, and every savepoint (a decision of a batch, a fill of a settled
  // batch), journals the pages it touches so that it alone can be rolled back. In files (SQLite's default here), that
  // was a pwrite per page on the node's thread: 120,000 of them in a 1,000-fill run (bench/throughput.ts), twice the
  // writes to the WAL. Nothing durable lives there (a journal of an open transaction; sorts' and temp tables' spill).
  db.pragma('temp_store = MEMORY');
  return db;
}

/** Applies the migrations not yet applied, in version order, up to `upTo` (all by default; tests stop earlier to build an old ledger). */
export function migrate(db: Db, upTo = Number.POSITIVE_INFINITY): number[] {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const applied = new Set((db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map((r) => r.version));
  const ran: number[] = [];
  // Versions are applied in order whatever order they were written in.
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (applied.has(m.version) || m.version > upTo) continue;
    // A table rebuild runs with foreign keys off (the pragma is a no-op inside a transaction), and
    // must leave every reference intact before it commits.
    const fk = m.rebuilds ? (db.pragma('foreign_keys', { simple: true }) as number) : 0;
    if (fk) db.pragma('foreign_keys = OFF');
    try {
      db.transaction(() => {
        db.exec(m.sql);
        if (m.rebuilds && (db.pragma('foreign_key_check') as unknown[]).length > 0) throw new Error(`migration ${m.version} breaks a foreign key`);
        db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
      })();
    } finally {
      if (fk) db.pragma('foreign_keys = ON');
    }
    ran.push(m.version);
  }
  return ran;
}
