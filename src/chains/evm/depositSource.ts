import { toHex, type Block, type Hex, type PublicClient } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';
import type { DepositSource, Inclusion, RangeRead, SourceBlock } from '../../indexer/source.ts';
import { decodeDepositLog, type DecodedDeposit, type RpcLog } from './depositLogs.ts';

/** An EVM head block: the indexer's block, and the base fee and gas limit the submitter prices and bounds with. */
export interface EvmHead extends SourceBlock {
  baseFeePerGas: bigint;
  gasLimit: bigint;
}

const sourceBlock = (b: Block): SourceBlock => ({ number: Number(b.number), hash: b.hash!, parentHash: b.parentHash });

/**
 * The depository's deposit events on an EVM chain, as a {@link DepositSource}: raw `eth_getLogs`
 * decoded without a generic ABI decoder (depositLogs.ts), blocks and receipts through the chain's client.
 */
export class EvmDepositSource implements DepositSource<EvmHead> {
  readonly rangeMethod = 'eth_getLogs';

  constructor(
    private chain: EvmChainConfig,
    private client: PublicClient,
  ) {}

  /** The newest block, with its base fee. */
  async head(): Promise<EvmHead> {
    const b = await this.client.getBlock({ blockTag: 'latest' });
    return { ...sourceBlock(b), baseFeePerGas: b.baseFeePerGas ?? 0n, gasLimit: b.gasLimit };
  }

  /** The canonical block at height `n`. */
  async block(n: number): Promise<SourceBlock> {
    return sourceBlock(await this.client.getBlock({ blockNumber: BigInt(n) }));
  }

  /** The depository's deposits in blocks [from, to], and the block hash of every log the answer held. */
  async deposits(from: number, to: number): Promise<RangeRead> {
    const logs = (await this.client.request({
      method: 'eth_getLogs',
      params: [{ address: this.chain.depository, fromBlock: toHex(from), toBlock: toHex(to) }],
    })) as unknown as RpcLog[];
    const deposits: DecodedDeposit[] = [];
    const blockHashes = new Map<number, string>();
    for (const l of logs) {
      const n = Number(l.blockNumber);
      const seen = blockHashes.get(n);
      // Two logs of one block from different forks: the answer cannot be trusted (the driver reads again).
      if (seen === undefined) blockHashes.set(n, l.blockHash);
      else if (seen !== l.blockHash) blockHashes.set(n, '');
      const d = decodeDepositLog(l);
      if (d) deposits.push(d);
    }
    return { deposits, entries: logs.length, blockHashes };
  }

  /** Where the transaction is included now, from its receipt; undefined when the chain has none. */
  async inclusion(txHash: string): Promise<Inclusion | undefined> {
    const receipt = await this.client.getTransactionReceipt({ hash: txHash as Hex }).catch((e: Error) => {
      if (e.name === 'TransactionReceiptNotFoundError') return undefined;
      throw e; // an RPC failure proves nothing: the pass is retried
    });
    return receipt && { success: receipt.status === 'success', blockNumber: Number(receipt.blockNumber), blockHash: receipt.blockHash };
  }
}
