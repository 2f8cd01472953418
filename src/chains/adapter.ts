import type { Hex } from 'viem';
import type { PayoutRow } from '../ledger/types.ts';

// What a submitter reports about a payout. Each hook runs inside the ledger transaction that
// records the transaction's new state, so the request's status and the transaction never disagree.
export interface PayoutHooks {
  // The payout's first transaction is signed and recorded; it is about to be broadcast.
  onSigned(payout: PayoutRow, txHash: Hex): void;
  // The payout's transaction is included and succeeded.
  onPaid(payout: PayoutRow, txHash: Hex, fee: bigint): void;
  // The payout cannot be made; reason is the interface's failReason.
  onFailed(payout: PayoutRow, reason: string, txHash?: Hex): void;
}

export interface QuoteCosts {
  // Gas price the quote assumes for a transaction sent now, in the chain's native smallest unit.
  maxFeePerGas: bigint;
  fillGas(currency: string): bigint;
  refundGas(currency: string): bigint;
}

export interface DepositTx {
  to: string;
  data: Hex;
  value: bigint;
}

// One per configured chain. The solver and the API speak to chains only through this.
export interface ChainAdapter {
  readonly chainId: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  // Indexes a transaction at once (the SDK reports its deposit right after sending it).
  // Resolves with the number of depository deposits the transaction holds.
  indexTransaction(txHash: Hex): Promise<number>;
  // The solver's spendable inventory of a currency on this chain: what the chain says it holds,
  // less the payouts the ledger has promised and not yet paid.
  balance(currency: string): Promise<bigint>;
  // Any address's balance (the quote reports the user's).
  balanceOf(owner: string, currency: string): Promise<bigint>;
  // Gas figures for quoting and for pricing refunds.
  costs(): Promise<QuoteCosts>;
  // Transactions a user sends to deposit: an approval first when the allowance is short.
  depositTxs(args: { user: string; currency: string; amount: bigint; orderId: Hex }): Promise<{ approve?: DepositTx; deposit: DepositTx }>;
  // New queued payouts exist in the ledger for this chain.
  wake(): void;
  // Head block as last seen and the indexer's position, for metrics and readiness.
  progress(): { head: number; indexed: number; ready: boolean };
}
