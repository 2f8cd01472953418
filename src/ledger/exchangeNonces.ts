import type { SqlDb as Db } from './sqlDb.ts';
import { orderRefIs } from './deposits.ts';

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
    // The requests whose transfer may still come: each has one mapping at most. A waiting one, and a fast-filled one
    // (pending, success, or failed if its payout did): the fast fill left 'waiting' before its deposit came, and that
    // deposit is what settles it (unread, the app that held for it paid the whole input, the solver kept the transfer).
    // requests_status (status, created_at) and requests_fast_fill_deadline (a deadline lies after its quote) narrow the
    // read to recent ones; a request with a deposit booked has its transfer already.
    this.#awaiting = db.prepare(`SELECT x.* FROM requests r JOIN exchange_nonces x ON x.request_id = r.id
      WHERE r.id IN (SELECT id FROM requests WHERE status = 'waiting' AND created_at >= @since
          UNION SELECT id FROM requests WHERE fast_fill_deadline IS NOT NULL AND fast_fill_deadline >= @since)
        AND r.origin_chain_id = @chain AND x.nonce > @above AND x.nonce < @below
        AND NOT EXISTS (SELECT 1 FROM deposits d WHERE ${orderRefIs('d.order_ref', 'r.id')})
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
   * The mappings of requests from chain `chainId` whose transfer may still come (waiting, or fast-filled, and no deposit
   * booked for them) whose nonce lies in (`above`, `below`) and that were quoted at or after `since` (ms).
   */
  awaiting(chainId: number, since: number, above: number, below: number): NonceMappingRow[] {
    return this.#awaiting.all({ since, chain: chainId, above, below }) as NonceMappingRow[];
  }
  ofRequest(requestId: string): NonceMappingRow | undefined {
    return this.#ofRequest.get(requestId) as NonceMappingRow | undefined;
  }
}
