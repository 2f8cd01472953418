// The one payout pipeline: every destination chain pays through it, over its own PayoutSender.
//
//   send     read the chain's queued payouts from the ledger; each payout not in flight and not waiting on
//            its backoff goes through prepare → submit → broadcast (at most `concurrency` at once, work that
//            never failed ahead of retries), with the crash fault points between recording and broadcasting
//            and after broadcasting;
//   confirm  the sender's confirm pass over the chain's open transactions, on its own loop (or, `serial`,
//            before each send pass in one loop), which also keeps the queue-depth metric.
//
// What a step returns decides what happens next: ready → submit; unpayable (or a thrown UnpayableError) → the payout fails (one ledger
// transaction, onFailed once); retry (or a thrown error) → the payout stays queued and waits backoffMs.
// The pipeline writes the ledger only to fail a payout that is still queued; every other write (recording
// a signed transaction, settling) is the sender's, in the order the sender documents.
import PQueue from 'p-queue';
import type { Faults } from '../config/load.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow } from '../ledger/types.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { backoffMs, type BackoffPolicy } from '../lib/backoff.ts';
import { errText } from '../lib/errors.ts';
import { Loop } from '../lib/loop.ts';
import { mark } from '../lib/benchMarks.ts';
import { UnpayableError } from './errors.ts';
import { crashPoint } from './faults.ts';
import type { BatchSending, PayoutFailReason, PayoutHooks, PayoutSender, PostponeReason, PrepareResult, StepContext, SubmitResult } from './port.ts';

/** The retry policy of every payout step: 250 ms doubling up to 30 s, with full jitter. */
export const PAYOUT_BACKOFF: BackoffPolicy = { baseMs: 250, maxMs: 30_000 };

// How often the queue-depth gauge is read from the ledger at most.
const QUEUE_DEPTH_EVERY_MS = 1_000;
// While the batchable payouts waiting fill every slot's next batch, how often at most a send pass reads the queue through
// to its end for the payouts that go alone (they need no slot).
const REACH_EVERY_MS = 1_000;

/** What of the ledger the pipeline reads and writes. */
export type PipelineLedger = Pick<Ledger, 'tx'> & {
  payouts: Pick<Ledger['payouts'], 'queued' | 'queuedCount' | 'get' | 'getMany' | 'setState' | 'openTxs'>;
  /** A fill's order's deadline (absent: no fill is held to one). */
  requests?: Pick<Ledger['requests'], 'fillDeadline'>;
};

/** How a pipeline runs. */
export interface PayoutPipelineOptions {
  ledger: PipelineLedger;
  hooks: Pick<PayoutHooks, 'onFailed' | 'mayPay'>;
  metrics: Metrics;
  log: Logger;
  faults: Faults;
  /** How often the send and confirm passes run when nothing wakes them. */
  intervalMs: number;
  /**
   * Where every new head wakes the confirm pass and every queued payout wakes the send pass (the EVM's
   * indexer heads, the solver's payoutsQueued): how often both run anyway, as a backstop, instead of
   * intervalMs. Absent: intervalMs.
   */
  backstopMs?: number;
  /** Payouts being prepared, submitted or broadcast at once. */
  concurrency: number;
  /** Queued payouts read per send pass. */
  queuedBatch: number;
  /**
   * One loop running the confirm pass, then the send pass to its end (a chain whose confirm pass resends
   * recorded actions and must never race the first send of one).
   */
  serial?: boolean;
  backoff?: BackoffPolicy;
  /** Tries at starting (the sender's init and ready, which must be safe to run again) before giving up. */
  startAttempts?: number;
  /** For tests: the jitter's random source. */
  random?: () => number;
}

const POSTPONED: Record<PostponeReason, string> = {
  rpc: 'payout postponed: RPC error',
  'fee-cap': 'payout waits on the fee cap',
  'no-funds': 'payout postponed: the solver lacks funds for it',
  unconfirmed: 'payout postponed: the chain reports it made but its transaction is not found yet',
};

