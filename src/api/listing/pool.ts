import { Worker } from 'node:worker_threads';
import type { Logger } from '../../log.ts';
import { ApiError } from '../errors.ts';
import type { ListingJob, ListingResult, ListingWorkerData, ReadJob } from './run.ts';

interface Pending {
  id: number;
  job: ListingJob | ReadJob;
  /** Who asked (an API key id, else the client address): its listings in progress are counted. */
  caller: string | undefined;
  released?: boolean;
  resolve: (r: ListingResult | unknown[]) => void;
  reject: (e: Error) => void;
  timer?: NodeJS.Timeout;
}

// A worker's answer: ready once booted, then one per job (a listing's page or a ReadJob's rows, or its refusal).
type WorkerMessage = { id: number; ok: boolean; ready?: boolean; result?: ListingResult | unknown[]; error?: string; status?: number; errorCode?: string };

interface Slot {
  worker: Worker;
  /**
   * Set once the worker has opened its connection: its boot (loading the sources) is not a
   * listing's time.
   */
  ready: boolean;
  busy: Pending | undefined;
  /** Terminated: its replacement starts once it has exited. */
  retiring?: boolean;
  /** The listing a terminated worker may still be running (answered 503): its caller's until the worker exits. */
  held?: Pending;
}

// Listings wait here when every worker is busy; beyond this many, they are refused (503) rather
// than queued without bound.
const MAX_QUEUED = 256;

/**
 * Worker threads that run request listings, each with its own read-only ledger connection: a heavy
 * listing blocks its worker, never the node's event loop. One listing per worker at a time; a
 * listing that runs past `timeoutMs` answers 503 and has its worker terminated, and replaced once it has exited.
 */
export class ListingPool {
  readonly #slots: Slot[] = [];
  readonly #queue: Pending[] = [];
  // Every worker thread not yet exited, a terminated one included.
  readonly #alive = new Set<Worker>();
  #seq = 0;
  #closed = false;

  constructor(
    private readonly data: ListingWorkerData,
    private readonly opts: { workers: number; timeoutMs: number; log: Logger; perCaller?: number },
  ) {}
  // Listings in progress by caller: queued, running, or still running in a terminated worker.
  readonly #byCaller = new Map<string, number>();

