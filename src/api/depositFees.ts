import type { ChainAdapter } from '../chains/adapter.ts';
import type { Ledger } from '../ledger/index.ts';
import type { Logger } from '../log.ts';

/**
 * Reads, once, the fee each deposit transaction of these requests paid (its receipt) and keeps it
 * in the ledger, so the request records can show `inTxs[].fee`. A receipt that cannot be read now
 * leaves the fee unknown (null) until a later listing; it never fails the listing.
 */
export async function recordDepositFees(ledger: Ledger, adapters: Map<number, ChainAdapter> | undefined, requestIds: string[], log: Logger): Promise<void> {
  if (!adapters) return;
  const pending = new Map<string, { chainId: number; txHash: string }>();
  for (const d of ledger.deposits.withoutTxFee(requestIds)) pending.set(`${d.chain_id}:${d.tx_hash}`, { chainId: d.chain_id, txHash: d.tx_hash });
  await Promise.all(
    [...pending.values()].map(async ({ chainId, txHash }) => {
      const adapter = adapters.get(chainId);
      if (!adapter?.txFee) return;
      try {
        ledger.deposits.setTxFee(chainId, txHash, await adapter.txFee(txHash));
      } catch (e) {
        log.debug({ chainId, txHash, err: (e as Error).message }, 'deposit fee not readable yet');
      }
    }),
  );
}
