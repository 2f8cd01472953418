import type { SqlDb as Db } from './sqlDb.ts';

/** What a wallet's signed message authorizes; each purpose has its own nonces. */
export type SignedPurpose = 'link' | 'unlink' | 'claim';

/**
 * The nonces of signed messages the node has acted on (see the migration of signature_nonces):
 * each signature authorizes one action, once, until its expiry.
 */
export class SignatureNonces {
  #use;
  constructor(db: Db) {
    this.#use = db.prepare(`INSERT INTO signature_nonces (key, purpose, wallet, nonce, expires_at, used_at)
      VALUES (@key, @purpose, @wallet, @nonce, @expiresAt, @now) ON CONFLICT(key) DO NOTHING`);
  }

  /**
   * Marks `wallet`'s nonce for `purpose` used. Returns false when it was used already. Call it in
   * the ledger transaction of what the signature authorizes, so that both happen or neither.
   */
  use(purpose: SignedPurpose, wallet: string, nonce: string, expiresAt: number, now = Date.now()): boolean {
    const key = `${purpose}:${wallet.toLowerCase()}:${nonce}`;
    return this.#use.run({ key, purpose, wallet, nonce, expiresAt, now }).changes === 1;
  }
}
