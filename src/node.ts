import { hostname } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Address } from 'viem';
import { createAdminApi } from './admin/server.ts';
import { ListingPool } from './api/listing/pool.ts';
import { createApi, createOperatorApi } from './api/server.ts';
import { ChainRegistry } from './chains/registry.ts';
import type { Config } from './config/load.ts';
import { Registry } from './config/registry.ts';
import { Deliverer } from './events/deliverer.ts';
import { Ledger, type LedgerLocation, type OpenedLedger } from './ledger/index.ts';
import { QuotePruner } from './ledger/quotePruner.ts';
import { NotifyQueueGuard } from './ledger/postgres/notifyQueueGuard.ts';
import { PostgresLedger } from './ledger/postgres/ledger.ts';
import { DepositFeeReader } from './chains/depositFeeReader.ts';
import { createLogger, type Logger } from './log.ts';
import { asNodeWork } from './lib/apiReads.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { SeenPrices } from './chains/seenPrices.ts';
import { FeedPriceSource, recordingPrices, type PriceSource } from './quote/prices.ts';
import { Solver } from './solver/solver.ts';
import { SolverDesk } from './solver/desk.ts';
import { registerAuditMetrics } from './audit/audit.ts';
import { AuditDifference } from './audit/auditDifference.ts';
import { BalanceDrift } from './solver/lossBreaker.ts';
import { refuseWhileDraining, unsent } from './drain.ts';
import { fencedLedger } from './ledger/fenced.ts';
import type { LeaseLostError } from './ledger/leases.ts';
import { EXIT_LEASE_LOST, Leadership } from './lease/leadership.ts';

export interface NodeOptions {
  log?: Logger;
  prices?: PriceSource;
  /** Serve the API over the ledger without indexing, solving or submitting (`relay-node api`). */
  readOnly?: boolean;
  /** The API's clock (tests move it to drive date-dependent behaviour such as the v2 retirement). */
  now?: () => number;
  /**
   * Active/standby (config.ha): what to do once this node lost the leader lease, its acting ledger
   * already fenced. Default: exit with EXIT_LEASE_LOST (crash-only: the supervisor starts it again, a standby).
   */
  onLeaseLost?: (err: LeaseLostError) => void;
}

// The most a start waits for the first price reads (#notePrices).
const PRICE_NOTE_MS = 10_000;

export function ledgerPath(config: Config): string {
  return join(config.dataDir, 'ledger.sqlite');
}

/** Where the configured ledger is: PostgreSQL at `ledger.url` when set (a secret, revealed to the connection only), else the SQLite file. */
export function ledgerLocation(config: Config): LedgerLocation {
  return {
    path: ledgerPath(config),
    url: config.ledger?.url?.reveal(),
    timeoutMs: config.ledger?.timeoutMs,
    statusCacheMaxAgeMs: config.ledger?.statusCacheMaxAgeMs,
  };
}

/** One relay node: chains → indexers → ledger → solver → submitters → chains, and the API over the ledger. */
export class RelayNode {
  /** The ledger this node opened, SQLite's or PostgreSQL's (tests and benchmarks seed it); its stages are handed the `Ledger` interface only. */
  readonly ledger: OpenedLedger;
  /**
   * The ledger of the stages that act on chains (indexers, solver and its desk, submitters, deliverer,
   * pruner): with config.ha, fenced by the leader lease (every write checks it; src/ledger/fenced.ts);
   * without, the ledger itself. The API and the admin API write to `ledger`, never fenced: a standby
   * serves quotes too.
   */
  readonly acting: Ledger;
  /** The leader lease (config.ha.enabled): when this node acts, and the gate of its broadcasts. */
  readonly leadership: Leadership | undefined;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly registry: Registry;
  /** Every chain's profile and (unless read-only) its adapter, handed out as narrow ports. */
  readonly chains: ChainRegistry;
  readonly solver: Solver | undefined;
  /** What the API asks of the solver (absent on a read-only replica). */
  readonly desk: SolverDesk | undefined;
  readonly api: FastifyInstance;
  /** Worker threads (own read-only ledger connections) for the request listings. */
  readonly listings: ListingPool;
  /** /ready and /metrics on api.metricsListen, when configured. */
  readonly operatorApi: FastifyInstance | undefined;
  readonly solverAddress: Address;
  /** Webhook deliveries of the status events outbox (absent on a read-only replica). */
  readonly deliverer: Deliverer | undefined;
  /** The admin API, on its own listen address (config.admin.port; absent: not served). */
  readonly admin: FastifyInstance | undefined;
  #adminUrl: string | undefined;
  #draining: string | undefined;
  /** Deletes quotes nobody used, past their expiry (absent on a read-only replica). */
  readonly quotePruner: QuotePruner | undefined;
  readonly depositFees: DepositFeeReader | undefined;
  /** PostgreSQL: keeps the notification queue from filling behind a stuck API replica (the leader's). */
  readonly notifyQueue: NotifyQueueGuard | undefined;
  #url: string | undefined;
  // Reads each currency's price once through the node's price source, noting it for the indexers (SeenPrices).
  #notePrices: (() => Promise<void>) | undefined;
  #operatorUrl: string | undefined;

