// The leader's renewals, on a thread of their own (renewWorker.mjs) with a ledger connection of their own: the main
// thread's event loop may not turn for seconds (on PostgreSQL every ledger call blocks it, and a new leader
// reconciling makes thousands), and a renewal timer there fired late enough to lose a healthy leader's lease. The
// thread renews only while the main thread shows life (src/lib/threadLife.ts), and reports through shared memory,
// which the main thread reads without waiting: when the last renewal that landed was sent, or that one was refused.
import { Worker } from 'node:worker_threads';
import type { LedgerLocation } from '../ledger/index.ts';
import { renewSql } from '../ledger/leases.ts';
import { translate } from '../ledger/postgres/pgDb.ts';
import { hideUrl } from '../ledger/pgUrl.ts';
import { DEFAULT_TIMEOUT_MS } from '../ledger/postgres/syncClient.ts';
import { LIFE, lifeBuffer } from '../lib/threadLife.ts';
import type { Logger } from '../log.ts';

// Slots of the shared lease array (BigInt64Array), and the values of `state`.
const SENT = 0;
const STATE = 1;
const RENEWING = 0n;
const REFUSED = 1n;
const STOPPED = 2n;

export interface RenewerOptions {
  /** The ledger, reached on a connection of the renewer's own (the URL is a secret: only the thread has it). */
  where: LedgerLocation;
  holder: string;
  epoch: number;
  leaseMs: number;
  renewMs: number;
  /** When the acquisition that took the lease was sent, on the process-wide monotonic clock (threadLife.monotonicMs). */
  sentMs: number;
  /** How long a renewal sent lets the leader act (the gate's deadline after it): past it, no more renewals. */
  actMs: number;
  /** A main thread showing no life for this long is hung: no more renewals (leaseMs / 2 by default). */
  hungMs?: number;
  log: Logger;
}

/** A lease held by this process, renewed from a thread of its own while the main thread lives. */
export class ThreadRenewer {
  readonly #view: BigInt64Array;
  readonly #worker: Worker;

  constructor(o: RenewerOptions) {
    this.#view = new BigInt64Array(new SharedArrayBuffer(2 * BigInt64Array.BYTES_PER_ELEMENT));
    Atomics.store(this.#view, SENT, BigInt(Math.floor(o.sentMs * 1000)));
    const timeoutMs = o.where.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const t = translate(renewSql('postgres'));
    const statement = o.where.url ? { text: t.text, names: t.sources.map((s) => ('name' in s ? s.name : '')) } : { text: renewSql('sqlite'), names: [] };
    this.#worker = new Worker(new URL('./renewWorker.mjs', import.meta.url), {
      workerData: {
        life: lifeBuffer(),
        lease: this.#view.buffer,
        slots: { beat: LIFE.beat, callUntil: LIFE.callUntil, sent: SENT, state: STATE, renewing: RENEWING, refused: REFUSED },
        where: { url: o.where.url, path: o.where.path },
        statement,
        holder: o.holder,
        epoch: o.epoch,
        leaseMs: o.leaseMs,
        actMs: o.actMs,
        renewMs: o.renewMs,
        hungMs: o.hungMs ?? o.leaseMs / 2,
        timeoutMs,
      },
    });
    // The thread never keeps the process alive; what it says is logged when this thread's loop turns.
    this.#worker.unref();
    const hide = (text: string) => (o.where.url ? hideUrl(text, o.where.url) : text);
    this.#worker.on('error', (err) => o.log.error({ err: hide(String(err?.message ?? err)) }, 'the lease renewer thread failed: no more renewals'));
    this.#worker.on('message', (m: { failed?: string; hung?: number; alive?: boolean }) => {
      if (m.failed !== undefined) o.log.warn({ err: hide(m.failed) }, 'leader lease renewal failed; trying again');
      else if (m.hung !== undefined) o.log.error({ sinceMs: Math.round(m.hung) }, 'the main thread shows no life: lease renewals stopped');
      else if (m.alive) o.log.warn('the main thread shows life again: lease renewals resumed');
    });
  }

  /** When the last renewal that landed (or the acquisition) was sent, on the process-wide monotonic clock (ms). */
  get sentMs(): number {
    return Number(Atomics.load(this.#view, SENT)) / 1000;
  }

  /** A renewal found the lease taken (another holder or epoch). */
  get refused(): boolean {
    return Atomics.load(this.#view, STATE) === REFUSED;
  }

  /** No more renewals (the thread ends; a renewal already sent may still land). */
  stop(): void {
    Atomics.compareExchange(this.#view, STATE, RENEWING, STOPPED);
    void this.#worker.terminate().catch(() => {});
  }
}
