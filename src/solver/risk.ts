import type { RiskConfig } from '../config/schema.ts';
import type { Registry } from '../config/registry.ts';
import { canonicalAddress } from '../chains/address.ts';
import type { Ledger } from '../ledger/index.ts';
import { switchName } from '../ledger/operations.ts';
import type { DepositRow } from '../ledger/types.ts';
import type { FailReasonOf, PostponeReason } from '../ledger/reasons.ts';
import { formatUsd, usdMicro } from '../lib/money.ts';
import type { Decision } from './match.ts';

/** Why a limit, a pause or dry-run mode holds a confirmed deposit back (recorded in the postponements table). */
export type RiskPostponeReason = Exclude<PostponeReason, 'FAST_FILL_PENDING' | 'ANOTHER_DEPOSIT_PAYS' | 'INVENTORY_UNREADABLE' | 'DECISION_FAILED'>;

/** The failReasons a limit ends an order with (the interface's names). */
export type RiskFailReason = FailReasonOf<'SOLVER_CAPACITY_EXCEEDED' | 'BLOCKED_WALLET'>;

export type Verdict =
  | { kind: 'go' }
  | { kind: 'postpone'; reason: RiskPostponeReason }
  // refund: whether the deposit goes back automatically (not to a blocked depositor).
  | { kind: 'fail'; reason: RiskFailReason; refund: boolean };

/** micro-USD worth of an amount of a currency on a chain, at the solver's current prices. */
export type UsdOf = (chainId: number, currency: string, amount: bigint) => bigint;

/** The actor name the loss breaker records its pauses under. */
export const LOSS_BREAKER_ACTOR = 'loss-breaker';

const HOUR_MS = 3_600_000;
const micro = (usd: string) => usdMicro(1n, 0, usd);

// Wallet lists hold addresses as the operator wrote them; they are compared in every chain kind's
// canonical form, so an EVM address matches whatever its case.
function walletSet(list: string[] | undefined): Set<string> | undefined {
  if (!list) return undefined;
  const out = new Set<string>();
  for (const w of list) {
    out.add(w);
    for (const kind of ['evm', 'svm', 'exchange'] as const) {
      const c = canonicalAddress(kind, w);
      if (c) out.add(c);
    }
  }
  return out;
}

/**
 * The solver's risk limits: pauses, dry run, wallet lists, the largest order per route, USD in
 * flight per origin chain and the hourly outflow per destination chain. `judge` runs inside the
 * decision's ledger transaction, so what it reads of earlier decisions is committed or in the same
 * transaction: two deposits never both fit under a limit that only one fits under.
 */
export class RiskPolicy {
  #denyRecipients;
  #allowRecipients;
  #denyDepositors;
  #allowDepositors;
  constructor(
    private config: RiskConfig,
    private ledger: Ledger,
    private registry: Registry,
  ) {
    this.#denyRecipients = walletSet(config.denyRecipients)!;
    this.#allowRecipients = walletSet(config.allowRecipients);
    this.#denyDepositors = walletSet(config.denyDepositors)!;
    this.#allowDepositors = walletSet(config.allowDepositors);
  }

