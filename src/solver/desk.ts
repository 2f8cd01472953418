import type { ChainPorts } from '../chains/ports.ts';
import type { Currency, Registry } from '../config/registry.ts';
import type { RiskConfig } from '../config/schema.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow } from '../ledger/types.ts';
import { conversionRate, mulRatioCeil } from '../lib/money.ts';
import type { PriceSource } from '../quote/prices.ts';
import { claimAppFees, type ClaimRequest } from './claims.ts';
import { fastFill, type FastFillInput, type FastFillResult } from './fastFill.ts';
import { admitRelay, type RelayAdmission } from './gaslessRelay.ts';
import type { SolverPort } from './port.ts';
import { RiskPolicy } from './risk.ts';
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
    const payout = this.ledger.tx(() => {
      const p = claimAppFees(this.ledger, this.registry, claim, gas);
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

  admitRelay(admission: RelayAdmission) {
    const { requestId } = admitRelay(this.ledger, admission);
    this.chains.payoutsQueued(admission.chainId);
    return { requestId };
  }

  submitSignedDeposit(deposit: SignedDeposit): void {
    recordSignedDeposit(this.ledger, deposit);
    this.chains.payoutsQueued(deposit.request.origin_chain_id);
  }
}
