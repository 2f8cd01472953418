import { createHash, randomBytes } from 'node:crypto';
import type { SqlDb as Db } from './sqlDb.ts';

export interface ApiKeyRow {
  id: string;
  name: string;
  created_at: number;
  revoked_at: number | null;
}

export type KeyLookup = { state: 'valid'; key: ApiKeyRow } | { state: 'revoked' | 'unknown' };

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export class ApiKeys {
  #insert;
  #byHash;
  #list;
  #revoke;
  #get;
  constructor(db: Db) {
    this.#get = db.prepare('SELECT id, name, created_at, revoked_at FROM api_keys WHERE id = ?');
    this.#insert = db.prepare('INSERT INTO api_keys (id, name, key_hash, created_at) VALUES (?, ?, ?, ?)');
    this.#byHash = db.prepare('SELECT id, name, created_at, revoked_at FROM api_keys WHERE key_hash = ?');
    this.#list = db.prepare('SELECT id, name, created_at, revoked_at FROM api_keys ORDER BY created_at, id');
    this.#revoke = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
  }

  /** Returns the key itself once; the ledger keeps only its hash. */
  create(name: string, now = Date.now()): { id: string; key: string } {
    const id = `key_${randomBytes(8).toString('hex')}`;
    const key = `rn_${randomBytes(24).toString('base64url')}`;
    this.#insert.run(id, name, hashApiKey(key), now);
    return { id, key };
  }

  lookup(key: string): KeyLookup {
    const row = this.#byHash.get(hashApiKey(key)) as ApiKeyRow | undefined;
    if (!row) return { state: 'unknown' };
    return row.revoked_at === null ? { state: 'valid', key: row } : { state: 'revoked' };
  }

  get(id: string): ApiKeyRow | undefined {
    return this.#get.get(id) as ApiKeyRow | undefined;
  }

  list(): ApiKeyRow[] {
    return this.#list.all() as ApiKeyRow[];
  }

  /** False when there is no such live key. */
  revoke(id: string, now = Date.now()): boolean {
    return this.#revoke.run(now, id).changes === 1;
  }
}
