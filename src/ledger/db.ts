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
