import type { DepositAddressFunding } from '../chains/adapter.ts';
import type { Ledger } from '../ledger/index.ts';

/**
 * Queues the sweep of funds that reached a request's deposit address, unless a sweep of that address
 * and currency is still open (a later arrival gets its own once it is done). The sweep pays into the
 * depository, for the request's refund address (refunds go back there). Returns whether it queued one.
 * Runs inside the caller's ledger transaction.
 */
export function queueSweep(ledger: Ledger, f: DepositAddressFunding, now = Date.now()): boolean {
  const r = ledger.requests.get(f.requestId);
  if (!r) return false;
  const sweeps = ledger.payouts.forRequest(r.id).filter((p) => p.kind === 'sweep' && p.currency === f.currency);
  if (sweeps.some((p) => p.state === 'queued' || p.state === 'sent')) return false;
  ledger.payouts.insert({
    id: `sweep:${r.id}:${f.currency}:${sweeps.length}`,
    kind: 'sweep',
    request_id: r.id,
    deposit_id: null,
    chain_id: f.chainId,
    // Whose deposit the sweep makes: refunds go back there.
    recipient: r.refund_to!,
    currency: f.currency,
    amount: f.amount.toString(),
    // The arrival the sweep moves is dated by its decision (the matcher's arrivedAt): when the address held it, where the
    // watcher proved that earlier (paid in time while the node was down), else now.
    decided_at: f.heldBy !== undefined && f.heldBy < now ? f.heldBy : now,
  });
  return true;
}
