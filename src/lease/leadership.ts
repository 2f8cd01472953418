// Active/standby: which of several nodes on one ledger acts on the chains.
//
//   standby   serves the API; every renewMs tries to take the leader lease (free, or expired);
//   leader    on taking it: arms the acting ledger with (node id, epoch) and starts the chain stages as
//             a fresh start does (each chain reconciles what the ledger recorded before signing
//             anything new); renews every renewMs, and keeps a deadline on the monotonic clock:
//             the moment it sent its last successful renewal + leaseMs − a quarter lease. Every
//             broadcast checks that deadline first (the BroadcastGate), every ledger write checks the
//             lease row (fencedLedger);
//   lost      a renewal refused or failing past the deadline, a write finding the lease taken, a
//             broadcast past the deadline: the acting ledger is disarmed first, then the process
//             exits with EXIT_LEASE_LOST. Crash-only: a supervisor starts it again, as a standby.
//
// Renewals off the event loop (renewFrom, as the node runs): on PostgreSQL every ledger call blocks this
// thread until it answers, so a new leader reconciling (thousands of calls back to back) or a loaded host
// kept the event loop from turning for seconds, a renewal timer here fired late, and a healthy leader lost
// its lease by itself. The renewals run on a thread of their own with a ledger connection of their own
// (renewer.ts), and only while this thread shows life (src/lib/threadLife.ts): its event loop turns (a
// heartbeat every renewMs/2) or it waits on the ledger inside a call's bound. A thread showing neither for
// leaseMs/2 is hung: the renewals stop and the lease expires for a standby. The renewer writes when it sent
// the last renewal that landed (process-wide monotonic clock) and a refusal into shared memory; check()
// reads both, and the heartbeat timer turns a refusal or a passed deadline into lost(). Acquiring,
// releasing, the fence inside write transactions, arming and disarming stay on this thread. Without
// renewFrom (tests on fake timers) the renewals run on this thread's timers, as before.
//
// Clocks: the lease's expiry is written and compared on the database's clock on PostgreSQL (one clock for
// nodes on several hosts), on the host's wall clock on SQLite (one host); see leases.ts. The holder stops
// acting by its monotonic clock, never by a wall clock.
// A paused process (SIGSTOP, a long GC, a VM migration) does not see time pass on its timers, but it
// does on its monotonic clock: on resuming past its deadline it broadcasts nothing more.
import type { ActingLedger } from '../ledger/fenced.ts';
import type { Ledger, LedgerLocation } from '../ledger/index.ts';
import { LeaseLostError } from '../ledger/leases.ts';
import { errText } from '../lib/errors.ts';
import { beat, monotonicMs } from '../lib/threadLife.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { BroadcastGate } from '../submitter/gate.ts';
import { ThreadRenewer } from './renewer.ts';

/** The exit code of a node that stopped acting because it lost the leader lease (EX_TEMPFAIL: start it again). */
export const EXIT_LEASE_LOST = 75;

export interface LeadershipOptions {
  /** The ledger itself (the lease's reads and writes are not fenced). */
  ledger: Ledger;
  /** The acting stages' ledger, armed on taking the lease and disarmed on losing it. */
  acting: ActingLedger;
  nodeId: string;
  leaseMs: number;
  renewMs: number;
  log: Logger;
  metrics: Metrics;
  /** Starts the chain stages (this node now leads); a throw is a lost lease. */
  onLead(epoch: number): Promise<void>;
  /** This node stopped acting (already fenced): exit. */
  onLost(err: LeaseLostError): void;
  /**
   * Where a renewer thread reaches the ledger on a connection of its own (the node's ledger location): the leader's
   * renewals then run there, off this thread's event loop (renewer.ts), and the clocks are the real ones. Absent,
   * the renewals run on this thread's timers, with the clocks below (tests on fake timers).
   */
  renewFrom?: LedgerLocation;
  /** Wall clock (ms since the Unix epoch), written into the lease (without renewFrom). */
  now?: () => number;
  /** Monotonic clock (ms), for the deadline (without renewFrom; with it, the process-wide monotonic clock). */
  monotonic?: () => number;
}