  constructor(
    readonly config: Config,
    opts: NodeOptions = {},
  ) {
    this.log = opts.log ?? createLogger(config.log.level);
    this.metrics = createMetrics();
    this.registry = new Registry(config.chains);
    this.ledger = Ledger.connect(ledgerLocation(config), {
      readonly: opts.readOnly,
      checkpointThread: this.log,
      // An active/standby node writes its ranges through the fenced view, in transactions that check the lease: no thread.
      writerThread: config.ha.enabled ? undefined : this.log,
    });
    registerAuditMetrics(this.metrics.registry, this.ledger);
    if (config.ha.enabled && !opts.readOnly) {
      let leadership: Leadership | undefined;
      // A write that finds the lease taken ends the leadership (fenced first), even where its caller catches it.
      const acting = fencedLedger(this.ledger, (err) => leadership?.lost(err));
      const onLost =
        opts.onLeaseLost ??
        (() => {
          process.stderr.write(`relay-node: leader lease lost; exiting with code ${EXIT_LEASE_LOST} (a supervisor starts it again as a standby)\n`);
          process.exit(EXIT_LEASE_LOST);
        });
      this.leadership = leadership = new Leadership({
        ledger: this.ledger,
        acting,
        nodeId: config.ha.nodeId ?? `${hostname()}:${process.pid}`,
        leaseMs: config.ha.leaseMs,
        renewMs: config.ha.renewMs,
        // Renewals on a thread of their own, with a connection of their own: the event loop may stall in ledger calls.
        renewFrom: ledgerLocation(config),
        log: this.log,
        metrics: this.metrics,
        onLead: () => this.#startStages(),
        onLost,
      });
      this.acting = acting;
    } else {
      this.acting = this.ledger;
    }
    // From the config: a read-only replica may have the address without the key.
    this.solverAddress = config.solverAddress;
    let prices: PriceSource;
    if (opts.readOnly) {
      this.chains = new ChainRegistry(config.chains);
      prices = opts.prices ?? new FeedPriceSource(this.chains);
    } else {
      // The chains first, then the solver they report to: their hooks reach the solver once it is
      // built (nothing calls them before start()).
      let solver: Solver | undefined;
      const to = () => solver!;
      const hooks = {
        onSigned: (...a: Parameters<Solver['onSigned']>) => to().onSigned(...a),
        onPaid: (...a: Parameters<Solver['onPaid']>) => to().onPaid(...a),
        onFailed: (...a: Parameters<Solver['onFailed']>) => to().onFailed(...a),
        onFunding: (...a: Parameters<Solver['onFunding']>) => to().onFunding(...a),
        reorgs: {
          reorgDecided: (...a: Parameters<Solver['reorgs']['reorgDecided']>) => to().reorgs.reorgDecided(...a),
          onDepositReorged: (...a: Parameters<Solver['reorgs']['onDepositReorged']>) => to().reorgs.onDepositReorged(...a),
        },
        onDepositAddressFunded: (...a: Parameters<Solver['onDepositAddressFunded']>) => to().onDepositAddressFunded(...a),
        // The solver's pass is the node's own work: a deposit a client reports (an SVM transaction read at once) confirms
        // it from within the API's request, whose chain reads yield to the node's (lib/apiReads.ts).
        depositsConfirmed: () => asNodeWork(() => to().depositsConfirmed()),
      };
      // Every price the node reads is noted for the indexers, which weigh deposits (confirmations by value) as they read them.
      const seenPrices = new SeenPrices();
      this.chains = new ChainRegistry(config.chains, {
        config,
        ledger: this.acting,
        hooks,
        metrics: this.metrics,
        log: this.log,
        gate: this.leadership,
        seenPrices,
      });
      prices = recordingPrices(opts.prices ?? new FeedPriceSource(this.chains), seenPrices);
      const noted = prices;
      this.#notePrices = async () => {
        const reads = [...this.registry.chains.keys()].flatMap((id) => this.registry.currenciesOf(id).map((c) => noted.usdPrice(c).catch(() => undefined)));
        let timer: NodeJS.Timeout | undefined;
        // Bounded: a feed that does not answer delays no start (its deposits are weighed at the configured price meanwhile).
        await Promise.race([Promise.all(reads), new Promise((resolve) => (timer = setTimeout(resolve, PRICE_NOTE_MS)))]);
        clearTimeout(timer);
      };
      // The loss breaker's measure: the audit's difference (anchored at the audit's opening block) where it can be read, balance drift elsewhere.
      const lossMeasure = config.risk.lossBreaker
        ? new AuditDifference(this.acting, this.registry, this.chains, prices, new BalanceDrift(this.acting, this.registry, this.chains, prices), this.log)
        : undefined;
      solver = new Solver(this.acting, this.registry, this.chains, prices, this.metrics, this.log, config.risk, config.inventory, lossMeasure);
      this.solver = solver;
      // The API's fast fills, claims and relays are the solver's payouts: fenced (a standby answers 503 NOT_LEADER).
      this.desk = new SolverDesk(this.acting, this.registry, this.chains, prices, config.risk);
      this.quotePruner = new QuotePruner(this.acting.requests, {
        graceMs: config.quote.pruneGraceSeconds * 1000,
        intervalMs: config.quote.pruneIntervalSeconds * 1000,
        now: opts.now ?? Date.now,
        onPruned: (n) => this.log.info({ pruned: n }, 'unused expired quotes deleted'),
        onError: (e) => this.log.error({ err: e.message }, 'pruning unused quotes failed'),
      });
      this.depositFees = new DepositFeeReader(this.acting, this.chains, this.log);
      if (this.ledger instanceof PostgresLedger) {
        this.notifyQueue = new NotifyQueueGuard(this.ledger, {
          onUsage: (u) => this.metrics.notifyQueueUsage.set(u),
          onEnded: (n, usage) =>
            this.log.warn({ listeners: n, usage }, "PostgreSQL's notification queue is held back: the API replicas' status listeners ended"),
          onError: (e) => this.log.error({ err: e.message }, "reading PostgreSQL's notification queue failed"),
        });
      }
      this.deliverer = new Deliverer({ ledger: this.acting, config, metrics: this.metrics, log: this.log, gate: this.leadership });
    }
    this.listings = new ListingPool(
      { ledger: ledgerLocation(config), chains: config.chains, solver: this.solverAddress, bounds: config.api.listing, nice: config.api.listing.workerNice },
      { workers: config.api.listing.workers, timeoutMs: config.api.listing.timeoutMs, perCaller: config.api.listing.perCaller, log: this.log },
    );
    const apiContext = {
      config,
      registry: this.registry,
      ledger: this.ledger,
      metrics: this.metrics,
      log: this.log,
      prices,
      solver: this.solverAddress,
      chains: this.chains,
      ports: opts.readOnly ? undefined : this.chains,
      solverPort: this.desk,
      now: opts.now ?? Date.now,
      listings: this.listings,
      role: this.leadership ? () => this.leadership!.role : undefined,
    };
    this.api = createApi(apiContext);
    this.operatorApi = config.api.metricsListen ? createOperatorApi(apiContext) : undefined;
    refuseWhileDraining(this.api, () => this.#draining);
    if (this.solver && config.admin.port !== undefined) {
      this.admin = createAdminApi({
        ledger: this.ledger,
        registry: this.registry,
        chains: this.chains,
        solver: this.solver,
        log: this.log,
        reindexMaxBlocks: config.admin.reindexMaxBlocks,
        receive: config.api,
      });
    }
  }

