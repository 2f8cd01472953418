// Nonces of one sender on one chain. Assignments are serialised: a nonce is handed to one caller at a
// time and counts as used only when the caller says it was consumed (recorded in the ledger, or
// broadcast), so a failure before that point never leaves a gap.

import type { Address, PublicClient } from 'viem';
import type { Ledger } from '../../ledger/index.ts';

export class NonceManager {
  #next: number | undefined;
  #lock: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: { client: PublicClient; ledger: Ledger; chainId: number; address: Address }) {}

  // The next nonce: above everything the chain knows (pending included) and everything the ledger
  // recorded (signed transactions that may not have reached the chain yet).
  async #compute(): Promise<number> {
    const pending = await this.opts.client.getTransactionCount({ address: this.opts.address, blockTag: 'pending' });
    const recorded = this.opts.ledger.payouts.maxNonce(this.opts.chainId, this.opts.address);
    return Math.max(pending, recorded === null ? 0 : recorded + 1);
  }

  init(): Promise<number> {
    return this.#serial(async () => (this.#next = await this.#compute()));
  }

  /** After a nonce was taken by something else: recompute from the chain and the ledger. */
  resync(): Promise<number> {
    return this.#serial(async () => (this.#next = await this.#compute()));
  }

  peek(): number | undefined {
    return this.#next;
  }

  /**
   * Runs fn with the next nonce, exclusively. fn returns whether the nonce was consumed; only then does
   * the next caller get the following one. If fn throws, the nonce is not consumed.
   */
  withNonce<T>(fn: (nonce: number) => Promise<{ consumed: boolean; value: T }>): Promise<T> {
    return this.#serial(async () => {
      if (this.#next === undefined) throw new Error('nonce manager used before init');
      const { consumed, value } = await fn(this.#next);
      if (consumed) this.#next += 1;
      return value;
    });
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn);
    this.#lock = run.catch(() => undefined);
    return run;
  }
}
