import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { FailReason, PostponeReason, RefundFailReason } from './ledger/reasons.ts';

type LabelValues = Record<string, string | number>;
/** A counter whose label values are typed: a reason label takes only its union's names. */
type TypedCounter<L extends LabelValues> = Omit<Counter<Extract<keyof L, string>>, 'inc'> & { inc(labels: L, value?: number): void };
/** A gauge whose label values are typed. */
type TypedGauge<L extends LabelValues> = Omit<Gauge<Extract<keyof L, string>>, 'set'> & { set(labels: L, value: number): void };

/** How a fill or refund payout ended; a refund that is never made is counted under its refundFailReason. */
type PayoutLabels = { chain: number | string; outcome: 'success' | 'failed' | RefundFailReason };

/** The node's metrics, in one registry per node instance, so tests can run several nodes in one process. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'relay_node_' });
  const r = [registry];
  return {
    registry,
    depositsIndexed: new Counter({ name: 'relay_deposits_indexed_total', help: 'Depository deposits indexed', labelNames: ['chain'], registers: r }),
    fills: new Counter({ name: 'relay_fills_total', help: 'Fills by outcome', labelNames: ['chain', 'outcome'], registers: r }) as TypedCounter<PayoutLabels>,
    refunds: new Counter({
      name: 'relay_refunds_total',
      help: 'Refunds by outcome',
      labelNames: ['chain', 'outcome'],
      registers: r,
    }) as TypedCounter<PayoutLabels>,
    decisions: new Counter({
      name: 'relay_solver_decisions_total',
      help: 'Solver decisions by outcome and reason',
      labelNames: ['decision', 'reason'],
      registers: r,
    }) as TypedCounter<{ decision: 'fill' | 'fail' | 'settle'; reason: FailReason | 'none' }>,
    depositToFill: new Histogram({
      name: 'relay_deposit_to_fill_seconds',
      help: 'From deposit confirmed by the indexer to fill broadcast',
      labelNames: ['chain'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r,
    }),
    indexerLag: new Gauge({ name: 'relay_indexer_lag_blocks', help: 'Head block minus last indexed block', labelNames: ['chain'], registers: r }),
    headBlock: new Gauge({ name: 'relay_chain_head_block', help: 'Latest block seen', labelNames: ['chain'], registers: r }),
    solverBalance: new Gauge({
      name: 'relay_solver_balance',
      help: 'Solver inventory in smallest units (may lose precision above 2^53)',
      labelNames: ['chain', 'currency'],
      registers: r,
    }),
    // Inventory per chain and currency: the wallet plus what the depository owes the solver, the
    // configured target, and (inventory − target) / target (below 0: under target).
    inventory: new Gauge({
      name: 'relay_inventory',
      help: 'Solver wallet plus depository balance owed to it, smallest units',
      labelNames: ['chain', 'currency'],
      registers: r,
    }),
    inventoryTarget: new Gauge({
      name: 'relay_inventory_target',
      help: 'Configured inventory target, smallest units',
      labelNames: ['chain', 'currency'],
      registers: r,
    }),
    inventorySkew: new Gauge({
      name: 'relay_inventory_skew',
      help: '(inventory - target) / target; negative below target',
      labelNames: ['chain', 'currency'],
      registers: r,
    }),
    rpcErrors: new Counter({ name: 'relay_rpc_errors_total', help: 'Failed RPC calls', labelNames: ['chain', 'method'], registers: r }),
    queueDepth: new Gauge({ name: 'relay_payout_queue_depth', help: 'Payouts queued or in flight', labelNames: ['chain'], registers: r }),
    reorgs: new Counter({ name: 'relay_reorgs_total', help: 'Reorgs detected', labelNames: ['chain'], registers: r }),
    replacements: new Counter({ name: 'relay_tx_replacements_total', help: 'Transactions replaced with a higher fee', labelNames: ['chain'], registers: r }),
    // Status events (src/events): webhook deliveries by outcome (delivered, retry, dead), the time
    // from a status change to its delivery, and the deliveries still pending.
    webhookDeliveries: new Counter({
      name: 'relay_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome',
      labelNames: ['outcome'],
      registers: r,
    }),
    webhookLatency: new Histogram({
      name: 'relay_webhook_delivery_latency_seconds',
      help: 'From a status change (its event in the outbox) to its successful webhook delivery',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 14400],
      registers: r,
    }),
    outboxDepth: new Gauge({ name: 'relay_events_outbox_depth', help: 'Webhook deliveries pending (due or waiting for a retry)', registers: r }),
    // Operating (src/solver/risk.ts, src/solver/lossBreaker.ts): deposits held back by typed reason,
    // the loss breaker's state and the unexplained loss it measures.
    postponed: new Counter({
      name: 'relay_solver_postponed_total',
      help: 'Deposit decisions postponed, by reason',
      labelNames: ['reason'],
      registers: r,
    }) as TypedCounter<{ reason: PostponeReason }>,
    waiting: new Gauge({ name: 'relay_payouts_waiting', help: 'Confirmed deposits held back, by reason', labelNames: ['reason'], registers: r }) as TypedGauge<{
      reason: PostponeReason;
    }>,
    breakerTripped: new Gauge({
      name: 'relay_loss_breaker_tripped',
      help: '1 while the loss breaker holds payouts on the chain',
      labelNames: ['chain'],
      registers: r,
    }),
    unexplainedLoss: new Gauge({
      name: 'relay_unexplained_loss_usd',
      help: 'Solver balance loss the ledger does not explain, in USD',
      labelNames: ['chain'],
      registers: r,
    }),
    // RPC providers (src/chains/providers), labelled by the provider's configured name, never its URL.
    rpcProviderRequests: new Counter({
      name: 'relay_rpc_provider_requests_total',
      help: 'JSON-RPC calls sent to a provider',
      labelNames: ['chain', 'provider'],
      registers: r,
    }),
    rpcProviderErrors: new Counter({
      name: 'relay_rpc_provider_errors_total',
      help: 'Calls a provider failed to answer, by kind (rate_limited, timeout, network, http, behind, internal)',
      labelNames: ['chain', 'provider', 'kind'],
      registers: r,
    }),
    rpcProviderLatency: new Histogram({
      name: 'relay_rpc_provider_latency_seconds',
      help: 'Answer time of a provider (one HTTP exchange)',
      labelNames: ['chain', 'provider'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r,
    }),
    rpcProviderHeadLag: new Gauge({
      name: 'relay_rpc_provider_head_lag_blocks',
      help: "The chain's newest agreed block minus the provider's head (negative: it claims to be ahead)",
      labelNames: ['chain', 'provider'],
      registers: r,
    }),
    rpcQuorumDisagreements: new Counter({
      name: 'relay_rpc_quorum_disagreements_total',
      help: 'Decision reads refused because providers answered differently',
      labelNames: ['chain', 'method'],
      registers: r,
    }),
    feeCapWaits: new Counter({
      name: 'relay_payout_fee_cap_waits_total',
      help: "Payouts (stage send), stuck transactions (stage replace) and their cancels (stage cancel) held back by the chain's fee cap, replacement limit or cancel cap",
      labelNames: ['chain', 'stage'],
      registers: r,
    }),
    svmPayoutsUnproven: new Gauge({
      name: 'relay_svm_payouts_unproven',
      help: "SVM payout transactions expired without a status whose providers' history cannot prove they never landed: held (not signed again) at the last confirm pass",
      labelNames: ['chain'],
      registers: r,
    }),
    payoutPostponed: new Counter({
      name: 'relay_payout_postponed_total',
      help: 'Payouts postponed before signing (they stay queued and are tried again after a backoff), by reason: rpc, fee-cap, no-funds, unconfirmed',
      labelNames: ['chain', 'reason'],
      registers: r,
    }) as TypedCounter<{ chain: string; reason: 'rpc' | 'fee-cap' | 'no-funds' | 'unconfirmed' }>,
    payoutsFailed: new Counter({
      name: 'relay_payouts_failed_total',
      help: 'Payouts failed for good, by kind; a refund, sweep, excess or withdrawal that failed leaves money for an operator to move (GET /admin/payouts?state=failed)',
      labelNames: ['chain', 'kind'],
      registers: r,
    }) as TypedCounter<{ chain: string | number; kind: string }>,
    feeCapCancels: new Counter({
      name: 'relay_payout_fee_cap_cancels_total',
      help: "Cancels of fee-capped transactions at their nonce (feeCapPolicy 'cancel'): sent, and landed (their payouts queued again)",
      labelNames: ['chain', 'outcome'],
      registers: r,
    }) as TypedCounter<{ chain: string; outcome: 'sent' | 'landed' }>,
    wsClients: new Gauge({ name: 'relay_status_stream_clients', help: 'Open websocket status stream connections', registers: r }),
    notifyQueueUsage: new Gauge({
      name: 'relay_ledger_notify_queue_usage',
      help: "PostgreSQL ledger: the share of its notification queue in use (0-1), as the leading node last read it; API replicas' status listeners are ended past 0.1",
      registers: r,
    }),
    leader: new Gauge({ name: 'relay_leader', help: 'Active/standby: 1 while this node holds the leader lease and acts on chains, else 0', registers: r }),
    leaderEpoch: new Gauge({
      name: 'relay_leader_epoch',
      help: 'Active/standby: the leader lease epoch this node acts under (0 before it leads)',
      registers: r,
    }),
  };
}

/** The node's metrics (one registry per node instance). */
export type Metrics = ReturnType<typeof createMetrics>;
