import type { RiskConfig } from '../config/schema.ts';
import type { Registry } from '../config/registry.ts';
import { canonicalAddress } from '../chains/address.ts';
import type { Ledger } from '../ledger/index.ts';
import { switchName } from '../ledger/operations.ts';
import type { DepositRow } from '../ledger/types.ts';
import type { FailReasonOf, PostponeReason } from '../ledger/reasons.ts';
import { usdMicro } from '../lib/money.ts';
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

  /** micro-USD of fills decided on a destination chain in the hour before `now` (not failed). */
  outflowUsd(chainId: number, usd: UsdOf, now = Date.now()): bigint {
    const native = this.registry.native(chainId).address;
    let total = 0n;
    for (const row of this.ledger.payouts.fillsSince(chainId, now - HOUR_MS)) {
      total += usd(chainId, row.currency, BigInt(row.amount));
      if (row.native_topup) total += usd(chainId, native, BigInt(row.native_topup));
    }
    return total;
  }
}
