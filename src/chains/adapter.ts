import type { RelayTerms } from './evm/relayTerms.ts';
import type { Hex } from 'viem';
import type { FundingPart } from '../ledger/funding.ts';
import type { DepositRow, PayoutRow } from '../ledger/types.ts';
import type { ChainKind } from './address.ts';
import type { ReorgDecider } from '../indexer/events.ts';
import { RelayNodeError } from '../lib/errors.ts';
import type { ChainIntake, CostOracle, DepositSteps, Reindexer, SignedCallOutcome, SolverWallet } from './ports.ts';

export type { PayoutHooks } from '../submitter/port.ts';

/** Why a gasless relay (POST /execute rawCalls) is refused before anything is sent or charged. */
export class RelayRefusedError extends RelayNodeError {
  override name = 'RelayRefusedError';
  constructor(
    // SIMULATION_FAILED: the call reverts; INVALID_AUTHORIZATION: an authorization is for another
    // chain or unsigned; AUTHORIZATION_USED: its nonce is spent (a replay); RPC_UNAVAILABLE: 503.
    // TARGET_NOT_ALLOWED: the call's target is a contract, not a wallet (it would act as the solver).
    // GAS_LIMIT_EXCEEDED: the call needs more gas than the chain's maxCallGas.
    readonly errorCode: 'SIMULATION_FAILED' | 'INVALID_AUTHORIZATION' | 'AUTHORIZATION_USED' | 'TARGET_NOT_ALLOWED' | 'GAS_LIMIT_EXCEEDED' | 'RPC_UNAVAILABLE',
    message: string,
  ) {
    super(message);
  }
}

/** What relaying a user's call costs the node, by simulation (with its EIP-7702 authorizations). */
export interface RelaySimulation {
  /** Gas limit the node will send it with (the estimate plus the chain's margin). */
  gas: bigint;
  /** The most the node may pay per gas now, in wei. */
  maxFeePerGas: bigint;
  /** The L1 data fee the transaction pays at most beside its gas (OP-stack chains; else 0), in wei. */
  l1Native: bigint;
  /** The signer and nonce of each authorization, in order (each is relayed once). */
  authorities: { address: string; nonce: bigint }[];
}

/**
 * A successful transaction that funds an app balance (see the interface's "Funding the app
 * balance"): what the chain shows arrived at the solver in it, never what its calldata claims.
 */
export interface FundingTransfer {
  chainId: number;
  txHash: string;
  blockNumber: number;
  blockHash: string;
  from: string;
  /** The wallet whose app balance is credited. */
  credited: string;
  /** Each ERC-20 Transfer log to the solver (the logged amount) and the native value sent to it. */
  parts: FundingPart[];
}

/** What a re-index found (the indexer driver's answer, src/indexer/driver.ts). */
export type { ReindexResult } from '../indexer/driver.ts';

/** What chains report to the rest of the node, besides payouts. */
export interface ChainEvents {
  /** Deposits reached their confirmations: the solver has work. */
  depositsConfirmed(): void;
  /** A confirmed app balance funding transfer; resolves once it is booked. */
  onFunding(t: FundingTransfer): Promise<void>;
  /** Decides what a reorg means for deposits already acted on (the solver, src/solver/reorgs.ts). */
  readonly reorgs: ReorgDecider;
  /** Funds worth sweeping reached a request's deposit address: the solver queues the sweep. */
  onDepositAddressFunded: DepositAddressSweeps['onDepositAddressFunded'];
  /** The chain's indexer read its recorded blocks against the chain since the start (IndexerDriver.checked). */
  depositsChecked?(): void;
}

/** Funds worth sweeping at a request's deposit address, as the chain's watcher read them. */
export interface DepositAddressFunding {
  requestId: string;
  chainId: number;
  currency: string;
  /** What the address holds of `currency` now, in its smallest unit. */
  amount: bigint;
  /**
   * When the address held the quoted amount by (ms; a block's time), where the watcher found it by the quote's expiry
   * (a payment made while the node was down). Absent: it arrived when the watcher saw it.
   */
  heldBy?: number;
}

/** The port the solver implements for deposit address watchers: it is the only writer of payouts. */
export interface DepositAddressSweeps {
  /** Queues a sweep of `f` (inside its own ledger transaction) unless one is open for the address and currency; returns whether it queued one. */
  onDepositAddressFunded(f: DepositAddressFunding): boolean;
}

