import type { ChainPorts } from '../chains/ports.ts';
import type { Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';

export interface InventoryLine {
  currency: string;
  symbol: string;
  /**
   * Smallest units, as decimal strings: what the solver's wallet holds, what payouts not yet made
   * have promised of it, and the rest.
   */
  held: string;
  reserved: string;
  spendable: string;
  /**
   * What the depository holds for the solver (deposits of filled orders not withdrawn yet): counted
   * as inventory, brought to the wallet by a withdrawal.
   */
  owedByDepository: string;
}

/** The solver's inventory per chain and currency, read from the chains now (an unreachable chain says so). */
export async function inventory(
  registry: Registry,
  chains: Pick<ChainPorts, 'ids' | 'wallet'>,
  ledger: Ledger,
): Promise<{ chainId: number; name: string; currencies?: InventoryLine[]; error?: string }[]> {
  return Promise.all(
    chains.ids().map(async (chainId) => {
      const wallet = chains.wallet(chainId)!;
      const name = registry.chains.get(chainId)?.name ?? String(chainId);
      try {
        const reserved = ledger.payouts.reservedOn(chainId);
        // The exchange has no depository: a deposit there is a transfer to the solver's own account, which the wallet's
        // balance holds already (counted again, the inventory was the wallet plus every filled deposit there).
        const owed = registry.chains.get(chainId)?.kind === 'exchange' ? new Map<string, bigint>() : ledger.withdrawals.owedByCurrency(chainId);
        const currencies = await Promise.all(
          registry.currenciesOf(chainId).map(async (c) => {
            const held = await wallet.balanceOf(wallet.solver, c.address);
            const r = reserved.get(c.address) ?? 0n;
            return {
              currency: c.address,
              symbol: c.symbol,
              held: held.toString(),
              reserved: r.toString(),
              spendable: (held - r).toString(),
              owedByDepository: (owed.get(c.address.toLowerCase()) ?? 0n).toString(),
            };
          }),
        );
        return { chainId, name, currencies };
      } catch {
        // The provider's message may carry its URL: the operator gets the fact, not the detail.
        return { chainId, name, error: 'chain unreachable' };
      }
    }),
  );
}
