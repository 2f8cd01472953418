import type { Stack } from './stack.ts';
import { until } from './until.ts';

/**
 * Mines the chain's finalityDepth blocks on `chainId` and waits for the node's indexer to have read them: every deposit
 * made on it before is then final, past any reorg the indexer still looks for (so its fill's app fees are claimable).
 */
export async function pastFinality(s: Stack, chainId: number): Promise<void> {
  const chain = s.node.registry.chain(chainId);
  if (chain?.kind !== 'evm') throw new Error(`chain ${chainId} is not an EVM chain of this stack`);
  const client = s.publicClient(chainId);
  const head = Number(await client.getBlockNumber());
  await client.request({ method: 'anvil_mine' as any, params: [`0x${chain.finalityDepth.toString(16)}`] as any });
  await until(() => ((s.node.ledger.indexer.tip(chainId)?.number ?? 0) >= head + chain.finalityDepth ? true : undefined), `chain ${chainId} past finality`);
}
