import { describe, expect, it } from 'vitest';
import { until } from '../../../test/helpers/until.ts';
import { apiReads, isApiRead } from '../../lib/apiReads.ts';
import { FeeOracle } from './fees.ts';

describe('FeeOracle: a read the API started is never what the node waits on', () => {
  // A quote prices gas through the same oracle a fill does. Its reads yield to the node's at the provider
  // (chains/providers/pool.ts), behind as many as a client keeps in flight: here the API's never answer. A fill's fees
  // must not wait on them.
  it("reads the head and the priority fee again as the node's own while the API's are under way", async () => {
    const reads: { method: string; api: boolean; answer: (v: unknown) => void }[] = [];
    const read = (method: string) =>
      new Promise((resolve) => {
        reads.push({ method, api: isApiRead(), answer: resolve });
      });
    const client = { getBlock: () => read('getBlock'), request: ({ method }: { method: string }) => read(method) };
    const oracle = new FeeOracle(client as never, 1_000);
    void apiReads.run(true, () => oracle.current());
    await until(() => (reads.length === 1 ? true : undefined), "the quote's head read");
    const forFill = oracle.current();
    await until(() => (reads.length === 2 ? true : undefined), "the fill's own head read");
    expect(reads.map((r) => [r.method, r.api])).toEqual([
      ['getBlock', true],
      ['getBlock', false],
    ]);
    reads[1]!.answer({ number: 10n, baseFeePerGas: 7n, gasLimit: 30_000_000n });
    // The head warms the priority fee: read as the node's, the fill joins it.
    await until(() => (reads.length === 3 ? true : undefined), "the fill's priority fee read");
    expect([reads[2]!.method, reads[2]!.api]).toEqual(['eth_maxPriorityFeePerGas', false]);
    reads[2]!.answer('0x3');
    expect(await forFill).toEqual({ maxFeePerGas: 17n, maxPriorityFeePerGas: 3n });
    expect(reads).toHaveLength(3);
  });

  it("reads the priority fee again as the node's own while the API's read of the block is under way", async () => {
    const reads: { api: boolean; answer: (v: unknown) => void }[] = [];
    const client = {
      getBlock: async () => ({ number: 5n, baseFeePerGas: 1n, gasLimit: 30_000_000n }),
      request: () =>
        new Promise((resolve) => {
          reads.push({ api: isApiRead(), answer: resolve });
        }),
    };
    const oracle = new FeeOracle(client as never, 60_000);
    void apiReads.run(true, () => oracle.current());
    await until(() => (reads.length === 1 ? true : undefined), "the quote's priority fee read");
    const forFill = oracle.current();
    await until(() => (reads.length === 2 ? true : undefined), "the fill's own priority fee read");
    expect(reads.map((r) => r.api)).toEqual([true, false]);
    reads[1]!.answer('0x2');
    expect(await forFill).toEqual({ maxFeePerGas: 4n, maxPriorityFeePerGas: 2n });
  });
});
