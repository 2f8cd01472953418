import type { SqlDb as Db } from './sqlDb.ts';

/** A wallet's exchange transfer nonce mapped to the request it pays for (POST /authorize). */
export interface NonceMappingRow {
  nonce: number;
  wallet: string;
  request_id: string;
  signature: string;
  created_at: number;
}

/** The exchange_nonces table (migration 4): which request a wallet's transfer nonce pays for. */
export class ExchangeNonces {
  #insert;
  #get;
  #ofRequest;
  #awaiting;
  constructor(db: Db) {
    this.#insert = db.prepare(`INSERT INTO exchange_nonces (nonce, wallet, request_id, signature, created_at)
      VALUES (@nonce, @wallet, @request_id, @signature, @created_at) ON CONFLICT DO NOTHING`);
    this.#get = db.prepare('SELECT * FROM exchange_nonces WHERE wallet = ? AND nonce = ?');
    this.#ofRequest = db.prepare('SELECT * FROM exchange_nonces WHERE request_id = ?');
    // requests_status (status, created_at) narrows the read to recent waiting requests; each has one mapping at most.
    this.#awaiting = db.prepare(`SELECT x.* FROM requests r JOIN exchange_nonces x ON x.request_id = r.id
      WHERE r.status = 'waiting' AND r.created_at >= ? AND r.origin_chain_id = ? AND x.nonce > ? AND x.nonce < ?
      ORDER BY x.wallet, x.nonce`);
  }

  /** Returns false when (wallet, nonce) or the request is mapped already. */
  insert(row: NonceMappingRow): boolean {
    return this.#insert.run(row).changes === 1;
  }
  /** wallet: EIP-55 checksummed. */
  get(wallet: string, nonce: number): NonceMappingRow | undefined {
    return this.#get.get(wallet, nonce) as NonceMappingRow | undefined;
  }
  /**
   * The mappings of requests from chain `chainId` still waiting for their transfer whose nonce lies in (`above`,
   * `below`) and that were quoted at or after `since` (ms).
   */
  awaiting(chainId: number, since: number, above: number, below: number): NonceMappingRow[] {
    return this.#awaiting.all(since, chainId, above, below) as NonceMappingRow[];
  }
  ofRequest(requestId: string): NonceMappingRow | undefined {
    return this.#ofRequest.get(requestId) as NonceMappingRow | undefined;
  }
}
