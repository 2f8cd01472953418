import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Address } from 'viem';
import { ListingPool } from './api/listing/pool.ts';
import { createApi, createOperatorApi } from './api/server.ts';
import type { ChainAdapter } from './chains/adapter.ts';
import { createAdapter } from './chains/adapters.ts';
import type { Config } from './config/load.ts';
import { Registry } from './config/registry.ts';
import { Deliverer } from './events/deliverer.ts';
import { Ledger } from './ledger/index.ts';
import { QuotePruner } from './ledger/quotePruner.ts';
import { createLogger, type Logger } from './log.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { FeedPriceSource, type PriceSource } from './quote/prices.ts';
import { Solver } from './solver/solver.ts';

export interface NodeOptions {
  log?: Logger;
  prices?: PriceSource;
  // Serve the API over the ledger without indexing, solving or submitting (`relay-node api`).
  readOnly?: boolean;
  // The API's clock (tests move it to drive date-dependent behaviour such as the v2 retirement).
  now?: () => number;
}

export function ledgerPath(config: Config): string {
  return join(config.dataDir, 'ledger.sqlite');
}

// One relay node: chains → indexers → ledger → solver → submitters → chains, and the API over the ledger.
export class RelayNode {
  readonly ledger: Ledger;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly registry: Registry;
  readonly adapters = new Map<number, ChainAdapter>();
  readonly solver: Solver | undefined;
  readonly api: FastifyInstance;
  // Worker threads (own read-only ledger connections) for the request listings.
  readonly listings: ListingPool;
  // /ready and /metrics on api.metricsListen, when configured.
  readonly operatorApi: FastifyInstance | undefined;
  readonly solverAddress: Address;
  // Webhook deliveries of the status events outbox (absent on a read-only replica).
  readonly deliverer: Deliverer | undefined;
  // Deletes quotes nobody used, past their expiry (absent on a read-only replica).
  readonly quotePruner: QuotePruner | undefined;
  #url: string | undefined;
  #operatorUrl: string | undefined;

  constructor(
    readonly config: Config,
    opts: NodeOptions = {},
  ) {
    this.log = opts.log ?? createLogger(config.log.level);
    this.metrics = createMetrics();
    this.registry = new Registry(config.chains);
    this.ledger = Ledger.open(ledgerPath(config), { readonly: opts.readOnly });
    // From the config: a read-only replica may have the address without the key.
    this.solverAddress = config.solverAddress;
    const prices = opts.prices ?? new FeedPriceSource(config.chains);
    if (!opts.readOnly) {
      const solver = new Solver(this.ledger, this.registry, this.adapters, prices, this.metrics, this.log);
      this.solver = solver;
      const hooks = {
        onSigned: solver.onSigned.bind(solver),
        onPaid: solver.onPaid.bind(solver),
        onFailed: solver.onFailed.bind(solver),
        onFunding: solver.onFunding.bind(solver),
        wake: () => solver.wake(),
      };
      this.quotePruner = new QuotePruner(this.ledger.db, {
        graceMs: config.quote.pruneGraceSeconds * 1000,
        intervalMs: config.quote.pruneIntervalSeconds * 1000,
        now: opts.now ?? Date.now,
        onPruned: (n) => this.log.info({ pruned: n }, 'unused expired quotes deleted'),
        onError: (e) => this.log.error({ err: e.message }, 'pruning unused quotes failed'),
      });
      this.deliverer = new Deliverer({ ledger: this.ledger, config, metrics: this.metrics, log: this.log });
      for (const chain of config.chains) {
        this.adapters.set(chain.id, createAdapter(chain, { config, ledger: this.ledger, hooks, metrics: this.metrics, log: this.log }));
      }
    }
    this.listings = new ListingPool(
      { ledgerPath: ledgerPath(config), chains: config.chains, solver: this.solverAddress },
      { workers: config.api.listing.workers, timeoutMs: config.api.listing.timeoutMs, log: this.log },
    );
    const apiContext = {
      config,
      registry: this.registry,
      ledger: this.ledger,
      metrics: this.metrics,
      log: this.log,
      prices,
      solver: this.solverAddress,
      adapters: opts.readOnly ? undefined : this.adapters,
      now: opts.now ?? Date.now,
      listings: this.listings,
    };
    this.api = createApi(apiContext);
    this.operatorApi = config.api.metricsListen ? createOperatorApi(apiContext) : undefined;
  }

  get url(): string {
    if (!this.#url) throw new Error('node not started');
    return this.#url;
  }

  // The operator listener's URL (api.metricsListen), once started.
  get operatorUrl(): string | undefined {
    return this.#operatorUrl;
  }

  async start(): Promise<this> {
    await Promise.all([...this.adapters.values()].map((a) => a.start()));
    this.solver?.start();
    this.deliverer?.start();
    this.quotePruner?.start();
    this.#url = await this.api.listen({ host: this.config.api.host, port: this.config.api.port });
    const ml = this.config.api.metricsListen;
    if (this.operatorApi && ml) this.#operatorUrl = await this.operatorApi.listen({ host: ml.host, port: ml.port });
    this.log.info({ url: this.#url, solver: this.solverAddress, chains: [...this.registry.chains.keys()] }, 'relay node started');
    return this;
  }

  async stop(): Promise<void> {
    this.quotePruner?.stop();
    await this.api.close();
    await this.operatorApi?.close();
    await this.listings.close();
    await this.deliverer?.stop();
    await this.solver?.stop();
    await Promise.all([...this.adapters.values()].map((a) => a.stop()));
    this.ledger.close();
  }
}
