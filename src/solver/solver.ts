import { keccak256, toHex, type Hex } from 'viem';
import type { ChainEvents, DepositAddressFunding, FundingTransfer, PayoutHooks } from '../chains/adapter.ts';
import type { ChainPorts } from '../chains/ports.ts';
import type { Registry } from '../config/registry.ts';
import { onRelayFailed, onRelayPaid, onRelaySigned } from './gaslessRelay.ts';
import type { Ledger } from '../ledger/index.ts';
import { Requests, type NewRequest } from '../ledger/requests.ts';
import type { DepositRow, PayoutRow, Pricing, RequestRow, TransactionRow } from '../ledger/types.ts';
import { forRequest, type Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { breakdown, pricedAt, rateText } from '../quote/fillAmount.ts';
import { marketRate } from '../quote/pricing.ts';
import { ceilDiv, conversionRate, mulRatioCeil, usdMicro, usdMicroCeil } from '../lib/money.ts';
import { mark } from '../lib/benchMarks.ts';
import type { PriceSource } from '../quote/prices.ts';
import { reverseClaim } from './claims.ts';
import { LossBreaker, BalanceDrift, type UnexplainedMovement } from './lossBreaker.ts';
import { match, overpaid, type Decision } from './match.ts';
import { RiskPolicy, type Verdict } from './risk.ts';
import type { InventoryConfig, RiskConfig } from '../config/schema.ts';
import { queueWithdrawal, WithdrawalRefused } from './withdrawals.ts';
import { switchName } from '../ledger/operations.ts';
import { LEDGER_BIRTH } from '../ledger/scanMarks.ts';
import {
  accrueAppFees,
  chargeFastFillGas,
  debitSponsor,
  moneyOf,
  releaseHold,
  releaseSponsorHold,
  reverseAppFees,
  reverseSponsor,
  settleHold,
  sponsorHeld,
} from './appBalanceBooks.ts';
import { DepositReorgs } from './reorgs.ts';
import { queueSweep } from './sweeps.ts';
import { inputWorth } from './fastFill.ts';
import { onSignedDepositFailed, signedDepositPayoutId } from './signedDeposits.ts';
import type { FailReason, PostponeReason } from '../ledger/reasons.ts';
import { errText, RelayNodeError } from '../lib/errors.ts';
import { canonicalAddress, describeAddressKind, nativeAddress } from '../kinds/address.ts';

// Keyed by `${chainId}:${canonical currency address}`.
interface Snapshot {
  at: number;
  /** What refunding a deposit of the currency costs, in the chain's native units. */
  refundCost: Map<string, bigint>;
  /** What sweeping a deposit address costs, by chain (those with deposit addresses), in its native units. */
  sweepCost: Map<number, bigint>;
  /** The most a transaction sent now pays per gas, by chain (those with a gas market), in its native units. */
  feePerGas: Map<number, bigint>;
  /** Each chain's reference L1 data fee now (CostOracle.l1Reference), where it has one. */
  l1Reference: Map<number, bigint>;
  spendable: Map<string, bigint>;
  prices: Map<string, string>;
}

// Confirmed deposits decided in one ledger transaction (one disk flush).
const DECIDE_BATCH = 200;
// A snapshot older than this is read again in the background while decisions go on with it; one
// older than the bound is waited for (after a start, or when the node was idle).
const SNAPSHOT_TTL_MS = 1000;
const SNAPSHOT_MAX_AGE_MS = 3000;
const key = (chainId: number, currency: string) => `${chainId}:${currency}`;
// A fill's failures of the caller's making (its recipient or calls reverted, or needed more gas than
// priced): the gas its transactions burned on chain is the caller's to bear.
const CALLER_FAILURES = new Set<string>(['TRANSACTION_REVERTED', 'EXECUTION_REVERTED', 'QUOTED_GAS_LIMIT_EXCEEDED']);
// The payout kinds an operator's refund (or return of an excess) bears the reverted gas of (#callerBurned).
const FILL_REFUND: ReadonlySet<string> = new Set(['fill', 'refund']);
const FILL_REFUND_EXCESS: ReadonlySet<string> = new Set(['fill', 'refund', 'excess']);
const EXCESS: ReadonlySet<string> = new Set(['excess']);

/** An admin request the ledger's state refuses (status: the HTTP status that says why). */
export class AdminRefusal extends RelayNodeError {
  override name = 'AdminRefusal';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const p = (row: PayoutRow) => `${row.kind} payout ${row.id} ${row.state}`;

/** What the solver asks of the chains: the solver's wallets and costs (its snapshot), and a chain's payouts woken. */
export type SolverChains = Pick<ChainPorts, 'ids' | 'wallet' | 'costs' | 'payoutsQueued' | 'signedCalls'>;

/**
 * Turns confirmed deposits into fills or refunds. Every decision is one ledger transaction that
 * marks the deposit handled, moves the request and queues the payout; submitters do the rest.
 */
export class Solver implements PayoutHooks, ChainEvents {
  #snapshot: Snapshot | undefined;
  #refreshing: Promise<void> | undefined;
  #generation = 0;
  // Set while a snapshot is being read: what decisions commit meanwhile, to subtract from it.
  #spentWhileReading: [string, bigint][] | undefined;
  // Hold deadlines before this (ms) have been looked at by expireHolds.
  #holdsCheckedTo = 0;
  // Failed withdrawals whose signed depository call went out, each with when to read its call next (#releaseDeadWithdrawals);
  // undefined until read at start.
  #liveWithdrawals: Map<string, number> | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  readonly risk: RiskPolicy;
  /** What a reorg means for deposits already acted on: the indexers report, this decides. */
  readonly reorgs: DepositReorgs;
  #breaker: LossBreaker | undefined;

  constructor(
    private ledger: Ledger,
    private registry: Registry,
    private chains: SolverChains,
    private prices: PriceSource,
    private metrics: Metrics,
    private log: Logger,
    private riskConfig: RiskConfig = { routes: [], chains: [], denyRecipients: [], denyDepositors: [], dryRun: false },
    private inventoryConfig: InventoryConfig = { targets: [] },
    // What the loss breaker measures (the node gives the audit's difference); balance drift by default.
    lossMeasure?: UnexplainedMovement,
  ) {
    this.risk = new RiskPolicy(riskConfig, ledger, registry);
    this.reorgs = new DepositReorgs(ledger, metrics, log);
    if (riskConfig.lossBreaker) {
      const movement = lossMeasure ?? new BalanceDrift(ledger, registry, chains, prices);
      this.#breaker = new LossBreaker(movement, ledger, usdMicro(1n, 0, riskConfig.lossBreaker.toleranceUsd), [...registry.chains.keys()], metrics, log);
    }
  }

  start(): void {
    this.#stopped = false;
    this.#recordDryRun();
    void this.#breaker?.check();
    this.wake();
    // Deposits whose decision was postponed (a chain unreachable) are retried on a timer, and
    // fast-fill holds whose deposit never came become permanent debits.
    this.#timer = setInterval(() => {
      this.wake();
      try {
        this.expireHolds();
      } catch (e) {
        this.log.error({ err: errText(e) }, 'expiring fast-fill holds failed; retried on the next tick');
      }
      this.#breaker?.check().catch((e) => this.log.error({ err: errText(e) }, 'loss breaker check failed'));
      try {
        this.#countWaiting();
      } catch (e) {
        // A ledger that does not answer (PostgreSQL unreachable) must not end the process from a timer.
        this.log.error({ err: errText(e) }, 'counting the deposits held back failed; retried on the next tick');
      }
      // Inventory metrics and threshold withdrawals stay current when no deposit asks for a snapshot.
      this.#fresh().catch((e) => this.log.error({ err: errText(e) }, 'inventory refresh failed'));
      this.#releaseDeadWithdrawals().catch((e) => this.log.error({ err: errText(e) }, 'checking failed withdrawals failed; retried on the next tick'));
    }, 2000);
  }

  // The deposits of failed withdrawals whose call went out are released once the chain shows the call expired
  // unexecuted; one executed since took them for good (the audit shows the payout that failed paid).
  async #releaseDeadWithdrawals(): Promise<void> {
    this.#liveWithdrawals ??= new Map(this.ledger.withdrawals.heldByFailed().map((id) => [id, 0]));
    for (const [id, readAt] of this.#liveWithdrawals) {
      if (Date.now() < readAt) continue;
      const p = this.ledger.payouts.get(id);
      const call = p && (await this.chains.signedCalls(p.chain_id)?.callOutcome(p));
      // Still executable: read again only once it may have expired (a chain read per tick for 7 days otherwise). Dead
      // only once the chain's blocks show it expired: past its expiry on the node's clock and not yet on the chain's
      // (a clock ahead, a sequencer catching up), it is read again on the next tick.
      if (call && !call.executed && !call.expired) {
        this.#liveWithdrawals.set(id, call.executableUntil >= Date.now() ? call.executableUntil + 1 : 0);
        continue;
      }
      this.#liveWithdrawals.delete(id);
      if (call?.executed) {
        this.log.error({ payout: id }, "a failed withdrawal's signed call was executed since: its deposits are withdrawn");
        continue;
      }
      this.ledger.withdrawals.release(id);
      this.log.warn({ payout: id }, "a failed withdrawal's signed call expired unexecuted: its deposits are withdrawable again");
    }
  }

  /**
   * A fast fill whose deposit did not land by the hold's deadline: the app bears the loss.
   * Each pass looks at the deadlines passed since the last one (a hold is always placed with a
   * deadline after the time it is placed): the first pass after a start looks at them all.
   */
  expireHolds(now = Date.now()): number {
    const since = now < this.#holdsCheckedTo ? 0 : this.#holdsCheckedTo;
    const ids = this.ledger.balances.expiredHolds(now, since);
    for (const id of ids) {
      this.ledger.tx(() => settleHold(this.ledger, this.ledger.requests.get(id)!, undefined, 0n));
      this.log.warn({ requestId: id }, 'fast-fill hold expired without a deposit: permanent debit');
    }
    this.#holdsCheckedTo = now;
    return ids.length;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#running;
    await this.#refreshing;
  }

  /** Runs the loss breaker's check of every chain now (after the one running, if any). */
  checkLosses(): Promise<void> {
    return this.#breaker?.checkNow() ?? Promise.resolve();
  }

  #recordDryRun(): void {
    if (!this.riskConfig.dryRun) return;
    this.ledger.tx(() => {
      if (this.ledger.operations.switchOn(switchName.dryRun, 'config', 'risk.dryRun is set')) {
        this.ledger.operations.record({ action: 'dry-run-on', actor: 'config', reason: 'risk.dryRun is set' });
      }
    });
  }

  /** Re-read inventory and prices before the next decision (e.g. when a price feed moved). */
  invalidate(): void {
    // Only decisions wait for the new reading. The last one stays for what is priced in the transaction that needs it
    // (a failed fill's refund, at the refund's cost): dropped, such a refund was left to an operator.
    if (this.#snapshot) this.#snapshot = { ...this.#snapshot, at: Number.NEGATIVE_INFINITY };
    this.#generation++;
  }

  /**
   * Reads inventory and prices before the chains start: a payout their submitters find failed while reconciling what
   * the ledger recorded is refunded at once, priced with it, rather than left to an operator. A read that fails (one
   * provider's error, one price) is tried again: given up after the first, the start went on with no reading, and a
   * fill found failed was left to an operator all the same. At most `timeoutMs`: a chain that does not answer delays no
   * start.
   */
  async prime(timeoutMs = 10_000, retryMs = 250): Promise<void> {
    // The reading may queue a withdrawal (inventory.withdrawAbove): a dry run is on before it.
    this.#recordDryRun();
    const started = Date.now();
    const read = () => this.#snapshot !== undefined && this.#snapshot.at >= started;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)));
    try {
      while (Date.now() - started < timeoutMs) {
        this.#refresh();
        await Promise.race([this.#refreshing, bound]);
        if (read()) return;
        await Promise.race([new Promise((r) => setTimeout(r, retryMs)), bound]);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Deposits reached their confirmations (a chain's indexer): decide them now. */
  depositsConfirmed(): void {
    this.wake();
  }

  wake(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#pass()
      .catch((e) => this.log.error({ err: errText(e) }, 'solver pass failed'))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.wake();
        }
      });
  }

  async #pass(): Promise<void> {
    // Deposits left confirmed by this pass (held back by a limit, or a decision that failed) keep
    // their place at the head of the queue: skipping them lets the deposits behind them be decided.
    let skip = 0;
    for (;;) {
      const batch = this.ledger.deposits.nextConfirmed(DECIDE_BATCH, skip);
      if (!batch.length || this.#stopped) return;
      for (const d of batch) mark(d.order_ref, 'solver:read');
      const snap = await this.#fresh().catch((e: unknown) => {
        // Nothing is decided without inventory and prices: the batch waits for a later pass.
        this.metrics.postponed.inc({ reason: 'INVENTORY_UNREADABLE' }, batch.length);
        throw e;
      });
      for (const d of batch) mark(d.order_ref, 'solver:snapshot');
      const woken = new Set<number>();
      // One commit for the batch (each decision is its own savepoint inside it): a durable commit
      // costs a disk flush, and a burst of deposits should not pay one each. Submitters are woken
      // only after the commit.
      this.ledger.tx(() => {
        for (const d of batch) {
          try {
            const chain = this.#decide(d, snap);
            mark(d.order_ref, 'solver:decided');
            if (chain !== undefined) woken.add(chain);
          } catch (e) {
            // Listed for the operator (GET /admin/stuck), logged once: it is retried on every pass, and logged only, it
            // was a deposit nobody saw.
            const first = this.ledger.operations.postponement(d.id)?.reason !== 'DECISION_FAILED';
            this.ledger.operations.postpone(d.id, 'DECISION_FAILED');
            this.metrics.postponed.inc({ reason: 'DECISION_FAILED' });
            if (first) this.log.error({ requestId: d.order_ref, deposit: d.id, err: errText(e) }, 'deposit decision failed; it stays confirmed and is retried');
          }
        }
      });
      for (const d of batch) mark(d.order_ref, 'solver:committed');
      for (const c of woken) this.chains.payoutsQueued(c);
      // One statement for the batch, not a read of each deposit's row.
      skip += this.ledger.deposits.countConfirmed(batch.map((d) => d.id));
      // The event loop's I/O between batches: the payouts just queued are being estimated and signed, and their answers
      // wait for this pass to yield. A burst of 1,250 deposits was decided whole before the first fill could leave.
      if (batch.length === DECIDE_BATCH) await new Promise((r) => setImmediate(r));
    }
  }

  // Inventory against its target (the wallet plus what the depository owes the solver), and the
  // withdrawal of what the depository owes once it passes the configured threshold (one at a time
  // per chain and currency, recorded as an admin entry by the node itself).
  #inventory(chainId: number, solver: string, c: { address: string; symbol: string }, wallet: bigint): void {
    const conf = this.inventoryConfig.targets.find((t) => t.chainId === chainId && t.currency.toLowerCase() === c.address.toLowerCase());
    // The exchange has no depository: its deposits are in the solver's account (the wallet) already.
    const depository = this.registry.chains.get(chainId)?.kind !== 'exchange';
    const owed = depository ? (this.ledger.withdrawals.owedByCurrency(chainId).get(c.address.toLowerCase()) ?? 0n) : 0n;
    const labels = { chain: chainId, currency: c.symbol };
    this.metrics.inventory.set(labels, Number(wallet + owed));
    if (conf?.target !== undefined && BigInt(conf.target) > 0n) {
      const target = BigInt(conf.target);
      this.metrics.inventoryTarget.set(labels, Number(target));
      // Parts per million, then a ratio: exact enough for an alert, no float in the sum.
      this.metrics.inventorySkew.set(labels, Number(((wallet + owed - target) * 1_000_000n) / target) / 1_000_000);
    }
    // Withdrawals are signed depository calls (EVM): elsewhere the node has no withdrawal path (an SVM one fails and
    // was queued again every tick; an exchange one was a transfer from the solver to itself).
    if (conf?.withdrawAbove === undefined || owed <= BigInt(conf.withdrawAbove) || !this.chains.signedCalls(chainId)) return;
    if (this.ledger.payouts.hasOpenWithdrawal(chainId, c.address)) return;
    try {
      const p = queueWithdrawal(
        this.ledger,
        { chainId, currency: c.address, solver },
        { actor: 'node', reason: `owed ${owed} above inventory.withdrawAbove ${conf.withdrawAbove}` },
      );
      this.log.info({ payout: p.id, chain: chainId, amount: p.amount }, 'withdrawal queued: depository funds owed above the threshold');
      queueMicrotask(() => this.chains.payoutsQueued(chainId));
    } catch (err) {
      if (!(err instanceof WithdrawalRefused)) throw err;
    }
  }

  // Inventory, gas and prices, read from the chains about once a second, off the decision's path:
  // decisions subtract what they commit from the snapshot, so two deposits never spend the same
  // inventory, and what they commit while a new snapshot is read is subtracted from it too.
  async #fresh(): Promise<Snapshot> {
    const age = this.#snapshot ? Date.now() - this.#snapshot.at : Infinity;
    if (age >= SNAPSHOT_TTL_MS) this.#refresh();
    if (age < SNAPSHOT_MAX_AGE_MS) return this.#snapshot!;
    // Twice at most: a read begun before invalidate() is dropped, and the second one is fresh.
    const stale = () => !this.#snapshot || Date.now() - this.#snapshot.at >= SNAPSHOT_MAX_AGE_MS;
    for (let i = 0; i < 2 && stale(); i++) {
      this.#refresh();
      await this.#refreshing;
    }
    if (stale()) throw new Error('inventory and prices could not be read');
    return this.#snapshot!;
  }

  #refresh(): void {
    if (this.#refreshing) return;
    const spent: [string, bigint][] = [];
    const generation = this.#generation;
    this.#spentWhileReading = spent;
    this.#refreshing = this.#readSnapshot()
      .then((snap) => {
        if (generation !== this.#generation) return; // invalidated while it was read
        // Conservative: a payout committed during the read may be in both the read and this list.
        for (const [k, amount] of spent) snap.spendable.set(k, (snap.spendable.get(k) ?? 0n) - amount);
        this.#snapshot = snap;
      })
      .catch((e) => this.log.warn({ err: errText(e) }, 'reading inventory and prices failed; the last snapshot stays'))
      .finally(() => {
        this.#refreshing = undefined;
        this.#spentWhileReading = undefined;
      });
  }

  // What a decision commits leaves the snapshot's spendable inventory (and the one being read).
  #spend(snap: Snapshot, k: string, amount: bigint): void {
    snap.spendable.set(k, (snap.spendable.get(k) ?? 0n) - amount);
    this.#spentWhileReading?.push([k, amount]);
  }

  async #readSnapshot(): Promise<Snapshot> {
    const refundCost = new Map<string, bigint>();
    const sweepCost = new Map<number, bigint>();
    const feePerGas = new Map<number, bigint>();
    const l1Reference = new Map<number, bigint>();
    const spendable = new Map<string, bigint>();
    const prices = new Map<string, string>();
    await Promise.all(
      this.chains.ids().flatMap((chainId) => {
        const wallet = this.chains.wallet(chainId)!;
        const costs = this.chains.costs(chainId)!;
        const sweeps = costs.sweepCost ? [costs.sweepCost().then((cost) => void sweepCost.set(chainId, cost))] : [];
        const fees = costs.feePerGas ? [costs.feePerGas().then((fee) => void feePerGas.set(chainId, fee))] : [];
        const l1 = costs.l1Reference ? [costs.l1Reference().then((fee) => void l1Reference.set(chainId, fee))] : [];
        return [
          ...sweeps,
          ...fees,
          ...l1,
          ...this.registry.currenciesOf(chainId).map(async (c) => {
            const k = key(chainId, c.address);
            const [bal, cost, price] = await Promise.all([wallet.balance(c.address), costs.refundCost(c.address), this.prices.usdPrice(c)]);
            spendable.set(k, bal);
            refundCost.set(k, cost);
            prices.set(k, price);
            this.metrics.solverBalance.set({ chain: chainId, currency: c.symbol }, Number(bal));
            this.#inventory(chainId, wallet.solver, c, bal);
          }),
        ];
      }),
    );
    return { at: Date.now(), refundCost, sweepCost, feePerGas, l1Reference, spendable, prices };
  }

  // micro-USD of an amount, at the snapshot's price, rounded up (what a sponsor is charged).
  #usdMicro(chainId: number, currency: string, amount: bigint, snap: Snapshot): bigint {
    if (amount === 0n) return 0n;
    const cur = this.registry.currency(chainId, currency)!;
    return usdMicroCeil(amount, cur.decimals, snap.prices.get(key(chainId, currency)) ?? cur.usdPrice);
  }

  // The deposit of a fast-filled request: it releases the hold; nothing is paid again. Returns the chain of an excess.
  #settleFastFill(d: DepositRow, r: RequestRow, snap: Snapshot): number | undefined {
    // Linked before the deposit is handled: the ledger's trigger then counts it owed to the solver.
    this.ledger.payouts.linkDeposit(`fill:${r.id}`, d.id);
    this.ledger.deposits.markHandled(d.id, r.id);
    // Settled by a deposit of the user's own, the order's signed deposit still unsigned in the queue is not sent (it took
    // the tokens again, back as a DOUBLE_SPEND less two transactions' gas). When it is this very deposit, it was sent:
    // left as it is.
    this.#dropSignedDeposit(r.id, 'ORDER_ALREADY_FILLED', Date.now());
    // A deposit beyond the input the fast fill was priced at goes back to refundTo, as a deposit address's overpayment
    // does (kept, the user lost it); the hold is settled by what the fill was made of.
    const excess = this.#excessOf(d, r);
    const cur = this.registry.currency(d.chain_id, d.currency)!;
    const cout = this.registry.currency(r.destination_chain_id, r.destination_currency);
    const input = { currency: cur, price: snap.prices.get(key(d.chain_id, d.currency)) ?? cur.usdPrice };
    // Weighed as its hold was (fastFill.ts): on a route moving one asset, at the higher of the asset's two readings.
    const value = cout
      ? inputWorth(
          BigInt(d.amount) - excess,
          JSON.parse(r.pricing!) as Pricing,
          input,
          {
            currency: cout,
            price: snap.prices.get(key(r.destination_chain_id, r.destination_currency)) ?? cout.usdPrice,
          },
          usdMicro,
        )
      : usdMicro(BigInt(d.amount) - excess, cur.decimals, input.price);
    settleHold(this.ledger, r, d, value);
    this.log.info({ requestId: r.id, deposit: d.id }, 'fast-filled request settled by its deposit');
    return excess > 0n ? this.#queueRefund(r.id, { ...d, amount: excess.toString() }, r.refund_to ?? d.depositor, snap, Date.now(), 'excess') : undefined;
  }

  // Returns the chain that got a payout, if any.
  #decide(d: DepositRow, snap: Snapshot): number | undefined {
    const found = this.ledger.requests.get(d.order_ref);
    // An open deposit address's quote is a template: each arrival is a request of its own.
    const arrival = found && moneyOf(found)?.depositAddressType === 'open' ? this.#arrival(found, d, snap) : undefined;
    const order = arrival ? (this.ledger.requests.get(arrival.id) ?? arrival) : found;
    const decision = match(d, order, {
      now: Date.now(),
      spendable: (chainId, currency) => snap.spendable.get(key(chainId, currency)) ?? 0n,
      native: (chainId) => this.registry.native(chainId).address,
      currentRate: (r, pricing) => {
        const cin = this.registry.currency(r.origin_chain_id, r.origin_currency);
        const cout = this.registry.currency(r.destination_chain_id, r.destination_currency);
        const pin = snap.prices.get(key(r.origin_chain_id, r.origin_currency));
        const pout = snap.prices.get(key(r.destination_chain_id, r.destination_currency));
        if (!cin || !cout || !pin || !pout) return undefined;
        return marketRate(pin, cin, pout, cout, pricing.swap?.spreadBps ?? 0);
      },
      hasDeposit: (requestId) => this.ledger.deposits.forRequest(requestId).length > 0,
      fastFillOutcome: (requestId) => {
        const state = this.ledger.payouts.get(`fill:${requestId}`)?.state;
        return state === 'success' ? 'paid' : state === 'failed' ? 'failed' : 'pending';
      },
      sponsorCanPay: (r, sponsored) => {
        const wallet = moneyOf(r)?.sponsor?.wallet;
        // What fast-fill holds set aside is not there to spend: it covers fills already paid.
        // What POST /execute held for this very request is there for it.
        return (
          wallet !== undefined &&
          this.ledger.balances.summary(wallet).available + sponsorHeld(this.ledger, r.id) >=
            this.#usdMicro(r.destination_chain_id, r.destination_currency, sponsored, snap)
        );
      },
      otherDeposits: (orderId, depositId) =>
        this.ledger.deposits.byOrderRef(orderId).filter((o) => o.id !== depositId && (o.state === 'confirmed' || o.state === 'unconfirmed')),
      // A signed deposit the node submits, or a sweep of the order's deposit address in its currency: either lands as
      // the order's deposit. A sweep counted not, and 1 wei naming the order (its id is public by address) failed it
      // while the user's sweep waited, the user's money then refunded as a DOUBLE_SPEND less two transactions' gas.
      depositInFlight: (orderId) =>
        this.ledger.payouts
          .forRequest(orderId)
          .some((p) => (p.kind === 'deposit' || (p.kind === 'sweep' && p.currency === found?.origin_currency)) && (p.state === 'queued' || p.state === 'sent')),
      arrivedAt: (deposit) => (this.#sweepOf(deposit) ?? this.#signedDepositOf(deposit))?.decided_at ?? deposit.seen_at,
    });
    // Left confirmed: decided again once what it waits for is decided (a fast fill, another deposit).
    if (decision.kind === 'wait') {
      this.metrics.postponed.inc({ reason: decision.reason });
      return undefined;
    }
    return this.ledger.tx(() => {
      // The limits judge inside the decision's transaction: what earlier decisions of the batch
      // committed counts against them.
      const verdict = this.risk.judge(d, decision, (chainId, currency, amount) => this.#usdOf(chainId, currency, amount, snap));
      if (verdict.kind === 'postpone') return this.#postpone(d, decision, verdict);
      this.ledger.operations.release(d.id);
      // A limit's failure keeps whose failure it is: a deposit the matcher made a request of its own (a
      // second deposit, one short of a fast fill) stays one, and never fails the order it names.
      const final: Decision =
        verdict.kind === 'fail'
          ? { kind: 'fail', reason: verdict.reason, request: decision.request, extra: decision.kind === 'fail' ? decision.extra : undefined }
          : decision;
      const reason = final.kind === 'fail' ? final.reason : 'none';
      this.metrics.decisions.inc({ decision: final.kind, reason });
      if (arrival && !this.ledger.requests.get(arrival.id)) this.ledger.requests.insert(arrival);
      if (final.kind === 'fill') return this.#commitFill(d, final, snap);
      if (final.kind === 'settle') return this.#settleFastFill(d, final.request, snap);
      return this.#commitFailure(d, final, snap, (verdict.kind === 'fail' && !verdict.refund) || (!final.request && this.#beforeLedger(d)));
    });
  }

  // A deposit naming no order of this ledger, made before the ledger began indexing its chain (LEDGER_BIRTH): a ledger
  // started fresh over a depository used before (a lost ledger, a second node's) reads the old deposits again, each
  // unknown to it, and refunding them would pay deposits a ledger before it filled. An operator decides.
  #beforeLedger(d: DepositRow): boolean {
    const birth = this.ledger.funding.scanMark(d.chain_id, LEDGER_BIRTH);
    if (!birth || d.block_number > birth.block_number) return false;
    this.log.warn(
      { deposit: d.id, block: d.block_number, ledgerBirth: birth.block_number },
      'a deposit from before this ledger began on its chain names no order of it: left to an operator',
    );
    return true;
  }

  // micro-USD worth of an amount at the snapshot's price (truncated); 0 for an unknown currency.
  #usdOf(chainId: number, currency: string, amount: bigint, snap: Snapshot): bigint {
    const cur = this.registry.currency(chainId, currency);
    if (!cur || amount === 0n) return 0n;
    return usdMicro(amount, cur.decimals, snap.prices.get(key(chainId, currency)) ?? cur.usdPrice);
  }

  // A deposit held back by a limit, a pause or dry-run mode: it stays confirmed and is decided
  // again on a later pass; the reason is recorded for the admin listing and counted.
  #postpone(d: DepositRow, decision: Decision, verdict: Extract<Verdict, { kind: 'postpone' }>): undefined {
    const first = this.ledger.operations.postponement(d.id) === undefined;
    this.ledger.operations.postpone(d.id, verdict.reason);
    if (verdict.reason === 'DRY_RUN') {
      const detail =
        decision.kind === 'fill'
          ? {
              request: decision.request.id,
              chain: decision.request.destination_chain_id,
              recipient: decision.request.recipient,
              amount: decision.amount.toString(),
            }
          : decision.kind === 'fail'
            ? { request: decision.request?.id ?? null, refundChain: d.chain_id, amount: d.amount }
            : { request: decision.request.id };
      this.ledger.operations.dryRunDecision(d.id, decision.kind, decision.kind === 'fail' ? decision.reason : null, detail);
    }
    this.metrics.postponed.inc({ reason: verdict.reason });
    if (first) this.log.warn({ requestId: d.order_ref, deposit: d.id, reason: verdict.reason }, 'deposit held back');
    return undefined;
  }

  // The gauge of deposits held back, by reason.
  #countWaiting(): void {
    const counts = new Map<PostponeReason, number>();
    for (const p of this.ledger.operations.postponed()) counts.set(p.reason, (counts.get(p.reason) ?? 0) + 1);
    this.metrics.waiting.reset();
    for (const [reason, n] of counts) this.metrics.waiting.set({ reason }, n);
  }

  // The request an arrival at an open deposit address makes: the template's route and pricing,
  // at the amount that arrived (re-quoted by the same pricing; a swap at the fill's rate, the top-up at today's price).
  #arrival(t: RequestRow, d: DepositRow, snap: Snapshot): NewRequest & { status: 'waiting' } & RequestRow {
    const pricing = this.#gasToday(this.#topUpToday(JSON.parse(t.pricing!) as Pricing, t, snap), t, snap);
    const out = breakdown(BigInt(d.amount), pricing).out;
    const now = Date.now();
    return {
      ...t,
      id: Requests.derivedId(d.id, (s) => keccak256(toHex(s))),
      parent_id: t.id,
      status: 'waiting',
      fail_reason: null,
      refund_fail_reason: null,
      details: null,
      trade_type: 'EXACT_INPUT',
      amount_in: d.amount,
      amount_out: (out > 0n ? out : 0n).toString(),
      min_amount_out: '0',
      expires_at: null,
      fill_deadline: null,
      created_at: now,
      updated_at: now,
      fast_fill_deadline: null,
      fast_fill_input: null,
      failed_call_data: null,
      sender: null,
      deposit_block: null,
      fill_time_ms: null,
      amount_usd: null,
      pricing: JSON.stringify(pricing),
      // The template's quote, as the arrival's record shows it (its fees and details).
      quote: this.ledger.requests.quoteOf(t.id) ?? null,
    };
  }

  // A template has no expiry, so the gas top-up its pricing fixed in native currency is bought at today's price for
  // each arrival (kept when a price is unknown): at the template's, anyone could take the top-up, arrival after
  // arrival, once the native currency had risen.
  #topUpToday(p: Pricing, t: RequestRow, snap: Snapshot): Pricing {
    if (!p.topUpNative) return p;
    const native = this.registry.native(t.destination_chain_id);
    const cout = this.registry.currency(t.destination_chain_id, t.destination_currency);
    const nativePrice = snap.prices.get(key(t.destination_chain_id, native.address));
    const price = snap.prices.get(key(t.destination_chain_id, t.destination_currency));
    if (!cout || !nativePrice || !price) return p;
    return { ...p, topUpOut: mulRatioCeil(BigInt(p.topUpNative), conversionRate(nativePrice, native.decimals, price, cout.decimals)).toString() };
  }

  // Likewise the gas the template's fee priced (its fill's and its sweep's, in native units) is charged at today's fee
  // per gas and prices for each arrival (the template's where today's is unknown): at the template's, the solver paid
  // the difference once gas or the native currency had risen, arrival after arrival.
  #gasToday(p: Pricing, t: RequestRow, snap: Snapshot): Pricing {
    const g = p.openGas;
    const cout = this.registry.currency(t.destination_chain_id, t.destination_currency);
    const price = snap.prices.get(key(t.destination_chain_id, t.destination_currency));
    if (!g || !cout || !price) return p;
    const inOut = (chainId: number, native: bigint): bigint | undefined => {
      const n = this.registry.native(chainId);
      const nativePrice = snap.prices.get(key(chainId, n.address));
      return nativePrice === undefined ? undefined : mulRatioCeil(native, conversionRate(nativePrice, n.decimals, price, cout.decimals));
    };
    const quotedFee = BigInt(g.feePerGas ?? 0);
    const fee = snap.feePerGas.get(t.destination_chain_id);
    // The L2 gas moves with the fee per gas, the L1 data fee with the chain's reference L1 fee (L1DataFee.reference).
    const quotedL1 = BigInt(g.l1Native ?? 0);
    const quotedRef = BigInt(g.l1Reference ?? 0);
    const ref = snap.l1Reference.get(t.destination_chain_id);
    const l1 = quotedRef > 0n && ref !== undefined ? ceilDiv(quotedL1 * ref, quotedRef) : quotedL1;
    const l2 = BigInt(g.fillNative) - quotedL1;
    const fill = (quotedFee > 0n && fee !== undefined ? ceilDiv(l2 * fee, quotedFee) : l2) + l1;
    const fillOut = inOut(t.destination_chain_id, fill);
    const sweepOut = inOut(t.origin_chain_id, snap.sweepCost.get(t.origin_chain_id) ?? BigInt(g.sweepNative));
    if (fillOut === undefined || sweepOut === undefined) return p;
    return { ...p, gasFeeOut: (fillOut + sweepOut).toString() };
  }

  #commitFill(d: DepositRow, decision: Extract<Decision, { kind: 'fill' }>, snap: Snapshot): number {
    const r = decision.request;
    const now = Date.now();
    this.ledger.deposits.markHandled(d.id, r.id);
    this.ledger.requests.setStatus(r.id, 'pending', {}, now);
    this.ledger.payouts.insert({
      id: `fill:${r.id}`,
      kind: 'fill',
      request_id: r.id,
      deposit_id: d.id,
      chain_id: r.destination_chain_id,
      recipient: r.recipient!,
      currency: r.destination_currency,
      amount: decision.amount.toString(),
      native_topup: decision.topUp > 0n ? decision.topUp.toString() : null,
      calls: moneyOf(r)?.calls ? JSON.stringify(moneyOf(r)!.calls) : null,
      max_gas: moneyOf(r)?.maxGas ?? null,
      rate: decision.rate ? rateText(decision.rate) : null,
      decided_at: now,
    });
    debitSponsor(this.ledger, r, this.#usdMicro(r.destination_chain_id, r.destination_currency, decision.fees.sponsored, snap));
    this.#dropSignedDeposit(r.id, 'ORDER_ALREADY_FILLED', now);
    if (decision.excess > 0n) {
      const excessChain = this.#queueRefund(r.id, { ...d, amount: decision.excess.toString() }, r.refund_to ?? d.depositor, snap, now, 'excess');
      if (excessChain !== undefined && excessChain !== r.destination_chain_id) queueMicrotask(() => this.chains.payoutsQueued(excessChain));
    }
    this.#spend(snap, key(r.destination_chain_id, r.destination_currency), decision.amount);
    if (decision.topUp > 0n) this.#spend(snap, key(r.destination_chain_id, this.registry.native(r.destination_chain_id).address), decision.topUp);
    this.log.info({ requestId: r.id, deposit: d.id, amount: decision.amount.toString(), chain: r.destination_chain_id }, 'fill queued');
    return r.destination_chain_id;
  }

  // Decided by another deposit (the user's own, sent while the node's waited in its queue: filled, or failed for good),
  // the order needs its signed deposit (usePermit) no more: one never signed is not sent. Sent, it took the user's tokens
  // a second time, and they came back as a DOUBLE_SPEND less that deposit's gas and the refund's (a dollar of a 7 USDC
  // order). One signed may land: it is refunded so. Inside the decision's transaction.
  #dropSignedDeposit(requestId: string, reason: FailReason, now: number): void {
    const signed = this.ledger.payouts.get(signedDepositPayoutId(requestId));
    if (signed?.state === 'queued' && this.ledger.payouts.txsOf(signed.id).length === 0)
      this.ledger.payouts.setState(signed.id, 'failed', { failReason: reason }, now);
  }

  // noRefund: the deposit is not sent back automatically (a blocked depositor): an operator decides.
  #commitFailure(d: DepositRow, decision: Extract<Decision, { kind: 'fail' }>, snap: Snapshot, noRefund = false): number | undefined {
    const now = Date.now();
    let requestId: Hex;
    if (!decision.request || decision.extra) {
      // The deposit gets a request of its own, so its refund has a status to read. It has one already
      // when it was decided before, a reorg took it back, and it came back at the same place.
      requestId = Requests.derivedId(d.id, (s) => keccak256(toHex(s)));
      if (!this.ledger.requests.get(requestId))
        this.ledger.requests.insert({
          id: requestId,
          parent_id: decision.request?.id ?? null,
          kind: decision.request ? 'extra' : 'orphan',
          request_type: 'Bridge',
          status: 'failure',
          user: d.depositor,
          recipient: null,
          refund_to: d.depositor,
          origin_chain_id: d.chain_id,
          destination_chain_id: decision.request?.destination_chain_id ?? d.chain_id,
          origin_currency: d.currency,
          destination_currency: decision.request?.destination_currency ?? d.currency,
          trade_type: null,
          amount_in: d.amount,
          amount_out: '0',
          min_amount_out: '0',
          pricing: null,
          order_data: null,
          quote: null,
          expires_at: null,
          fill_deadline: null,
          created_at: now,
          currency_in_symbol: this.registry.currency(d.chain_id, d.currency)?.symbol.toUpperCase() ?? null,
          currency_out_symbol: decision.request?.currency_out_symbol ?? this.registry.currency(d.chain_id, d.currency)?.symbol.toUpperCase() ?? null,
        });
    } else {
      requestId = decision.request.id;
      this.#dropSignedDeposit(requestId, decision.reason, now);
    }
    this.ledger.deposits.markHandled(d.id, requestId);
    this.ledger.requests.setStatus(requestId, 'failure', { failReason: decision.reason }, now);
    // Not filled: nothing will be charged of what POST /execute held for it.
    releaseSponsorHold(this.ledger, requestId, decision.reason);
    this.log.info({ requestId, deposit: d.id, reason: decision.reason }, 'deposit will not be filled');
    if (noRefund) {
      this.ledger.requests.setStatus(requestId, 'failure', { refundFailReason: 'MANUAL_REFUND_REQUIRED' }, now);
      this.log.warn({ requestId, deposit: d.id, reason: decision.reason }, 'deposit held for an operator: not refunded automatically');
      return undefined;
    }
    const refundTo = decision.request && !decision.extra && d.chain_id === decision.request.origin_chain_id ? decision.request.refund_to! : d.depositor;
    return this.#queueRefund(requestId, d, refundTo, snap, now);
  }

  // Queues the refund of a deposit to `to` on its own chain, less the refund's gas. Must run inside
  // a ledger transaction.
  #queueRefund(requestId: Hex, d: DepositRow, to: string, snap: Snapshot, now: number, kind: 'refund' | 'excess' = 'refund'): number | undefined {
    // A refund bears the sweep that brought the deposit in (a deposit address's); an excess does not: the fill paid it.
    const cost = this.#refundCost(d.chain_id, d.currency, snap, kind === 'refund' ? d : undefined);
    const amount = cost === undefined ? undefined : BigInt(d.amount) - cost;
    // Never more back than the deposit brought, whatever paid some of it back already (a guard: the
    // callers pass only what is left of it; a refund past it would be the solver's own money).
    if (amount !== undefined && amount > 0n && this.#returned(d.id) + amount > BigInt(this.ledger.deposits.get(d.id)!.amount)) {
      this.log.error({ requestId, deposit: d.id, amount: amount.toString(), kind }, 'refund refused: it would return more than the deposit brought');
      if (kind === 'refund') this.ledger.requests.setStatus(requestId, 'failure', { refundFailReason: 'MANUAL_REFUND_REQUIRED' }, now);
      return undefined;
    }
    if (amount === undefined || amount <= 0n) {
      const refundFailReason = amount === undefined ? 'MANUAL_REFUND_REQUIRED' : 'AMOUNT_TOO_LOW_TO_REFUND';
      // An excess too small to return leaves the fill's status as it is.
      if (kind === 'excess') {
        this.log.warn({ requestId, deposit: d.id, excess: d.amount, refundFailReason }, 'deposit address excess not returned');
        return undefined;
      }
      this.ledger.requests.setStatus(requestId, 'failure', { refundFailReason }, now);
      this.metrics.refunds.inc({ chain: d.chain_id, outcome: refundFailReason });
      this.log.warn({ requestId, deposit: d.id, refundFailReason }, 'deposit cannot be refunded');
      return undefined;
    }
    // A refund of the same request cancelled by a reorg keeps its id: this one is the deposit's next
    // (the guard above counts what any of them returned).
    const earlier = this.ledger.payouts.forRequest(requestId).filter((p) => p.kind === kind).length;
    this.ledger.payouts.insert({
      id: earlier ? `${kind}:${requestId}:${earlier}` : `${kind}:${requestId}`,
      kind,
      request_id: requestId,
      deposit_id: d.id,
      chain_id: d.chain_id,
      recipient: to,
      currency: d.currency,
      amount: amount.toString(),
      decided_at: now,
    });
    return d.chain_id;
  }

  // Whether a payout of a deposit's own money (a refund, an excess) may still pay it. One that failed on a chain whose
  // payouts are signed depository calls (EVM) may: its call stays executable until it expires, by anyone holding it,
  // and it is public (its reverted transaction's input, the request's failedCallData). `dead`: failed ones read on
  // chain as expired unexecuted. One a reorg cancelled while queued was never sent.
  #mayPay(p: PayoutRow, dead?: ReadonlySet<string>): boolean {
    if (p.state !== 'failed') return true;
    return p.fail_reason !== 'DEPOSIT_REORGED' && this.chains.signedCalls(p.chain_id) !== undefined && !dead?.has(p.id);
  }

  // What the payouts of a deposit return of it: its refunds and excess that may pay (in its currency).
  #returned(depositId: string, dead?: ReadonlySet<string>): bigint {
    return this.ledger.payouts
      .forDeposit(depositId)
      .reduce((sum, p) => ((p.kind === 'refund' || p.kind === 'excess') && this.#mayPay(p, dead) ? sum + BigInt(p.amount) : sum), 0n);
  }

  // The part of a request's deposit still the user's to get back: all of it, less a deposit address's
  // overpayment when that went back on its own (an excess payout, sent or on its way, or failed with its signed
  // call still executable: refunded again, it paid twice).
  #unreturned(d: DepositRow, r: RequestRow, dead?: ReadonlySet<string>): DepositRow {
    const excessLive = this.ledger.payouts.forDeposit(d.id).some((p) => p.kind === 'excess' && this.#mayPay(p, dead));
    return excessLive ? { ...d, amount: (BigInt(d.amount) - overpaid(d, r)).toString() } : d;
  }

  // What a payout's transactions that landed on chain paid in gas (its chain's native currency; of a
  // batch, this payout's share), in the deposit's currency at the snapshot's prices, rounded up; 0 when a
  // price is unknown.
  #burnedBy(payout: PayoutRow, d: Pick<DepositRow, 'chain_id' | 'currency'>, snap: Snapshot): bigint {
    const fee = this.#gasBurned(payout);
    const native = this.registry.native(payout.chain_id);
    const cur = this.registry.currency(d.chain_id, d.currency);
    const nativePrice = snap.prices.get(key(payout.chain_id, native.address));
    const price = snap.prices.get(key(d.chain_id, d.currency));
    if (fee === 0n || !cur || !nativePrice || !price) return 0n;
    return mulRatioCeil(fee, conversionRate(nativePrice, native.decimals, price, cur.decimals));
  }

  // The gas the deposit's failed payouts of `kinds` burned on chain, failed there of the caller's making (CALLER_FAILURES:
  // a recipient that took the payment only in a simulation), in the deposit's currency at the snapshot's prices.
  #callerBurned(d: DepositRow, snap: Snapshot, kinds: ReadonlySet<string>): bigint {
    return this.ledger.payouts
      .forDeposit(d.id)
      .reduce((sum, x) => (kinds.has(x.kind) && x.state === 'failed' && CALLER_FAILURES.has(x.fail_reason ?? '') ? sum + this.#burnedBy(x, d, snap) : sum), 0n);
  }

  // What a payout's transactions that landed on chain paid in gas, in its chain's native units (of a batch, its share).
  #gasBurned(payout: PayoutRow): bigint {
    let fee = 0n;
    for (const t of this.ledger.payouts.txsOf(payout.id)) {
      // A cancel is the solver's own doing (a fee-capped transaction), never the caller's.
      if (t.fee !== null && !t.cancel) fee += BigInt(t.fee) / BigInt(this.ledger.payouts.rowsOfTx(t.hash).length);
    }
    return fee;
  }

  // The refund's own gas, in the deposit's currency; undefined when the chain or price is unknown. With `swept`: and the
  // sweep's, when that deposit came in through a deposit address (the solver's sweep is its transaction), as its
  // fill's price would have: otherwise anyone's deposit-address orders, refunded, cost the solver a sweep each. Likewise
  // the node's signed deposit (usePermit), when that is the deposit's transaction.
  #refundCost(chainId: number, currency: string, snap: Snapshot, swept?: DepositRow): bigint | undefined {
    let cost = snap.refundCost.get(key(chainId, currency));
    if (cost !== undefined && swept && this.#sweepOf(swept)) {
      const sweep = snap.sweepCost.get(chainId);
      cost = sweep === undefined ? undefined : cost + sweep;
    }
    if (cost !== undefined && swept) cost += this.#signedDepositGas(swept);
    const cur = this.registry.currency(chainId, currency);
    // A chain taken out of the config has no currency and no native one: unpriced (the refund is left for an
    // operator), where reading its native currency threw and the deposit's decision failed on every pass.
    if (cost === undefined || !cur) return undefined;
    const native = this.registry.native(chainId);
    const price = snap.prices.get(key(chainId, currency));
    const nativePrice = snap.prices.get(key(chainId, native.address));
    if (!price || !nativePrice) return undefined;
    return mulRatioCeil(cost, conversionRate(nativePrice, native.decimals, price, cur.decimals));
  }

  // The gas of the node's own signed deposit (usePermit) when it is the deposit's transaction, in native units: the
  // fill's quote priced it, so a refund bears it as a swept deposit's bears its sweep (before, each such order refunded
  // cost the solver a deposit transaction). Its fee once its receipt is read, else the most it could cost.
  #signedDepositGas(d: DepositRow): bigint {
    const t = this.#signedDepositTx(d);
    if (!t) return 0n;
    return t.fee !== null ? BigInt(t.fee) : BigInt(t.gas_limit) * BigInt(t.max_fee_per_gas);
  }

  // The transaction of the node's own signed deposit (usePermit) when it is the deposit's transaction.
  #signedDepositTx(d: DepositRow): TransactionRow | undefined {
    const tx = d.tx_hash.toLowerCase();
    return d.order_ref ? this.ledger.payouts.txsOf(signedDepositPayoutId(d.order_ref)).find((x) => x.hash.toLowerCase() === tx && !x.cancel) : undefined;
  }

  // The node's signed deposit payout whose transaction brought the deposit. Its arrival is when the node recorded the
  // user's permit (checked against the quote's expiry then), as a sweep's is when the watcher saw the funds: the node
  // sends it when its queue lets it (a restart, a held chain), and judged by when the indexer read it, a permit recorded
  // in time that landed in time came back as ORDER_EXPIRED, refunded less the node's deposit gas and the refund's.
  #signedDepositOf(d: DepositRow): PayoutRow | undefined {
    return this.#signedDepositTx(d) ? this.ledger.payouts.get(signedDepositPayoutId(d.order_ref)) : undefined;
  }

  // The sweep payout whose transaction brought the deposit, when it is the solver's sweep of a deposit address.
  #sweepOf(d: DepositRow): PayoutRow | undefined {
    const tx = d.tx_hash.toLowerCase();
    return this.ledger.payouts.forRequest(d.order_ref).find((p) => p.kind === 'sweep' && p.tx_hash?.toLowerCase() === tx);
  }

  // A failed refund's (or excess's) signed call stays executable until it expires: anyone holding it (its calldata is
  // public) may submit it once its recipient accepts. A new refund (a new request) while it can still execute, or
  // after a refund's did, would pay the deposit twice. Returns the failed ones that expired unexecuted (dead); an
  // excess executed since stays counted as returned.
  async #deadSignedCalls(requestId: Hex): Promise<Set<string>> {
    const dead = new Set<string>();
    for (const p of this.ledger.payouts.forRequest(requestId)) {
      if ((p.kind !== 'refund' && p.kind !== 'excess') || p.state !== 'failed') continue;
      const call = await this.chains.signedCalls(p.chain_id)?.callOutcome(p);
      if (call?.executed) {
        if (p.kind === 'excess') continue;
        throw new AdminRefusal(409, `refund ${p.id} failed here but its signed call was executed on chain since: the deposit is returned`);
      }
      if (call && !call.expired) {
        const until = new Date(call.executableUntil).toISOString();
        throw new AdminRefusal(
          409,
          call.executableUntil >= Date.now()
            ? `${p.kind} ${p.id} failed, but its signed call can still be executed until ${until}: refund by hand after that`
            : `${p.kind} ${p.id} failed, and its signed call expires at ${until}, but chain ${p.chain_id}'s blocks have not passed that yet (their timestamps are behind this node's clock): it can still be executed; refund by hand once they have`,
        );
      }
      dead.add(p.id);
    }
    return dead;
  }

  // The recipient an operator names for a manual refund (`to`), in its chain's canonical spelling; undefined when none
  // is named. Refused (400) unless it is an address of the deposit's chain, and never the address standing for the
  // native currency (the zero address on EVM): a refund there is burned.
  #operatorRecipient(chainId: number, to: string | undefined): string | undefined {
    if (to === undefined) return undefined;
    const kind = this.registry.chain(chainId)?.kind;
    if (!kind) throw new AdminRefusal(409, `chain ${chainId} of the deposit is not configured: its refund cannot be sent`);
    const canonical = canonicalAddress(kind, to.trim());
    if (!canonical) throw new AdminRefusal(400, `to: ${JSON.stringify(to)} is not ${describeAddressKind(kind)} (chain ${chainId}, the deposit's)`);
    if (canonical === nativeAddress(kind)) throw new AdminRefusal(400, `to: ${canonical} stands for the native currency; a refund sent there is lost`);
    return canonical;
  }

  // The part of a deposit its paid fill did not use, which goes back as an excess: a deposit address's deposit beyond the
  // input the fill was priced at (the quote's, or a fast fill's), and any deposit beyond the input a fast fill was priced
  // at (paid before the deposit came, the fill takes no more of it: kept, a user who deposited the quoted 10 USDC after a
  // fast fill priced at 5 lost the other 5). 0 for any other order: a deposit's own fill is made of all of it.
  #excessOf(d: DepositRow, r: RequestRow): bigint {
    const priced = BigInt(r.fast_fill_input ?? r.amount_in);
    return (r.deposit_address || r.fast_fill_input !== null) && BigInt(d.amount) > priced ? BigInt(d.amount) - priced : 0n;
  }

  /**
   * An operator's withdrawal of what the depository owes the solver (POST /admin/withdrawals), queued through the
   * solver's (fenced) ledger as its own payouts are, so it records the leader's epoch. Throws WithdrawalRefused.
   */
  withdraw(req: Parameters<typeof queueWithdrawal>[1], who: Parameters<typeof queueWithdrawal>[2]): PayoutRow {
    return queueWithdrawal(this.ledger, req, who);
  }

  /**
   * Refunds a request's deposit by an operator's hand (failReason MANUAL_ADMIN_REFUND): a deposit
   * held back (paused, over a limit, dry run), or one that failed without a refund (a blocked
   * depositor, a refund that failed). Refused while anything of the request is paid or being paid, except a deposit
   * address's excess nobody returned (its excess failed, its signed call dead) after the fill (or the refund of the
   * quoted part) paid: that returns the excess alone, as a new excess payout, and the request keeps its status.
   * `to`: another recipient on the deposit's chain than the one the node pays (refundTo, else the depositor), for a
   * recipient that refuses the refund; recorded in the admin action. The admin action is recorded in the same ledger
   * transaction as the payout it queues.
   */
  async manualRefund(
    requestId: Hex,
    who: { actor: string; reason: string },
    opts: { to?: string } = {},
  ): Promise<{ payoutId: string; chainId: number; amount: string; kind: 'refund' | 'excess' }> {
    const snap = await this.#fresh();
    const dead = await this.#deadSignedCalls(requestId);
    const res = this.ledger.tx(() => {
      const r = this.ledger.requests.get(requestId);
      if (!r) throw new AdminRefusal(404, `request ${requestId} not found`);
      const payouts = this.ledger.payouts.forRequest(requestId);
      const live = payouts.find((p) => (p.kind === 'fill' || p.kind === 'refund') && p.state !== 'failed' && p.state !== 'success');
      if (live) throw new AdminRefusal(409, `request ${requestId} has a ${p(live)}`);
      const paid = payouts.find((p) => (p.kind === 'fill' || p.kind === 'refund') && p.state === 'success');
      if (paid) return this.#manualExcess(r, paid, snap, dead, who, opts.to);
      const held = this.ledger.deposits.byOrderRef(r.id).find((d) => d.state === 'confirmed');
      // Never a deposit a reorg took back: its refund would come out of money the depository never got.
      const d = held ?? this.ledger.deposits.forRequest(requestId).find((x) => x.state !== 'reorged');
      if (!d) throw new AdminRefusal(409, `request ${requestId} has no deposit to refund`);
      // Nor one a reorg took back after the node acted (it stays 'handled': its payout was signed): the request records
      // DEPOSIT_REORGED, and a refund would be paid out of other users' deposits.
      if (r.fail_reason === 'DEPOSIT_REORGED')
        throw new AdminRefusal(409, `request ${requestId}: a reorg took its deposit back after the node acted; the depository does not hold it`);
      const usual = r.kind === 'order' && d.chain_id === r.origin_chain_id ? (r.refund_to ?? d.depositor) : d.depositor;
      const to = this.#operatorRecipient(d.chain_id, opts.to);
      const now = Date.now();
      if (held) {
        this.ledger.deposits.markHandled(held.id, requestId);
        this.ledger.operations.release(held.id);
      }
      this.ledger.requests.setStatus(requestId, 'failure', { failReason: 'MANUAL_ADMIN_REFUND' }, now);
      // Its signed deposit still unsigned in the queue is not sent after the refund (it took the tokens again, back as a
      // DOUBLE_SPEND less two transactions' gas).
      this.#dropSignedDeposit(requestId, 'MANUAL_ADMIN_REFUND', now);
      const actionId = this.ledger.operations.record(
        {
          action: 'refund',
          target: `request:${requestId}`,
          actor: who.actor,
          reason: who.reason,
          detail: { deposit: d.id, kind: 'refund', ...(to ? { to, insteadOf: usual } : {}) },
        },
        now,
      );
      // A currency the node does not configure (a user's wrong token) has no refund cost or price: the node never
      // refunds it on its own (MANUAL_REFUND_REQUIRED), and the operator's refund returns it whole, the solver bearing
      // the gas. Refused, nothing the node offers could return it.
      const unpriced = this.registry.chains.has(d.chain_id) && !this.registry.currency(d.chain_id, d.currency);
      const cost = unpriced ? 0n : this.#refundCost(d.chain_id, d.currency, snap, d);
      // Less the gas its fills and refunds (and an excess none returned since) burned reverting on chain of the caller's
      // making, as the automatic refund bears a failed fill's: given back, a fill and a refund to recipients that take
      // ether only in a simulation cost the solver two reverted transactions an order, as often as anyone sent one.
      const kinds = this.ledger.payouts.forDeposit(d.id).some((x) => x.kind === 'excess' && x.state === 'success') ? FILL_REFUND : FILL_REFUND_EXCESS;
      const burned = cost === undefined ? 0n : this.#callerBurned(d, snap, kinds);
      const amount = cost === undefined ? undefined : BigInt(this.#unreturned(d, r, dead).amount) - cost - burned;
      if (amount === undefined || amount <= 0n) throw new AdminRefusal(409, `the deposit of ${requestId} cannot pay its own refund`);
      if (this.#returned(d.id, dead) + amount > BigInt(d.amount)) {
        throw new AdminRefusal(409, `the deposit of ${requestId} was returned already, in part or whole: a refund would return more than it brought`);
      }
      const id = `refund:${requestId}:admin:${actionId}`;
      this.ledger.payouts.insert({
        id,
        kind: 'refund',
        request_id: requestId,
        deposit_id: d.id,
        chain_id: d.chain_id,
        recipient: to ?? usual,
        currency: d.currency,
        amount: amount.toString(),
        decided_at: now,
      });
      return { payoutId: id, chainId: d.chain_id, amount: amount.toString(), kind: 'refund' as const };
    });
    this.log.warn({ requestId, actor: who.actor, payout: res.payoutId, kind: res.kind }, 'manual refund queued by an operator');
    this.chains.payoutsQueued(res.chainId);
    return res;
  }

  // The operator's return of a deposit address's excess after the request was paid (its fill, or the refund of the
  // quoted part): only the excess (the rest paid the fill), and only while no excess of it may still pay (one queued,
  // sent, paid, or failed with its signed call executable or executed). Inside manualRefund's ledger transaction.
  #manualExcess(
    r: RequestRow,
    paid: PayoutRow,
    snap: Snapshot,
    dead: ReadonlySet<string>,
    who: { actor: string; reason: string },
    toGiven: string | undefined,
  ): { payoutId: string; chainId: number; amount: string; kind: 'excess' } {
    const d = paid.deposit_id ? this.ledger.deposits.get(paid.deposit_id) : undefined;
    const excess = d ? this.#excessOf(d, r) : 0n;
    if (!d || excess === 0n) throw new AdminRefusal(409, `request ${r.id} has a ${p(paid)}`);
    // Never a deposit a reorg took back: the depository does not hold it.
    if (d.state === 'reorged' || r.fail_reason === 'DEPOSIT_REORGED')
      throw new AdminRefusal(409, `request ${r.id} has no deposit to refund: a reorg took it back`);
    // Nor one a withdrawal took: with no excess of it on its way, it was owed to the solver whole (a fast fill settled
    // before its excess was returned, an excess at most its own return's gas), and the depository paid all of it to the
    // solver; its excess from there would come out of other users' deposits. The solver's wallet holds it now.
    const taken = this.ledger.withdrawals.takenBy(d.id);
    if (taken)
      throw new AdminRefusal(
        409,
        `the deposit of ${r.id} was taken by withdrawal ${taken}: the depository no longer holds its excess; return it from the solver's wallet`,
      );
    const pending = this.ledger.payouts.forDeposit(d.id).find((x) => x.kind === 'excess' && this.#mayPay(x, dead));
    if (pending) throw new AdminRefusal(409, `request ${r.id} has a ${p(pending)}: its excess is returned or being returned`);
    const usual = r.refund_to ?? d.depositor;
    const to = this.#operatorRecipient(d.chain_id, toGiven);
    // An excess bears its own gas, never the sweep's: the fill paid that.
    const cost = this.#refundCost(d.chain_id, d.currency, snap);
    // Less the gas its failed excesses burned reverting on chain of the caller's making (manualRefund's reason).
    const amount = cost === undefined ? undefined : excess - cost - this.#callerBurned(d, snap, EXCESS);
    if (amount === undefined || amount <= 0n) throw new AdminRefusal(409, `the excess of ${r.id} cannot pay its own return`);
    // What the paid fill used stays paid: never more back than the deposit brought beyond it. Returned before (a
    // paid refund) may be the quoted part at most: a refund of the whole deposit returned the excess with it.
    const used = paid.kind === 'fill' ? BigInt(d.amount) - excess : 0n;
    const before = this.#returned(d.id, dead);
    if (before > BigInt(d.amount) - used - excess || before + amount > BigInt(d.amount) - used) {
      throw new AdminRefusal(409, `the deposit of ${r.id} was returned already, in part or whole: its excess would return more than it brought`);
    }
    const now = Date.now();
    const actionId = this.ledger.operations.record(
      {
        action: 'refund',
        target: `request:${r.id}`,
        actor: who.actor,
        reason: who.reason,
        detail: { deposit: d.id, kind: 'excess', ...(to ? { to, insteadOf: usual } : {}) },
      },
      now,
    );
    const id = `excess:${r.id}:admin:${actionId}`;
    this.ledger.payouts.insert({
      id,
      kind: 'excess',
      request_id: r.id,
      deposit_id: d.id,
      chain_id: d.chain_id,
      recipient: to ?? usual,
      currency: d.currency,
      amount: amount.toString(),
      decided_at: now,
    });
    return { payoutId: id, chainId: d.chain_id, amount: amount.toString(), kind: 'excess' };
  }

  /** What a confirmed funding transaction moved to the solver: credited once, at its USD worth. */
  async onFunding(t: FundingTransfer): Promise<void> {
    let micro = 0n;
    const what: string[] = [];
    const parts = t.parts.filter((p) => this.registry.currency(t.chainId, p.currency));
    for (const p of parts) {
      const cur = this.registry.currency(t.chainId, p.currency)!;
      micro += usdMicro(p.amount, cur.decimals, await this.prices.usdPrice(cur));
      what.push(`${p.amount} ${cur.symbol}`);
    }
    if (!parts.length || micro <= 0n) return;
    const booked = this.ledger.tx(() =>
      this.ledger.funding.credit(
        { chain_id: t.chainId, tx_hash: t.txHash, block_number: t.blockNumber, block_hash: t.blockHash, sender: t.from, wallet: t.credited, parts, micro },
        `${what.join(' + ')} from ${t.from}`,
      ),
    );
    if (booked) this.log.info({ wallet: t.credited, micro: micro.toString(), tx: t.txHash }, 'app balance credited');
  }

  /** Funds worth sweeping reached a deposit address (its chain's watcher reports them): queues the sweep, in one ledger transaction. */
  onDepositAddressFunded(f: DepositAddressFunding): boolean {
    return this.ledger.tx(() => queueSweep(this.ledger, f));
  }

  // ---- PayoutHooks: called by submitters inside their ledger transaction ----

  onSigned(payout: PayoutRow): void {
    if (payout.kind === 'relay') return onRelaySigned(this.ledger, payout);
    if (payout.kind !== 'fill') return;
    this.ledger.requests.setStatus(payout.request_id!, 'submitted');
    const confirmedAt = payout.deposit_id ? this.ledger.deposits.confirmedAt(payout.deposit_id) : null;
    if (confirmedAt) this.metrics.depositToFill.observe({ chain: payout.chain_id }, (Date.now() - confirmedAt) / 1000);
  }

  onPaid(payout: PayoutRow, txHash: string, fee: bigint): void {
    if (payout.kind === 'relay') {
      onRelayPaid(this.ledger, payout, txHash, fee);
      this.log.info({ requestId: payout.request_id, txHash, fee: fee.toString() }, 'gasless relay succeeded; sponsor charged');
      return;
    }
    if (payout.kind === 'claim' || payout.kind === 'sweep' || payout.kind === 'excess' || payout.kind === 'deposit' || payout.kind === 'withdrawal') {
      // None of these moves the request's status: a sweep's or a signed deposit's deposit event is
      // indexed like any other.
      forRequest(this.log, payout.request_id).info({ payout: payout.id, amount: payout.amount }, `${payout.kind} paid`);
      return;
    }
    this.ledger.requests.setStatus(payout.request_id!, payout.kind === 'fill' ? 'success' : 'refund');
    // A fast fill's deposit may be waiting for this outcome.
    if (payout.kind === 'fill' && !payout.deposit_id) queueMicrotask(() => this.wake());
    if (payout.kind === 'fill') {
      // The request's and the deposit's fields the fees need, not their whole rows (a fill of every batch reads them).
      const r = this.ledger.requests.feeBasis(payout.request_id!)!;
      const amount = payout.deposit_id ? this.ledger.deposits.amountOf(payout.deposit_id) : undefined;
      const d = amount === undefined ? undefined : { amount };
      // The fees are those of what the fill was made of: the deposit less a deposit address's overpayment
      // (it went back on its own); a fast fill's, paid before its deposit, the input it was priced at (a
      // caller naming a small input must not earn fees on the quote's); a swap's, at the rate it paid at.
      const filledFrom = d ? BigInt(d.amount) - overpaid(d, r) : BigInt(r.fast_fill_input ?? r.amount_in);
      if (r.pricing) accrueAppFees(this.ledger, r, breakdown(filledFrom, pricedAt(JSON.parse(r.pricing) as Pricing, payout.rate)));
      // A signed fill that lands after a reorg took its deposit back: its fees were never earned (src/solver/reorgs.ts).
      if (d && r.fail_reason === 'DEPOSIT_REORGED') reverseAppFees(this.ledger, r.id);
    }
    (payout.kind === 'fill' ? this.metrics.fills : this.metrics.refunds).inc({ chain: payout.chain_id, outcome: 'success' });
  }

  onFailed(payout: PayoutRow, reason: FailReason, txHash?: string, callData?: string): void {
    const now = Date.now();
    this.metrics.payoutsFailed.inc({ chain: payout.chain_id, kind: payout.kind });
    const log = forRequest(this.log, payout.request_id);
    if (payout.kind === 'relay') {
      onRelayFailed(this.ledger, payout, reason, txHash);
      log.warn({ reason, txHash }, 'gasless relay failed');
      return;
    }
    if (callData && payout.request_id) this.ledger.requests.setFailedCallData(payout.request_id, callData);
    if (payout.kind === 'claim') {
      // A claim whose transaction reached the chain and reverted there (its recipient refused it after the estimate)
      // bears the gas it burned, in the claimed currency at the snapshot's prices (none when one is unknown).
      const snap = this.#snapshot;
      const burned = snap && CALLER_FAILURES.has(reason) ? this.#burnedBy(payout, payout, snap) : 0n;
      reverseClaim(this.ledger, payout, burned);
      log.error({ payout: payout.id, reason }, 'app fee claim failed; the fees are owed again');
      return;
    }
    if (payout.kind === 'withdrawal') {
      // Its signed depository call went out with a transaction: public, valid until it expires, and anyone may submit
      // it once the depository holds enough. Its deposits stay taken until the chain shows it expired unexecuted
      // (#releaseDeadWithdrawals): released now, the next withdrawal took them again, and the old call a second time.
      if (this.ledger.payouts.txsOf(payout.id).length > 0) {
        this.#liveWithdrawals?.set(payout.id, 0);
        log.error({ payout: payout.id, chain: payout.chain_id, reason }, 'withdrawal failed; its deposits stay taken until its signed call expires');
        return;
      }
      // Nothing left the depository, and nothing can: its deposits are owed to the solver again.
      this.ledger.withdrawals.release(payout.id);
      log.error({ payout: payout.id, chain: payout.chain_id, reason }, 'withdrawal failed; its deposits are withdrawable again');
      return;
    }
    if (payout.kind === 'deposit') {
      // The signed deposit never happened: nothing was taken from the user, nothing to refund; a sponsor pays the
      // gas a reverted one burned.
      const native = this.registry.native(payout.chain_id);
      const usdPrice = this.#snapshot?.prices.get(key(payout.chain_id, native.address)) ?? native.usdPrice;
      onSignedDepositFailed(this.ledger, payout, reason, txHash, { decimals: native.decimals, usdPrice }, now);
      log.warn({ payout: payout.id, reason, txHash }, 'signed deposit failed');
      return;
    }
    if (payout.kind === 'sweep' || payout.kind === 'excess') {
      // The funds stay where they are (the deposit address, or the depository): an operator must look.
      log.error({ payout: payout.id, reason }, `${payout.kind} failed; manual action required`);
      return;
    }
    if (payout.kind === 'refund') {
      this.ledger.requests.setStatus(payout.request_id!, 'failure', { refundFailReason: 'MANUAL_REFUND_REQUIRED' }, now);
      this.metrics.refunds.inc({ chain: payout.chain_id, outcome: 'failed' });
      log.error({ payout: payout.id, reason }, 'refund failed; manual refund required');
      return;
    }
    this.metrics.fills.inc({ chain: payout.chain_id, outcome: 'failed' });
    // A reorg took the deposit back after this fill was signed: the depository does not hold it, so a refund would be
    // paid out of other users' deposits. The request fails keeping DEPOSIT_REORGED (what owed() and the audit read:
    // should the deposit come back on chain after all, the audit names it for an operator).
    if (payout.deposit_id && this.ledger.requests.get(payout.request_id!)?.fail_reason === 'DEPOSIT_REORGED') {
      this.ledger.requests.setStatus(payout.request_id!, 'failure', {}, now);
      reverseSponsor(this.ledger, payout.request_id!);
      log.error({ payout: payout.id, reason, deposit: payout.deposit_id }, 'fill failed after a reorg took its deposit back: nothing refunded');
      return;
    }
    this.ledger.requests.setStatus(payout.request_id!, 'failure', { failReason: reason }, now);
    const d = payout.deposit_id ? this.ledger.deposits.get(payout.deposit_id) : undefined;
    const r = this.ledger.requests.get(payout.request_id!) as RequestRow;
    if (!d) {
      reverseSponsor(this.ledger, r.id);
      // A fast fill (paid before any deposit) that failed: the app is charged nothing but the gas its transactions
      // burned on chain (as a deposit's refund bears it), and a deposit that comes is refunded (match: a fast fill
      // settles a deposit only when it paid).
      releaseHold(this.ledger, r.id, reason);
      // The order failed: its signed deposit still unsigned in the queue is not sent only to come back as a refund less
      // its gas and the refund's. One already sent lands and is refunded so.
      this.#dropSignedDeposit(r.id, reason, now);
      const burned = CALLER_FAILURES.has(reason) ? this.#gasBurned(payout) : 0n;
      const native = this.registry.native(payout.chain_id);
      const price = this.#snapshot?.prices.get(key(payout.chain_id, native.address)) ?? native.usdPrice;
      if (burned > 0n) chargeFastFillGas(this.ledger, r.id, usdMicroCeil(burned, native.decimals, price), reason);
      queueMicrotask(() => this.wake());
      return;
    }
    const snap = this.#snapshot;
    const left = this.#unreturned(d, r);
    // A fill that reached the chain and did not pay there (its calls or its recipient reverted after the
    // estimate; a batch that skipped it, before it failed alone) burned the solver's gas on the caller's
    // behalf, and a caller who can make that happen could repeat it at will: the refund bears that gas.
    const burned = snap && CALLER_FAILURES.has(reason) ? this.#burnedBy(payout, d, snap) : 0n;
    // A sponsored order's deposit may be far smaller than that gas (the sponsor paid the fees): what it cannot bear stays
    // charged to the sponsor, who took the order's execution on. Reversed whole, a sponsored 1 gwei bridge to a recipient
    // that reverts on chain cost the solver its fill's gas (96,255,728,510,670 wei) as often as anyone sent one.
    const short = burned > BigInt(left.amount) ? burned - BigInt(left.amount) : 0n;
    reverseSponsor(this.ledger, r.id, snap && short > 0n ? this.#usdMicro(d.chain_id, d.currency, short, snap) : 0n);
    const refundable = burned > 0n ? { ...left, amount: (BigInt(left.amount) - burned).toString() } : left;
    const chain = snap ? this.#queueRefund(r.id, refundable, r.refund_to ?? d.depositor, snap, now) : undefined;
    if (!snap) {
      this.ledger.requests.setStatus(r.id, 'failure', { refundFailReason: 'MANUAL_REFUND_REQUIRED' }, now);
      log.error({ payout: payout.id, reason, deposit: d.id }, 'fill failed before the solver could read refund costs; manual refund required');
    }
    // The refund is on another chain than the failed fill; wake its submitter once this commits.
    if (chain !== undefined) queueMicrotask(() => this.chains.payoutsQueued(chain));
  }
}
