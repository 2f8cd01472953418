// The ledger as the acting stages of an active/standby node see it (indexers, solver, submitters,
// deliverer): every write checks, in its own transaction, that this node still holds the leader
// lease under the epoch it acts on. The API keeps the ledger itself: its writes (quotes, keys,
// usage) are a standby's too and are never fenced.
import { type FinalRange, writeFinalRange } from './finalRange.ts';
import type { Ledger, TxOptions } from './ledger.ts';
import { type Fence, LeaseLostError } from './leases.ts';

/** A ledger whose writes are fenced by the leader lease (see fencedLedger). */
export interface ActingLedger extends Ledger {
  /** The holder and epoch this node acts under; undefined before it leads and once it stopped. */
  readonly fence: Fence | undefined;
  /** Acts under this holder and epoch from now on (the lease was just acquired). */
  arm(fence: Fence): void;
  /** Stops every write at once (the lease is lost or its deadline passed): each throws LeaseLostError. */
  disarm(why: string): void;
}

// Ledger members that are not stores.
const OWN = new Set<PropertyKey>(['tx', 'read', 'statusOf', 'ping', 'close']);

/**
 * Store methods that only read (or, events.committed and onAppended, only wake listeners): called
 * outside a transaction, they run as they are, on a standby too (its API reads through the solver's
 * desk and the chains' ports). Every other method is taken for a write and fenced: a new write needs
 * no change here, and a read missing here only costs a lease check (or, on a standby, a NOT_LEADER).
 * A name here must never write in any store (fenced.test.ts reads the stores' source to check it).
 */
export const READS = new Set<PropertyKey>(
  (
    'get lookup list buckets lastRun hasSvmOpening svmOpening credits ofRequest summary expiredHolds sponsorOf balances claimedBy ' +
    'accruedFor claimsOf unconfirmed nextConfirmed byOrderRef recentWithoutTxFee forRequest handledAbove handledIn handledOfTxs ' +
    'liveOfChain amountsInBlocks inBlocks inFlight committed onAppended since maxSeq webhook webhooks due pendingDelivery deliveryCounts pendingCount ' +
    'deliveries ofTx standingFrom all scanMark cursor tip block current holds actions actionsOf switches postponement postponed ' +
    'dryRunDecisions adminKey adminKeys queued queuedCount forDeposit reservedOn openTxs stranded txsOf rowsOfTx rawOf getMany maxNonce ofChain txsOfChain made ' +
    'txCostsOfSender hashesOfSender outflowSums hasOpenWithdrawal outflowsSince unsettled unsent relayedBy children depositAddresses ' +
    'byDepositAddress watchedOf quoteOf search latestStatusesOfUser manualRefundsOwed owed owedByCurrency depositsOf status'
  ).split(' '),
);

/**
 * Wraps a ledger (any implementation: it works on the Ledger interface) so that:
 * - `tx(fn)` checks first, inside the same transaction, that the lease row still names the fence's
 *   holder and epoch, and throws LeaseLostError otherwise (nothing of fn is written);
 * - a store method called outside a transaction runs inside one such transaction, so no write
 *   escapes the check, unless it is one of READS (which runs as it is);
 * - every payout inserted carries the fence's epoch (`payouts.epoch`).
 * Before `arm` and after `disarm`, every transaction throws LeaseLostError without touching the ledger.
 * `onLost` hears of every LeaseLostError thrown (the node then stops acting, even where a caller
 * catches the error and carries on).
 */
export function fencedLedger(inner: Ledger, onLost: (err: LeaseLostError) => void = () => {}): ActingLedger {
  let fence: Fence | undefined;
  let stopped: string | undefined = 'not the leader yet';
  let depth = 0;
  const lost = (why: string): never => {
    const err = new LeaseLostError(fence, why);
    onLost(err);
    throw err;
  };
  const tx = <T>(fn: () => T, opts?: TxOptions): T => {
    if (depth > 0) return inner.tx(fn, opts);
    if (stopped || !fence) return lost(stopped ?? 'no fence');
    const f = fence;
    return inner.tx(() => {
      if (!inner.leases.holds(f)) lost(`the lease no longer names ${f.holder} at epoch ${f.epoch}`);
      depth++;
      try {
        return fn();
      } finally {
        depth--;
      }
    }, opts);
  };
  const stores = new Map<PropertyKey, object>();
  // A store's methods, each run in a fenced transaction unless one is under way; its other members as they are.
  const wrapStore = (name: PropertyKey, store: object): object => {
    const methods = new Map<PropertyKey, unknown>();
    return new Proxy(store, {
      get(target, key) {
        const value = Reflect.get(target, key);
        if (typeof value !== 'function') return value;
        let w = methods.get(key);
        if (!w) {
          const method = value as (...a: unknown[]) => unknown;
          w =
            name === 'payouts' && key === 'insert'
              ? (p: object) => tx(() => method.call(target, { ...p, epoch: fence!.epoch }))
              : READS.has(key)
                ? method.bind(target)
                : (...args: unknown[]) => (depth > 0 ? method.apply(target, args) : tx(() => method.apply(target, args)));
          methods.set(key, w);
        }
        return w;
      },
    });
  };
  const acting = {
    get fence() {
      return stopped ? undefined : fence;
    },
    arm(f: Fence) {
      fence = { ...f };
      stopped = undefined;
    },
    disarm(why: string) {
      stopped = why;
    },
    tx,
    // Fenced as every write, in a transaction of the node's that checks the lease (not on a writer thread).
    writeFinalRange: async (range: FinalRange) => tx(() => writeFinalRange(inner, range), { lazy: true }),
    read: <T>(fn: () => T): T => inner.read(fn),
    // A read of the inner ledger as it is (on PostgreSQL, over a connection of its own).
    statusOf: (id: string) => inner.statusOf(id),
    ping: () => inner.ping(),
    close: () => inner.close(),
  };
  return new Proxy(acting, {
    get(target, prop) {
      if (prop in target) return Reflect.get(target, prop);
      if (OWN.has(prop)) return Reflect.get(inner, prop);
      const value = Reflect.get(inner, prop);
      if (typeof value !== 'object' || value === null) return value;
      let w = stores.get(prop);
      if (!w) stores.set(prop, (w = wrapStore(prop, value)));
      return w;
    },
  }) as unknown as ActingLedger;
}
