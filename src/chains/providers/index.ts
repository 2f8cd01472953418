import { createPublicClient, type Chain, type PublicClient } from 'viem';
import type { RpcProviderConfig } from '../../config/schema.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { ProviderPool } from './pool.ts';
import { decisionTransport, poolTransport } from './transport.ts';

export { ProviderPool, ProviderPoolError, QuorumDisagreementError, DECISION_METHODS } from './pool.ts';

/** A chain's providers as configured: `rpc`, or the single `rpcUrl` as a list of one. */
export function providersOf(chain: { rpcUrl?: string; rpc?: RpcProviderConfig[] }): RpcProviderConfig[] {
  if (chain.rpc?.length) return chain.rpc;
  if (!chain.rpcUrl) return [];
  return [{ url: chain.rpcUrl, weight: 1, maxRps: 0, maxConcurrent: 32, role: 'any' }];
}

/** The pool of one EVM chain's providers and its two clients: routed reads, and quorum decision reads. */
export function evmClients(
  chain: { id: number; rpcUrl?: string; rpc?: RpcProviderConfig[]; quorum?: number; pollIntervalMs: number },
  viemChain: Chain,
  metrics: Metrics,
  log: Logger,
  onPushedHead?: (n: bigint) => void,
): { pool: ProviderPool; client: PublicClient; decisionClient: PublicClient } {
  const pool = new ProviderPool({
    chainId: chain.id,
    onPushedHead,
    providers: providersOf(chain),
    quorum: chain.quorum,
    probeMs: Math.max(100, Math.min(chain.pollIntervalMs, 2_000)),
    metrics,
    log,
  });
  const client = createPublicClient({ chain: viemChain, transport: poolTransport(pool) }) as PublicClient;
  const decisionClient = createPublicClient({ chain: viemChain, transport: decisionTransport(pool) }) as PublicClient;
  return { pool, client, decisionClient };
}
