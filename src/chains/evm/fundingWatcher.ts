import { decodeFunctionData, erc20Abi, getAddress, zeroAddress, type Address, type PublicClient } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { Logger } from '../../log.ts';
import type { FundingTransfer } from '../adapter.ts';

// App balances are funded by a transfer to the solver whose calldata ends with
// 012345abcdef + the 20-byte address to credit + 012345abcdef (the interface's format).
const MARKER = /012345abcdef([0-9a-f]{40})012345abcdef$/i;
const SOURCE = 'app-balance';
const MAX_BLOCKS_PER_PASS = 50;

export function parseFunding(input: string): Address | undefined {
  const m = MARKER.exec(input);
  return m ? getAddress(`0x${m[1]}`) : undefined;
}

// Reads confirmed blocks for such transfers (native, or an ERC-20 transfer of a configured
// token) and reports each once; the cursor moves only after the report is booked.
export class FundingWatcher {
  #running: Promise<void> | undefined;
  #tokens: Set<string>;

  constructor(
    private chain: EvmChainConfig,
    private client: PublicClient,
    private ledger: Ledger,
    private solver: Address,
    private report: (t: FundingTransfer) => Promise<void>,
    private log: Logger,
  ) {
    this.#tokens = new Set(chain.currencies.map((c) => c.address));
  }

  onHead(head: bigint): void {
    if (this.#running) return;
    this.#running = this.#pass(Number(head))
      .catch((e) => this.log.warn({ err: (e as Error).message }, 'app balance funding scan failed; retrying'))
      .finally(() => (this.#running = undefined));
  }

  async stop(): Promise<void> {
    await this.#running;
  }

  async #pass(head: number): Promise<void> {
    const confirmed = head - this.chain.confirmations + 1;
    const from = (this.ledger.indexer.cursor(this.chain.id, SOURCE) ?? this.chain.startBlock - 1) + 1;
    const to = Math.min(confirmed, from + MAX_BLOCKS_PER_PASS - 1);
    for (let n = from; n <= to; n++) {
      const block = await this.client.getBlock({ blockNumber: BigInt(n), includeTransactions: true });
      for (const tx of block.transactions) {
        if (!tx.to) continue;
        const t = this.#funding(tx.to, tx.from, tx.input, tx.value);
        if (t) await this.report({ chainId: this.chain.id, txHash: tx.hash, from: getAddress(tx.from), ...t });
      }
      this.ledger.indexer.setCursor(this.chain.id, SOURCE, n);
    }
  }

  #funding(to: Address, from: Address, input: string, value: bigint) {
    const marked = parseFunding(input);
    if (!marked) return undefined;
    const credited = marked === zeroAddress ? getAddress(from) : marked;
    if (getAddress(to) === this.solver && value > 0n) return { credited, currency: zeroAddress as string, amount: value };
    if (!this.#tokens.has(getAddress(to))) return undefined;
    try {
      // The marker trails the transfer's own arguments; the decoder reads only the first 68 bytes.
      const { functionName, args } = decodeFunctionData({ abi: erc20Abi, data: input.slice(0, 2 + 8 + 128) as `0x${string}` });
      if (functionName !== 'transfer' || getAddress(args[0]) !== this.solver || args[1] <= 0n) return undefined;
      return { credited, currency: getAddress(to) as string, amount: args[1] };
    } catch {
      return undefined;
    }
  }
}
