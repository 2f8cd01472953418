// How an SVM destination chain pays (the payout pipeline's PayoutSender, src/submitter/): fills and refunds
// as SOL or SPL transfers from the solver's account, with the order id in a memo and the recipient's token
// account created when it is missing (for a fill, only when its quote charged the rent).
//
//   prepare  read the mint and the recipient's token account, price the compute unit from recent
//            prioritization fees, size the compute-unit limit by simulation (plus a margin);
//   submit   sign with a recent blockhash, check the 1,232-byte limit (TRANSACTION_TOO_LARGE), record the
//            transaction (signature as hash, base64 wire bytes as raw, the blockhash's last valid block
//            height as nonce) with the payout's new state in one ledger transaction, and only then send;
//   confirm  look the recorded signatures up (getSignatureStatuses, with history), settle what landed
//            at the chain's commitment (a failure only once final: finalized, or its blockhash expired),
//            resend the recorded bytes while their blockhash is valid, and only once the blockhash has
//            expired at the finalized height AND the signature is absent from a history that provably
//            covers the transaction's whole life, mark it dropped and queue the payout to be signed again
//            with a fresh blockhash.
//
// Never paying twice: a payout has at most one transaction that can still land. A signed transaction
// is in the ledger before it can reach the chain; it is re-sent only as the same bytes (same
// signature: the chain runs a signature once); and a new transaction is signed for the payout only
// after the old one provably can never land (its blockhash is past the finalized block height, so no
// block can include it any more, and the chain's history does not have it). "No status" is that proof
// only from a provider whose history holds every slot the transaction could have landed in: its
// ledger reaching back to the slot it was signed at (pruned ledgers, after days down), and its
// transaction-status index complete through the finalized slot (Agave's index lags replay under load;
// the status cache forgets after ~300 slots; history may be off). Without that proof the payout stays
// sent, is looked at again every pass, and is named in a warning. On restart the confirm pass runs
// before anything new is signed.
import { type BroadcastGate, OPEN_GATE } from '../../submitter/gate.ts';
import { PublicKey, VersionedTransaction, type Connection, type Keypair, type SignatureStatus, type TransactionInstruction } from '@solana/web3.js';
import type { SvmChainConfig } from '../../config/schema.ts';
import type { Faults } from '../../config/load.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { PayoutRow, TransactionRow } from '../../ledger/types.ts';
import { forRequest, type Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { errText } from '../../lib/errors.ts';
import { UnpayableError } from '../../submitter/errors.ts';
import { PayoutPipeline } from '../../submitter/pipeline.ts';
import { quotedNoRent } from '../../submitter/quotedRent.ts';
import type { BroadcastResult, PayoutSender, PrepareResult, StepContext, SubmitResult, TxStatus } from '../../submitter/port.ts';
import type { PayoutHooks } from '../adapter.ts';
import { canonicalAddress } from '../address.ts';
import {
  ataOf,
  base58Encode,
  budgetedTransaction,
  isSvmNative,
  memoInstruction,
  orderMemo,
  priorityLamports,
  transferInstructions,
  wireBytes,
  type MintInfo,
} from './transactions.ts';

/**
 * What the providers' history proves (src/chains/svm/rpcPool.ts): each answer undefined when every reading
 * provider gives the proof, else why not (providers by name, never a URL).
 */
export interface SvmHistoryProof {
  /** Every reader's transaction-status index complete through this (finalized) slot. */
  statusIndexComplete(slot: number): Promise<string | undefined>;
  /** Every reader's ledger history reaching back to this slot. */
  historyReaches(slot: number): Promise<string | undefined>;
}

/** What an SVM chain's payouts need: the chain, its connection and the solver's key, and the adapter's caches. */
export interface SvmPayoutOptions {
  chain: SvmChainConfig;
  ledger: Ledger;
  conn: Connection;
  /** Whether the providers' "no status" for an expired payout proves it never landed (the connection's pool). */
  history: SvmHistoryProof;
  keypair: Keypair;
  hooks: PayoutHooks;
  metrics: Metrics;
  log: Logger;
  faults: Faults;
  /** Asked right before anything is sent to the chain (active/standby: only the lease's holder, before its deadline). */
  gate?: BroadcastGate;
  mintInfo(currency: string): Promise<MintInfo>;
  /** Micro-lamports per compute unit, from recent prioritization fees of these writable accounts. */
  priorityFee(writable: PublicKey[]): Promise<bigint>;
}

// The most compute a simulation may use (the runtime's per-transaction maximum).
const MAX_CU = 1_400_000;
// Margin on the simulated compute units: 20% and a fixed floor.
const CU_MARGIN_BPS = 2_000n;
const CU_MARGIN_MIN = 1_000;
const CONCURRENCY = 4;
const QUEUED_BATCH = 200;
const REBROADCAST_MS = 2_000;
const OPEN = new Set(['signed', 'broadcast']);
const STATUS_BATCH = 256;
// Blocks a blockhash is valid for after its own (Agave's MAX_PROCESSING_AGE: lastValidBlockHeight is the
// blockhash's height plus this), and twice that as a margin: a transaction recorded without the slot it
// was signed at cannot have landed in a slot below (last valid height - HISTORY_MARGIN), since a block's
// slot is at least its height.
const HISTORY_MARGIN = 300;
// How often the warning for a payout held without proof is repeated (it is looked at every pass).
const HELD_WARN_MS = 60_000;
const RANK = { processed: 0, confirmed: 1, finalized: 2 } as const;

/** A payout's instructions, priced and sized, with the blockhash to sign them at. */
export interface SvmPrepared {
  ixs: TransactionInstruction[];
  price: bigint;
  blockhash: string;
  lastValidBlockHeight: number;
  /** The slot the blockhash was read at (confirmed): the transaction can only land in a later one (its blockhash's descendants). */
  slot: number;
  /** Compute units the simulation used, and the limit set from it. */
  used: number;
  limit: number;
}

/** A recorded SVM transaction, ready to send. */
export interface SvmSigned {
  payoutId: string;
  signature: string;
  raw: string;
}

// Simulation errors that mean "the solver lacks funds now" (wait for inventory) rather than "this
// transfer can never succeed". Custom 1 is the System program's ResultWithNegativeLamports and the
// Token programs' InsufficientFunds.
function lacksFunds(err: unknown): boolean {
  const s = JSON.stringify(err);
  return /InsufficientFundsForFee|AccountNotFound|"Custom":1\b|"InsufficientFunds"/.test(s);
}

/** The payout pipeline of an SVM chain, over its sender. */
export function svmPayoutPipeline(o: SvmPayoutOptions): PayoutPipeline<SvmPrepared, SvmSigned> {
  const sender = new SvmPayoutSender(o);
  return new PayoutPipeline(sender, {
    ledger: o.ledger,
    hooks: o.hooks,
    metrics: o.metrics,
    log: sender.log,
    faults: o.faults,
    intervalMs: o.chain.pollIntervalMs,
    concurrency: CONCURRENCY,
    queuedBatch: QUEUED_BATCH,
  });
}

/** Builds, signs, records, sends and confirms SVM payout transactions (the chain-specific half of the payout pipeline). */
export class SvmPayoutSender implements PayoutSender<SvmPrepared, SvmSigned> {
  readonly chainId: number;
  readonly address: string;
  readonly label = 'svm';
  readonly log: Logger;
  readonly #o: SvmPayoutOptions;
  readonly #lastSent = new Map<string, number>();
  // Signatures held (expired, no status, no proof) and when their warning was last logged.
  readonly #heldWarned = new Map<string, number>();

  constructor(o: SvmPayoutOptions) {
    this.#o = o;
    this.chainId = o.chain.id;
    this.address = o.keypair.publicKey.toBase58();
    this.log = o.log.child({ component: 'svm-submitter', chainId: o.chain.id, solver: this.address });
  }

  // ------------------------------------------------------------------------------------------ prepare + submit

  async #instructions(p: PayoutRow): Promise<{ ixs: TransactionInstruction[]; writable: PublicKey[] }> {
    if (p.kind !== 'fill' && p.kind !== 'refund' && p.kind !== 'excess') throw new UnpayableError(`${p.kind} payouts are not made on SVM chains`);
    if (p.calls) throw new UnpayableError('destination calls are not made on SVM chains');
    const recipient = canonicalAddress('svm', p.recipient);
    if (!recipient) throw new UnpayableError(`recipient ${p.recipient} is not a base58 public key`);
    let amount: bigint;
    try {
      amount = BigInt(p.amount);
    } catch {
      throw new UnpayableError(`amount ${p.amount} is not an integer`);
    }
    if (amount <= 0n) throw new UnpayableError(`amount ${p.amount} is not positive`);
    const solver = this.#o.keypair.publicKey;
    const to = new PublicKey(recipient);
    const ixs: TransactionInstruction[] = [];
    const writable = [solver];
    if (isSvmNative(p.currency)) {
      ixs.push(...transferInstructions({ from: solver, to, amount, payer: solver }));
      writable.push(to);
    } else {
      const mint = await this.#o.mintInfo(p.currency);
      const ata = ataOf(to, mint.mint, mint.programId);
      const exists = (await this.#o.conn.getAccountInfo(ata, 'confirmed')) !== null;
      // A fill pays for creating the account only when its quote charged the rent: one closed by its
      // owner after the quote would otherwise be created (and its rent reclaimed) at the solver's expense.
      // Refunds and excess are charged the rent whenever (SvmAdapter.refundCost).
      if (!exists && p.kind === 'fill' && quotedNoRent(this.#o.ledger, p)) {
        throw new UnpayableError(
          `the recipient's token account ${ata.toBase58()} is missing and the quote charged no rent to create it`,
          'NEW_CALLDATA_INCLUDES_HIGHER_RENT_FEE',
        );
      }
      ixs.push(...transferInstructions({ from: solver, to, amount, mint, createAta: !exists, payer: solver }));
      writable.push(ata, ataOf(solver, mint.mint, mint.programId));
      // A gas top-up rides along as lamports to the recipient.
      const topUp = BigInt(p.native_topup ?? 0);
      if (topUp > 0n) ixs.push(...transferInstructions({ from: solver, to, amount: topUp, payer: solver }));
    }
    ixs.push(memoInstruction(orderMemo(p.request_id ?? p.id)));
    return { ixs, writable };
  }

  /** The payout's instructions, their compute-unit price and limit (by simulation), and a recent blockhash. */
  async prepare(payout: PayoutRow): Promise<PrepareResult<SvmPrepared>> {
    const { conn, keypair } = this.#o;
    const { ixs, writable } = await this.#instructions(payout);
    const [
      price,
      {
        context: { slot },
        value: { blockhash, lastValidBlockHeight },
      },
    ] = await Promise.all([this.#o.priorityFee(writable), conn.getLatestBlockhashAndContext('confirmed')]);
    const payer = keypair.publicKey;

    // Size the compute budget by simulation of the same instructions.
    const probe = budgetedTransaction({ payer, blockhash, instructions: ixs, computeUnitLimit: MAX_CU, microLamportsPerCu: price });
    const sim = await conn.simulateTransaction(probe, { sigVerify: false, replaceRecentBlockhash: true, commitment: 'confirmed' });
    if (sim.value.err) {
      if (lacksFunds(sim.value.err)) {
        return { kind: 'retry', why: 'no-funds', cause: new Error(`the solver lacks funds for the payout now: ${JSON.stringify(sim.value.err)}`) };
      }
      return {
        kind: 'unpayable',
        reason: payout.kind === 'fill' ? 'EXECUTION_REVERTED' : 'TRANSACTION_REVERTED',
        detail: `simulation failed: ${JSON.stringify(sim.value.err)}; ${(sim.value.logs ?? []).slice(-3).join(' | ')}`,
      };
    }
    const used = sim.value.unitsConsumed ?? 200_000;
    const limit = Math.min(MAX_CU, Math.ceil((used * Number(10_000n + CU_MARGIN_BPS)) / 10_000) + CU_MARGIN_MIN);
    return { kind: 'ready', prepared: { ixs, price, blockhash, lastValidBlockHeight, slot, used, limit } };
  }

  /** Signs, and records the transaction with the payout's `sent` state and `onSigned` in one ledger transaction. */
  async submit(payout: PayoutRow, p: SvmPrepared, { log }: StepContext): Promise<SubmitResult<SvmSigned>> {
    const { ledger, keypair, hooks } = this.#o;
    const tx = budgetedTransaction({
      payer: keypair.publicKey,
      blockhash: p.blockhash,
      instructions: p.ixs,
      computeUnitLimit: p.limit,
      microLamportsPerCu: p.price,
    });
    tx.sign([keypair]);
    const wire = wireBytes(tx);
    if (!wire) return { kind: 'unpayable', reason: 'TRANSACTION_TOO_LARGE', detail: 'the payout transaction exceeds the 1,232-byte packet limit' };
    const signature = base58Encode(tx.signatures[0]!);
    const raw = Buffer.from(wire).toString('base64');

    const recorded = ledger.tx(() => {
      const cur = ledger.payouts.get(payout.id);
      if (!cur || cur.state !== 'queued') return false;
      ledger.payouts.insertTx({
        hash: signature as `0x${string}`,
        payout_id: cur.id,
        chain_id: this.chainId,
        sender: this.address,
        // The transaction cannot land after this block height: the blockhash has expired.
        nonce: p.lastValidBlockHeight,
        raw: raw as `0x${string}`,
        gas_limit: String(p.limit),
        // SVM: the compute-unit price (micro-lamports) and the priority fee it makes (lamports).
        max_fee_per_gas: p.price.toString(),
        max_priority_fee_per_gas: priorityLamports(p.limit, p.price).toString(),
        created_at: Date.now(),
      });
      // Where the provider's history must reach back to before a missing status may prove it never landed.
      ledger.payouts.setTxState(signature, 'signed', { sentBlock: p.slot });
      ledger.payouts.setState(cur.id, 'sent', { txHash: signature });
      hooks.onSigned(cur, signature);
      return true;
    });
    if (!recorded) return { kind: 'stale' };
    log.info(
      {
        signature,
        computeUnits: p.used,
        limit: p.limit,
        microLamportsPerCu: p.price.toString(),
        bytes: wire.length,
        lastValidBlockHeight: p.lastValidBlockHeight,
      },
      'svm payout signed and recorded',
    );
    return { kind: 'recorded', txHash: signature, signed: { payoutId: payout.id, signature, raw } };
  }

  /** Sends recorded bytes (never anything else). A refusal is left to the confirm pass. */
  async broadcast(s: SvmSigned, { log }: StepContext): Promise<BroadcastResult> {
    await this.#broadcast(s.payoutId, s.signature, s.raw, log);
    return { kind: 'sent' };
  }

  async #broadcast(payoutId: string, signature: string, raw: string, log: Logger): Promise<void> {
    (this.#o.gate ?? OPEN_GATE).check();
    this.#lastSent.set(signature, Date.now());
    let error: string | undefined;
    try {
      await this.#o.conn.sendRawTransaction(Buffer.from(raw, 'base64'), { skipPreflight: true, maxRetries: 0 });
    } catch (e) {
      error = errText(e);
    }
    if (error && !/AlreadyProcessed|already been processed/i.test(error)) {
      this.#o.metrics.rpcErrors.inc({ chain: this.chainId, method: 'sendTransaction' });
      log.warn({ signature, err: error }, 'svm broadcast refused; left to reconciliation');
      return;
    }
    this.#o.ledger.tx(() => {
      const t = this.#o.ledger.payouts.txsOf(payoutId).find((x) => x.hash === signature);
      if (t && t.state === 'signed') this.#o.ledger.payouts.setTxState(signature, 'broadcast', { broadcastAt: Date.now() });
    });
  }

  // ------------------------------------------------------------------------------------------ confirm

  /** Looks the solver's open signatures up and settles, resends or requeues each. */
  async confirm(): Promise<TxStatus[]> {
    const { ledger, conn } = this.#o;
    const open = ledger.payouts.openTxs(this.chainId).filter((t) => t.sender === this.address);
    if (!open.length) {
      this.#o.metrics.svmPayoutsUnproven.set({ chain: String(this.chainId) }, 0);
      return [];
    }
    // The finalized height is read before the statuses: a signature absent from a later answer,
    // whose blockhash expired before that height, was never included and never will be. "Later"
    // is made sure of by slot, not by clock: the epoch info names the finalized block's slot, the
    // connection's pool (rpcPool.ts) then takes no status answer from a slot before it.
    const epoch = await conn.getEpochInfo('finalized');
    const finalizedHeight = epoch.blockHeight ?? 0; // none named: nothing expired
    // An expired transaction's missing status may decide a second signature: the providers' status index
    // must be complete through the finalized slot (every block the transaction could be in), and that is
    // asked before the statuses (an index only grows: complete before the read, complete at it).
    const expired = open.some((t) => finalizedHeight > t.nonce);
    const indexGap = expired ? await this.#o.history.statusIndexComplete(epoch.absoluteSlot) : undefined;
    const statuses: (SignatureStatus | null)[] = [];
    for (let i = 0; i < open.length; i += STATUS_BATCH) {
      const r = await conn.getSignatureStatuses(
        open.slice(i, i + STATUS_BATCH).map((t) => t.hash),
        { searchTransactionHistory: true },
      );
      statuses.push(...r.value);
    }
    // ... and their ledger history must reach back to where each could first have landed, asked after the
    // statuses (history is pruned from below: reaching back after the read, it reached back at it).
    const absent = open.filter((t, i) => !statuses[i] && finalizedHeight > t.nonce);
    const gaps = new Map<string, string>();
    // Reaching back to the lowest reaches back to all: one question a pass, one per transaction only when it does not.
    const lowest = absent.length && !indexGap ? await this.#o.history.historyReaches(Math.min(...absent.map(firstSlotOf))) : undefined;
    for (const t of absent) {
      const why = indexGap ?? (lowest && (await this.#o.history.historyReaches(firstSlotOf(t))));
      if (why) gaps.set(t.hash, why);
    }
    this.#o.metrics.svmPayoutsUnproven.set({ chain: String(this.chainId) }, gaps.size);
    for (const sig of this.#heldWarned.keys()) if (!gaps.has(sig)) this.#heldWarned.delete(sig);
    const out: TxStatus[] = [];
    for (let i = 0; i < open.length; i++) {
      const t = open[i]!;
      try {
        out.push({ kind: await this.#confirmOne(t, statuses[i] ?? null, finalizedHeight, gaps.get(t.hash)), payoutId: t.payout_id, txHash: t.hash });
      } catch (e) {
        const log = forRequest(this.log, this.#o.ledger.payouts.get(t.payout_id)?.request_id);
        log.warn({ signature: t.hash, err: errText(e) }, 'svm confirm of a transaction failed; retrying');
      }
    }
    return out;
  }

  // Whether the chain (a quorum of its providers, at its newest slot) still takes the transaction's blockhash: while it
  // does, the transaction may yet land, whatever expiry height was recorded with it.
  async #blockhashValid(t: TransactionRow): Promise<boolean> {
    const { recentBlockhash } = VersionedTransaction.deserialize(Buffer.from(this.#o.ledger.payouts.rawOf(t.hash), 'base64')).message;
    return (await this.#o.conn.isBlockhashValid(recentBlockhash, { commitment: 'processed' })).value;
  }

  async #confirmOne(t: TransactionRow, st: SignatureStatus | null, finalizedHeight: number, unproven: string | undefined): Promise<TxStatus['kind']> {
    const { ledger, hooks, conn } = this.#o;
    const log = forRequest(this.log, ledger.payouts.get(t.payout_id)?.request_id).child({ payout: t.payout_id, signature: t.hash });
    if (st) {
      const level = st.confirmationStatus ? RANK[st.confirmationStatus] : st.confirmations === null ? RANK.finalized : RANK.confirmed;
      if (level < RANK[this.#o.chain.commitment]) return 'pending'; // landed; not yet at the chain's commitment
      const landed = await conn.getTransaction(t.hash, { commitment: this.#o.chain.commitment, maxSupportedTransactionVersion: 0 });
      if (!landed) return 'pending';
      const fee = BigInt(landed.meta?.fee ?? 0);
      const extra = { blockNumber: landed.slot, gasUsed: BigInt(landed.meta?.computeUnitsConsumed ?? 0), fee };
      if (!st.err && !landed.meta?.err) {
        const settled = ledger.tx(() => {
          const tx = ledger.payouts.txsOf(t.payout_id).find((x) => x.hash === t.hash);
          if (tx && OPEN.has(tx.state)) ledger.payouts.setTxState(t.hash, 'included', extra);
          const cur = ledger.payouts.get(t.payout_id);
          if (!cur) return false;
          if (cur.state === 'success') {
            if (cur.tx_hash !== t.hash) log.error({ recorded: cur.tx_hash }, 'a second transaction reports paying a settled payout');
            return false;
          }
          if (cur.state === 'failed') {
            log.error('payout recorded failed was paid on chain');
            return false;
          }
          ledger.payouts.setState(cur.id, 'success', { txHash: t.hash });
          hooks.onPaid(cur, t.hash, fee);
          return true;
        });
        this.#lastSent.delete(t.hash);
        if (settled) log.info({ slot: landed.slot, fee: fee.toString(), computeUnits: landed.meta?.computeUnitsConsumed }, 'svm payout paid');
        return 'paid';
      }
      // A failure is acted on only once it is final: its block finalized, or its blockhash expired at the finalized
      // height. A block seen at `confirmed` may yet be replaced, and while the blockhash is valid the same signed bytes
      // (anyone may send them) could land on the other fork and pay after the refund the failure decided.
      if (level < RANK.finalized && (finalizedHeight <= t.nonce || (await this.#blockhashValid(t)))) return 'pending';
      const failed = ledger.tx(() => {
        ledger.payouts.setTxState(t.hash, 'reverted', { ...extra, error: JSON.stringify(st.err ?? landed.meta?.err) });
        const cur = ledger.payouts.get(t.payout_id);
        if (!cur || cur.state !== 'sent' || ledger.payouts.txsOf(cur.id).some((x) => OPEN.has(x.state))) return false;
        ledger.payouts.setState(cur.id, 'failed', { txHash: t.hash, failReason: 'TRANSACTION_REVERTED' });
        hooks.onFailed(cur, 'TRANSACTION_REVERTED', t.hash);
        return true;
      });
      this.#lastSent.delete(t.hash);
      if (failed) log.warn({ err: st.err }, 'svm payout failed: transaction failed on chain');
      return 'reverted';
    }
    if (finalizedHeight > t.nonce && unproven) {
      // Expired, but its absence is not proven: the provider cannot see back to it, or not yet up to the
      // finalized slot. It may have landed (and paid): it stays sent and is looked at again next pass.
      const last = this.#heldWarned.get(t.hash);
      if (last === undefined || Date.now() - last >= HELD_WARN_MS) {
        this.#heldWarned.set(t.hash, Date.now());
        log.warn(
          { lastValidBlockHeight: t.nonce, finalizedHeight, firstSlot: firstSlotOf(t), why: unproven },
          "svm payout not signed again: its blockhash expired without a status, but the providers' history cannot prove it never landed",
        );
      }
      return 'pending';
    }
    if (finalizedHeight > t.nonce) {
      // Past its recorded expiry, but the chain still takes its blockhash: the expiry recorded was the word of the one
      // provider that gave the blockhash, and a hostile one names it early (holding the transaction meanwhile, to send
      // it once the payout is signed again: paid twice). It is asked of the providers' quorum before anything is decided.
      if (await this.#blockhashValid(t)) return 'pending';
      // Expired and absent from a history that covers its whole life: it can never land. Only now may the
      // payout be signed again.
      const requeued = ledger.tx(() => {
        const error = `blockhash expired at height ${t.nonce} (finalized ${finalizedHeight}) and the chain does not have it`;
        ledger.payouts.setTxState(t.hash, 'dropped', { error });
        const cur = ledger.payouts.get(t.payout_id);
        if (!cur || cur.state !== 'sent' || ledger.payouts.txsOf(cur.id).some((x) => OPEN.has(x.state))) return false;
        ledger.payouts.setState(cur.id, 'queued');
        return true;
      });
      this.#lastSent.delete(t.hash);
      this.#heldWarned.delete(t.hash);
      log.warn({ lastValidBlockHeight: t.nonce, finalizedHeight, requeued }, 'svm transaction expired without landing; payout queued for a fresh blockhash');
      return requeued ? 'requeued' : 'dropped';
    }
    // Not seen yet and still valid: send the same bytes again now and then.
    const last = this.#lastSent.get(t.hash) ?? 0;
    if (Date.now() - last >= REBROADCAST_MS) await this.#broadcast(t.payout_id, t.hash, this.#o.ledger.payouts.rawOf(t.hash), log);
    return 'pending';
  }
}

// The lowest slot a recorded transaction could have landed in: the slot its blockhash was read at (recorded
// at signing), else, for a row recorded without it, a bound from its last valid height (a block's slot is at
// least its height).
function firstSlotOf(t: TransactionRow): number {
  return t.sent_block ?? Math.max(0, t.nonce - HISTORY_MARGIN);
}