  /** The chains' adapters by chain id, for tests and diagnostics (empty on a read-only replica); the node's parts take ports. */
  get adapters(): ChainRegistry['adapters'] {
    return this.chains.adapters;
  }

  get adminUrl(): string {
    if (!this.#adminUrl) throw new Error('admin API not started (config.admin.port)');
    return this.#adminUrl;
  }

  get url(): string {
    if (!this.#url) throw new Error('node not started');
    return this.#url;
  }

  /** The operator listener's URL (api.metricsListen), once started. */
  get operatorUrl(): string | undefined {
    return this.#operatorUrl;
  }

  async start(): Promise<this> {
    // Active/standby: the API at once, the chain stages once this node holds the lease.
    if (!this.leadership) await this.#startStages();
    this.#url = await this.api.listen({ host: this.config.api.host, port: this.config.api.port });
    if (this.admin) this.#adminUrl = await this.admin.listen({ host: this.config.admin.host, port: this.config.admin.port });
    const ml = this.config.api.metricsListen;
    if (this.operatorApi && ml) this.#operatorUrl = await this.operatorApi.listen({ host: ml.host, port: ml.port });
    this.log.info(
      { url: this.#url, solver: this.solverAddress, chains: [...this.registry.chains.keys()], nodeId: this.leadership?.nodeId },
      this.leadership ? 'relay node started as a standby: acting once it holds the leader lease' : 'relay node started',
    );
    this.leadership?.start();
    return this;
  }

  // The stages that act on chains, as a fresh start runs them: each chain's submitter reconciles what
  // the ledger recorded (by nonce, blockhash, the exchange's nonce) before it signs anything new.
  async #startStages(): Promise<void> {
    // The indexers weigh deposits (and app balance fundings) for confirmationsByValue at the newest price the node read,
    // from their first pass: one made while the node was down is judged at once, before the solver reads any price.
    await this.#notePrices?.();
    await this.solver?.prime();
    await this.chains.start();
    this.solver?.start();
    this.deliverer?.start();
    this.quotePruner?.start();
    this.depositFees?.start();
    this.notifyQueue?.start();
  }

  /**
   * Graceful drain: stop quoting (503 with the reason), stop deciding, and wait until what the
   * ledger recorded is signed and broadcast, for at most `boundMs`. The node keeps confirming
   * while it waits; `stop()` follows. Nothing recorded is lost even when the bound cuts it short:
   * a restarted node takes up whatever is queued or signed. Resolves with what was left unsent.
   */
  async drain(boundMs = this.config.shutdown.drainTimeoutMs, reason = 'the node is shutting down'): Promise<number> {
    this.#draining = reason;
    if (this.leadership && this.leadership.role !== 'leader') {
      // A standby has nothing of its own to finish: the leader sends what the ledger holds.
      this.log.info('draining a standby: nothing to finish');
      return 0;
    }
    this.log.info({ boundMs }, 'draining: no new quotes; finishing what is recorded');
    await this.solver?.stop();
    const end = Date.now() + boundMs;
    let left = unsent(this.ledger);
    while (left > 0 && Date.now() < end) {
      for (const id of this.chains.ids()) this.chains.payoutsQueued(id);
      await new Promise((r) => setTimeout(r, 50));
      left = unsent(this.ledger);
    }
    if (left) this.log.warn({ left }, 'drain bound reached: the rest is in the ledger for the next start');
    else this.log.info('drained: everything recorded is broadcast');
    return left;
  }

  async stop(): Promise<void> {
    await this.admin?.close();
    this.quotePruner?.stop();
    this.notifyQueue?.stop();
    await this.depositFees?.stop();
    await this.api.close();
    await this.operatorApi?.close();
    await this.listings.close();
    await this.deliverer?.stop();
    await this.solver?.stop();
    await this.chains.stop();
    // Released once nothing acts any more: a standby takes over at its next try, not after a lease.
    this.leadership?.stop();
    // SQLite: once its checkpoint thread has closed too, everything committed is in the database file.
    if ('closed' in this.ledger) await this.ledger.closed();
    else this.ledger.close();
  }
}
