import type { SqlDb as Db } from './sqlDb.ts';

/**
 * What names an EIP-2612 permit: its owner's nonce on one token of one chain, and its deadline (a
 * later permit of the same owner with the same nonce is another message, another signature).
 */
export interface PermitNonce {
  chainId: number;
  token: string;
  owner: string;
  nonce: bigint;
  deadline: bigint;
}

/**
 * The EIP-2612 permits the node has recorded a signed deposit for (migration 28): each one funds one
 * request. The token alone does not enforce it: the depository skips `permit` when the owner's
 * allowance covers the amount, and the nonce then stays current.
 */
export class UsedPermits {
  #use;
  #of;
  #inFlight;
  constructor(db: Db) {
    this.#use = db.prepare(`INSERT INTO used_permits (chain_id, token, owner, nonce, deadline, request_id, used_at)
      VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`);
    this.#of = db.prepare('SELECT request_id FROM used_permits WHERE chain_id = ? AND token = ? AND owner = ? AND nonce = ? AND deadline = ?');
    this.#inFlight = db.prepare(`SELECT u.request_id FROM used_permits u JOIN payouts p ON p.id = 'deposit:' || u.request_id
      WHERE u.chain_id = ? AND u.token = ? AND u.owner = ? AND u.nonce = ? AND p.state IN ('queued', 'sent') LIMIT 1`);
  }

  /**
   * The request whose signed deposit under a permit of `p`'s nonce (any deadline) is queued or sent, if any. Its
   * permit will use the nonce: a deposit of another permit of the same nonce would revert, on the solver's gas.
   */
  inFlight(p: PermitNonce): string | undefined {
    const row = this.#inFlight.get(p.chainId, p.token.toLowerCase(), p.owner.toLowerCase(), p.nonce.toString()) as { request_id: string } | undefined;
    return row?.request_id;
  }

  /**
   * Records that `p` funds `requestId`. Returns false when it funds a request already. Call it in the
   * ledger transaction that records the signed deposit, so that a second request racing it is refused;
   * never undone, not even when that deposit fails (its signature is public from then on).
   */
  use(p: PermitNonce, requestId: string, now = Date.now()): boolean {
    return this.#use.run(p.chainId, p.token.toLowerCase(), p.owner.toLowerCase(), p.nonce.toString(), p.deadline.toString(), requestId, now).changes === 1;
  }

  /** The request `p` funds, if any. */
  usedBy(p: PermitNonce): string | undefined {
    const row = this.#of.get(p.chainId, p.token.toLowerCase(), p.owner.toLowerCase(), p.nonce.toString(), p.deadline.toString()) as
      | { request_id: string }
      | undefined;
    return row?.request_id;
  }
}
