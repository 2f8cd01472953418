import { LEDGER_BIRTH } from '../ledger/scanMarks.ts';
import type { Ledger } from '../ledger/index.ts';
import { bindDeposits, type ChainDeposit, type NewDeposit, type Recorded } from '../ledger/deposits.ts';
import type { FinalRange } from '../ledger/finalRange.ts';
import type { DepositRow } from '../ledger/types.ts';
import { errText, RelayNodeError } from '../lib/errors.ts';
import { Loop } from '../lib/loop.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { IndexerEvents, ReorgDecider } from './events.ts';
import type { DepositSource, RangeRead, SourceBlock } from './source.ts';

/** The chain's reorg is deeper than its finality window: the indexer stops (an operator must look). */
export class ReorgTooDeepError extends RelayNodeError {
  override name = 'ReorgTooDeepError';
}

/** What a re-index found: the deposit logs in the range, those newly recorded (ids), and those left to the indexer's own passes. */
export interface ReindexResult {
  fromBlock: number;
  toBlock: number;
  logs: number;
  recorded: string[];
  skipped: number;
}

/** How the driver reads one chain: where its cursor starts and is named, its confirmation and finality depths, its widest range. */
export interface DriverConfig {
  chainId: number;
  /** The cursor's name in the ledger's cursors table. */
  cursor: string;
  /** The first block that can hold deposits (the cursor starts just below it). */
  startBlock: number;
  /** Blocks a deposit waits before the solver acts on it (the block holding it counts as one). */
  confirmations: number;
  /** Blocks below the head a reorg can still replace: the unfinalized block list is this long. */
  finalityDepth: number;
  /**
   * The widest range one read may ask for. Infinity: every read runs from the cursor to the head
   * (a source whose reads are not bounded by a range, as SVM's signature lists); a refused read then
   * fails the pass rather than narrowing the range.
   */
  maxRange: number;
  pollIntervalMs: number;
  /**
   * Whether new heads are announced (a websocket newHeads subscription that wakes the driver): the
   * poll is then a backstop, every HEADS_BACKSTOP_MS (or pollIntervalMs when longer).
   */
  followsHeads?: () => boolean;
  /**
   * Confirmations by value; without it every deposit waits `confirmations`. A deposit waits as many blocks as the
   * worth of what a reorg removing it would take back asks: itself, with the deposits confirmed or acted on in its
   * block and after it (a reorg takes them all). Judged one by one, deposits split below a row, in one block or a few,
   * were all paid at the base count, and a reorg that shallow took back their whole sum.
   */
  byValue?: {
    /** A deposit's worth (micro-USD; 0 for a currency with no price). */
    worth(d: Pick<DepositRow, 'currency' | 'amount'>): bigint;
    /** Blocks that deposits of this worth in all wait. */
    confirmations(worth: bigint): number;
    /** The most blocks any deposit waits: one this deep is confirmed whatever its worth. */
    most: number;
  };
  /**
   * The source's reads are final (SVM at its commitment, the exchange's ledger): deposits are confirmed
   * in the transaction that writes them, whatever block (slot, time) they carry.
   */
  final?: boolean;
}

/** A range read under way: its entries and the headers of its unfinalized blocks. */
interface Reading {
  from: number;
  to: number;
  windowStart: number;
  read: Promise<RangeRead>;
  headers: Map<number, Promise<SourceBlock>>;
}

// An answer with this many entries is dense enough: the range stops growing.
const DENSE_RANGE_ENTRIES = 5_000;
// Where new heads are pushed, the poll that backs the pushes up (a subscription that goes silent
// is also caught by its own ping timeout, and polling resumes once it is closed).
const HEADS_BACKSTOP_MS = 2_000;
// The first read is the one never overlapped with a write (the next range is read while one is
// written): on a history dense with deposits, 32 blocks were ~10,000 logs read before any write began.
// Doubling from 8 costs a sparse chain two more small reads at startup.
const INITIAL_RANGE = 8;
// Ranges of final blocks handed to the ledger ahead of their commits: the one being written and the next, so that
// a ledger writing off this thread (SQLite's writer thread) has the next range at hand when it commits one.
const QUEUED_WRITES = 2;

// Heads kept for deposits' arrivals (#existedAfter): a few hours of blocks read a poll at a time; a deposit of an older
// block is judged by its block's time.
const MAX_HEADS_NOTED = 4_096;

