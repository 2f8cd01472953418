import { vi } from 'vitest';
import { rpc } from '../../src/devnet/rawTransactions.ts';

/**
 * Runs fn with the node's clock `days` on (Date only) and the chain at `rpcUrl` a block `days` on too: past a failed
 * signed call's expiry (7 days), which the node judges by the chain's blocks (a chain of 1 confirmation). The chain's
 * clock is set back after, so that calls signed later are not expired on chain from the start.
 */
export async function daysLater<T>(rpcUrl: string, days: number, fn: () => Promise<T>): Promise<T> {
  await rpc(rpcUrl, 'evm_increaseTime', [days * 86_400]);
  await rpc(rpcUrl, 'evm_mine', []);
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(Date.now() + days * 86_400_000);
  try {
    return await fn();
  } finally {
    vi.useRealTimers();
    await rpc(rpcUrl, 'anvil_setTime', [Math.floor(Date.now() / 1000)]);
    await rpc(rpcUrl, 'evm_mine', []);
  }
}
