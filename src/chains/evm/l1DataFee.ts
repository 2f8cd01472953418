// The L1 data fee of OP-stack chains (OP Mainnet, Base and the rest of the superchain): beside its L2 gas, each
// transaction pays for posting its bytes to L1, taken from the sender's balance at inclusion and not part of
// gasUsed × effectiveGasPrice. Unpriced, every fill, refund and sweep there cost the solver that fee on top of what
// was charged, and a destination call's calldata (chosen by whoever quotes it) made it as large as they liked.
import { encodeFunctionData, parseAbi, size, zeroAddress, zeroHash, type Address, type Hex, type PublicClient } from 'viem';
import { DepositAddressFactoryAbi, OrderFillerAbi, RelayDepositoryAbi } from '../../../contracts-abi/index.ts';
import { SharedReads } from '../../lib/sharedReads.ts';
import { erc20TransferCall, nativeTransferCall } from './callRequest.ts';

/** The GasPriceOracle predeploy, at the same address on every OP-stack chain. */
export const GAS_PRICE_ORACLE: Address = '0x420000000000000000000000000000000000000F';

const ORACLE_ABI = parseAbi(['function getL1FeeUpperBound(uint256 _unsignedTxSize) view returns (uint256)']);

/**
 * What an unsigned EIP-1559 transaction carries beside its calldata, at most: its type byte and list header, chain id,
 * nonce, both fees, gas limit, `to`, value and an empty access list, each RLP-encoded at its widest plausible size.
 */
export const TX_ENVELOPE_BYTES = 96;

const REFERENCE_BYTES = 1_000;

const refundData = (native: boolean): Hex =>
  encodeFunctionData({
    abi: RelayDepositoryAbi,
    functionName: 'execute',
    args: [
      { calls: [native ? nativeTransferCall(zeroAddress, 0n) : erc20TransferCall(zeroAddress, zeroAddress, 0n)], nonce: 0n, expiration: 0n },
      `0x${'00'.repeat(65)}`,
    ],
  });

/** Calldata bytes of the node's own transactions of a fixed shape (the ABI encoding's length does not depend on the values). */
export const CALLDATA_BYTES = {
  fill: {
    native: size(encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillNative', args: [zeroHash, zeroAddress] })),
    erc20: size(encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillErc20', args: [zeroHash, zeroAddress, zeroAddress, 0n] })),
  },
  refund: { native: size(refundData(true)), erc20: size(refundData(false)) },
  sweep: size(encodeFunctionData({ abi: DepositAddressFactoryAbi, functionName: 'sweep', args: [zeroAddress, zeroHash, zeroAddress] })),
  permitDeposit: size(
    encodeFunctionData({
      abi: RelayDepositoryAbi,
      functionName: 'depositErc20WithPermit',
      args: [zeroAddress, zeroAddress, 0n, zeroHash, 0n, 27, zeroHash, zeroHash],
    }),
  ),
};

/** How the node learns a chain's L1 data fee: `auto` prices it where the chain has the predeploy, `op-stack` requires it, `none` never prices it. */
export type L1DataFeeMode = 'auto' | 'op-stack' | 'none';

/**
 * The L1 data fee a transaction sent now pays at most, from the chain's GasPriceOracle (getL1FeeUpperBound, since the
 * Fjord upgrade: an upper bound on the compressed size for 99.99% of transactions), with a margin for the L1 fees'
 * rise between a quote and its fill, as the L2 fee is priced at twice the base fee. 0 on a chain without one.
 * Read once per head block and size.
 */
export class L1DataFee {
  #present: boolean | undefined;
  // Per size, this block's fee.
  #cache = new SharedReads<number, bigint>(true);
  #cacheBlock = 0n;

  constructor(
    private readonly client: PublicClient,
    private readonly mode: L1DataFeeMode,
    private readonly marginBps: number,
    private readonly head: () => bigint,
  ) {}

  /** The fee of a transaction carrying `calldataBytes` of calldata, with the margin, in wei. */
  async of(calldataBytes: number): Promise<bigint> {
    if (!(await this.#priced())) return 0n;
    const txSize = calldataBytes + TX_ENVELOPE_BYTES;
    // One block's fees at a time (call orders bring sizes of their own). Head 0: no head read yet, or never (a standby
    // serving quotes does not index): a cached fee would be kept for good.
    const block = this.head();
    if (block !== this.#cacheBlock || block === 0n) {
      this.#cache.clear();
      this.#cacheBlock = block;
    }
    return this.#cache.get(txSize, () =>
      this.client
        .readContract({ address: GAS_PRICE_ORACLE, abi: ORACLE_ABI, functionName: 'getL1FeeUpperBound', args: [BigInt(txSize)] })
        .then((f) => (f * BigInt(10_000 + this.marginBps) + 9_999n) / 10_000n),
    );
  }

  /**
   * The fee of a fixed reference transaction now (1,000 bytes of calldata). The oracle's bound is the transaction's
   * size term (which depends on its size alone) times the L1 fees and scalars, so any transaction's fee moves from one
   * moment to another as the reference's does: a fee quoted earlier is today's at quoted × reference now / reference then.
   */
  reference(): Promise<bigint> {
    return this.of(REFERENCE_BYTES);
  }

  // `auto`: whether the predeploy has code, read until a read succeeds. `op-stack` never asks: a chain configured so
  // without the oracle fails its quotes loudly (the read reverts), rather than filling with the fee unpriced.
  async #priced(): Promise<boolean> {
    if (this.mode !== 'auto') return this.mode === 'op-stack';
    this.#present ??= ((await this.client.getCode({ address: GAS_PRICE_ORACLE })) ?? '0x') !== '0x';
    return this.#present;
  }
}

/**
 * What a transaction cost its sender, from its receipt: its L2 gas (gasUsed × effectiveGasPrice) and, on an OP-stack
 * chain, the L1 data fee its receipt names (`l1Fee`, a field the chain's nodes add; viem keeps it as the hex it came
 * as). Every fee the node books (a payout's, a batch share, a sponsor's charge, the audit's sums) comes from here.
 */
export function receiptFee(receipt: { gasUsed: bigint; effectiveGasPrice: bigint; l1Fee?: unknown }): bigint {
  const l1 = receipt.l1Fee;
  return receipt.gasUsed * receipt.effectiveGasPrice + (typeof l1 === 'bigint' ? l1 : typeof l1 === 'string' && /^0x[0-9a-f]+$/i.test(l1) ? BigInt(l1) : 0n);
}
