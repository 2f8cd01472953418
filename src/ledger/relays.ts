import type { SqlDb as Db } from './sqlDb.ts';

/** The signed EIP-7702 authorizations the node has relayed (migration 18): each one once. */
export class RelayedAuthorizations {
  #claim;
  #of;
  constructor(db: Db) {
    this.#claim = db.prepare(`INSERT INTO relayed_authorizations (chain_id, authority, nonce, request_id)
      VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`);
    this.#of = db.prepare('SELECT request_id FROM relayed_authorizations WHERE chain_id = ? AND authority = ? AND nonce = ?');
  }

  /**
   * Records that `authority`'s authorization of `nonce` on `chainId` is relayed by `requestId`.
   * Returns false when it was relayed already. Call it in the ledger transaction that records the
   * relay, so that a replay racing it is refused.
   */
  claim(chainId: number, authority: string, nonce: bigint, requestId: string): boolean {
    return this.#claim.run(chainId, authority.toLowerCase(), nonce.toString(), requestId).changes === 1;
  }

  /** The request that relayed this authorization, if any. */
  relayedBy(chainId: number, authority: string, nonce: bigint): string | undefined {
    return (this.#of.get(chainId, authority.toLowerCase(), nonce.toString()) as { request_id: string } | undefined)?.request_id;
  }
}
