/** The SQL dialect of a ledger connection. */
export type Dialect = 'sqlite' | 'postgres';

/**
 * Which dialect a connection speaks, read once where a store is built, for the few statements that
 * cannot be written once for both (reading a JSON array: SQLite's json_each, PostgreSQL's
 * jsonb_array_elements_text). The PostgreSQL facade says `dialect: 'postgres'`; a better-sqlite3
 * Database has no such property and is SQLite.
 */
export function dialectOf(db: object): Dialect {
  return (db as { dialect?: Dialect }).dialect === 'postgres' ? 'postgres' : 'sqlite';
}