  /** The configured limits of a chain, if any. */
  #chain(chainId: number) {
    return this.config.chains.find((c) => c.chainId === chainId);
  }

  /** Whether a wallet may be paid (recipient) or served (depositor). */
  blocked(wallet: string | null, role: 'recipient' | 'depositor'): boolean {
    if (!wallet) return false;
    const deny = role === 'recipient' ? this.#denyRecipients : this.#denyDepositors;
    const allow = role === 'recipient' ? this.#allowRecipients : this.#allowDepositors;
    return deny.has(wallet) || (allow !== undefined && !allow.has(wallet));
  }

  /** Whether dry-run mode is on (from the config at start, or an operator). */
  dryRun(): boolean {
    return this.ledger.operations.switches().some((s) => s.name === switchName.dryRun);
  }

  /** What the limits make of the matcher's decision for a deposit. */
  judge(d: DepositRow, decision: Decision, usd: UsdOf, now = Date.now()): Verdict {
    if (decision.kind === 'settle') return { kind: 'go' };
    const switches = new Map(this.ledger.operations.switches().map((s) => [s.name, s]));
    if (switches.has(switchName.dryRun)) return { kind: 'postpone', reason: 'DRY_RUN' };
    // A blocked depositor's deposit is neither filled nor sent back on its own: an operator decides.
    if (this.blocked(d.depositor, 'depositor')) return { kind: 'fail', reason: 'BLOCKED_WALLET', refund: false };
    if (switches.has(switchName.all)) return { kind: 'postpone', reason: 'PAUSED_ALL' };
    // The chain the payout would be made on: the fill's destination, or the refund's origin.
    const payoutChain = decision.kind === 'fill' ? decision.request.destination_chain_id : d.chain_id;
    const chainPause = switches.get(switchName.chain(payoutChain));
    if (chainPause) return { kind: 'postpone', reason: chainPause.actor === LOSS_BREAKER_ACTOR ? 'LOSS_BREAKER' : 'PAUSED_CHAIN' };
    if (decision.kind !== 'fill') return { kind: 'go' };

    const r = decision.request;
    if (this.blocked(r.recipient, 'recipient')) return { kind: 'fail', reason: 'BLOCKED_WALLET', refund: true };
    if (switches.has(switchName.route(r.origin_chain_id, r.destination_chain_id))) return { kind: 'postpone', reason: 'PAUSED_ROUTE' };
    const worth = usd(d.chain_id, d.currency, BigInt(d.amount));
    const route = this.config.routes.find((x) => x.originChainId === r.origin_chain_id && x.destinationChainId === r.destination_chain_id);
    const maxOrder = route?.maxOrderUsd ?? this.config.maxOrderUsd;
    if (maxOrder !== undefined && worth > micro(maxOrder)) return { kind: 'fail', reason: 'SOLVER_CAPACITY_EXCEEDED', refund: true };

    const origin = this.#chain(d.chain_id);
    if (origin?.maxInFlightUsd !== undefined && this.inFlightUsd(d.chain_id, usd) + worth > micro(origin.maxInFlightUsd)) {
      return { kind: 'postpone', reason: 'IN_FLIGHT_LIMIT' };
    }
    const dest = this.#chain(r.destination_chain_id);
    if (dest?.outflowUsdPerHour !== undefined) {
      const out =
        usd(r.destination_chain_id, r.destination_currency, decision.amount) +
        usd(r.destination_chain_id, this.registry.native(r.destination_chain_id).address, decision.topUp);
      if (this.outflowUsd(r.destination_chain_id, usd, now) + out > micro(dest.outflowUsdPerHour)) return { kind: 'postpone', reason: 'OUTFLOW_BUDGET' };
    }
    return { kind: 'go' };
  }

  /** micro-USD of deposits on an origin chain acted on whose fill or deposit is not final yet. */
  inFlightUsd(chainId: number, usd: UsdOf): bigint {
    const chain = this.registry.chains.get(chainId);
    const tip = this.ledger.indexer.tip(chainId)?.number;
    // Chains without blocks the ledger keeps (SVM, the exchange): in flight until the fill is made.
    const final = chain && 'finalityDepth' in chain && tip !== undefined ? tip - chain.finalityDepth : Number.MAX_SAFE_INTEGER;
    let total = 0n;
    for (const row of this.ledger.deposits.inFlight(chainId, final)) total += usd(chainId, row.currency, BigInt(row.amount));
    return total;
  }

  /**
   * micro-USD of what payouts decided on a chain in the hour before `now` (not failed) take out of the solver's
   * inventory there: fills with their native top-ups, app fee claims and sponsored relays' value.
   */
  outflowUsd(chainId: number, usd: UsdOf, now = Date.now()): bigint {
    return this.#outflows(chainId, usd, now).reduce((sum, o) => sum + o.usd, 0n);
  }

  /** The hourly outflow budget of a chain (USD, as configured), if it has one. */
  outflowBudget(chainId: number): string | undefined {
    return this.#chain(chainId)?.outflowUsdPerHour;
  }

  /**
   * Why a payout of `amount` of `currency` decided on a chain at `now` (an app fee claim's) may not be made now: it
   * would take the hour's outflow there past the chain's outflowUsdPerHour. The reason names the budget and when
   * enough of the hour's outflow will have left it (never, for a payout worth more than the whole budget); undefined
   * when the payout fits or the chain has no budget. Run inside the ledger transaction that books the payout, so two
   * payouts never both fit where only one does.
   */
  outflowRefusal(chainId: number, currency: string, amount: bigint, usd: UsdOf, now = Date.now()): string | undefined {
    const budget = this.outflowBudget(chainId);
    if (budget === undefined) return undefined;
    const limit = micro(budget);
    const worth = usd(chainId, currency, amount);
    const rows = this.#outflows(chainId, usd, now);
    let used = rows.reduce((sum, o) => sum + o.usd, 0n);
    if (used + worth <= limit) return undefined;
    const over = `${formatUsd(worth)} USD on chain ${chainId}`;
    if (worth > limit) return `${over} is more than the chain's whole hourly outflow budget (outflowUsdPerHour: ${budget} USD)`;
    const spent = used;
    // The earliest time the hour's window has let go of enough earlier payouts for this one to fit.
    let retryAt = now;
    for (const o of rows.sort((a, b) => a.at - b.at)) {
      used -= o.usd;
      retryAt = o.at + HOUR_MS;
      if (used + worth <= limit) break;
    }
    return (
      `${over} would take the chain's outflow of the last hour (${formatUsd(spent)} USD) past its hourly outflow budget ` +
      `(outflowUsdPerHour: ${budget} USD) until ${new Date(retryAt).toISOString()}`
    );
  }

  // The payouts the hourly outflow budget counts, each with when it was decided and its micro-USD worth.
  #outflows(chainId: number, usd: UsdOf, now: number): { at: number; usd: bigint }[] {
    const native = this.registry.native(chainId).address;
    return this.ledger.payouts.outflowsSince(chainId, now - HOUR_MS).map((row) => ({
      at: Number(row.decided_at),
      usd: usd(chainId, row.currency, BigInt(row.amount)) + (row.native_topup ? usd(chainId, native, BigInt(row.native_topup)) : 0n),
    }));
  }
}
