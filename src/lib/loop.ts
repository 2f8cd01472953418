import { asNodeWork } from './apiReads.ts';

/**
 * One background task that runs again when woken or when its interval elapses, never twice at once.
 *
 * Every stage of the node (indexers, the solver, submitters' send and confirm passes, watchers) is such
 * a task: it is woken by work arriving and ticks on a timer to catch what no wake announced. A wake
 * during a run asks for exactly one more run after it, so bursts of wakes coalesce.
 */
export class Loop {
  readonly #run: () => Promise<void>;
  readonly #intervalMs: number | (() => number);
  readonly #onError: (err: unknown) => void;
  #started = false;
  #running: Promise<void> | undefined;
  #again = false;
  #timer: NodeJS.Timeout | undefined;

  /**
   * @param run one pass; it should return when there is nothing more to do right away.
   * @param intervalMs how long to wait after a pass before the next one when nothing wakes it (read
   *   after each pass when a function: a stage whose wakes can be trusted waits longer).
   * @param onError what a failed pass reports (the loop itself keeps going).
   */
  constructor(run: () => Promise<void>, intervalMs: number | (() => number), onError: (err: unknown) => void) {
    this.#run = run;
    this.#intervalMs = intervalMs;
    this.#onError = onError;
  }

  /** Starts the loop with a pass now. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.wake();
  }

  /**
   * Runs a pass now, or one more after the current one. The pass is the node's own work whoever wakes it (an API request
   * reporting a deposit wakes its indexer): its reads, and the passes it schedules, never yield as the API's.
   */
  wake(): void {
    asNodeWork(() => this.#wake());
  }

  #wake(): void {
    if (!this.#started) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#running = this.#pass().finally(() => {
      this.#running = undefined;
      if (!this.#started) return;
      if (this.#again) {
        this.#again = false;
        this.wake();
      } else {
        this.#timer = setTimeout(() => this.wake(), typeof this.#intervalMs === 'number' ? this.#intervalMs : this.#intervalMs());
        this.#timer.unref();
      }
    });
  }

  /** Resolves once the pass under way (and the one it asked for) has finished; starts one if none is. */
  async settle(): Promise<void> {
    if (!this.#running) this.wake();
    while (this.#running) await this.#running;
  }

  /** Stops the loop; resolves when the pass under way has finished. No pass starts afterwards. */
  async stop(): Promise<void> {
    this.#started = false;
    this.#again = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#running) await this.#running;
  }

  /** Whether the loop is started (and not stopped). */
  get started(): boolean {
    return this.#started;
  }

  async #pass(): Promise<void> {
    try {
      await this.#run();
    } catch (err) {
      this.#onError(err);
    }
  }
}