/** The leader lease as one node holds or waits for it; also the gate every broadcast passes. */
export class Leadership implements BroadcastGate {
  readonly #o: LeadershipOptions;
  readonly #now: () => number;
  readonly #mono: () => number;
  readonly #marginMs: number;
  #epoch: number | undefined;
  // Renewals on this thread: when the last one that landed was sent (monotonic).
  #sent = Number.NEGATIVE_INFINITY;
  // Renewals on a thread of their own (renewFrom): it keeps the same, in shared memory.
  #renewer: ThreadRenewer | undefined;
  #lost: LeaseLostError | undefined;
  #timer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(o: LeadershipOptions) {
    this.#o = o;
    this.#now = o.renewFrom ? Date.now : (o.now ?? Date.now);
    this.#mono = o.renewFrom ? monotonicMs : (o.monotonic ?? monotonicMs);
    this.#marginMs = Math.floor(o.leaseMs / 4);
  }

  get nodeId(): string {
    return this.#o.nodeId;
  }

  /** 'leader' while this node holds the lease and acts; 'standby' otherwise. */
  get role(): 'leader' | 'standby' {
    return this.#epoch !== undefined && !this.#lost ? 'leader' : 'standby';
  }

  /** The epoch this node acts under (undefined on a standby). */
  get epoch(): number | undefined {
    return this.#lost ? undefined : this.#epoch;
  }

  /** Starts trying to take the lease, now and every renewMs. */
  start(): void {
    this.#o.metrics.leader.set(0);
    this.#tryAcquire();
  }

  /**
   * Throws LeaseLostError unless this node leads and its monotonic deadline has not passed; a passed
   * deadline is a lost lease (fenced, then the process exits). Called right before every broadcast.
   */
  check(): void {
    if (this.#lost) throw this.#lost;
    if (this.#epoch === undefined) throw new LeaseLostError(undefined, `${this.#o.nodeId} is a standby`);
    if (this.#renewer?.refused) this.lost(new LeaseLostError(this.#fence(), 'the renewal was refused: another node holds the lease'));
    if (this.#mono() >= this.#deadline) this.lost(new LeaseLostError(this.#fence(), 'the lease deadline passed before a renewal'));
  }

  /**
   * This node no longer holds the lease: disarm the acting ledger first, then report (once). A
   * standby hearing a LeaseLostError (an API call that would act) is not losing anything: ignored.
   */
  lost(err: LeaseLostError): never {
    if (this.#epoch === undefined || this.#stopped) throw err;
    if (!this.#lost) {
      this.#lost = err;
      this.#o.acting.disarm(err.message);
      this.#renewer?.stop();
      clearTimeout(this.#timer);
      clearTimeout(this.#deadlineTimer);
      this.#o.metrics.leader.set(0);
      this.#o.log.error({ nodeId: this.#o.nodeId, epoch: this.#epoch, err: err.message }, 'leader lease lost: this node stops acting now');
      this.#o.onLost(err);
    }
    throw err;
  }

  /** A clean stop: stop renewing and, when leading, free the lease at once for a standby. */
  stop(): void {
    this.#stopped = true;
    this.#renewer?.stop();
    clearTimeout(this.#timer);
    clearTimeout(this.#deadlineTimer);
    if (this.#epoch === undefined || this.#lost) return;
    this.#o.acting.disarm('stopping');
    try {
      if (this.#o.ledger.leases.release(this.#o.nodeId, this.#epoch)) this.#o.log.info({ epoch: this.#epoch }, 'leader lease released');
    } catch (err) {
      this.#o.log.warn({ err: errText(err) }, 'could not release the leader lease; it expires on its own');
    }
    this.#o.metrics.leader.set(0);
  }

  #fence() {
    return this.#epoch === undefined ? undefined : { holder: this.#o.nodeId, epoch: this.#epoch };
  }

  #schedule(fn: () => void): void {
    if (this.#stopped || this.#lost) return;
    this.#timer = setTimeout(fn, this.#o.renewMs);
  }

  #tryAcquire(): void {
    if (this.#stopped) return;
    const { ledger, nodeId, leaseMs, log } = this.#o;
    let epoch: number | undefined;
    let previous: { holder: string | null; epoch: number } | undefined;
    let sent = this.#mono();
    try {
      previous = ledger.leases.current();
      epoch = ledger.leases.acquire(nodeId, this.#now(), leaseMs);
    } catch (err) {
      log.warn({ err: errText(err) }, 'could not read the leader lease; trying again');
    }
    if (epoch === undefined) return this.#schedule(() => this.#tryAcquire());
    // An acquisition that waited (on PostgreSQL, for a stopped holder's transaction to end and free the writer's
    // lock) left little of the lease measured from before it was sent: the deadline passed before the renewer's
    // first renewal could land, and the new leader gave up its lease. Renewed at once, measured from now.
    if (this.#mono() - sent > this.#o.renewMs) {
      const again = this.#mono();
      try {
        if (ledger.leases.renew(nodeId, epoch, this.#now(), leaseMs)) sent = again;
      } catch (err) {
        log.warn({ err: errText(err) }, 'the renewal right after taking the lease failed; the renewer tries again');
      }
    }
    this.#epoch = epoch;
    this.#sent = sent;
    this.#o.acting.arm({ holder: nodeId, epoch });
    this.#o.metrics.leader.set(1);
    this.#o.metrics.leaderEpoch.set(epoch);
    log.info(
      { nodeId, epoch, previousEpoch: previous?.epoch, previousHolder: previous?.holder ?? undefined },
      `took over the leader lease (epoch ${previous?.epoch ?? '?'} → ${epoch}): starting the chain stages`,
    );
    if (this.#o.renewFrom) {
      this.#renewer = new ThreadRenewer({
        where: this.#o.renewFrom,
        holder: nodeId,
        epoch,
        leaseMs,
        renewMs: this.#o.renewMs,
        sentMs: sent,
        actMs: leaseMs - this.#marginMs,
        log,
      });
      this.#tick();
    } else {
      this.#watchDeadline();
      this.#schedule(() => this.#renew());
    }
    this.#o.onLead(epoch).catch((err) => {
      if (this.#lost || this.#stopped) return;
      try {
        this.lost(err instanceof LeaseLostError ? err : new LeaseLostError(this.#fence(), `the chain stages did not start: ${errText(err)}`));
      } catch {
        // reported
      }
    });
  }

  #renew(): void {
    if (this.#stopped || this.#lost || this.#epoch === undefined) return;
    const { ledger, nodeId, leaseMs, log } = this.#o;
    const sent = this.#mono();
    try {
      // Past the deadline already (the process was paused): never act again, even if the lease is still ours.
      if (sent >= this.#deadline) this.lost(new LeaseLostError(this.#fence(), 'the lease deadline passed before a renewal'));
      if (!ledger.leases.renew(nodeId, this.#epoch, this.#now(), leaseMs)) {
        this.lost(new LeaseLostError(this.#fence(), 'the renewal was refused: another node holds the lease'));
      }
      this.#sent = sent;
      this.#watchDeadline();
    } catch (err) {
      if (this.#lost) return;
      // The ledger did not answer: try again; the deadline timer ends it if no renewal lands in time.
      log.warn({ err: errText(err) }, 'leader lease renewal failed; trying again');
    }
    this.#schedule(() => this.#renew());
  }

  // The last renewal that landed was sent at `sent` (monotonic): act until sent + leaseMs − margin.
  get #deadline(): number {
    return (this.#renewer ? this.#renewer.sentMs : this.#sent) + this.#o.leaseMs - this.#marginMs;
  }

  // With a renewer thread: every half renewal, show it this thread's event loop turns, and end the leadership
  // when a renewal was refused or the deadline passed with none landing.
  #tick(): void {
    if (this.#stopped || this.#lost) return;
    beat();
    try {
      this.check();
    } catch {
      return; // reported by check
    }
    this.#deadlineTimer = setTimeout(() => this.#tick(), Math.max(1, Math.floor(this.#o.renewMs / 2)));
  }

  // Ends the leadership when the deadline passes with no renewal (a timer may fire a little early: it looks again).
  #watchDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    if (this.#stopped || this.#lost) return;
    this.#deadlineTimer = setTimeout(
      () => {
        if (this.#mono() < this.#deadline) return this.#watchDeadline();
        try {
          this.check();
        } catch {
          // reported by check
        }
      },
      Math.max(0, this.#deadline - this.#mono()) + 1,
    );
  }
}
