// The base fee of a devnet chain moved by a test: one block mined at it, seen by the node.
import { toHex } from 'viem';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import type { Stack } from './stack.ts';
import { until } from './until.ts';

/** Mines one block on `chainId` whose base fee is `baseFee` (wei), and waits until the node's indexer has seen it. Returns its number. */
export async function mineAtBaseFee(s: Stack, chainId: number, baseFee: bigint): Promise<bigint> {
  const url = s.devnet.chains.find((c) => c.id === chainId)!.rpcUrl;
  await rpc(url, 'anvil_setNextBlockBaseFeePerGas', [toHex(baseFee)]);
  await rpc(url, 'anvil_mine', ['0x1']);
  const n = await s.publicClient(chainId).getBlockNumber({ cacheTime: 0 });
  await until(() => (BigInt(s.node.adapters.get(chainId)!.progress().head) >= n ? true : undefined), `the node at block ${n} of chain ${chainId}`);
  return n;
}
