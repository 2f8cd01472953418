import { randomUUID } from 'node:crypto';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow } from '../ledger/types.ts';
import { RelayNodeError } from '../lib/errors.ts';

/** Who asks for a withdrawal and why (an operator, or the node's own threshold): recorded with it. */
export interface WithdrawWho {
  actor: string;
  reason: string;
}

export interface WithdrawRequest {
  chainId: number;
  /** The currency's address on the chain (the zero address for native). */
  currency: string;
  /** The solver's wallet on the chain: the only recipient a withdrawal ever has. */
  solver: string;
  /** At most this much (smallest units); all that is owed when absent. Whole deposits are taken. */
  amount?: bigint;
  /** Exactly these deposits; each must be owed to the solver. */
  depositIds?: string[];
}

/** A withdrawal the ledger does not allow: more than is owed, or a deposit still owed to a user. */
export class WithdrawalRefused extends RelayNodeError {
  override name = 'WithdrawalRefused';
  constructor(
    message: string,
    readonly errorCode: 'NOTHING_OWED' | 'AMOUNT_EXCEEDS_OWED' | 'DEPOSIT_NOT_OWED',
  ) {
    super(message);
  }
}

/**
 * Queues the withdrawal of depository funds owed to the solver (deposits of filled orders) to the
 * solver's wallet, as one payout of kind `withdrawal` (an allocator-signed call request the chain's
 * submitter sends). The payout, the deposits it takes and the admin entry with who and why are one
 * ledger transaction. Throws WithdrawalRefused when the ledger does not owe what is asked.
 */
export function queueWithdrawal(ledger: Ledger, req: WithdrawRequest, who: WithdrawWho, now = Date.now()): PayoutRow {
  return ledger.tx(() => {
    const owed = ledger.withdrawals.owed(req.chainId, req.currency);
    let take = owed;
    if (req.depositIds) {
      const byId = new Map(owed.map((d) => [d.id, d]));
      const bad = req.depositIds.find((id) => !byId.has(id));
      if (bad)
        throw new WithdrawalRefused(
          `deposit ${bad} is not owed to the solver in ${req.currency} on chain ${req.chainId} (not filled, owed to a user, or withdrawn already)`,
          'DEPOSIT_NOT_OWED',
        );
      take = [...new Set(req.depositIds)].map((id) => byId.get(id)!);
    }
    const total = take.reduce((s, d) => s + d.owed, 0n);
    // What withdrawals took of deposits a reorg then took back stays in the depository (its users' deposits): room is
    // the most any withdrawal may take now.
    const shortfall = ledger.withdrawals.shortfall(req.chainId, req.currency);
    const room = owed.reduce((s, d) => s + d.owed, 0n) - shortfall;
    const short = shortfall > 0n ? ` (less ${shortfall} that withdrawals took of deposits a reorg took back)` : '';
    if (total === 0n || room <= 0n)
      throw new WithdrawalRefused(`nothing in ${req.currency} on chain ${req.chainId} is owed to the solver${short}`, 'NOTHING_OWED');
    const most = total < room ? total : room;
    if ((req.amount !== undefined && req.amount > most) || (req.depositIds && total > room))
      throw new WithdrawalRefused(
        `${req.amount ?? total} asked, but the depository owes the solver ${most} in ${req.currency} on chain ${req.chainId}${short}`,
        'AMOUNT_EXCEEDS_OWED',
      );
    const limit = req.amount ?? room;
    if (total > limit) {
      // Whole deposits, oldest first, as long as they fit in the amount asked (or the room).
      const fit: typeof take = [];
      let sum = 0n;
      for (const d of take) if (sum + d.owed <= limit) fit.push(d), (sum += d.owed);
      if (sum === 0n)
        throw new WithdrawalRefused(
          `no whole deposit fits in ${limit}; the smallest owed is ${take.reduce((m, d) => (d.owed < m ? d.owed : m), total)}`,
          'AMOUNT_EXCEEDS_OWED',
        );
      take = fit;
    }
    const amount = take.reduce((s, d) => s + d.owed, 0n);
    const id = `withdrawal:${randomUUID()}`;
    ledger.payouts.insert({
      id,
      kind: 'withdrawal',
      request_id: null,
      deposit_id: null,
      chain_id: req.chainId,
      recipient: req.solver,
      currency: req.currency,
      amount: amount.toString(),
      decided_at: now,
    });
    ledger.withdrawals.take(
      take.map((d) => d.id),
      id,
    );
    ledger.operations.record(
      {
        action: 'withdraw',
        target: `chain:${req.chainId}`,
        actor: who.actor,
        reason: who.reason,
        detail: { payout: id, currency: req.currency, amount: amount.toString(), deposits: take.map((d) => d.id) },
      },
      now,
    );
    return ledger.payouts.get(id)!;
  });
}
