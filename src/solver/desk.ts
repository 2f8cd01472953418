import type { ChainPorts } from '../chains/ports.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { RiskConfig } from '../config/schema.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow } from '../ledger/types.ts';
import { conversionRate, mulRatioCeil, usdMicro } from '../lib/money.ts';
import type { PriceSource } from '../quote/prices.ts';
import { claimAppFees, type ClaimRequest } from './claims.ts';
import { fastFill, type FastFillInput, type FastFillResult } from './fastFill.ts';
import { admitRelay, type RelayAdmission } from './gaslessRelay.ts';
import type { SolverPort } from './port.ts';
import { RiskPolicy, type UsdOf } from './risk.ts';
import { recordSignedDeposit, type SignedDeposit } from './signedDeposits.ts';

/**
 * The solver's side of the API's requests (SolverPort): each decision is written to the ledger here,
 * and the chain that pays it is woken.
 */
export class SolverDesk implements SolverPort {
  // The same risk controls the solver applies to fills, for the fills the API asks for (fast fills).
  readonly #risk: RiskPolicy;

  constructor(
    private ledger: Ledger,
    private registry: Registry,
    private chains: Pick<ChainPorts, 'costs' | 'payoutsQueued'>,
    private prices: PriceSource,
    risk: RiskConfig,
  ) {
    this.#risk = new RiskPolicy(risk, ledger, registry);
  }

  fastFill(input: Omit<FastFillInput, 'risk'>): Promise<FastFillResult> {
    return fastFill(this.ledger, this.registry, this.chains, this.prices, { ...input, risk: this.#risk });
  }

  async claimAppFees(claim: ClaimRequest, within: () => void): Promise<PayoutRow> {
    const gas = await this.#claimGas(claim.target);
    const usd = await this.#usdOn(claim.target.chainId);
    const payout = this.ledger.tx(() => {
      // A claim pays out of the solver's inventory on its chain: it counts in the chain's hourly outflow budget.
      const p = claimAppFees(this.ledger, this.registry, claim, gas, Date.now(), { risk: this.#risk, usd });
      within();
      return p;
    });
    this.chains.payoutsQueued(payout.chain_id);
    return payout;
  }

  // A claim's gas on its chain (a refund's: one transfer), in the claimed currency at current prices, rounded up.
  async #claimGas(target: Currency): Promise<bigint> {
    const costs = this.chains.costs(target.chainId);
    if (!costs) throw new Error(`chain ${target.chainId} has no cost oracle`);
    const native = this.registry.native(target.chainId);
    const [wei, nativePrice, price] = await Promise.all([costs.refundCost(target.address), this.prices.usdPrice(native), this.prices.usdPrice(target)]);
    return mulRatioCeil(wei, conversionRate(nativePrice, native.decimals, price, target.decimals));
  }

  // micro-USD worth of amounts on a chain at current prices (a currency whose price cannot be read now at its configured
  // one, as the solver's snapshot does), read before the ledger transaction: the outflow budget values the claim and
  // the hour's payouts with it. A chain without a budget reads no price.
  async #usdOn(chainId: number): Promise<UsdOf> {
    const prices = new Map<string, string>();
    if (this.#risk.outflowBudget(chainId) !== undefined) {
      await Promise.all(this.registry.currenciesOf(chainId).map(async (c) => prices.set(c.address, await this.prices.usdPrice(c).catch(() => c.usdPrice))));
    }
    return (chain, currency, amount) => {
      const c = this.registry.currency(chain, currency);
      if (!c || amount === 0n) return 0n;
      return usdMicro(amount, c.decimals, (chain === chainId ? prices.get(c.address) : undefined) ?? c.usdPrice);
    };
  }

  async admitRelay(admission: RelayAdmission) {
    // The relay's value pays out of the solver's inventory on its chain: it counts in the chain's hourly outflow budget.
    const usd = await this.#usdOn(admission.chainId);
    const native = this.registry.native(admission.chainId).address;
    const { requestId } = admitRelay(this.ledger, admission, (value) => this.#risk.outflowRefusal(admission.chainId, native, value, usd));
    this.chains.payoutsQueued(admission.chainId);
    return { requestId };
  }

  submitSignedDeposit(deposit: SignedDeposit): void {
    recordSignedDeposit(this.ledger, deposit);
    this.chains.payoutsQueued(deposit.request.origin_chain_id);
  }
}
