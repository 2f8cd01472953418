// The simulated chain's state: litesvm, the slot and its clock, the blockhashes still valid, and the
// record of every executed transaction (by signature, slot and address).

import crypto from 'node:crypto';
import { LiteSVM, Clock } from 'litesvm';
import { address as kitAddress } from '@solana/kit';
import { Keypair } from '@solana/web3.js';
import { FAUCET_LAMPORTS, FINALIZE_DEPTH, MAX_PROCESSING_AGE, SLOTS_PER_EPOCH, SYSTEM_PROGRAM, toB58, type Commitment } from './codec.ts';
import type { TxRecord } from './records.ts';

/** The chain behind the RPC: one slot at a time, each with a fresh blockhash; the last 150 stay valid. */
export class ChainState {
  /** Blockhashes are checked here (150-block window), not by litesvm, which only knows its latest one. */
  readonly svm = new LiteSVM().withSigverify(true).withBlockhashCheck(false).withTransactionHistory(0n);
  readonly genesisHash = toB58(crypto.randomBytes(32));
  slot = 0;
  txCount = 0;
  readonly slotTimes = new Map<number, number>();
  readonly blockhashHeight = new Map<string, number>();
  readonly blockhashBySlot = new Map<number, string>();
  /** Every slot's blockhash, by slot (the stand-in's ledger is never pruned: getBlock answers any slot). */
  readonly blockhashes: string[] = [];
  readonly records = new Map<string, TxRecord>();
  readonly bySlot = new Map<number, TxRecord[]>();
  readonly byAddress = new Map<string, TxRecord[]>();
  /** Funds the faucet's transfers; the default mint authority. */
  readonly authority = Keypair.generate();
  readonly faucet = this.authority;

  /** Genesis: slot 0, its clock and blockhash, and the faucet's lamports. */
  constructor() {
    this.setClockForSlot();
    this.newBlockhash();
    this.svm.setAccount({
      address: kitAddress(this.faucet.publicKey.toBase58()),
      lamports: FAUCET_LAMPORTS as never,
      programAddress: kitAddress(SYSTEM_PROGRAM),
      executable: false,
      space: 0n,
      data: new Uint8Array(0),
    });
  }

  /** Sets litesvm's clock for the current slot (never earlier than the previous slot's time). */
  setClockForSlot(): void {
    const slot = this.slot;
    const now = Math.floor(Date.now() / 1000);
    const prev = this.slotTimes.get(slot - 1) ?? now;
    const t = Math.max(now, prev);
    this.slotTimes.set(slot, t);
    const epoch = BigInt(Math.floor(slot / SLOTS_PER_EPOCH));
    this.svm.setClock(new Clock(BigInt(slot), BigInt(t), epoch, epoch, BigInt(t)));
  }

  /** A new blockhash for the current slot. */
  newBlockhash(): void {
    this.svm.expireBlockhash();
    const h = this.svm.latestBlockhash();
    this.blockhashHeight.set(h, this.slot);
    this.blockhashBySlot.set(this.slot, h);
    this.blockhashes[this.slot] = h;
  }

  /** Forgets the blockhash of the slot that fell out of twice the validity window. */
  pruneOld(): void {
    const oldSlot = this.slot - 2 * MAX_PROCESSING_AGE;
    const h = this.blockhashBySlot.get(oldSlot);
    if (h !== undefined) {
      this.blockhashBySlot.delete(oldSlot);
      if (this.blockhashHeight.get(h) === oldSlot) this.blockhashHeight.delete(h);
    }
  }

  /** Moves to the next slot: its clock and blockhash. */
  advance(): void {
    this.slot++;
    this.setClockForSlot();
    this.newBlockhash();
    this.pruneOld();
  }

  /** The newest slot at a commitment. */
  slotAt(c: Commitment): number {
    const slot = this.slot;
    return c === 'processed' ? slot : c === 'confirmed' ? Math.max(0, slot - 1) : Math.max(0, slot - FINALIZE_DEPTH);
  }

  /** Whether a transaction with this blockhash may still be processed. */
  blockhashValid(hash: string): boolean {
    const h = this.blockhashHeight.get(hash);
    return h !== undefined && this.slot - h <= MAX_PROCESSING_AGE;
  }

  /** The commitment a recorded transaction has reached. */
  recordStatus(rec: TxRecord): Commitment {
    const d = this.slot - rec.slot;
    return d >= FINALIZE_DEPTH ? 'finalized' : d >= 1 ? 'confirmed' : 'processed';
  }

  /** Whether a recorded transaction is seen at a commitment. */
  visibleAt(rec: TxRecord, c: Commitment): boolean {
    const order = { processed: 0, confirmed: 1, finalized: 2 };
    return order[this.recordStatus(rec)] >= order[c];
  }
}
