import type { SqlDb as Db } from './sqlDb.ts';

export interface StoredBlock {
  number: number;
  hash: string;
  parent_hash: string;
}

export class IndexerState {
  #getCursor;
  #setCursor;
  #putBlock;
  #tip;
  #block;
  #dropAbove;
  #prune;
  constructor(db: Db) {
    this.#getCursor = db.prepare('SELECT block_number FROM cursors WHERE chain_id = ? AND source = ?');
    this.#setCursor = db.prepare(`INSERT INTO cursors (chain_id, source, block_number) VALUES (?, ?, ?)
      ON CONFLICT(chain_id, source) DO UPDATE SET block_number = excluded.block_number`);
    this.#putBlock = db.prepare(`INSERT INTO chain_blocks (chain_id, number, hash, parent_hash) VALUES (?, ?, ?, ?)
      ON CONFLICT(chain_id, number) DO UPDATE SET hash = excluded.hash, parent_hash = excluded.parent_hash`);
    this.#tip = db.prepare('SELECT number, hash, parent_hash FROM chain_blocks WHERE chain_id = ? ORDER BY number DESC LIMIT 1');
    this.#block = db.prepare('SELECT number, hash, parent_hash FROM chain_blocks WHERE chain_id = ? AND number = ?');
    this.#dropAbove = db.prepare('DELETE FROM chain_blocks WHERE chain_id = ? AND number > ?');
    this.#prune = db.prepare('DELETE FROM chain_blocks WHERE chain_id = ? AND number < ?');
  }

  cursor(chainId: number, source: string): number | undefined {
    return (this.#getCursor.get(chainId, source) as { block_number: number } | undefined)?.block_number;
  }
  setCursor(chainId: number, source: string, block: number): void {
    this.#setCursor.run(chainId, source, block);
  }
  putBlock(chainId: number, b: StoredBlock): void {
    this.#putBlock.run(chainId, b.number, b.hash, b.parent_hash);
  }
  tip(chainId: number): StoredBlock | undefined {
    return this.#tip.get(chainId) as StoredBlock | undefined;
  }
  block(chainId: number, number: number): StoredBlock | undefined {
    return this.#block.get(chainId, number) as StoredBlock | undefined;
  }
  dropAbove(chainId: number, number: number): void {
    this.#dropAbove.run(chainId, number);
  }
  pruneBelow(chainId: number, number: number): void {
    this.#prune.run(chainId, number);
  }
}
