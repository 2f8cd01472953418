import type { ChainPorts } from '../chains/ports.ts';
import type { Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';
import { switchName } from '../ledger/operations.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { usdMicro } from '../lib/money.ts';
import type { PriceSource } from '../quote/prices.ts';
import { LOSS_BREAKER_ACTOR } from './risk.ts';
import { errText } from '../lib/errors.ts';

/**
 * How much of the solver's holdings on a chain went missing in a way the ledger does not explain
 * (the audit's difference). The loss breaker depends only on this: AuditDifference on EVM chains,
 * the simple balance comparison below elsewhere.
 */
export interface UnexplainedMovement {
  /** micro-USD lost on the chain beyond what the ledger explains (0 when nothing is missing). */
  unexplainedLossUsd(chainId: number): Promise<bigint>;
  /** The operator accepted the chain's balance as it is now: measure from here. */
  rebase(chainId: number): void | Promise<void>;
}

type Amounts = Map<string, bigint>;
const add = (m: Amounts, k: string, v: bigint) => m.set(k, (m.get(k) ?? 0n) + v);

/**
 * The simple difference (the breaker's measure where the audit's, src/audit/auditDifference.ts, cannot be read): the solver wallet's balance of each currency, plus everything the ledger
 * says left it since (fills and app fee claims made, transaction fees), should not fall between two
 * readings. Payouts signed but not yet seen made, and transactions broadcast, may have left already:
 * their amounts and most fees are allowed for, so a payment caught between the chain and the ledger
 * never reads as a loss.
 */
export class BalanceDrift implements UnexplainedMovement {
  #baseline = new Map<number, Amounts>();
  constructor(
    private ledger: Ledger,
    private registry: Registry,
    private chains: Pick<ChainPorts, 'wallet'>,
    private prices: PriceSource,
  ) {}

  // What the ledger says left the solver's wallet (made: `spent`) or may have (in flight: `allowance`).
  #ledgerOutflow(chainId: number, solver: string): { spent: Amounts; allowance: Amounts } {
    const native = this.registry.native(chainId).address;
    const spent: Amounts = new Map();
    const allowance: Amounts = new Map();
    // Summed by the ledger (a row per currency and state): reading every payout and transaction row every check cost the event loop.
    const out = this.ledger.payouts.outflowSums(chainId, solver);
    for (const p of out.payouts) {
      const m = p.state === 'success' ? spent : allowance;
      add(m, p.currency, p.amount);
      if (p.nativeTopup) add(m, native, p.nativeTopup);
    }
    if (out.fees) add(spent, native, out.fees);
    if (out.openCost) add(allowance, native, out.openCost);
    return { spent, allowance };
  }

  // Each currency's balance plus what the ledger says was spent: constant unless money moved unexplained.
  async #reading(chainId: number): Promise<{ level: Amounts; allowance: Amounts } | undefined> {
    const a = this.chains.wallet(chainId);
    if (!a) return undefined;
    const currencies = this.registry.currenciesOf(chainId);
    const held = await Promise.all(currencies.map((c) => a.balanceOf(a.solver, c.address)));
    // The ledger is read after the chain: a payment made in between counts as spent, never as lost.
    const { spent, allowance } = this.#ledgerOutflow(chainId, a.solver);
    const level: Amounts = new Map();
    currencies.forEach((c, i) => level.set(c.address, held[i]! + (spent.get(c.address) ?? 0n)));
    return { level, allowance };
  }

  async unexplainedLossUsd(chainId: number): Promise<bigint> {
    const now = await this.#reading(chainId);
    if (!now) return 0n;
    const base = this.#baseline.get(chainId);
    if (!base) {
      this.#baseline.set(chainId, now.level);
      return 0n;
    }
    let loss = 0n;
    for (const c of this.registry.currenciesOf(chainId)) {
      const missing = (base.get(c.address) ?? 0n) - (now.level.get(c.address) ?? 0n) - (now.allowance.get(c.address) ?? 0n);
      if (missing > 0n) loss += usdMicro(missing, c.decimals, await this.prices.usdPrice(c));
    }
    // Money that arrived (a funding transfer, a withdrawal) raises the level: later losses are measured from it.
    for (const [k, v] of now.level) if (v > (base.get(k) ?? 0n)) base.set(k, v);
    return loss;
  }

  rebase(chainId: number): void {
    this.#baseline.delete(chainId);
  }
}

/**
 * Pauses payouts on a chain when its unexplained loss exceeds the tolerance, until an operator
 * resumes the chain (any process: the pause is a ledger switch). The trip is an admin action.
 */
export class LossBreaker {
  // Chains seen paused by the breaker: when the pause is gone, an operator resumed, and the
  // balance as it is then is the new baseline.
  #tripped = new Set<number>();
  #checking: Promise<void> | undefined;
  constructor(
    private movement: UnexplainedMovement,
    private ledger: Ledger,
    private toleranceMicroUsd: bigint,
    private chainIds: number[],
    private metrics: Metrics,
    private log: Logger,
  ) {}

  /** Checks every chain once (a check still running is not doubled). */
  async check(): Promise<void> {
    if (this.#checking) return;
    this.#checking = (async () => {
      for (const chainId of this.chainIds) await this.#checkChain(chainId);
    })().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  /** A check that starts now, after the one running (if any) ends. */
  async checkNow(): Promise<void> {
    while (this.#checking) await this.#checking.catch(() => {});
    return this.check();
  }

  async #checkChain(chainId: number): Promise<void> {
    const pause = this.ledger.operations.switches().find((s) => s.name === switchName.chain(chainId));
    if (pause?.actor === LOSS_BREAKER_ACTOR) {
      this.#tripped.add(chainId);
      this.metrics.breakerTripped.set({ chain: chainId }, 1);
      return;
    }
    if (this.#tripped.has(chainId)) {
      try {
        await this.movement.rebase(chainId);
      } catch (e) {
        this.log.warn({ chain: chainId, err: errText(e) }, 'loss breaker could not take the balance after the resume; trying again');
        return;
      }
      this.#tripped.delete(chainId);
    }
    this.metrics.breakerTripped.set({ chain: chainId }, 0);
    let loss: bigint;
    try {
      loss = await this.movement.unexplainedLossUsd(chainId);
    } catch (e) {
      this.log.warn({ chain: chainId, err: errText(e) }, 'loss breaker could not read the balance');
      return;
    }
    this.metrics.unexplainedLoss.set({ chain: chainId }, Number(loss) / 1e6);
    if (loss <= this.toleranceMicroUsd || pause) return;
    const reason = `unexplained balance loss of ${loss} micro-USD (tolerance ${this.toleranceMicroUsd})`;
    const tripped = this.ledger.tx(() => {
      if (!this.ledger.operations.switchOn(switchName.chain(chainId), LOSS_BREAKER_ACTOR, reason)) return false;
      this.ledger.operations.record({ action: 'pause', target: `chain:${chainId}`, actor: LOSS_BREAKER_ACTOR, reason, detail: { lossMicroUsd: loss } });
      return true;
    });
    if (tripped) {
      this.#tripped.add(chainId);
      this.metrics.breakerTripped.set({ chain: chainId }, 1);
      this.log.error({ chain: chainId, lossMicroUsd: loss.toString() }, 'loss breaker tripped: payouts on the chain paused until an operator resumes it');
    }
  }
}
