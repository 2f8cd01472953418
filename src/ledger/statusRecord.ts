import type { Deposits } from './deposits.ts';
import type { Payouts } from './payouts.ts';
import type { RequestRow } from './types.ts';

/** What the builder reads: the ledger, or the parts of it the outbox has while a request changes. */
export interface StatusSources {
  deposits: Pick<Deposits, 'forRequest' | 'byOrderRef'>;
  payouts: Pick<Payouts, 'forRequest'>;
}

export type StatusRecord = ReturnType<typeof statusRecord>;

/**
 * The Status record of the interface, read from the ledger only. It lives in the ledger because
 * every status change writes it to the events outbox (src/ledger/events.ts).
 */
export function statusRecord(ledger: StatusSources, r: RequestRow) {
  const deposits = ledger.deposits.forRequest(r.id);
  // Before its deposit is confirmed, an order has no deposit assigned; show the ones seen for it.
  const seen = r.kind === 'order' && r.status === 'waiting' ? ledger.deposits.byOrderRef(r.id) : [];
  const inTxHashes = [...new Set([...deposits, ...seen].map((d) => d.tx_hash))];
  const txHashes: string[] = [];
  for (const p of ledger.payouts.forRequest(r.id)) {
    if (p.tx_hash) txHashes.push(p.tx_hash);
  }
  return {
    status: r.status,
    details: r.details ?? detailsFor(r),
    inTxHashes,
    txHashes,
    updatedAt: r.updated_at,
    originChainId: r.origin_chain_id,
    destinationChainId: r.destination_chain_id,
    quoteCreatedAt: r.created_at,
    failReason: r.fail_reason,
    refundFailReason: r.refund_fail_reason,
  };
}

function detailsFor(r: RequestRow): string {
  switch (r.status) {
    case 'waiting':
      return 'Waiting for the deposit to be confirmed';
    case 'depositing':
      return 'Deposit in flight';
    case 'pending':
      return 'Deposit confirmed; fill queued';
    case 'submitted':
      return 'Fill submitted on the destination chain';
    case 'success':
      return 'Filled';
    case 'refund':
      return `Refunded after ${r.fail_reason ?? 'failure'}`;
    case 'failure':
      return r.refund_fail_reason ? `Failed (${r.fail_reason}); refund not possible: ${r.refund_fail_reason}` : `Failed (${r.fail_reason}); refund pending`;
  }
}
