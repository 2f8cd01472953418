import type { Ledger } from '../ledger/index.ts';

/** A read of what the solver holds of a currency on a chain, with the ledger's promises read just before it. */
export interface HeldRead {
  held: bigint;
  reservedBefore: bigint;
}

// What the ledger promised of a currency on a chain and has not yet paid (queued and sent payouts).
const reservedOf = (ledger: Ledger, chainId: number, currency: string) => ledger.payouts.reservedOn(chainId).get(currency) ?? 0n;

/** Reads what the solver holds (`held`, from the chain), noting the promises first; spendableAfter completes it. */
export async function readHeld(ledger: Ledger, chainId: number, currency: string, held: () => Promise<bigint>): Promise<HeldRead> {
  const reservedBefore = reservedOf(ledger, chainId, currency);
  return { held: await held(), reservedBefore };
}

/**
 * What is spendable of a HeldRead: the promises are read again (now) and the larger is taken, so a
 * payout paid and marked done while the balance was being read is never counted as spendable. Reads
 * the ledger only: inside a ledger transaction it also sees what another admission recorded since.
 */
export function spendableAfter(ledger: Ledger, chainId: number, currency: string, read: HeldRead): bigint {
  const after = reservedOf(ledger, chainId, currency);
  return read.held - (read.reservedBefore > after ? read.reservedBefore : after);
}

/**
 * What the solver can spend of a currency on a chain: what it holds there, read from the chain,
 * minus what the ledger promised and has not yet paid. The promises are read before and after the
 * chain read and the larger is taken: a payout that is paid and marked done while the balance is
 * being read is then never counted as spendable (taken once more, at worst, until the next read).
 */
export async function spendable(ledger: Ledger, chainId: number, currency: string, held: () => Promise<bigint>): Promise<bigint> {
  return spendableAfter(ledger, chainId, currency, await readHeld(ledger, chainId, currency, held));
}