  #release(p: Pending): void {
    if (p.released || p.caller === undefined) return;
    p.released = true;
    const left = this.#byCaller.get(p.caller)! - 1;
    if (left) this.#byCaller.set(p.caller, left);
    else this.#byCaller.delete(p.caller);
  }

  // Workers start with the first listing: a node that never lists pays nothing.
  #ensureStarted(): void {
    while (this.#slots.length < this.opts.workers) this.#slots.push(this.#spawn());
  }

  #spawn(): Slot {
    const worker = new Worker(new URL('./worker.mjs', import.meta.url), { workerData: this.data });
    const slot: Slot = { worker, ready: false, busy: undefined };
    this.#alive.add(worker);
    worker.once('exit', () => {
      this.#alive.delete(worker);
      if (slot.held) this.#release(slot.held);
      // Gone while running a listing (no error event): that listing failed.
      const p = slot.busy;
      slot.busy = undefined;
      if (p) {
        clearTimeout(p.timer);
        this.#release(p);
        p.reject(new ApiError(503, 'LISTING_UNAVAILABLE', 'the listing failed; try again'));
      }
      if (this.#closed) return;
      // A terminated worker is replaced only now: terminating it does not stop SQLite's native call, and the query it
      // was running keeps its place until it ends, so timed-out listings never run more queries at once than there
      // are workers.
      const i = this.#slots.indexOf(slot);
      if (i >= 0) this.#slots[i] = this.#spawn();
      this.#next();
    });
    worker.unref();
    worker.on('message', (msg: WorkerMessage) => {
      if (msg.ready) {
        slot.ready = true;
        return this.#next();
      }
      const p = slot.busy;
      if (!p || p.id !== msg.id) return;
      this.#finish(slot);
      this.#release(p);
      if (msg.ok) p.resolve(msg.result!);
      else p.reject(msg.status !== undefined ? new ApiError(msg.status, msg.errorCode!, msg.error!) : new Error(msg.error));
    });
    worker.on('error', (e) => {
      if (slot.retiring) return;
      this.opts.log.error({ err: e.message }, 'listing worker failed');
      const err = new ApiError(503, 'LISTING_UNAVAILABLE', 'the listing failed; try again');
      if (slot.ready) return this.#replace(slot, err);
      // It failed while starting (it would again): drop it, refuse what waits; the next listing retries.
      slot.retiring = true;
      this.#slots.splice(this.#slots.indexOf(slot), 1);
      if (!this.#slots.some((x) => x.ready))
        for (const p of this.#queue.splice(0)) {
          this.#release(p);
          p.reject(err);
        }
    });
    return slot;
  }

  #finish(slot: Slot): void {
    clearTimeout(slot.busy?.timer);
    slot.busy = undefined;
    this.#next();
  }

  // Terminates a worker (stuck or failed); a fresh one takes its place once it has exited.
  #replace(slot: Slot, err: Error): void {
    const p = slot.busy;
    clearTimeout(p?.timer);
    slot.busy = undefined;
    slot.held = p;
    slot.retiring = true;
    void slot.worker.terminate();
    p?.reject(err);
  }

  #next(): void {
    for (const slot of this.#slots) {
      if (slot.busy || !slot.ready || slot.retiring) continue;
      const p = this.#queue.shift();
      if (!p) return;
      slot.busy = p;
      p.timer = setTimeout(() => {
        this.opts.log.warn({ timeoutMs: this.opts.timeoutMs }, 'listing ran past its time; its worker is replaced');
        this.#replace(slot, new ApiError(503, 'LISTING_TIMEOUT', `the listing took longer than ${this.opts.timeoutMs} ms; narrow the filters`));
      }, this.opts.timeoutMs);
      slot.worker.postMessage({ id: p.id, job: p.job });
    }
  }

  /** Worker threads alive (a terminated one until it exits). */
  get threads(): number {
    return this.#alive.size;
  }

  /** Listings running or waiting. */
  get busy(): number {
    return this.#queue.length + this.#slots.filter((x) => x.busy).length;
  }

  /**
   * Runs a listing on a free worker (queued while all are busy). A `caller` has at most `perCaller` listings in
   * progress (429 past it), one that timed out counted until its worker has stopped running it: the workers and
   * their queue are shared, and one caller's heavy listings would hold them all.
   */
  run(job: ListingJob, caller?: string): Promise<ListingResult>;
  /** A ReadJob (a webhook's deliveries, a key's usage) goes through the same workers, queue and per-caller count. */
  run(job: ReadJob, caller?: string): Promise<unknown[]>;
  run(job: ListingJob | ReadJob, caller?: string): Promise<ListingResult | unknown[]> {
    if (this.#closed) return Promise.reject(new ApiError(503, 'SHUTTING_DOWN', 'the API is shutting down'));
    if (this.#queue.length >= MAX_QUEUED) return Promise.reject(new ApiError(503, 'LISTING_BUSY', 'too many listings in progress; try again shortly'));
    const { perCaller } = this.opts;
    if (caller !== undefined && perCaller !== undefined) {
      const n = this.#byCaller.get(caller) ?? 0;
      if (n >= perCaller)
        return Promise.reject(new ApiError(429, 'RATE_LIMITED', `at most ${perCaller} listings in progress per caller; wait for one to answer`));
      this.#byCaller.set(caller, n + 1);
    }
    this.#ensureStarted();
    return new Promise<ListingResult | unknown[]>((resolve, reject) => {
      this.#queue.push({ id: ++this.#seq, job, caller, resolve, reject });
      this.#next();
    });
  }

  /** Stops the workers; listings still waiting are refused. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const p of this.#queue.splice(0)) p.reject(new ApiError(503, 'SHUTTING_DOWN', 'the API is shutting down'));
    await Promise.all(
      this.#slots.map(async (s) => {
        clearTimeout(s.busy?.timer);
        s.busy?.reject(new ApiError(503, 'SHUTTING_DOWN', 'the API is shutting down'));
        s.retiring = true;
        await s.worker.terminate();
      }),
    );
  }
}
