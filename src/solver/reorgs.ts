import type { ReorgDecider } from '../indexer/events.ts';
import type { Ledger } from '../ledger/index.ts';
import type { DepositRow, PayoutRow } from '../ledger/types.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { reverseAppFees, reverseSponsor, unsettleHold } from './appBalanceBooks.ts';

const REASON = 'DEPOSIT_REORGED';

/**
 * What a reorg means for a deposit the node acted on, decided by the solver: the indexer only reports
 * that the deposit is no longer canonical (src/indexer/driver.ts).
 */
export class DepositReorgs implements ReorgDecider {
  constructor(
    private ledger: Ledger,
    private metrics: Metrics,
    private log: Logger,
  ) {}

  /** Whether the deposit's request already records DEPOSIT_REORGED (its payout had gone out, so it stays handled). */
  reorgDecided(d: DepositRow): boolean {
    return !!d.request_id && this.ledger.requests.get(d.request_id)?.fail_reason === REASON;
  }

  /**
   * A deposit the node acted on, that a reorg removed and the new chain does not hold: the request
   * records DEPOSIT_REORGED. Payouts not yet signed for it are cancelled (the deposit is left as
   * reorged, so a later inclusion of the same transaction is decided afresh); a payout already signed
   * cannot be taken back: the request keeps its course, with the reason recorded for the operator.
   * Runs inside the indexer's ledger transaction.
   */
  onDepositReorged(d: DepositRow, now: number): void {
    const r = d.request_id ? this.ledger.requests.get(d.request_id) : undefined;
    // A fast fill is paid before its deposit comes, and tied to it when it settles. One settled before
    // payouts were tied is tied now, so that it counts below as the payout already made.
    const fastFill = r?.fast_fill_deadline != null ? this.ledger.payouts.get(`fill:${r.id}`) : undefined;
    const paidAhead = fastFill?.state === 'success';
    if (paidAhead && fastFill.deposit_id === null) this.ledger.payouts.linkDeposit(fastFill.id, d.id);
    const payouts = this.ledger.payouts.forDeposit(d.id);
    // A refund or excess queued again after it was sent (its transaction could no longer land: #settleOrRequeue) was
    // signed all the same: its depository call went out with that transaction, and anyone may still submit it.
    const broadcast = (p: PayoutRow) => (p.kind === 'refund' || p.kind === 'excess') && this.ledger.payouts.txsOf(p.id).length > 0;
    const signed = payouts.filter((p) => p.state !== 'queued' || broadcast(p));
    for (const p of payouts) {
      if (p.state === 'queued' && !broadcast(p)) this.ledger.payouts.setState(p.id, 'failed', { failReason: REASON }, now);
    }
    if (!signed.length) {
      this.ledger.deposits.unhandleReorged(d.id);
      if (d.request_id && payouts.some((p) => p.kind === 'fill')) reverseSponsor(this.ledger, d.request_id);
    } else {
      // It stays handled (a re-inclusion is the same deposit), but the depository does not hold it.
      this.ledger.withdrawals.writeOff(d.id);
      // The fill's app fees were never earned: no value came in. A fast fill's are, once the app bears the hold below.
      if (r && !paidAhead) reverseAppFees(this.ledger, r.id);
    }
    // The fast fill this deposit settled: the app that held for it bears it now.
    if (paidAhead) unsettleHold(this.ledger, r!.id);
    if (r) this.ledger.requests.setStatus(r.id, signed.length ? r.status : 'failure', { failReason: REASON }, now);
    this.metrics.decisions.inc({ decision: 'fail', reason: REASON });
    this.log.error(
      { chain: d.chain_id, requestId: d.request_id ?? d.order_ref, deposit: d.id, cancelled: payouts.length - signed.length, signed: signed.map((p) => p.id) },
      signed.length ? 'DEPOSIT_REORGED: a reorg removed a deposit already paid out' : 'DEPOSIT_REORGED: a reorg removed a deposit; its payouts are cancelled',
    );
  }
}
