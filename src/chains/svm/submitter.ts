// One submitter per SVM destination chain: fills and refunds as SOL or SPL transfers from the solver's
// account, with the order id in a memo and the recipient's token account created when it is missing.
//
//   prepare  read the mint and the recipient's token account, price the compute unit from recent
//            prioritization fees, size the compute-unit limit by simulation (plus a margin), check
//            the 1,232-byte limit (TRANSACTION_TOO_LARGE);
//   submit   sign with a recent blockhash, record the transaction (signature as hash, base64 wire
//            bytes as raw, the blockhash's last valid block height as nonce) with the payout's new
//            state in one ledger transaction, and only then send;
//   confirm  look the recorded signatures up (getSignatureStatuses, with history), settle what landed
//            at the chain's commitment, resend the recorded bytes while their blockhash is valid,
//            and only once the blockhash has expired at the finalized height AND the signature is
//            absent, mark it dropped and queue the payout to be signed again with a fresh blockhash.
//
// Never paying twice: a payout has at most one transaction that can still land. A signed transaction
// is in the ledger before it can reach the chain; it is re-sent only as the same bytes (same
// signature: the chain runs a signature once); and a new transaction is signed for the payout only
// after the old one provably can never land (its blockhash is past the finalized block height, so no
// block can include it any more, and the chain's history does not have it). On restart the confirm
// pass runs before anything new is signed.
import PQueue from 'p-queue';
import { PublicKey, type Connection, type Keypair, type SignatureStatus, type TransactionInstruction } from '@solana/web3.js';
import type { SvmChainConfig } from '../../config/schema.ts';
import type { Faults } from '../../config/load.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { PayoutRow, TransactionRow } from '../../ledger/types.ts';
import { forRequest, type Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
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
import type { FailReason } from '../../ledger/reasons.ts';

export interface SvmSubmitterOptions {
  chain: SvmChainConfig;
  ledger: Ledger;
  conn: Connection;
  keypair: Keypair;
  hooks: PayoutHooks;
  metrics: Metrics;
  log: Logger;
  faults: Faults;
  mintInfo(currency: string): Promise<MintInfo>;
  // Micro-lamports per compute unit, from recent prioritization fees of these writable accounts.
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
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 30_000;
const OPEN = new Set(['signed', 'broadcast']);
const STATUS_BATCH = 256;
const RANK = { processed: 0, confirmed: 1, finalized: 2 } as const;

// A permanent problem: the payout can never be sent as it is.
class Unpayable extends Error {
  constructor(
    readonly reason: FailReason,
    message: string,
  ) {
    super(message);
  }
}

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e));

// Simulation errors that mean "the solver lacks funds now" (wait for inventory) rather than "this
// transfer can never succeed". Custom 1 is the System program's ResultWithNegativeLamports and the
// Token programs' InsufficientFunds.
function lacksFunds(err: unknown): boolean {
  const s = JSON.stringify(err);
  return /InsufficientFundsForFee|AccountNotFound|"Custom":1\b|"InsufficientFunds"/.test(s);
}

export class SvmSubmitter {
  readonly chainId: number;
  readonly address: string;
  readonly #o: SvmSubmitterOptions;
  readonly #queue = new PQueue({ concurrency: CONCURRENCY });
  readonly #inFlight = new Set<string>();
  readonly #retry = new Map<string, { attempts: number; at: number }>();
  readonly #lastSent = new Map<string, number>();
  readonly #log: Logger;
  #running = false;
  #ready = false;
  #timer: NodeJS.Timeout | undefined;
  #confirming: Promise<void> | undefined;
  #confirmAgain = false;

