import type { Hex } from 'viem';
import type { PayoutRow, RequestRow } from '../ledger/types.ts';
import type { PermitNonce } from '../ledger/usedPermits.ts';
import type { DepositRequest, DepositStep, FillCost, FillCostRequest, RelaySimulation } from './adapter.ts';
import type { RelayTerms } from './evm/relayTerms.ts';
import type { AddressCodec } from '../kinds/codec.ts';
import type { ChainKind } from './address.ts';
import type { ReindexResult } from '../indexer/driver.ts';

export type { AddressCodec } from '../kinds/codec.ts';

// The narrow faces of a chain that the quote and the API speak to. Each is one job; an adapter
// implements those it can, and the chain registry (registry.ts) hands each caller only what it uses.
// Nothing here names a kind of chain: what differs between kinds is a method or a fact below.

/** Static facts of one configured chain that the API and the quote need (from its config; no RPC). */
export interface ChainProfile {
  readonly chainId: number;
  readonly codec: AddressCodec;
  /** The hosted chain type's vmType (the perpetuals exchange is the published "hypevm"). */
  readonly vmType: 'evm' | 'svm' | 'hypevm';
  /** Whether the chain's native currency is a gas token (the exchange's is its perps USD: no gas, no top-up). */
  readonly nativeIsGas: boolean;
  /** Whether a fill can run destination calls on the chain (orders with `txs`). */
  readonly destinationCalls: boolean;
  /** Whether deposits from the chain are tied to requests by a signed nonce mapping (POST /authorize). */
  readonly nonceMappings: boolean;
  /** Whether per-order deposit addresses are offered on the chain. */
  readonly depositAddresses: boolean;
  /** Whether transfers to the solver on the chain fund app balances. */
  readonly appBalanceDeposits: boolean;
  /** Where deposits go as the config names it (depository contract, vault); null where there is none. */
  readonly depository: string | null;
  /** The chain's contracts by the hosted API's names. */
  readonly contracts: Record<string, string>;
  /** The currencies (canonical addresses) that take an EIP-2612 permit. */
  readonly permitCurrencies: ReadonlySet<string>;
}

/** What things cost on a chain now, and what accounts hold there, in smallest units. */
export interface CostOracle {
  /** The solver's spendable inventory of a currency: what the chain says it holds, less the payouts promised and not yet paid. */
  balance(currency: string): Promise<bigint>;
  /** Any address's balance (the quote reports the user's). */
  balanceOf(owner: string, currency: string): Promise<bigint>;
  /** What a fill of `amount` to `recipient` costs the solver now, in native units. */
  fillCost(req: FillCostRequest): Promise<FillCost>;
  /** What refunding a deposit of `currency` may cost the solver now, in native units (any account the refund may have to create included). */
  refundCost(currency: string): Promise<bigint>;
  /** What the user's own deposit transaction costs in fees, in native units (quoted, not charged). */
  depositCost(currency: string): Promise<bigint>;
  /** What submitting a depositor's signed deposit costs the node, in native units; absent where the chain has no such deposits. */
  relayedDepositCost?(currency: string): Promise<bigint>;
  /** What sweeping a deposit address into the depository costs the solver now, in native units; absent where the chain has no deposit addresses. */
  sweepCost?(): Promise<bigint>;
  /** The most a transaction sent now pays per gas, in native units; absent where the chain has no gas market. */
  feePerGas?(): Promise<bigint>;
  /**
   * The L1 data fee of a fixed reference transaction now (OP-stack chains; 0 elsewhere): an L1 fee quoted earlier
   * (FillCost.l1Native, with its l1Reference) is today's in proportion. Absent where the chain has none.
   */
  l1Reference?(): Promise<bigint>;
}

/** The solver's wallet on a chain: its address and what it holds (the solver's inventory, the loss breaker, the admin inventory). */
export interface SolverWallet {
  /** The solver's address on this chain. */
  readonly solver: string;
  /** The solver's spendable inventory of a currency: what the chain says it holds, less the payouts promised and not yet paid. */
  balance(currency: string): Promise<bigint>;
  /** What an address holds of a currency now, in its smallest unit. */
  balanceOf(owner: string, currency: string): Promise<bigint>;
}

