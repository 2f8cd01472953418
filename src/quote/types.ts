import type { Hex } from 'viem';
import type { ChainProfile, CostOracle, DepositSteps } from '../chains/ports.ts';
import type { Config } from '../config/load.ts';
import type { Registry } from '../config/registry.ts';
import type { PriceSource } from './prices.ts';

/** Addresses arrive as strings and are checked against the kind of chain they belong to. */
export interface QuoteInput {
  user: string;
  recipient?: string;
  refundTo?: string;
  originChainId: number;
  destinationChainId: number;
  originCurrency: string;
  destinationCurrency: string;
  amount: bigint;
  tradeType: 'EXACT_INPUT' | 'EXACT_OUTPUT' | 'EXPECTED_OUTPUT';
  /** Basis points the output of a swap may fall short of the quote at fill time. */
  slippageTolerance?: number;
  protocolVersion?: string;
  referrer?: string;
  /** SVM origins: another account pays the deposit transaction's fees. */
  depositFeePayer?: string;
  /** Pay a per-order deposit address with a plain transfer (refundTo required). */
  useDepositAddress?: boolean;
  /** strict (default): one order, one address; open: a reusable address for the route. */
  depositAddressType?: 'strict' | 'open';
  /** Sign an EIP-2612 permit instead of sending approve and deposit transactions. */
  usePermit?: boolean;
  /** Fees to integrators: each recipient's share of the output, in basis points. */
  appFees?: { recipient: string; fee: number }[];
  subsidizeFees?: boolean;
  /** micro-USD (the 6-decimal stablecoin unit): the most the sponsor pays. */
  maxSubsidizationAmount?: bigint;
  sponsoredFeeComponents?: string[];
  subsidizeRent?: boolean;
  /** Deliver some of the destination's native currency with an ERC-20 fill, worth this many micro-USD. */
  topupGas?: boolean;
  topupGasAmount?: bigint;
  /** Destination calls the fill runs, paid from the output (EVM destinations, native currency). */
  txs?: { to: string; value: bigint; data: `0x${string}` }[];
}

/** Who pays sponsored fees: the app balance of the wallet linked to the caller's API key. */
export interface Sponsor {
  wallet: string;
  apiKeyId: string;
  /**
   * What the wallet's app balance can spend now, in micro-USD: its balance less what fast-fill holds
   * set aside (held money already covers a fill the solver paid; spending it twice is uncovered).
   */
  balance: bigint;
}

export const DEFAULT_TOPUP_MICRO_USD = 2_000_000n;
/** The gas top-up cap of a chain whose config sets no maxTopupGasUsd. */
export const DEFAULT_MAX_TOPUP_USD = '50';
export const SPONSORABLE = ['execution', 'swap', 'platform'] as const;

/** The chain ports a quote uses: each chain's profile, what things cost there, and how to deposit. */
export interface QuoteChains {
  profile(chainId: number): ChainProfile | undefined;
  costs(chainId: number): CostOracle | undefined;
  deposits(chainId: number): DepositSteps | undefined;
}

export interface QuoteContext {
  config: Config;
  registry: Registry;
  chains: QuoteChains;
  prices: PriceSource;
  /** The solver's EVM address: the Order type's `solver` field is an address whatever the chains. */
  solver: Hex;
  sponsor?: Sponsor;
  now?: number;
}
