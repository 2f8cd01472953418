import type { Hex } from 'viem';
import type { PayoutRow } from '../ledger/types.ts';
import type { ClaimRequest } from './claims.ts';
import type { FastFillInput, FastFillResult } from './fastFill.ts';
import type { RelayAdmission } from './gaslessRelay.ts';
import type { SignedDeposit } from './signedDeposits.ts';

/**
 * What the API asks of the solver: the decisions that write payouts on a caller's request. The
 * solver is the only writer of payouts; the API checks the request (signatures, keys, bodies),
 * then hands it over here. Each method throws the solver's typed errors (FastFillError,
 * GaslessRelayError, SignedDepositRefusedError, ClaimError); the API maps their codes to statuses.
 */
export interface SolverPort {
  /** Fills a request before its deposit is final, held on the caller's app balance. */
  fastFill(input: Omit<FastFillInput, 'risk'>): Promise<FastFillResult>;
  /**
   * Pays a wallet's accrued app fees out, less the claim's own gas; `within` runs in the same ledger
   * transaction (the API marks the signature's nonce used there: nothing owed books nothing and keeps the nonce).
   */
  claimAppFees(claim: ClaimRequest, within: () => void): Promise<PayoutRow>;
  /** Admits a gasless relay: its request, payout and the sponsor's hold. */
  admitRelay(admission: RelayAdmission): Promise<{ requestId: Hex }>;
  /** Records a depositor's signed deposit for the node to submit. */
  submitSignedDeposit(deposit: SignedDeposit): void;
}