/**
 * One deposit indexer for every chain kind with blocks (in the shape of Ponder's sync layer): a cursor
 * in the ledger, adaptive block ranges, the unfinalized block list, reorg detection and rewind, and
 * confirmation, over a {@link DepositSource}.
 *
 * Each range is committed in one ledger transaction: its deposits, its blocks and the cursor moved
 * past them, so the cursor never passes what was written. A deposit is written once per (chain, tx,
 * log index); one in a block that a reorg removes before it was acted on is marked reorged and never
 * reaches the solver. Deposits already acted on that a reorg removed are reported to the
 * {@link ReorgDecider} (the solver), inside the range's transaction: the solver decides what it means.
 */
export class IndexerDriver<H extends SourceBlock = SourceBlock> {
  readonly #cfg: DriverConfig;
  readonly #source: DepositSource<H>;
  readonly #ledger: Ledger;
  readonly #events: IndexerEvents<H>;
  readonly #reorgs: ReorgDecider;
  readonly #metrics: Metrics;
  readonly #log: Logger;
  readonly #loop: Loop;
  #range: number;
  #head = 0;
  #born = false;
  // Whether a pass since start() found the blocks recorded before it on the chain (or rewound those it did not).
  #checked = false;
  #stopped = true;
  #waiters: { block: number; resolve: () => void }[] = [];
  #passWaiters: (() => void)[] = [];
  // Whether deposits already acted on may sit in blocks a reorg replaced (see #pass).
  #checkHandled = true;
  #fatal: Error | undefined;
  #lastReadAt = 0;
  // Heads read since start() and when each read began, rising in both (#existedAfter): a block above one did not exist
  // then, whatever time the block itself claims.
  #heads: { number: number; at: number }[] = [];
  // The next range, asked for while the last one was written (taken by the next pass if it starts there).
  #ahead: Reading | undefined;
  // Ranges of final blocks handed to the ledger and not committed yet, in order (see #queue); the block the last of
  // them ends at (the next range starts after it); the first failure among them, until a pass sees it.
  #writes: Promise<void>[] = [];
  #queuedTo: number | undefined;
  #writeFailure: { error: unknown } | undefined;