/** Reads what the sender of an included transaction paid for it (the deposit fee reader, src/chains/depositFeeReader.ts). */
export interface TxFeeReader {
  /** The fee of an included transaction, in the native smallest unit; rejects while it cannot be read. */
  txFee(txId: string): Promise<bigint>;
}

/**
 * A chain's indexing as the admin re-index sees it (src/admin/actions.ts): how far it is and, where
 * the chain's indexer can re-read a range cheaply, that re-read.
 */
export interface Reindexer {
  /** The chain's kind, named in the refusal where it offers no re-index. */
  readonly kind: ChainKind;
  progress(): ChainProgress;
  /**
   * Reads the chain's deposits again over blocks its indexer has passed; `record` runs in the ledger
   * transaction that writes what was found. Absent where the indexer cannot re-read a range cheaply.
   */
  reindex?(fromBlock: number, toBlock: number, record: (r: ReindexResult) => void): Promise<ReindexResult>;
}

/** What an included transaction's receipt says, as the audit needs it. */
export interface ReceiptFacts {
  blockNumber: bigint;
  /** What its sender paid for it (gas used × effective gas price), in the native smallest unit. */
  fee: bigint;
  success: boolean;
}

/**
 * What the audit's difference (src/audit/auditDifference.ts) reads of a chain whose solver books it
 * keeps from an opening block: balances now and at a block, the head and receipts. The chain
 * registry hands one out for the chains that have such an audit (EVM); the others have none.
 */
export interface AuditReader {
  readonly chainId: number;
  /** The solver's address on this chain. */
  readonly solver: string;
  /** What an address holds of a currency now. */
  balanceOf(owner: string, currency: string): Promise<bigint>;
  /** What an address held of a currency at a block (needs the block's state). */
  balanceAt(owner: string, currency: string, blockNumber: bigint): Promise<bigint>;
  /** The newest block number, read now (never cached). */
  head(): Promise<bigint>;
  /** The receipt of an included transaction; rejects where there is none. */
  receipt(txHash: string): Promise<ReceiptFacts>;
}

/** How a user deposits on a chain: the steps the quote hands out, and the check of a signed deposit. */
export interface DepositSteps {
  /** The solver's address on this chain. */
  readonly solver: string;
  /** Where deposits go on this chain (depository contract, vault account). */
  readonly depositAddress: string;
  /** About how long a deposit takes to be confirmed, in seconds (the quote's timeEstimate). */
  readonly confirmSeconds: number;
  /** About how long a deposit of this amount takes to be confirmed (confirmations by value); confirmSeconds when absent. */
  confirmSecondsFor?(currency: string, amount: bigint): number;
  /** The steps a user takes to deposit, in order. May throw QuoteError for a request the chain cannot take. */
  depositSteps(req: DepositRequest): Promise<DepositStep[]>;
  /**
   * Checks a depositor's signed deposit (the body of the quote's signature step, and its signature)
   * against the request; returns what authorizes the node to submit it and the nonce it spends.
   * Throws SignedDepositError. Absent where the chain takes no signed deposits.
   */
  verifySignedDeposit?(request: RequestRow, body: Record<string, unknown>, signature: Hex): Promise<VerifiedSignedDeposit>;
}

/** A signed deposit checked against its request (DepositSteps.verifySignedDeposit). */
export interface VerifiedSignedDeposit {
  /** What authorizes the node to submit it (the chain's encoding of the permit). */
  authorization: string;
  /** What the signature spends: the ledger lets it fund one request only (the token may not consume it). */
  permit: PermitNonce;
}

/** Simulates a user's call sent from the solver's key with its EIP-7702 authorizations (POST /execute rawCalls). */
export interface RelaySimulator {
  /** Throws RelayRefusedError when the call cannot be relayed. */
  simulateRelay(terms: RelayTerms): Promise<RelaySimulation>;
}