// What the user does to deposit, one quote step each, in the shape the chain's wallets take
// (`items[].data`). The chain's own adapter builds them; the quote adds ids, requestId and check.
/** Why a signed deposit is refused: the interface's failReason names where one applies. */
export class SignedDepositError extends RelayNodeError {
  override name = 'SignedDepositError';
  constructor(
    // RPC_UNAVAILABLE: the chain could not be read to check the signature (503, retry).
    readonly errorCode:
      | 'INVALID_SIGNATURE'
      | 'SIGNATURE_EXPIRED'
      | 'INVALID_NONCE'
      | 'INVALID_INPUT_PARAMETERS'
      | 'GASLESS_PERMIT_BALANCE_TOO_LOW'
      | 'RPC_UNAVAILABLE',
    message: string,
  ) {
    super(message);
  }
}

export interface DepositStep {
  id: string; // 'approve', 'authorize', 'deposit', ...
  kind: 'transaction' | 'signature';
  action: string;
  description: string;
  data: Record<string, unknown>;
  /** The status path the client polls after this step (the last step has one). */
  check?: 'status' | 'status-v3';
  /** A deposit address the user pays with a plain transfer (on the deposit step). */
  depositAddress?: string;
}

export interface DepositRequest {
  user: string;
  currency: string;
  amount: bigint;
  orderId: Hex;
  /** SVM: another address pays the deposit transaction's fees and signs it first. */
  feePayer?: string;
  /** The quote's protocolVersion (some chains require v2 for deposits from them). */
  protocolVersion?: string;
  /** The wallet's active chain, for signatures that name one (defaults to the chain's own choice). */
  signatureChainId?: number;
  /**
   * Pay a per-order deposit address instead of the depository; what arrives there is deposited for
   * `refundTo` (refunds go back to it).
   */
  depositAddressFor?: string;
  /** Ask for a signed deposit (EIP-2612 permit) valid until this time (seconds), which the node submits. */
  permitDeadline?: number;
}

/** A destination call the fill runs (EVM): the order's output pays for it. */
export interface DestinationCall {
  to: string;
  value: bigint;
  data: `0x${string}`;
}

export interface FillCostRequest {
  currency: string;
  recipient: string;
  amount: bigint;
  calls?: DestinationCall[];
  /** Whether the fill also delivers native currency to the recipient (a gas top-up). */
  topUp?: boolean;
}

export interface FillCost {
  /** Everything the solver spends to pay out, in the chain's native smallest unit. */
  native: bigint;
  /** The part of `native` that is account rent (SVM account creation); 0 elsewhere. */
  rent: bigint;
  /**
   * The smallest payout the chain accepts for this recipient (SVM: a new SOL account must be
   * left rent-exempt); 0 where there is none.
   */
  minimumAmount: bigint;
  /** The most gas the fill may use: with calls, the gas they were simulated at; a native fill (it runs its recipient's code), the gas it was priced at. */
  gasLimit?: bigint;
  /** Where the chain has a gas market: the fee per gas `native` was priced at. */
  feePerGas?: bigint;
  /** The part of `native` that is an L1 data fee (OP-stack chains), which does not move with the fee per gas. */
  l1Native?: bigint;
  /** With l1Native: the L1 data fee of the chain's reference transaction at the same moment (CostOracle.l1Reference). */
  l1Reference?: bigint;
}

/**
 * One per configured chain, inside the chain registry (registry.ts): the node starts and stops it
 * through the registry. Nothing outside src/chains/ sees it whole: the registry hands each caller
 * the narrow ports (ports.ts) it implements.
 */
export interface ChainAdapter extends CostOracle, DepositSteps, ChainIntake, SolverWallet, Reindexer {
  readonly chainId: number;
  readonly kind: ChainKind;
  start(): Promise<void>;
  stop(): Promise<void>;
  /**
   * Simulates a user's call sent from the solver's key with its EIP-7702 authorizations (POST
   * /execute rawCalls); throws RelayRefusedError when it cannot be relayed. EVM chains only.
   */
  simulateRelay?(terms: RelayTerms): Promise<RelaySimulation>;
  /** What the sender of an included transaction paid for it (TxFeeReader); absent where deposit fees are not read. */
  txFee?(txId: string): Promise<bigint>;
  /** New queued payouts exist in the ledger for this chain: its submitter looks now. */
  payoutsQueued(): void;
  /** Whether the chain's recorded blocks were compared with it since the start (IndexerDriver.checked). */
  readonly depositsChecked: boolean;
  /** Whether a payout out of a deposit of this chain may be signed now (IndexerDriver.mayPayOutOf). */
  mayPayOutOf(deposit: DepositRow): boolean;
  /** Where a payout's signed call stands (SignedCalls); absent where a payout is no request anyone may submit. */
  callOutcome?(payout: PayoutRow): Promise<SignedCallOutcome | undefined>;
}