type StepOutcome = Exclude<PrepareResult<unknown>, { kind: 'ready' }> | Exclude<SubmitResult<unknown>, { kind: 'recorded' }>;

/** A chain's payout pipeline as its adapter holds it. */
export interface Payouts {
  readonly chainId: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  wake(): void;
  confirmSoon(): void;
  confirmNow(): Promise<void>;
}

/**
 * Drives one chain's payouts through its sender: pump, in-flight set, retry map with backoff, a send loop
 * and a confirm loop, the crash fault points and the queue-depth metric, written once for every chain.
 */
export class PayoutPipeline<P, S> implements Payouts {
  readonly chainId: number;
  readonly #sender: PayoutSender<P, S>;
  readonly #o: PayoutPipelineOptions;
  readonly #log: Logger;
  readonly #label: { chain: string };
  readonly #queue: PQueue;
  readonly #inFlight = new Set<string>();
  // Payouts waiting on their backoff: tries so far, when the next is due, and the postpone reasons already
  // warned about (a payout postponed again for the same reason is logged at debug).
  readonly #retry = new Map<string, { attempts: number; at: number; warned: Set<PostponeReason> }>();
  // One timer wakes the send loop when the earliest backoff ends.
  #retryTimer: NodeJS.Timeout | undefined;
  #retryAt = Infinity;
  readonly #send: Loop;
  readonly #confirm: Loop;
  #started = false;
  #ready = false;
  // Batchable payouts waiting for a sending slot, and the slots in use.
  #waiting: string[] = [];
  #slots = 0;
  // How many queued payouts mayPay held on the last send pass: the next read reaches past them as past those in flight.
  #held = 0;
  // When a send pass last read every queued payout (a read through to the end, or one that was not truncated).
  #reachedAt = -Infinity;
  // When the queue-depth metric was last read from the ledger (it counts the queued payouts and reads the open transactions).
  #depthAt = -Infinity;

