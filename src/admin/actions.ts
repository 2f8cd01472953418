import { ApiError } from '../api/errors.ts';
import type { ReindexResult } from '../chains/adapter.ts';
import type { Reindexer } from '../chains/ports.ts';
import type { ChainKind } from '../chains/address.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow } from '../ledger/types.ts';
import { switchName } from '../ledger/operations.ts';

/** Who asks for an admin action, and why: both are recorded with it. */
export interface Who {
  actor: string;
  reason: string;
}

/** What a pause covers: every payout, the payouts on one chain, or the fills of one route. */
export type PauseScope = { scope: 'all' } | { scope: 'chain'; chainId: number } | { scope: 'route'; originChainId: number; destinationChainId: number };

function nameOf(s: PauseScope): { name: string; target: string } {
  if (s.scope === 'all') return { name: switchName.all, target: 'all' };
  if (s.scope === 'chain') return { name: switchName.chain(s.chainId), target: `chain:${s.chainId}` };
  return { name: switchName.route(s.originChainId, s.destinationChainId), target: `route:${s.originChainId}:${s.destinationChainId}` };
}

/** Pauses payouts in a scope; false when it was paused already (nothing is recorded then). */
export function pause(ledger: Ledger, s: PauseScope, who: Who): boolean {
  const { name, target } = nameOf(s);
  return ledger.tx(() => {
    if (!ledger.operations.switchOn(name, who.actor, who.reason)) return false;
    ledger.operations.record({ action: 'pause', target, actor: who.actor, reason: who.reason });
    return true;
  });
}

/** Resumes payouts in a scope (also a pause the loss breaker made); false when it was not paused. */
export function resume(ledger: Ledger, s: PauseScope, who: Who): boolean {
  const { name, target } = nameOf(s);
  return ledger.tx(() => {
    const was = ledger.operations.switches().find((x) => x.name === name);
    if (!ledger.operations.switchOff(name)) return false;
    ledger.operations.record({ action: 'resume', target, actor: who.actor, reason: who.reason, detail: { pausedBy: was?.actor, pausedFor: was?.reason } });
    return true;
  });
}

/** Turns dry-run mode on or off; false when it already was so. */
export function setDryRun(ledger: Ledger, on: boolean, who: Who): boolean {
  return ledger.tx(() => {
    const changed = on ? ledger.operations.switchOn(switchName.dryRun, who.actor, who.reason) : ledger.operations.switchOff(switchName.dryRun);
    if (changed) ledger.operations.record({ action: on ? 'dry-run-on' : 'dry-run-off', actor: who.actor, reason: who.reason });
    return changed;
  });
}

export interface StuckItem {
  state: 'waiting' | 'retrying' | 'failed';
  /** A typed reason: a postponement reason, a payout's or request's fail reason. */
  reason: string;
  requestId: string | null;
  depositId: string | null;
  payoutId: string | null;
  chainId: number;
  amount: string;
  currency: string;
  ageMs: number;
}

// How long a payout may stay sent, its one transaction unsettled, before it is listed (SENT_UNSETTLED): one settles
// within blocks, and one held longer waits on something the node cannot settle alone (an SVM expiry no provider can
// prove, an exchange action refused for funds, a transaction at the fee cap with no replacement).
const SENT_UNSETTLED_AFTER_MS = 10 * 60_000;

/**
 * Payouts and deposits an operator may have to look at: waiting (held back by a limit, a pause or
 * dry run; queued on a paused chain; queued out of a deposit its chain does not hold as canonical yet, by `mayPay`;
 * unconfirmed on a chain no longer in `configured`; sent 10 minutes ago and not settled), retrying (re-signed at least once, not yet made) and failed (a payout that failed, a deposit left for
 * manual refund).
 */
