import {
  createPublicClient,
  encodeFunctionData,
  erc20Abi,
  getAddress,
  http,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { RelayDepositoryAbi } from '../../../contracts-abi/index.ts';
import type { Config } from '../../config/load.ts';
import type { ChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import type { ChainAdapter, DepositTx, PayoutHooks, QuoteCosts } from '../adapter.ts';
import { EvmIndexer } from './indexer.ts';
import { EvmSubmitter } from './submitter.ts';
import { viemChain } from './viemChain.ts';

// Gas the quote charges for the node's own transactions. Measured on the node's contracts (see
// test/evm-adapter.test.ts); the submitter estimates each real transaction and adds a margin.
export const GAS = {
  fill: { native: 60_000n, erc20: 75_000n },
  refund: { native: 80_000n, erc20: 95_000n },
};

export class EvmAdapter implements ChainAdapter {
  readonly chainId: number;
  readonly client: PublicClient;
  readonly solver: Address;
  #indexer: EvmIndexer;
  #submitter: EvmSubmitter;
  #baseFee: bigint | undefined;
  #priority: { block: bigint; fee: bigint } | undefined;

  constructor(
    private chain: ChainConfig,
    config: Config,
    private ledger: Ledger,
    hooks: PayoutHooks & { wake(): void },
    metrics: Metrics,
    log: Logger,
  ) {
    this.chainId = chain.id;
    this.client = createPublicClient({
      chain: viemChain(chain),
      transport: http(chain.rpcUrl, { timeout: 10_000, retryCount: 2, batch: false }),
    }) as PublicClient;
    const account = privateKeyToAccount(config.solverKey.reveal());
    this.solver = account.address;
    const clog = log.child({ chain: chain.id });
    this.#submitter = new EvmSubmitter({
      chain,
      ledger,
      publicClient: this.client,
      account,
      allocatorKey: config.allocatorKey,
      hooks,
      metrics,
      log: clog,
      faults: config.faults,
    });
    this.#indexer = new EvmIndexer(
      chain,
      this.client,
      ledger,
      {
        onConfirmed: () => hooks.wake(),
        onHead: (n, baseFee) => {
          this.#baseFee = baseFee;
          this.#submitter.onHead(n, baseFee);
        },
      },
      metrics,
      clog,
    );
  }

  async start(): Promise<void> {
    await this.#submitter.start();
    this.#indexer.start();
  }

  async stop(): Promise<void> {
    await this.#indexer.stop();
    await this.#submitter.stop();
  }

  wake(): void {
    this.#submitter.wake();
  }

  progress() {
    const head = Number(this.#indexer.head);
    const indexed = this.#indexer.indexed();
    return { head, indexed, ready: head > 0 && indexed >= head - 1 && !this.#indexer.fatal };
  }

  async indexTransaction(txHash: Hex): Promise<number> {
    const receipt = await this.client.getTransactionReceipt({ hash: txHash });
    const deposits = receipt.logs.filter((l) => getAddress(l.address) === this.chain.depository).length;
    if (deposits) await this.#indexer.waitFor(receipt.blockNumber);
    return deposits;
  }

  async balanceOf(owner: string, currency: string): Promise<bigint> {
    if (getAddress(currency) === zeroAddress) return this.client.getBalance({ address: owner as Address });
    return this.client.readContract({ address: currency as Address, abi: erc20Abi, functionName: 'balanceOf', args: [owner as Address] });
  }

  async balance(currency: string): Promise<bigint> {
    const held = await this.balanceOf(this.solver, currency);
    const reserved = this.ledger.payouts.reservedOn(this.chainId).get(currency.toLowerCase()) ?? 0n;
    return held - reserved;
  }

  async costs(): Promise<QuoteCosts> {
    const block = this.#indexer.head;
    if (this.#baseFee === undefined) {
      this.#baseFee = (await this.client.getBlock({ blockTag: 'latest' })).baseFeePerGas ?? 0n;
    }
    if (!this.#priority || this.#priority.block !== block) {
      this.#priority = { block, fee: await this.client.estimateMaxPriorityFeePerGas() };
    }
    const native = (c: string) => getAddress(c) === zeroAddress;
    return {
      maxFeePerGas: this.#baseFee * 2n + this.#priority.fee,
      fillGas: (c) => (native(c) ? GAS.fill.native : GAS.fill.erc20),
      refundGas: (c) => (native(c) ? GAS.refund.native : GAS.refund.erc20),
    };
  }

  async depositTxs(args: { user: string; currency: string; amount: bigint; orderId: Hex }): Promise<{ approve?: DepositTx; deposit: DepositTx }> {
    const depository = this.chain.depository;
    const user = args.user as Address;
    if (getAddress(args.currency) === zeroAddress) {
      return {
        deposit: {
          to: depository,
          value: args.amount,
          data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [user, args.orderId] }),
        },
      };
    }
    const token = getAddress(args.currency);
    const allowance = await this.client.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [user, depository] });
    const deposit: DepositTx = {
      to: depository,
      value: 0n,
      data: encodeFunctionData({
        abi: RelayDepositoryAbi,
        functionName: 'depositErc20',
        args: [user, token, args.amount, args.orderId],
      }),
    };
    if (allowance >= args.amount) return { deposit };
    return {
      approve: { to: token, value: 0n, data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [depository, args.amount] }) },
      deposit,
    };
  }
}
