/** What the guard asks of the ledger (PostgresLedger). */
export interface NotifyQueue {
  notifyQueueUsage(): number;
  endStatusListeners(): number;
}

/** How often the queue is looked at. */
const INTERVAL_MS = 30_000;
/**
 * The share of the queue (8 GB by default) past which the listeners are ended: hours of a busy solver's changes
 * held back, far below the point where PostgreSQL refuses the writes that notify (the queue full).
 */
const END_ABOVE = 0.1;

/**
 * Keeps PostgreSQL's notification queue from filling up behind a stuck API replica. Every status change notifies
 * (migration 26), and PostgreSQL keeps each notification until every listener has read it: a replica that stops
 * reading while connected (a paused process) holds the queue back, and once the queue is full every write that
 * notifies fails, the solver's included. The node that leads looks at the queue every 30 s, reports its use, and past
 * a tenth of it ends the status listeners' connections: the stuck one's backend goes and frees the queue, the others
 * listen again within moments (their replicas read without their kept records meanwhile).
 */
export class NotifyQueueGuard {
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly queue: NotifyQueue,
    private readonly opts: {
      onUsage: (usage: number) => void;
      onEnded: (listeners: number, usage: number) => void;
      onError: (e: Error) => void;
      intervalMs?: number;
      endAbove?: number;
    },
  ) {}

  /** One look: the queue's use, and the listeners ended if it is past the bound. */
  check(): { usage: number; ended: number } {
    const usage = this.queue.notifyQueueUsage();
    this.opts.onUsage(usage);
    if (usage <= (this.opts.endAbove ?? END_ABOVE)) return { usage, ended: 0 };
    const ended = this.queue.endStatusListeners();
    this.opts.onEnded(ended, usage);
    return { usage, ended };
  }

  start(): this {
    const tick = () => {
      try {
        this.check();
      } catch (e) {
        this.opts.onError(e as Error);
      }
      this.#timer = setTimeout(tick, this.opts.intervalMs ?? INTERVAL_MS);
      this.#timer.unref();
    };
    this.#timer = setTimeout(tick, this.opts.intervalMs ?? INTERVAL_MS);
    this.#timer.unref();
    return this;
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