export function stuck(ledger: Ledger, now = Date.now(), configured?: ReadonlySet<number>, mayPay?: (p: PayoutRow) => boolean): StuckItem[] {
  const out: StuckItem[] = [];
  // No indexer confirms them any more: listed nowhere else, they would wait unseen (the oldest 1,000 of a chain).
  for (const d of configured ? ledger.deposits.unconfirmedOutside(configured, 1_000) : []) {
    out.push({
      state: 'waiting',
      reason: 'CHAIN_NOT_CONFIGURED',
      requestId: d.order_ref,
      depositId: d.id,
      payoutId: null,
      chainId: d.chain_id,
      amount: d.amount,
      currency: d.currency,
      ageMs: now - d.seen_at,
    });
  }
  for (const p of ledger.operations.postponed()) {
    out.push({
      state: 'waiting',
      reason: p.reason,
      requestId: p.order_ref,
      depositId: p.deposit_id,
      payoutId: null,
      chainId: p.chain_id,
      amount: p.amount,
      currency: p.currency,
      ageMs: now - p.first_at,
    });
  }
  const switches = new Set(ledger.operations.switches().map((s) => s.name));
  const rows = ledger.payouts.unsettled();
  for (const p of rows) {
    const base = {
      requestId: p.request_id,
      depositId: p.deposit_id,
      payoutId: p.id,
      chainId: p.chain_id,
      amount: p.amount,
      currency: p.currency,
      ageMs: now - p.decided_at,
    };
    if (p.state === 'failed') out.push({ state: 'failed', reason: p.fail_reason ?? 'UNKNOWN', ...base });
    else if (p.state === 'queued' && switches.has(switchName.dryRun)) out.push({ state: 'waiting', reason: 'DRY_RUN', ...base });
    else if (p.state === 'queued' && switches.has(switchName.all)) out.push({ state: 'waiting', reason: 'PAUSED_ALL', ...base });
    else if (p.state === 'queued' && switches.has(switchName.chain(p.chain_id))) out.push({ state: 'waiting', reason: 'PAUSED_CHAIN', ...base });
    else if (p.state === 'queued' && mayPay && !mayPay(p)) out.push({ state: 'waiting', reason: 'DEPOSIT_UNCHECKED', ...base });
    else if (p.txs > 1) out.push({ state: 'retrying', reason: 'REPLACED', ...base });
    else if (p.state === 'sent' && now - p.updated_at >= SENT_UNSETTLED_AFTER_MS) out.push({ state: 'waiting', reason: 'SENT_UNSETTLED', ...base });
  }
  // Failed deposits nobody refunds on their own (a blocked depositor, a refund the chain refused).
  const manual = ledger.requests.manualRefundsOwed();
  for (const r of manual) {
    if (out.some((o) => o.requestId === r.id && o.state === 'failed')) continue;
    out.push({
      state: 'failed',
      reason: r.fail_reason ?? 'MANUAL_REFUND_REQUIRED',
      requestId: r.id,
      depositId: r.deposit_id,
      payoutId: null,
      chainId: r.chain_id,
      amount: r.amount,
      currency: r.currency,
      ageMs: now - r.updated_at,
    });
  }
  return out;
}

// Why a chain's indexer offers no re-index of a range.
const reindexUnsupported: Partial<Record<ChainKind, string>> = {
  svm:
    "its indexer reads each vault address's signatures newest first down to its cursor, so re-reading a slot range means paging through every signature since; " +
    'a missed deposit is read by its signature instead (POST /transactions/index)',
  exchange: "its indexer follows the exchange's transfer ledger by its own cursor, not blocks",
};

/**
 * Makes a chain's indexer read deposits again over [fromBlock, toBlock] (blocks it has passed),
 * bounded by `maxBlocks`, recorded as an admin action with who and why in the transaction that
 * writes what it found. A deposit already recorded is not recorded again; a missed one is recorded
 * and confirmed, and the solver decides it like any other. Refused (400) for a range the chain's
 * indexer has not reached yet, one too wide, or a chain whose indexer cannot re-read a range.
 */
export async function reindex(
  ledger: Ledger,
  chain: Reindexer | undefined,
  range: { chainId: number; fromBlock: number; toBlock: number },
  maxBlocks: number,
  who: Who,
): Promise<ReindexResult> {
  const { chainId, fromBlock, toBlock } = range;
  if (!chain) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `chainId ${chainId} is not a chain of this node`);
  if (toBlock < fromBlock) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `toBlock ${toBlock} is below fromBlock ${fromBlock}`);
  if (toBlock - fromBlock + 1 > maxBlocks) {
    throw new ApiError(
      400,
      'INVALID_INPUT_PARAMETERS',
      `the range holds ${toBlock - fromBlock + 1} blocks; at most ${maxBlocks} are re-indexed at once (admin.reindexMaxBlocks)`,
    );
  }
  if (!chain.reindex) {
    const why = reindexUnsupported[chain.kind] ?? 'its indexer cannot re-read a range';
    throw new ApiError(400, 'REINDEX_UNSUPPORTED', `chain ${chainId} (${chain.kind}) offers no re-index by range: ${why}`);
  }
  const indexed = chain.progress().indexed;
  if (toBlock > indexed) {
    throw new ApiError(
      400,
      'INVALID_INPUT_PARAMETERS',
      `chain ${chainId} is indexed up to block ${indexed}; blocks above it are read by the indexer itself (toBlock ${toBlock})`,
    );
  }
  return chain.reindex(fromBlock, toBlock, (r) => {
    ledger.operations.record({ action: 'reindex', target: `chain:${chainId}`, actor: who.actor, reason: who.reason, detail: r });
  });
}
