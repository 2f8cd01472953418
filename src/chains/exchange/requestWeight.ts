// What the exchange's requests cost and how much of that the node may spend. Hyperliquid limits each IP address to a
// weight of 1,200 a minute, its /info reads and /exchange actions together (its docs, "Rate limits and user limits"):
// a request past it is answered HTTP 429. Most reads the node makes weigh 20 (a ledger read, a preTransferCheck), so a
// client asking the node for quotes to the exchange once a second spent the whole minute, and the node's own reads of
// its deposits and payouts were refused with it.
import { isApiRead } from '../../lib/apiReads.ts';

// The reads that weigh 2; userRole weighs 60; every other documented read 20.
const LIGHT_READS = new Set(['l2Book', 'allMids', 'clearinghouseState', 'orderStatus', 'spotClearinghouseState', 'exchangeStatus']);

/** A request's weight: an action 1 plus 1 per 40 of its batch (orders, cancels...); a read by its type. */
export function requestWeight(path: '/info' | '/exchange', body: Record<string, unknown>): number {
  if (path === '/exchange') {
    const action = body.action as Record<string, unknown> | undefined;
    const batch = Object.values(action ?? {}).find(Array.isArray) as unknown[] | undefined;
    return 1 + Math.floor((batch?.length ?? 0) / 40);
  }
  const type = String(body.type);
  return LIGHT_READS.has(type) ? 2 : type === 'userRole' ? 60 : 20;
}

/** The node's requests could not be sent within their wait: its request budget is spent for now. */
export class ExchangeBudgetError extends Error {
  override name = 'ExchangeBudgetError';
}

/**
 * The weight the node may spend on the exchange a minute (`weightPerMinute`; 0: no budget, the exchange's own limit
 * alone), counted as the exchange counts it: what was spent over the last 60 seconds. The node's own requests take it
 * first; a read for the public API only while it stays within half of it (lib/apiReads.ts), as on an RPC provider. A
 * 429 (another client on the same address, or a budget set above the exchange's) stops every request for a pause that
 * doubles while they go on.
 */
export class WeightBudget {
  // What was spent, oldest first, over the last minute.
  readonly #spent: { at: number; weight: number }[] = [];
  #sum = 0;
  #pausedUntil = 0;
  #strikes = 0;

  constructor(
    readonly perMinute: number,
    // How long a request waits for the budget before it fails (ExchangeBudgetError): the node's own, and the API's.
    private readonly maxWaitMs = { node: 60_000, api: 2_000 },
  ) {}

  /** Waits until `weight` fits the budget (and no 429 pause runs), then spends it. */
  async take(weight: number): Promise<void> {
    const yielding = isApiRead();
    if (this.perMinute <= 0 && Date.now() >= this.#pausedUntil) return;
    const deadline = Date.now() + (yielding ? this.maxWaitMs.api : this.maxWaitMs.node);
    for (;;) {
      const now = Date.now();
      const wait = this.#waitFor(weight, yielding, now);
      if (wait === 0) {
        if (this.perMinute > 0) {
          this.#spent.push({ at: now, weight });
          this.#sum += weight;
        }
        return;
      }
      if (now + wait > deadline)
        throw new ExchangeBudgetError(`the node's request budget on the exchange (${this.perMinute} weight a minute) is spent for now; try again shortly`);
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** The exchange answered 429: no request for a pause (1 s, doubling while 429s go on, at most a minute). */
  rateLimited(now = Date.now()): void {
    this.#strikes++;
    this.#pausedUntil = now + Math.min(60_000, 1_000 * 2 ** (this.#strikes - 1));
  }

  /** An answer other than a 429: the next one's pause starts short again. */
  answered(): void {
    this.#strikes = 0;
  }

  // Milliseconds until `weight` fits (0: now): until enough of what was spent a minute ago leaves the window.
  #waitFor(weight: number, yielding: boolean, now: number): number {
    if (now < this.#pausedUntil) return this.#pausedUntil - now;
    if (this.perMinute <= 0) return 0;
    while (this.#spent.length && this.#spent[0]!.at <= now - 60_000) this.#sum -= this.#spent.shift()!.weight;
    const limit = yielding ? this.perMinute / 2 : this.perMinute;
    // A request weighing more than the whole limit goes alone, once nothing else is in the window.
    let over = this.#sum + weight - Math.max(limit, weight);
    if (over <= 0) return 0;
    for (const s of this.#spent) {
      over -= s.weight;
      if (over <= 0) return Math.max(1, s.at + 60_000 - now);
    }
    return 60_000;
  }
}
