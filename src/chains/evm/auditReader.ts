import { erc20Abi, getAddress, zeroAddress, type Address, type Hex, type PublicClient } from 'viem';
import type { AuditReader, ReceiptFacts } from '../ports.ts';
import { receiptFee } from './l1DataFee.ts';

/** What the EVM audit reader reads through: the chain adapter's routed client and its solver. */
export interface EvmAuditSource {
  readonly chainId: number;
  readonly solver: string;
  readonly client: PublicClient;
  balanceOf(owner: string, currency: string): Promise<bigint>;
}

/**
 * An EVM chain's reader for the audit's difference (src/audit/auditDifference.ts): balances at a
 * block (the audit's opening one needs the block's state), the head read uncached, and receipts.
 */
export class EvmAuditReader implements AuditReader {
  constructor(private readonly chain: EvmAuditSource) {}

  get chainId(): number {
    return this.chain.chainId;
  }

  get solver(): string {
    return this.chain.solver;
  }

  balanceOf(owner: string, currency: string): Promise<bigint> {
    return this.chain.balanceOf(owner, currency);
  }

  async balanceAt(owner: string, currency: string, blockNumber: bigint): Promise<bigint> {
    const at = { blockNumber };
    if (getAddress(currency) === zeroAddress) return this.chain.client.getBalance({ address: owner as Address, ...at });
    return this.chain.client.readContract({ address: currency as Address, abi: erc20Abi, functionName: 'balanceOf', args: [owner as Address], ...at });
  }

  head(): Promise<bigint> {
    return this.chain.client.getBlockNumber({ cacheTime: 0 });
  }

  async receipt(txHash: string): Promise<ReceiptFacts> {
    const r = await this.chain.client.getTransactionReceipt({ hash: txHash as Hex });
    return { blockNumber: r.blockNumber, fee: receiptFee(r), success: r.status === 'success' };
  }
}