  constructor(sender: PayoutSender<P, S>, o: PayoutPipelineOptions) {
    this.#sender = sender;
    this.#o = o;
    this.chainId = sender.chainId;
    this.#label = { chain: String(sender.chainId) };
    this.#log = o.log;
    this.#queue = new PQueue({ concurrency: o.concurrency });
    const onError = (err: unknown) => this.#log.error({ err: errText(err) }, `${sender.label} payout pass failed`);
    if (o.serial) {
      this.#send = this.#confirm = new Loop(
        async () => {
          await this.#confirmPass();
          this.#pump();
          await this.#queue.onIdle();
        },
        o.intervalMs,
        onError,
      );
    } else {
      this.#confirm = new Loop(() => this.#confirmPass(), o.backstopMs ?? o.intervalMs, onError);
      this.#send = new Loop(async () => this.#pump(), o.backstopMs ?? o.intervalMs, onError);
    }
  }

  /** Starts: the sender's init, a first confirm pass (what the ledger holds is reconciled before anything new is signed), then sending. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    try {
      if (this.#o.serial) {
        await this.#sender.init?.();
        if (!this.#started) return;
        this.#reachedAt = Date.now();
        this.#ready = true;
        this.#confirm.start();
        return;
      }
      // A provider hiccup while starting is retried (every step is safe to run again) rather than
      // ending the process; a chain that stays unreachable still stops the start, with its error.
      for (let attempt = 1; ; attempt++) {
        try {
          await this.#sender.init?.();
          if (!this.#started) return;
          this.#confirm.start();
          await this.#confirm.settle();
          if (!this.#started) return;
          await this.#sender.ready?.();
          break;
        } catch (err) {
          if (attempt >= (this.#o.startAttempts ?? 1) || !this.#started) throw err;
          this.#log.warn({ attempt, err: errText(err) }, `${this.#sender.label} submitter start failed; retrying`);
          await new Promise((r) => setTimeout(r, 250 * 2 ** attempt));
        }
      }
      if (!this.#started) return;
      this.#reachedAt = Date.now();
      this.#ready = true;
      this.#send.start();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /** Stops taking work; resolves once the payouts being handled and the confirm pass under way have finished. */
  async stop(): Promise<void> {
    this.#started = false;
    this.#ready = false;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#retryAt = Infinity;
    await this.#send.stop();
    await this.#queue.onIdle();
    await this.#confirm.stop();
  }

  /** New queued payouts exist in the ledger for this chain. */
  wake(): void {
    this.#send.wake();
  }

  /** Asks for a confirm pass soon (a new head). */
  confirmSoon(): void {
    this.#confirm.wake();
  }

  /** Runs a confirm pass now (or one more after the one under way) and resolves when it is done. */
  async confirmNow(): Promise<void> {
    this.#confirm.wake();
    await this.#confirm.settle();
  }

  /** Whether the pipeline is started and sending. */
  get ready(): boolean {
    return this.#ready;
  }

  #pump(): void {
    if (!this.#started || !this.#ready) return;
    const now = Date.now();
    // Enough batchable payouts wait to fill every slot's next batch: no batchable payout read now could leave sooner,
    // and every read reaches past the payouts in flight (a burst of 10,000 fills was read again, whole, on every pass:
    // 0.38 ms of the node's CPU per fill). A slot freed wakes this pass again (#drain). A payout that goes alone (a
    // refund, a fill with calls) needs no slot: at most every REACH_EVERY_MS the queue is read through to its end for
    // those, the batchable ones left to their turn (held until fewer waited than the slots take, such a payout waited
    // for the whole backlog ahead of it to leave: pipeline.test).
    const full = this.#waitingFull();
    if (full && now - this.#reachedAt < REACH_EVERY_MS) return this.#drain();
    const { ledger, queuedBatch } = this.#o;
    // Payouts in flight or waiting on their backoff are read and skipped: the read reaches as far past them, so that
    // however many wait (500 relays held at their own fee cap, refunds waiting for funds) they never hide the payouts
    // decided after them (a chain's every fill waited behind 500 relays).
    let skipped = this.#inFlight.size + this.#held;
    for (const r of this.#retry.values()) if (r.at > now) skipped++;
    let limit = queuedBatch + skipped;
    let rows: PayoutRow[];
    try {
      if (full) limit = ledger.payouts.queuedCount(this.chainId) + queuedBatch;
      rows = ledger.payouts.queued(this.chainId, limit);
    } catch (err) {
      this.#log.error({ err: errText(err) }, 'cannot read queued payouts');
      return;
    }
    const truncated = rows.length === limit;
    if (full || !truncated) this.#reachedAt = now;
    let held = 0;
    for (const row of rows) {
      if (this.#inFlight.has(row.id)) continue;
      // Read through for the payouts that go alone: a batchable one is taken in its turn (not held, not counted).
      if (full && this.#sender.batch?.batchable(row)) continue;
      // Held (its deposit's chain not yet read for reorgs since the start): woken again once it is (depositsChecked).
      if (this.#o.hooks.mayPay && !this.#o.hooks.mayPay(row)) {
        held++;
        continue;
      }
      const retry = this.#retry.get(row.id);
      if (retry && retry.at > now) {
        // Still waiting (a timer may fire a little before the clock says so): wake again when it ends.
        this.#wakeAt(retry.at);
        continue;
      }
      this.#inFlight.add(row.id);
      mark(row.request_id, 'pipe:pumped');
      if (this.#sender.batch?.batchable(row)) {
        this.#waiting.push(row.id);
        continue;
      }
      // Work that never failed goes ahead of retries.
      void this.#queue
        .add(() => this.#process(row.id), { priority: retry ? 0 : 1 })
        .catch((err) => this.#log.error({ payout: row.id, requestId: row.request_id, err: errText(err) }, 'unexpected error processing payout'))
        .finally(() => {
          this.#inFlight.delete(row.id);
          if (truncated) this.#send.wake();
        });
    }
    // More held than the last pass counted, and the read stopped at its limit: read again, reaching past them (a batch
    // of payouts held out of one chain's deposits hid every later payout of this chain, out of any chain's deposits).
    // (A read through for the payouts that go alone counted only theirs.)
    if (!full) {
      const more = truncated && held > this.#held;
      this.#held = held;
      if (more) this.#send.wake();
    }
    this.#drain();
  }

  // Sends waiting batchable payouts while a slot is free: alone when one waits, together when several do.
  #drain(): void {
    const batch = this.#sender.batch;
    if (!batch) return;
    while (this.#slots < batch.slots && this.#waiting.length > 0 && this.#started) {
      const ids = this.#waiting.splice(0, batch.maxPayouts);
      this.#slots++;
      void this.#queue
        .add(() => (ids.length === 1 ? this.#process(ids[0]!) : this.#processBatch(batch, ids)))
        .catch((err) => this.#log.error({ payouts: ids.length, err: errText(err) }, 'unexpected error processing a batch'))
        .finally(() => {
          this.#slots--;
          for (const id of ids) this.#inFlight.delete(id);
          this.#drain();
          if (!this.#waitingFull()) this.#send.wake();
        });
    }
  }

  // Whether the batchable payouts waiting fill every slot's next batch.
  #waitingFull(): boolean {
    const batch = this.#sender.batch;
    return batch !== undefined && this.#waiting.length >= batch.maxPayouts * batch.slots;
  }

  // Several payouts in one transaction, recorded for every payout it carries before broadcast.
  async #processBatch(batch: BatchSending<S>, ids: string[]): Promise<void> {
    if (!this.#started) return;
    const { ledger } = this.#o;
    // One statement for the batch's rows, in the order the payouts waited.
    const byId = new Map(ledger.payouts.getMany(ids).map((p) => [p.id, p]));
    const read = ids.flatMap((id) => byId.get(id) ?? []);
    // A batch's lines name every request it carries; each payout's own lines name its request alone.
    const log = this.#log.child({ batch: ids.length, requestIds: read.flatMap((p) => p.request_id ?? []) });
    const logOf = (p: PayoutRow) => log.child({ payout: p.id, ...(p.request_id ? { requestId: p.request_id } : {}) });
    for (const p of read) mark(p.request_id, 'pipe:batch');
    const rows: PayoutRow[] = [];
    const late: string[] = [];
    for (const payout of read) {
      if (payout.state !== 'queued' || payout.chain_id !== this.chainId) continue;
      // Past its deadline: alone, through its sender's prepare (#process), which settles a fill the chain paid already.
      if (this.#deadlinePassed(payout)) {
        late.push(payout.id);
        continue;
      }
      try {
        batch.check(payout);
        rows.push(payout);
      } catch (err) {
        if (!(err instanceof UnpayableError)) throw err;
        this.#fail(payout, err.reason, err.message, logOf(payout));
      }
    }
    for (const id of late) await this.#process(id);
    if (rows.length <= 1) {
      if (rows[0]) await this.#process(rows[0].id);
      return;
    }
    try {
      const r = await batch.submitBatch(rows, { log, stopped: () => !this.#started });
      if (r.kind === 'alone') {
        await Promise.all(rows.map((p) => this.#process(p.id)));
      } else if (r.kind === 'split') {
        for (const part of r.parts)
          await this.#processBatch(
            batch,
            part.map((p) => p.id),
          );
      } else if (r.kind === 'stale') {
        this.#send.wake();
      } else if (r.kind === 'retry') {
        for (const p of rows) this.#postpone(p.id, r.cause, r.why, logOf(p));
      } else {
        for (const p of rows) this.#retry.delete(p.id);
        crashPoint(this.#o.faults, 'afterFillRecorded', rows);
        await this.#sender.broadcast(r.signed, { log, stopped: () => !this.#started });
        crashPoint(this.#o.faults, 'afterFillBroadcast', rows);
      }
    } catch (err) {
      const why = this.#sender.classify?.(err) ?? 'rpc';
      for (const p of rows) this.#postpone(p.id, err, why, logOf(p));
    }
  }

  async #process(payoutId: string): Promise<void> {
    if (!this.#started) return;
    const payout = this.#o.ledger.payouts.get(payoutId);
    if (!payout || payout.state !== 'queued' || payout.chain_id !== this.chainId) return;
    mark(payout.request_id, 'pipe:process');
    const log = this.#log.child({ payout: payout.id, kind: payout.kind, requestId: payout.request_id });
    const ctx: StepContext = { log, stopped: () => !this.#started };
    try {
      const prepared = await this.#sender.prepare(payout, ctx);
      if (prepared.kind !== 'ready') return this.#outcome(payout, prepared, log);
      // The deadline is applied here, where the fill would be signed, not before prepare: prepare is where a sender finds
      // a fill the chain paid already (a transaction the ledger lost track of: a ledger restored from a backup, another
      // node with the key) and settles it, or waits while the chain says so. Failed before it, such a fill was refunded
      // too: paid twice (review-today-6).
      if (this.#failIfExpired(payout, log)) return;
      const submitted = await this.#sender.submit(payout, prepared.prepared, ctx);
      if (submitted.kind !== 'recorded') return this.#outcome(payout, submitted, log);
      this.#retry.delete(payout.id);
      crashPoint(this.#o.faults, 'afterFillRecorded', [payout]);
      mark(payout.request_id, 'pipe:broadcast');
      const sent = await this.#sender.broadcast(submitted.signed, ctx);
      mark(payout.request_id, 'pipe:broadcasted');
      if (sent.kind === 'requeued') this.#postpone(sent.payoutId, sent.cause, sent.why, log);
      crashPoint(this.#o.faults, 'afterFillBroadcast', [payout]);
    } catch (err) {
      if (err instanceof UnpayableError) return this.#fail(payout, err.reason, err.message, log);
      this.#postpone(payout.id, err, this.#sender.classify?.(err) ?? 'rpc', log);
    }
  }

  // Why a fill may no longer be signed: its order's output deadline (the request's fill_deadline) has passed. Its amount
  // was decided at the rate of its deposit's decision; held past the deadline (a fee cap, funds, a provider, a recipient
  // that keeps it waiting) and paid whenever it could be, it was a free option on the solver for whoever could also make
  // it fail (a recipient contract that reverts when the price moved against him). Past the deadline the order is not
  // filled: the fill fails and its deposit is refunded, as the order says. A queued fill has no transaction of the
  // ledger's that can still land (a sender queues one again only once its transactions are proven dead), and it fails
  // only once its sender's prepare has found the chain has not paid it (#process): failing it never pays twice.
  #deadlinePassed(payout: PayoutRow): string | undefined {
    if (payout.kind !== 'fill' || !payout.request_id) return undefined;
    // An open deposit address's arrival is held to its template's window, counted from its decision (requests.fillDeadline):
    // unbounded, an arrival held on a fee cap was paid at its decided rate whenever the hold ended (review-today-6).
    const deadline = this.#o.ledger.requests?.fillDeadline(payout.request_id);
    if (deadline === undefined || Date.now() <= deadline) return undefined;
    return `the order's fill deadline ${new Date(deadline).toISOString()} has passed`;
  }

  // Fails a fill past its order's deadline (checked again in the failing transaction); returns whether it was past it.
  #failIfExpired(payout: PayoutRow, log: Logger): boolean {
    const why = this.#deadlinePassed(payout);
    if (!why) return false;
    this.#fail(payout, 'PROTOCOL_DEADLINE_EXPIRED', why, log, undefined, (cur) => this.#deadlinePassed(cur) !== undefined);
    return true;
  }

  #outcome(payout: PayoutRow, r: StepOutcome, log: Logger): void {
    if (r.kind === 'unpayable') this.#fail(payout, r.reason, r.detail, log, r.callData, r.stillHolds);
    else if (r.kind === 'retry') this.#postpone(payout.id, r.cause, r.why, log);
    else if (r.kind === 'settled') this.#retry.delete(payout.id);
  }

  // The payout stays queued and is tried again after its backoff: counted by reason, warned about the
  // first time for each reason (until it is sent or fails), then logged at debug.
  #postpone(payoutId: string, cause: unknown, why: PostponeReason, log: Logger): void {
    const prev = this.#retry.get(payoutId);
    const attempts = (prev?.attempts ?? 0) + 1;
    const delay = backoffMs(attempts, this.#o.backoff ?? PAYOUT_BACKOFF, this.#o.random);
    const warned = prev?.warned ?? new Set<PostponeReason>();
    const level = warned.has(why) ? 'debug' : 'warn';
    warned.add(why);
    this.#retry.set(payoutId, { attempts, at: Date.now() + delay, warned });
    this.#o.metrics.payoutPostponed.inc({ ...this.#label, reason: why });
    if (why === 'rpc') this.#o.metrics.rpcErrors.inc({ ...this.#label, method: 'prepare' });
    else if (why === 'fee-cap') this.#o.metrics.feeCapWaits.inc({ ...this.#label, stage: 'send' });
    log[level]({ err: errText(cause), reason: why, attempts, retryInMs: delay }, `${this.#sender.label} ${POSTPONED[why]}`);
    this.#wakeAt(Date.now() + delay);
  }

  // Wakes the send loop at `at` (or earlier, for an earlier backoff already due).
  #wakeAt(at: number): void {
    if (!this.#started || at >= this.#retryAt) return;
    clearTimeout(this.#retryTimer);
    this.#retryAt = at;
    this.#retryTimer = setTimeout(
      () => {
        this.#retryTimer = undefined;
        this.#retryAt = Infinity;
        this.#send.wake();
      },
      Math.max(1, at - Date.now() + 1),
    );
    this.#retryTimer.unref();
  }

  // One ledger transaction: a payout still queued (and for which `stillHolds`, when given, still holds) fails, and its
  // hook fires once.
  #fail(payout: PayoutRow, reason: PayoutFailReason, detail: string, log: Logger, callData?: string, stillHolds?: (cur: PayoutRow) => boolean): void {
    const { ledger, hooks } = this.#o;
    const done = ledger.tx(() => {
      const cur = ledger.payouts.get(payout.id);
      if (!cur || cur.state !== 'queued' || (stillHolds && !stillHolds(cur))) return false;
      ledger.payouts.setState(cur.id, 'failed', { failReason: reason });
      hooks.onFailed(cur, reason, undefined, callData);
      return true;
    });
    this.#retry.delete(payout.id);
    if (!done) return;
    log.warn({ reason, detail }, `${this.#sender.label} payout failed before sending`);
  }

  async #confirmPass(): Promise<void> {
    // Safety net for queued payouts nobody woke the send loop for (serial: the send pass follows anyway).
    if (!this.#o.serial) this.#send.wake();
    try {
      this.#updateQueueDepth();
      const statuses = await this.#sender.confirm({ log: this.#log, stopped: () => !this.#started });
      let requeued = false;
      for (const s of statuses) {
        if (s.kind !== 'requeued') continue;
        requeued = true;
        if (s.cause !== undefined) this.#postpone(s.payoutId, s.cause, s.why ?? 'rpc', this.#log.child({ payout: s.payoutId }));
      }
      // Serial: the send pass follows anyway.
      if (requeued && !this.#o.serial) this.#send.wake();
    } catch (err) {
      this.#o.metrics.rpcErrors.inc({ ...this.#label, method: 'confirm' });
      this.#log.warn({ err: errText(err) }, `${this.#sender.label} confirm pass failed; retrying`);
    }
  }

  // At most once per QUEUE_DEPTH_EVERY_MS: the confirm pass runs on every head, and a gauge scraped
  // every few seconds does not need a full read of the queue each block (a profile of a burst of fills
  // showed these two reads among the confirm pass's costliest statements).
  #updateQueueDepth(): void {
    const now = Date.now();
    if (now - this.#depthAt < QUEUE_DEPTH_EVERY_MS) return;
    this.#depthAt = now;
    try {
      const { ledger } = this.#o;
      const queued = ledger.payouts.queuedCount(this.chainId);
      const inFlight = new Set(ledger.payouts.openTxs(this.chainId).map((t) => t.payout_id)).size;
      this.#o.metrics.queueDepth.set(this.#label, queued + inFlight);
    } catch {
      // metrics never break the pipeline
    }
  }
}