/** What the API asks of a chain's indexing: a transaction now, a deposit address now, and how far it is. */
export interface ChainIntake {
  /** Indexes a transaction at once (the SDK reports its deposit right after sending it); resolves with the deposits it holds. */
  indexTransaction(txId: string): Promise<number>;
  /** Reads new deposits now rather than at the next poll (a transfer may be waiting on what the caller just recorded). */
  indexNow(): void;
  /** Looks at a request's deposit address now; resolves with the sweeps queued. Absent where there are no deposit addresses. */
  checkDepositAddress?(requestId: string): Promise<number>;
  /** Head block (or slot) as last seen and the indexer's position, for readiness. */
  progress(): ChainProgress;
}

/** A chain's head and indexing position, for metrics and readiness. */
export interface ChainProgress {
  head: number;
  indexed: number;
  ready: boolean;
  providers?: { name: string; state: string; headLag: number }[];
  heldBy?: string;
}

/** The static profiles of the chains a node serves (available on a read-only API replica too). */
export interface ChainProfiles {
  profile(chainId: number): ChainProfile | undefined;
}

/**
 * Where a payout's signed call stands on a chain whose payouts are requests anyone may submit (an EVM depository's
 * allocator-signed call request): a failed refund's stays executable until it expires, so a new refund of the same
 * deposit would pay twice.
 */
export interface SignedCalls {
  /** Executed (by anyone), expired unexecuted, or still executable; undefined when the payout signed no call. */
  callOutcome(payout: PayoutRow): Promise<SignedCallOutcome | undefined>;
}

/**
 * A signed call on chain. `expired`: the chain shows it can never execute (unexecuted, and a block the chain's
 * confirmations deep is past its expiration); judged by the chain's block timestamps, never the node's clock.
 * `executableUntil` (ms since the epoch): its expiration, for messages and for when to read it again.
 */
export interface SignedCallOutcome {
  executed: boolean;
  expired: boolean;
  executableUntil: number;
}

/** The chain ports of a node that talks to chains (absent on a read-only API replica). */
export interface ChainPorts extends ChainProfiles {
  /** The chains the node serves, by id. */
  ids(): number[];
  costs(chainId: number): CostOracle | undefined;
  deposits(chainId: number): DepositSteps | undefined;
  relay(chainId: number): RelaySimulator | undefined;
  intake(chainId: number): ChainIntake | undefined;
  /** The solver's wallet on a chain. */
  wallet(chainId: number): SolverWallet | undefined;
  /** The chain's fee reader; undefined where deposit fees are not read. */
  txFees(chainId: number): TxFeeReader | undefined;
  /** The chain's indexing for the admin re-index. */
  reindexer(chainId: number): Reindexer | undefined;
  /** The chain's audit reader; undefined where the chain has no audit of the solver's books from an opening block. */
  audit(chainId: number): AuditReader | undefined;
  /** New queued payouts exist in the ledger for this chain: its submitter looks now. */
  payoutsQueued(chainId: number): void;
  /** The chain's signed calls; undefined where a payout is no request anyone may submit. */
  signedCalls(chainId: number): SignedCalls | undefined;
  /**
   * Whether a queued payout may be signed now: one out of a deposit once its chain's indexer holds the deposit as
   * canonical since the start (IndexerDriver.mayPayOutOf); a withdrawal once its chain's was compared since the start.
   */
  mayPay(payout: PayoutRow): boolean;
}

/** Reads a Chainlink-style price aggregator on a chain (the quote's USD prices where a currency names a feed). */
export interface PriceFeedReader {
  /** The aggregator's answer decimals. */
  decimals(aggregator: string): Promise<number>;
  /** The aggregator's latest answer and when it was updated (seconds). */
  latestRound(aggregator: string): Promise<{ answer: bigint; updatedAt: bigint }>;
}

/** The price feed readers of the chains a node serves. */
export interface PriceFeeds {
  /** The reader of a chain's aggregators; undefined where the chain has none the node can read. */
  priceFeed(chainId: number): PriceFeedReader | undefined;
}
