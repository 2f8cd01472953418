import type { Ledger } from '../ledger/index.ts';

/**
 * What the solver can spend of a currency on a chain: what it holds there, read from the chain,
 * minus what the ledger promised and has not yet paid. The promises are read before and after the
 * chain read and the larger is taken: a payout that is paid and marked done while the balance is
 * being read is then never counted as spendable (taken once more, at worst, until the next read).
 */
export async function spendable(ledger: Ledger, chainId: number, currency: string, held: () => Promise<bigint>): Promise<bigint> {
  const reserved = () => ledger.payouts.reservedOn(chainId).get(currency) ?? 0n;
  const before = reserved();
  const amount = await held();
  const after = reserved();
  return amount - (before > after ? before : after);
}