  constructor(deps: {
    config: DriverConfig;
    source: DepositSource<H>;
    ledger: Ledger;
    events: IndexerEvents<H>;
    reorgs: ReorgDecider;
    metrics: Metrics;
    log: Logger;
  }) {
    this.#cfg = deps.config;
    this.#source = deps.source;
    this.#ledger = deps.ledger;
    this.#events = deps.events;
    this.#reorgs = deps.reorgs;
    this.#metrics = deps.metrics;
    this.#log = deps.log;
    // Start narrow and widen while answers stay small: a failed oversized read costs the
    // provider (and us) the whole answer before it fails, so probing from the top is expensive.
    this.#range = Math.min(this.#cfg.maxRange, INITIAL_RANGE);
    const { pollIntervalMs, followsHeads } = this.#cfg;
    this.#loop = new Loop(
      () => this.#run(),
      followsHeads ? () => (followsHeads() ? Math.max(pollIntervalMs, HEADS_BACKSTOP_MS) : pollIntervalMs) : pollIntervalMs,
      (e) => this.#log.error({ chain: this.#cfg.chainId, err: errText(e) }, 'indexer pass failed'),
    );
  }

  /** The head block number read last (0 before the first pass). */
  get head(): number {
    return this.#head;
  }

  /** The error that stopped the indexer for good (a reorg deeper than the finality window), if any. */
  get fatal(): Error | undefined {
    return this.#fatal;
  }

  /** When a pass last committed its read, or handed it to the ledger (ms; 0 before the first): a stalled or failing indexer stops moving it. */
  get lastReadAt(): number {
    return this.#lastReadAt;
  }

  /** The newest block whose deposits are all committed (the ledger's cursor). */
  indexed(): number {
    return this.#ledger.indexer.cursor(this.#cfg.chainId, this.#cfg.cursor) ?? this.#cfg.startBlock - 1;
  }

  /**
   * Whether a payout out of this deposit may be signed now. Not before a pass since start() has compared the blocks
   * recorded with the chain (a reorg while the node was down is seen there, not before), nor while the deposit's block
   * is one a reorg replaced, or one not read again since the rewind: back on the new chain the deposit is relocated, gone
   * it is failed DEPOSIT_REORGED and its queued payouts cancelled (#goneHandled), and paid meanwhile it was paid out of
   * nothing. Always for a deposit in a final block, and on a chain whose reads are final. Never once the indexer stopped
   * on a reorg deeper than its window (fatal): the blocks it recorded, final ones too, are on a fork the chain left, and
   * what they hold is for an operator to settle.
   */
  mayPayOutOf(d: Pick<DepositRow, 'block_number' | 'block_hash'>): boolean {
    const { chainId, finalityDepth } = this.#cfg;
    if (finalityDepth === 0) return true;
    if (!this.#checked || this.#fatal) return false;
    // No deposit acted on sits in a block a reorg replaced (#goneHandled found none pending since the last rewind): a
    // deposit of a block this indexer has read is on a canonical block. Without this, every queued payout cost the ledger
    // reads below on every send pass.
    if (!this.#checkHandled && d.block_number <= this.#head) return true;
    if (d.block_number <= this.#head - finalityDepth) return true;
    const tip = this.#ledger.indexer.tip(chainId);
    if (tip && d.block_number > tip.number) return false;
    const stored = this.#ledger.indexer.block(chainId, d.block_number);
    return !stored || stored.hash === d.block_hash;
  }

  /**
   * Whether a pass since start() has compared the blocks recorded with the chain and the indexer did not stop on a reorg
   * deeper than its window since (always, where reads are final).
   */
  get checked(): boolean {
    return this.#cfg.finalityDepth === 0 || (this.#checked && !this.#fatal);
  }

  /** Starts reading: a pass now, then on every wake and poll interval. */
  start(): void {
    this.#stopped = false;
    this.#checked = false;
    this.#loop.start();
  }

  /** Stops reading; resolves once the pass under way has committed or given up. Pending waiters are released. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop.stop();
    this.#ahead = undefined;
    for (const w of this.#waiters) w.resolve();
    this.#waiters = [];
    for (const w of this.#passWaiters) w();
    this.#passWaiters = [];
  }

  /** Reads now rather than at the next tick; wakes during a pass coalesce into one more pass. */
  wake(): void {
    if (this.#fatal) return;
    this.#loop.wake();
  }

  /**
   * Resolves once the indexer has committed up to `block`, or at once when it is not running (stopped, or never started:
   * a standby's, which acts on no chain, and whose waiters were left waiting until a takeover).
   */
  waitFor(block: number | bigint): Promise<void> {
    const n = Number(block);
    if (this.#stopped || this.indexed() >= n) return Promise.resolve();
    return new Promise((resolve) => {
      this.#waiters.push({ block: n, resolve });
      this.wake();
    });
  }

  /** Resolves after a whole pass that starts after this call (or when the driver stops). */
  nextPass(): Promise<void> {
    if (this.#stopped || this.#fatal) return Promise.resolve();
    return new Promise((resolve) => {
      this.#passWaiters.push(resolve);
      this.wake();
    });
  }

  /**
   * Records deposits read outside the driver's passes (a transaction the wallet reports right after
   * sending it), confirmed at once: only for sources whose reads are final at their commitment.
   * One ledger transaction; the cursor does not move. Returns how many are new. Waits for the indexer's first
   * pass to have noted where this ledger began on its chain (LEDGER_BIRTH): the API listens before the chains
   * start, and a deposit from before the ledger, recorded without that mark, was refunded as any orphan (a
   * ledger before this one may have filled it).
   */
  async recordConfirmed(deposits: ChainDeposit[]): Promise<number> {
    const chainId = this.#cfg.chainId;
    while (!this.#born) {
      if (this.#fatal) throw this.#fatal;
      await new Promise<void>((resolve) => {
        this.#passWaiters.push(resolve);
        this.wake();
      });
      if (this.#stopped && !this.#born) throw new Error(`the indexer of chain ${chainId} stopped before its first pass`);
    }
    const { fresh, confirmed } = this.#ledger.tx(() => {
      const fresh = this.#store(deposits, Date.now()).length;
      const top = deposits.reduce((m, d) => Math.max(m, d.block_number), -1);
      return { fresh, confirmed: top >= 0 ? this.#ledger.deposits.confirmUpTo(chainId, top) : 0 };
    });
    if (fresh) this.#metrics.depositsIndexed.inc({ chain: chainId }, fresh);
    if (confirmed) this.#events.onConfirmed();
    return fresh;
  }

  async #run(): Promise<void> {
    const passWaiters = this.#passWaiters;
    this.#passWaiters = [];
    try {
      // Catch up in as many passes as it takes; each pass commits its range.
      while (!this.#stopped && (await this.#pass())) {}
      await this.#settle();
    } catch (e) {
      await this.#settle().catch(() => {});
      if (e instanceof ReorgTooDeepError) {
        this.#fatal = e;
        this.#log.fatal({ chain: this.#cfg.chainId, err: e.message }, 'indexer stopped: reorg deeper than the finality window');
        void this.#loop.stop();
        for (const w of passWaiters) w();
        return;
      }
      this.#metrics.rpcErrors.inc({ chain: this.#cfg.chainId, method: 'indexer' });
      this.#log.warn({ chain: this.#cfg.chainId, err: errText(e) }, 'indexer pass failed; retrying');
    }
    const done = this.indexed();
    this.#waiters = this.#waiters.filter((w) => (w.block <= done ? (w.resolve(), false) : true));
    for (const w of passWaiters) w();
  }

  // A ledger that has indexed nothing of this chain yet notes the head it begins at (LEDGER_BIRTH), before it writes any
  // deposit: those up to it were made before this ledger existed, so none can be one of its orders.
  #noteBirth(latest: SourceBlock): void {
    if (this.#born) return;
    const { chainId, cursor } = this.#cfg;
    const indexer = this.#ledger.indexer;
    const funding = this.#ledger.funding;
    this.#ledger.tx(() => {
      if (indexer.cursor(chainId, cursor) === undefined && !funding.scanMark(chainId, LEDGER_BIRTH))
        funding.setScanMark(chainId, LEDGER_BIRTH, latest.number, latest.hash);
    });
    this.#born = true;
  }

  // One step: returns true when there is more to read right away.
  async #pass(): Promise<boolean> {
    const { chainId, finalityDepth } = this.#cfg;
    const askedAt = Date.now();
    const latest = await this.#source.head();
    const head = latest.number;
    this.#noteHead(head, askedAt);
    this.#head = head;
    this.#metrics.headBlock.set({ chain: chainId }, head);
    this.#events.onHead(latest);
    this.#noteBirth(latest);

    const tip = this.#ledger.indexer.tip(chainId);
    if (tip && tip.number <= head) {
      const canonical = tip.number === head ? latest : await this.#source.block(tip.number);
      if (canonical.hash !== tip.hash) {
        await this.#settle();
        await this.#rewind(tip.number);
        return true;
      }
    } else if (tip && tip.number > head) {
      // The chain is shorter than what we indexed: a reorg to a shorter fork (or a reset node).
      await this.#settle();
      await this.#rewind(head);
      return true;
    }

    if (!this.#checked) {
      this.#checked = true;
      this.#events.onChecked?.();
    }

    const from = (this.#queuedTo ?? this.indexed()) + 1;
    if (from > head) {
      await this.#settle();
      this.#confirm(head);
      this.#lastReadAt = Date.now();
      return false;
    }
    const bounded = Number.isFinite(this.#cfg.maxRange);
    let to = bounded ? Math.min(head, from + this.#range - 1) : head;

    // A read of this very range started while the previous range was written (final blocks only) is
    // taken as it is: it is checked below exactly as one started now.
    const windowStart = Math.max(from, head - finalityDepth + 1);
    const ahead = this.#ahead;
    this.#ahead = undefined;
    const reading =
      ahead && ahead.from === from && ahead.to <= head && ahead.windowStart <= windowStart ? ahead : this.#startRead(from, to, windowStart, latest);
    to = reading.to;

    let read: RangeRead;
    try {
      read = await reading.read;
      // Widen again after a shrink, but only while answers stay small: a range dense with
      // deposits keeps the width that worked.
      if (this.#range < this.#cfg.maxRange && read.entries < DENSE_RANGE_ENTRIES) this.#range = Math.min(this.#cfg.maxRange, this.#range * 2);
    } catch (e) {
      // Providers refuse wide ranges in many ways; narrow sharply and try again.
      if (bounded && this.#range > 1) {
        this.#range = Math.max(1, Math.floor(this.#range / 4));
        this.#log.debug({ chain: chainId, range: this.#range, err: errText(e) }, 'range read failed; shrinking range');
        this.#metrics.rpcErrors.inc({ chain: chainId, method: this.#source.rangeMethod });
        return true;
      }
      throw e;
    }

    // Read completely only this far: the cursor stops there (the deposits found are written all the
    // same), the rest is read on a later pass.
    if (read.upTo !== undefined) to = Math.max(from - 1, Math.min(to, read.upTo));
    const deposits = read.deposits;

    // The headers of the unfinalized window (up to where the read was complete), linked by parent hash to the tip.
    const headers: SourceBlock[] = await Promise.all(
      Array.from({ length: Math.max(0, to - windowStart + 1) }, (_, i) => reading.headers.get(windowStart + i)!),
    );
    let parent = windowStart === from ? tip?.hash : undefined;
    for (const h of headers) {
      if (parent && h.parentHash !== parent) return true; // the chain moved under us; the next pass sees the reorg
      parent = h.hash;
    }
    const hashOf = new Map(headers.map((h) => [h.number, h.hash]));
    for (const [n, hash] of read.blockHashes) {
      const expected = hashOf.get(n);
      if (expected && expected !== hash) return true; // entries from another fork than the headers
    }

    const gone = await this.#goneHandled(deposits, hashOf, head, to);
    if (gone === undefined) return true;

    // More to read at once: the next range is asked for now, and the provider answers it while this
    // one is written (a backfill otherwise waits for each read and each write in turn). Only blocks
    // already final are read ahead: an answer about unfinalized blocks would be a pass old when
    // written, and a reorg in between could have it written (even confirmed) before a tip check
    // saw it; those are read fresh, as before.
    const finalTo = Math.min(head - finalityDepth, to + this.#range);
    if (bounded && read.upTo === undefined && finalTo > to && !this.#stopped) {
      this.#ahead = this.#startRead(to + 1, finalTo, finalTo + 1, latest);
    }

    // Deposits that already have their confirmations at this head are written confirmed, as #confirm
    // below would confirm them right after (one write per deposit rather than an insert and an update).
    // (By value, only those past the most any deposit waits: the others are judged with what else a reorg would take, below.)
    const { confirmations, byValue } = this.#cfg;
    const confirmedNow = (d: NewDeposit) => d.block_number <= head - (byValue ? Math.max(confirmations, byValue.most) : confirmations) + 1;
    const now = Date.now();
    const values = bindDeposits(this.#rows(deposits, now, confirmedNow));
    // A range of final blocks (no reorg takes it back, so the chain gives it back whole) commits without
    // waiting for the disk (a lazy commit), though its deposits may be confirmed ones the solver acts on. Its
    // deposits and the cursor past them are one transaction, and the write-ahead log keeps commits in order,
    // so a power failure can only take back the newest ranges whole (deposits and cursor together: they are
    // read again), never a deposit the cursor has passed. The solver acts on a deposit only after its own
    // durable decision, whose commit makes every commit before it durable too. Such a range has no headers to
    // store (they are below the unfinalized window) and nothing for the solver to decide: it is handed to the
    // ledger, which may write it off this thread (SQLite's writer thread) while this one reads the next.
    if (to <= head - finalityDepth && gone.length === 0 && !this.#cfg.final) {
      await this.#queue({ chainId, source: this.#cfg.cursor, from, origin: this.#cfg.startBlock - 1, to, pruneBelow: head - finalityDepth, values });
      this.#queuedTo = to;
      this.#metrics.indexerLag.set({ chain: chainId }, Math.max(0, head - to));
      this.#lastReadAt = Date.now();
      return read.upTo === undefined && to < head;
    }
    await this.#settle();
    let final = 0;
    // A range with no deposit and nothing reorged writes only bookkeeping the chain gives back (its headers and the
    // cursor past them): it commits lazily, without the disk flush that held the node's one thread (a destination
    // chain's indexer committed once per block, so once per fill). A power failure can only take it back whole, to be
    // read again; the next durable commit makes it durable too. Deposits, and a reorg's consequences, stay durable.
    const lazy = deposits.length === 0 && gone.length === 0;
    const stored = this.#ledger.tx(
      () => {
        const recorded = this.#ledger.deposits.recordCount(chainId, values);
        for (const d of gone) this.#reorgs.onDepositReorged(d, now);
        for (const h of headers) this.#ledger.indexer.putBlock(chainId, { number: h.number, hash: h.hash, parent_hash: h.parentHash });
        this.#ledger.indexer.setCursor(chainId, this.#cfg.cursor, to);
        this.#ledger.indexer.pruneBelow(chainId, head - finalityDepth);
        // What a final source lists is confirmed as it is written.
        if (this.#cfg.final && deposits.length)
          final = this.#ledger.deposits.confirmUpTo(
            chainId,
            deposits.reduce((m, d) => Math.max(m, d.block_number), to),
          );
        return recorded;
      },
      { lazy },
    );
    this.#written(stored, from, to, final);
    this.#confirm(head);
    this.#metrics.indexerLag.set({ chain: chainId }, Math.max(0, head - to));
    this.#lastReadAt = Date.now();
    // A partial read waits for the next tick (what was not served yet is not served sooner by asking again at once).
    return read.upTo === undefined && to < head;
  }

  // What a committed range wrote: counted, logged, and the solver told of deposits confirmed.
  #written(w: Recorded, from: number, to: number, final = 0): void {
    if (w.fresh) {
      this.#metrics.depositsIndexed.inc({ chain: this.#cfg.chainId }, w.fresh);
      this.#log.info({ chain: this.#cfg.chainId, count: w.fresh, from, to }, 'deposits indexed');
    }
    if (final || w.confirmed) this.#events.onConfirmed();
  }

  // Hands a range of final blocks to the ledger without waiting for its commit, behind at most QUEUED_WRITES - 1
  // others (the oldest is waited for first). A failure is kept for the next #settle: the ranges handed over
  // behind it are refused by the ledger (each names the cursor it follows), so none moves the cursor past it.
  async #queue(range: FinalRange): Promise<void> {
    while (this.#writes.length >= QUEUED_WRITES) await this.#writes.shift();
    if (this.#writeFailure) await this.#settle();
    this.#writes.push(
      this.#ledger.writeFinalRange(range).then(
        (w) => this.#written(w, range.from, range.to),
        (error) => {
          this.#writeFailure ??= { error };
        },
      ),
    );
  }

  // Waits for every range handed to the ledger; throws the first failure among them, after which the next
  // range starts at the ledger's cursor again (and the range read ahead, past the failed one, is dropped).
  async #settle(): Promise<void> {
    await Promise.all(this.#writes.splice(0));
    this.#queuedTo = undefined;
    const failure = this.#writeFailure;
    this.#writeFailure = undefined;
    if (failure) {
      this.#ahead = undefined;
      throw failure.error;
    }
  }

  // Starts reading blocks [from, to]: the range's entries and, alongside them (not after: one round
  // trip less per range), the headers of its blocks from windowStart on (the unfinalized window).
  // Failures are left for whoever awaits them (a read never awaited fails nothing).
  #startRead(from: number, to: number, windowStart: number, latest: H): Reading {
    const headers = new Map<number, Promise<SourceBlock>>();
    for (let n = windowStart; n <= to; n++) {
      const h = n === latest.number ? Promise.resolve<SourceBlock>(latest) : this.#source.block(n);
      h.catch(() => {});
      headers.set(n, h);
    }
    const read = this.#source.deposits(from, to);
    read.catch(() => {});
    return { from, to, windowStart, read, headers };
  }

  // Deposits already acted on whose block a reorg replaced (their block hash is not the canonical
  // one any more). Back in this range's deposits, or included again later on the new chain, they are
  // the same deposit (#store relocates them). Still absent once the new chain has gone as far past
  // their old block as their confirmations: reported to the solver. Looked for after a rewind, and
  // once after a start (a crash may have come between the two). Undefined: the chain moves under
  // us, look again on the next pass.
  async #goneHandled(deposits: ChainDeposit[], hashOf: Map<number, string>, head: number, to: number): Promise<DepositRow[] | undefined> {
    const gone: DepositRow[] = [];
    if (!this.#checkHandled) return gone;
    const { chainId, confirmations, finalityDepth, startBlock } = this.#cfg;
    let pending = false;
    const windowFloor = Math.max(startBlock, head - finalityDepth + 1);
    for (const h of this.#ledger.deposits.handledIn(chainId, windowFloor, to)) {
      const canonical = hashOf.get(h.block_number) ?? this.#ledger.indexer.block(chainId, h.block_number)?.hash;
      if (!canonical || canonical === h.block_hash) continue;
      if (deposits.some((d) => d.tx_hash === h.tx_hash && d.order_ref === h.order_ref && d.amount === h.amount)) continue;
      if (this.#reorgs.reorgDecided(h)) continue;
      pending = true;
      if (to < h.block_number + confirmations) continue;
      const inclusion = await this.#source.inclusion(h.tx_hash);
      if (inclusion?.success) {
        // Included again at a later block: the insert relocates it when that block is read.
        if (inclusion.blockNumber > to) continue;
        // In a block of another fork than the one read: the chain moves under us.
        const read = hashOf.get(inclusion.blockNumber) ?? this.#ledger.indexer.block(chainId, inclusion.blockNumber)?.hash;
        if (read !== inclusion.blockHash) return undefined;
        // In a block read, without this deposit: the transaction deposited otherwise this time (a contract's deposit
        // that depends on the block), or nothing. Gone as any other, else it held the cursor here for good.
      }
      // Not on the new chain (or included again but reverted, or without it: no such deposit).
      gone.push(h);
    }
    if (!pending) this.#checkHandled = false;
    return gone;
  }

  // The ledger's rows of deposits read from canonical blocks. confirmedNow: the deposits written
  // confirmed at once (their confirmations reached).
  #rows(deposits: (ChainDeposit & { seen_at?: number })[], now: number, confirmedNow?: (d: NewDeposit) => boolean): (NewDeposit & { confirmed_at?: number })[] {
    const chainId = this.#cfg.chainId;
    return deposits.map((d) => {
      // Spelled out rather than spread: one shape for every row (a backfill builds tens of thousands
      // in a few calls, before the JIT has warmed up to a spread).
      const row: NewDeposit & { confirmed_at?: number } = {
        id: `${chainId}:${d.tx_hash}:${d.log_index}`,
        chain_id: chainId,
        tx_hash: d.tx_hash,
        log_index: d.log_index,
        block_number: d.block_number,
        block_hash: d.block_hash,
        depositor: d.depositor,
        currency: d.currency,
        amount: d.amount,
        order_ref: d.order_ref,
        // The chain's time where its source names it (never later than now: a clock ahead of the node's; never before a
        // head below its block was read: a block time lagging the node's clock), else the read's.
        seen_at: d.seen_at === undefined ? now : Math.min(Math.max(d.seen_at, this.#existedAfter(d.block_number)), now),
      };
      if (confirmedNow?.(row)) row.confirmed_at = now;
      return row;
    });
  }

  // A chain's block time is its sequencer's word: OP Stack blocks are 2 s apart from genesis, so those made catching up
  // after an outage carry times long past, and Arbitrum's may lag a day. Judged by it alone, a deposit sent after its
  // quote expired into such a block was filled at the expired price. Where heads are the chain's own (an EVM chain; the
  // exchange's head is the node's clock), a deposit in a block above a head read at `at` was made after `at`. The same holds
  // for an SVM slot and the cluster's clock.
  #noteHead(number: number, at: number): void {
    if (this.#source.clockHeads) return;
    const heads = this.#heads;
    const last = heads[heads.length - 1];
    // The same head read again: the block above it did not exist then either (a chain idle between deposits).
    if (last?.number === number) last.at = at;
    // A lower head (a provider behind the others, a shorter fork) tells nothing new: a block above it may be older.
    if (last && last.number >= number) return;
    heads.push({ number, at });
    if (heads.length > MAX_HEADS_NOTED) heads.splice(0, heads.length - MAX_HEADS_NOTED);
  }

  // When the newest head read below `block` was asked for (-Infinity: none since the start, e.g. a block made while the
  // node was down, judged by its own time).
  #existedAfter(block: number): number {
    const heads = this.#heads;
    let lo = 0;
    let hi = heads.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (heads[mid]!.number < block) lo = mid + 1;
      else hi = mid;
    }
    return lo > 0 ? heads[lo - 1]!.at : Number.NEGATIVE_INFINITY;
  }

  // Writes deposits read from canonical blocks (deposits.record); returns the ids of those new to the ledger (or
  // revived after a reorg). Runs inside the caller's ledger transaction.
  #store(deposits: (ChainDeposit & { seen_at?: number })[], now: number): string[] {
    return this.#ledger.deposits.record(this.#cfg.chainId, this.#rows(deposits, now));
  }

  /**
   * Reads the deposits again over [fromBlock, toBlock], blocks the indexer has already passed (an
   * operator's repair: a provider that answered a range without its logs, a cursor moved by hand).
   * Idempotent: a deposit already recorded is left as it is; one missed is recorded and confirmed
   * like any other, so the solver decides it as usual. Deposits of blocks the node has not read
   * yet, or of a fork other than the canonical chain's, are left to the driver's own passes.
   * `record` runs inside the ledger transaction that writes what was found (the admin entry).
   */
  async reindex(fromBlock: number, toBlock: number, record: (r: ReindexResult) => void): Promise<ReindexResult> {
    const chainId = this.#cfg.chainId;
    const { deposits: decoded } = await this.#source.deposits(fromBlock, toBlock);
    const latest = await this.#source.head();
    const windowFloor = latest.number - this.#cfg.finalityDepth + 1;
    // Blocks still inside the unfinalized window: a deposit counts only if its block is the
    // canonical one (the hash the ledger stored, or else the chain's own answer now).
    const canonical = new Map<number, string>();
    for (const n of new Set(decoded.map((d) => d.block_number).filter((n) => n >= windowFloor))) {
      canonical.set(n, this.#ledger.indexer.block(chainId, n)?.hash ?? (await this.#source.block(n)).hash);
    }
    const result = this.#ledger.tx(() => {
      // Read again inside the transaction: a pass may have rewound the cursor meanwhile.
      const cursor = this.indexed();
      const deposits = decoded.filter((d) => d.block_number <= cursor && (!canonical.has(d.block_number) || canonical.get(d.block_number) === d.block_hash));
      const recorded = this.#store(deposits, Date.now());
      const r: ReindexResult = { fromBlock, toBlock, logs: decoded.length, recorded, skipped: decoded.length - deposits.length };
      record(r);
      return r;
    });
    if (result.recorded.length) {
      this.#metrics.depositsIndexed.inc({ chain: chainId }, result.recorded.length);
      for (const id of result.recorded) {
        const requestId = this.#ledger.deposits.get(id)?.order_ref;
        this.#log.warn({ chain: chainId, requestId, deposit: id, fromBlock, toBlock }, 're-index found a deposit the indexer had missed');
      }
    }
    this.#confirm(latest.number);
    return result;
  }

  // Deposits that reached their confirmations are confirmed (in one transaction); the solver is told.
  #confirm(head: number): void {
    const { chainId, confirmations, byValue } = this.#cfg;
    const upTo = Math.min(head - confirmations + 1, this.indexed());
    const n = this.#ledger.tx(() => {
      if (!byValue) return this.#ledger.deposits.confirmUpTo(chainId, upTo);
      // exposed[j]: the worth of the deposits confirmed or acted on that a reorg of depth j (the blocks above head - j)
      // would take back, for the depths a deposit is not yet safe from whatever its worth (j < most).
      // (What is exposed is read only when a deposit waits: on most heads none does.)
      const waiting = this.#ledger.deposits.unconfirmed(chainId, upTo);
      if (!waiting.length) return 0;
      const most = byValue.most;
      const exposed = new Array<bigint>(Math.max(most, 1)).fill(0n);
      const expose = (block: number, worth: bigint) => {
        for (let j = Math.max(1, head - block + 1); j < most; j++) exposed[j]! += worth;
      };
      for (const d of this.#ledger.deposits.actedAbove(chainId, head - most)) expose(d.block_number, byValue.worth(d));
      // Oldest first: each deposit confirmed counts against the ones after it.
      let n = 0;
      for (const d of waiting) {
        const worth = byValue.worth(d);
        let safe = true;
        // A reorg of depth j takes it (j >= its confirmations) with what is exposed to that depth: their sum must ask j blocks at most.
        for (let j = head - d.block_number + 1; j < most && safe; j++) safe = byValue.confirmations(exposed[j]! + worth) <= j;
        if (safe && this.#ledger.deposits.confirmOne(d.id)) {
          expose(d.block_number, worth);
          n++;
        }
      }
      return n;
    });
    if (n) this.#events.onConfirmed();
  }

  // Walks back from `from` to the newest block whose stored hash the chain still has, drops what
  // the ledger took from the blocks above it, and re-reads forward from there.
  async #rewind(from: number): Promise<void> {
    const { chainId, finalityDepth } = this.#cfg;
    let n = from;
    const floor = from - finalityDepth;
    for (;;) {
      if (n <= floor) throw new ReorgTooDeepError(`chain ${chainId}: no common ancestor within ${finalityDepth} blocks of ${from}`);
      const stored = this.#ledger.indexer.block(chainId, n);
      if (!stored) {
        n--;
        continue;
      }
      // A read that fails is not a block the chain replaced: it ends the pass (the next one rewinds again). Taken for
      // one, a provider failing through a rewind walked it past the common ancestor, to the finality window, and the
      // indexer stopped for good on a reorg of two blocks.
      const onChain = await this.#source.block(n);
      if (onChain.hash === stored.hash) break;
      n--;
    }
    const ancestor = n;
    this.#ahead = undefined;
    const { dropped, acted } = this.#ledger.tx(() => {
      const dropped = this.#ledger.deposits.reorgAbove(chainId, ancestor);
      const acted = this.#ledger.deposits.handledAbove(chainId, ancestor);
      this.#ledger.indexer.dropAbove(chainId, ancestor);
      this.#ledger.indexer.setCursor(chainId, this.#cfg.cursor, ancestor);
      return { dropped, acted };
    });
    this.#metrics.reorgs.inc({ chain: chainId });
    if (acted.length) this.#checkHandled = true;
    this.#log.warn({ chain: chainId, ancestor, from, dropped: dropped.length }, 'reorg: rewound to common ancestor');
    for (const d of dropped) {
      this.#log.warn({ chain: chainId, requestId: d.order_ref, deposit: d.id, ancestor }, 'reorg: deposit dropped until its block is read again');
    }
    // These were confirmed and acted on; if they do not come back on the new chain, an operator must look.
    for (const d of acted) {
      this.#log.error({ chain: chainId, requestId: d.request_id ?? d.order_ref, deposit: d.id }, 'reorg removed a block holding a deposit already acted on');
    }
  }
}