  constructor(o: SvmSubmitterOptions) {
    this.#o = o;
    this.chainId = o.chain.id;
    this.address = o.keypair.publicKey.toBase58();
    this.#log = o.log.child({ component: 'svm-submitter', chainId: o.chain.id, solver: this.address });
  }

  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    // Reconcile what the ledger holds with the chain before anything new is signed.
    await this.confirmNow();
    if (!this.#running) return;
    this.#ready = true;
    this.#timer = setInterval(() => {
      void this.confirmNow();
      this.#pump();
    }, this.#o.chain.pollIntervalMs);
    this.#timer.unref();
    this.#pump();
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#ready = false;
    clearInterval(this.#timer);
    await this.#queue.onIdle();
    while (this.#confirming) await this.#confirming;
  }

  wake(): void {
    queueMicrotask(() => this.#pump());
  }

  confirmNow(): Promise<void> {
    if (this.#confirming) {
      this.#confirmAgain = true;
      return this.#confirming;
    }
    const run = (async () => {
      do {
        this.#confirmAgain = false;
        try {
          await this.#confirmPass();
        } catch (e) {
          this.#o.metrics.rpcErrors.inc({ chain: this.chainId, method: 'confirm' });
          this.#log.warn({ err: errText(e) }, 'svm confirm pass failed; retrying');
        }
      } while (this.#confirmAgain && this.#running);
    })();
    this.#confirming = run.finally(() => {
      this.#confirming = undefined;
    });
    return this.#confirming;
  }

  // ------------------------------------------------------------------------------------------ prepare + submit

  #pump(): void {
    if (!this.#running || !this.#ready) return;
    const now = Date.now();
    for (const row of this.#o.ledger.payouts.queued(this.chainId, QUEUED_BATCH)) {
      if (this.#inFlight.has(row.id)) continue;
      const r = this.#retry.get(row.id);
      if (r && r.at > now) continue;
      this.#inFlight.add(row.id);
      void this.#queue
        .add(() => this.#process(row.id), { priority: r ? 0 : 1 })
        .catch((e) => forRequest(this.#log, row.request_id).error({ payout: row.id, err: errText(e) }, 'unexpected error processing svm payout'))
        .finally(() => this.#inFlight.delete(row.id));
    }
  }

  async #instructions(p: PayoutRow): Promise<{ ixs: TransactionInstruction[]; writable: PublicKey[] }> {
    if (p.kind !== 'fill' && p.kind !== 'refund' && p.kind !== 'excess') throw new Unpayable('TRANSACTION_SUBMISSION_FAILED', `${p.kind} payouts are not made on SVM chains`);
    if (p.calls) throw new Unpayable('TRANSACTION_SUBMISSION_FAILED', 'destination calls are not made on SVM chains');
    const recipient = canonicalAddress('svm', p.recipient);
    if (!recipient) throw new Unpayable('TRANSACTION_SUBMISSION_FAILED', `recipient ${p.recipient} is not a base58 public key`);
    let amount: bigint;
    try {
      amount = BigInt(p.amount);
    } catch {
      throw new Unpayable('TRANSACTION_SUBMISSION_FAILED', `amount ${p.amount} is not an integer`);
    }
    if (amount <= 0n) throw new Unpayable('TRANSACTION_SUBMISSION_FAILED', `amount ${p.amount} is not positive`);
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
      ixs.push(...transferInstructions({ from: solver, to, amount, mint, createAta: !exists, payer: solver }));
      writable.push(ata, ataOf(solver, mint.mint, mint.programId));
      // A gas top-up rides along as lamports to the recipient.
      const topUp = BigInt(p.native_topup ?? 0);
      if (topUp > 0n) ixs.push(...transferInstructions({ from: solver, to, amount: topUp, payer: solver }));
    }
    ixs.push(memoInstruction(orderMemo(p.request_id ?? p.id)));
    return { ixs, writable };
  }

  async #process(payoutId: string): Promise<void> {
    if (!this.#running) return;
    const { ledger, conn, keypair, hooks } = this.#o;
    const payout = ledger.payouts.get(payoutId);
    if (!payout || payout.state !== 'queued' || payout.chain_id !== this.chainId) return;
    const log = this.#log.child({ payout: payout.id, kind: payout.kind, requestId: payout.request_id });
    try {
      const { ixs, writable } = await this.#instructions(payout);
      const [price, { blockhash, lastValidBlockHeight }] = await Promise.all([this.#o.priorityFee(writable), conn.getLatestBlockhash('confirmed')]);
      const payer = keypair.publicKey;

      // Size the compute budget by simulation of the same instructions.
      const probe = budgetedTransaction({ payer, blockhash, instructions: ixs, computeUnitLimit: MAX_CU, microLamportsPerCu: price });
      const sim = await conn.simulateTransaction(probe, { sigVerify: false, replaceRecentBlockhash: true, commitment: 'confirmed' });
      if (sim.value.err) {
        if (lacksFunds(sim.value.err)) throw new Error(`the solver lacks funds for the payout now: ${JSON.stringify(sim.value.err)}`);
        throw new Unpayable(payout.kind === 'fill' ? 'EXECUTION_REVERTED' : 'TRANSACTION_REVERTED', `simulation failed: ${JSON.stringify(sim.value.err)}; ${(sim.value.logs ?? []).slice(-3).join(' | ')}`);
      }
      const used = sim.value.unitsConsumed ?? 200_000;
      const limit = Math.min(MAX_CU, Math.ceil((used * Number(10_000n + CU_MARGIN_BPS)) / 10_000) + CU_MARGIN_MIN);

      const tx = budgetedTransaction({ payer, blockhash, instructions: ixs, computeUnitLimit: limit, microLamportsPerCu: price });
      tx.sign([keypair]);
      const wire = wireBytes(tx);
      if (!wire) throw new Unpayable('TRANSACTION_TOO_LARGE', 'the payout transaction exceeds the 1,232-byte packet limit');
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
          nonce: lastValidBlockHeight,
          raw: raw as `0x${string}`,
          gas_limit: String(limit),
          // SVM: the compute-unit price (micro-lamports) and the priority fee it makes (lamports).
          max_fee_per_gas: price.toString(),
          max_priority_fee_per_gas: priorityLamports(limit, price).toString(),
          created_at: Date.now(),
        });
        ledger.payouts.setState(cur.id, 'sent', { txHash: signature });
        hooks.onSigned(cur, signature);
        return true;
      });
      if (!recorded) return;
      this.#retry.delete(payout.id);
      log.info({ signature, computeUnits: used, limit, microLamportsPerCu: price.toString(), bytes: wire.length, lastValidBlockHeight }, 'svm payout signed and recorded');
      if (payout.kind === 'fill' && this.#o.faults.crashAfterFillRecorded) process.kill(process.pid, 'SIGKILL');
      await this.#broadcast(payout.id, signature, raw, log);
    } catch (e) {
      if (e instanceof Unpayable) return this.#fail(payout, e.reason, log, e.message);
      this.#backoff(payout.id, e, log);
    }
  }

  #backoff(payoutId: string, err: unknown, log: Logger): void {
    const attempts = (this.#retry.get(payoutId)?.attempts ?? 0) + 1;
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (attempts - 1)) * (0.75 + Math.random() * 0.5);
    this.#retry.set(payoutId, { attempts, at: Date.now() + delay });
    this.#o.metrics.rpcErrors.inc({ chain: this.chainId, method: 'prepare' });
    log.warn({ err: errText(err), attempts, retryInMs: Math.round(delay) }, 'svm payout postponed');
  }

  #fail(payout: PayoutRow, reason: FailReason, log: Logger, detail: string): void {
    const { ledger, hooks } = this.#o;
    const done = ledger.tx(() => {
      const cur = ledger.payouts.get(payout.id);
      if (!cur || cur.state !== 'queued') return false;
      ledger.payouts.setState(cur.id, 'failed', { failReason: reason });
      hooks.onFailed(cur, reason);
      return true;
    });
    this.#retry.delete(payout.id);
    if (done) log.warn({ reason, detail }, 'svm payout failed before sending');
  }

  // Sends recorded bytes (never anything else). A refusal is left to the confirm pass.
  async #broadcast(payoutId: string, signature: string, raw: string, log: Logger): Promise<void> {
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

  async #confirmPass(): Promise<void> {
    const { ledger, conn } = this.#o;
    const open = ledger.payouts.openTxs(this.chainId).filter((t) => t.sender === this.address);
    this.#o.metrics.queueDepth.set({ chain: String(this.chainId) }, open.length + ledger.payouts.queued(this.chainId, 10_000).length);
    if (!open.length) return;
    // The finalized height is read before the statuses: a signature absent from a later answer,
    // whose blockhash expired before that height, was never included and never will be. "Later"
    // is made sure of by slot, not by clock: the epoch info names the finalized block's slot, the
    // connection's pool (rpcPool.ts) then takes no status answer from a slot before it.
    const finalizedHeight = (await conn.getEpochInfo('finalized')).blockHeight ?? 0; // none named: nothing expired
    const statuses: (SignatureStatus | null)[] = [];
    for (let i = 0; i < open.length; i += STATUS_BATCH) {
      const r = await conn.getSignatureStatuses(
        open.slice(i, i + STATUS_BATCH).map((t) => t.hash),
        { searchTransactionHistory: true },
      );
      statuses.push(...r.value);
    }
    for (let i = 0; i < open.length; i++) {
      const t = open[i]!;
      try {
        await this.#confirmOne(t, statuses[i] ?? null, finalizedHeight);
      } catch (e) {
        forRequest(this.#log, this.#o.ledger.payouts.get(t.payout_id)?.request_id).warn({ signature: t.hash, err: errText(e) }, 'svm confirm of a transaction failed; retrying');
      }
    }
  }

  async #confirmOne(t: TransactionRow, st: SignatureStatus | null, finalizedHeight: number): Promise<void> {
    const { ledger, hooks, conn } = this.#o;
    const log = forRequest(this.#log, ledger.payouts.get(t.payout_id)?.request_id).child({ payout: t.payout_id, signature: t.hash });
    if (st) {
      const level = st.confirmationStatus ? RANK[st.confirmationStatus] : st.confirmations === null ? RANK.finalized : RANK.confirmed;
      if (level < RANK[this.#o.chain.commitment]) return; // landed; not yet at the chain's commitment
      const landed = await conn.getTransaction(t.hash, { commitment: this.#o.chain.commitment, maxSupportedTransactionVersion: 0 });
      if (!landed) return;
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
        return;
      }
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
      return;
    }
    if (finalizedHeight > t.nonce) {
      // Expired and absent: it can never land. Only now may the payout be signed again.
      const requeued = ledger.tx(() => {
        ledger.payouts.setTxState(t.hash, 'dropped', { error: `blockhash expired at height ${t.nonce} (finalized ${finalizedHeight}) and the chain does not have it` });
        const cur = ledger.payouts.get(t.payout_id);
        if (!cur || cur.state !== 'sent' || ledger.payouts.txsOf(cur.id).some((x) => OPEN.has(x.state))) return false;
        ledger.payouts.setState(cur.id, 'queued');
        return true;
      });
      this.#lastSent.delete(t.hash);
      log.warn({ lastValidBlockHeight: t.nonce, finalizedHeight, requeued }, 'svm transaction expired without landing; payout queued for a fresh blockhash');
      if (requeued) this.wake();
      return;
    }
    // Not seen yet and still valid: send the same bytes again now and then.
    const last = this.#lastSent.get(t.hash) ?? 0;
    if (Date.now() - last >= REBROADCAST_MS) await this.#broadcast(t.payout_id, t.hash, t.raw, log);
  }
}
