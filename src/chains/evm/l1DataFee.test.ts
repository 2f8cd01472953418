import { formatTransactionReceipt } from 'viem';
import { describe, expect, it } from 'vitest';
import { until } from '../../../test/helpers/until.ts';
import { apiReads, isApiRead } from '../../lib/apiReads.ts';
import { L1DataFee, receiptFee } from './l1DataFee.ts';

// A receipt as an OP-stack node serves it (eth_getTransactionReceipt): the L1 data fee and its inputs sit beside the
// standard fields. The figures are a Base transaction's shape; only the fields the fee reads matter.
const opReceipt = {
  blockHash: `0x${'11'.repeat(32)}`,
  blockNumber: '0x10',
  contractAddress: null,
  cumulativeGasUsed: '0x186a0',
  effectiveGasPrice: '0x3b9aca00',
  from: `0x${'22'.repeat(20)}`,
  gasUsed: '0x14c08',
  logs: [],
  logsBloom: `0x${'00'.repeat(256)}`,
  status: '0x1',
  to: `0x${'33'.repeat(20)}`,
  transactionHash: `0x${'44'.repeat(32)}`,
  transactionIndex: '0x1',
  type: '0x2',
  l1Fee: '0x2d79883d2000',
  l1GasPrice: '0x2e90edd000',
  l1GasUsed: '0x640',
  l1BaseFeeScalar: '0x8dd',
  l1BlobBaseFee: '0x1',
  l1BlobBaseFeeScalar: '0x101c12',
};

describe('receiptFee', () => {
  it("adds an OP-stack receipt's L1 data fee to its L2 gas, as viem's formatter leaves the field", () => {
    const receipt = formatTransactionReceipt(opReceipt as never);
    expect(receiptFee(receipt)).toBe(0x14c08n * 0x3b9aca00n + 0x2d79883d2000n);
  });

  it('is the L2 gas alone where the receipt names no L1 fee', () => {
    const { l1Fee: _, ...l1Receipt } = opReceipt;
    expect(receiptFee(formatTransactionReceipt(l1Receipt as never))).toBe(0x14c08n * 0x3b9aca00n);
    expect(receiptFee({ gasUsed: 2n, effectiveGasPrice: 3n, l1Fee: 5n })).toBe(11n);
  });
});

describe('L1DataFee: a read the API started is never what the node waits on', () => {
  // The oracle reads the API makes queue behind the provider's budget for the API (chains/providers/pool.ts), which a
  // client reading as fast as it is answered keeps full: one of them never answers here. A fill's read of the same
  // size and block must not wait on it.
  it("reads again as the node's own where the cached read is the API's", async () => {
    const reads: { api: boolean; answer: (fee: bigint) => void }[] = [];
    const client = {
      getCode: async () => '0x60',
      readContract: () =>
        new Promise<bigint>((resolve) => {
          reads.push({ api: isApiRead(), answer: resolve });
        }),
    };
    const fee = new L1DataFee(client as never, 'auto', 0, () => 7n);
    const forQuote = apiReads.run(true, () => fee.of(100));
    await until(() => (reads.length === 1 ? true : undefined), 'the quote read the oracle');
    const forFill = fee.of(100);
    await until(() => (reads.length === 2 ? true : undefined), "the fill read the oracle as the node's own");
    expect(reads.map((r) => r.api)).toEqual([true, false]);
    reads[1]!.answer(5n);
    expect(await forFill).toBe(5n);
    // A later API read of the block shares the node's answer; the API's own stays its own.
    expect(await apiReads.run(true, () => fee.of(100))).toBe(5n);
    expect(reads).toHaveLength(2);
    reads[0]!.answer(9n);
    expect(await forQuote).toBe(9n);
  });
});
