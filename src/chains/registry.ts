import type { SeenPrices } from './seenPrices.ts';
import type { BroadcastGate } from '../submitter/gate.ts';
import type { Config } from '../config/load.ts';
import type { ChainConfig } from '../config/schema.ts';
import type { Ledger } from '../ledger/index.ts';
import type { PayoutRow } from '../ledger/types.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { codecOf } from '../kinds/index.ts';
import type { ChainAdapter, ChainEvents, PayoutHooks } from './adapter.ts';
import { EvmAdapter } from './evm/adapter.ts';
import { ExchangeAdapter } from './exchange/adapter.ts';
import type {
  AuditReader,
  ChainIntake,
  ChainPorts,
  ChainProfile,
  ChainProfiles,
  CostOracle,
  DepositSteps,
  PriceFeedReader,
  PriceFeeds,
  Reindexer,
  RelaySimulator,
  SignedCalls,
  SolverWallet,
  TxFeeReader,
} from './ports.ts';
import { EvmAuditReader } from './evm/auditReader.ts';
import { EvmPriceFeedReader } from './evm/priceFeed.ts';
import { SvmAdapter } from './svm/adapter.ts';

/** What an adapter is built with. */
export interface AdapterDeps {
  config: Config;
  ledger: Ledger;
  hooks: PayoutHooks & ChainEvents;
  metrics: Metrics;
  log: Logger;
  /** Asked before every broadcast (active/standby); absent: always open. */
  gate?: BroadcastGate;
  /** The newest price the node's price source gave each currency (confirmations by value). */
  seenPrices?: SeenPrices;
}

// The one place that knows which kind of chain is which: its profile and its adapter. Everything
// else asks the registry for a port (a cost oracle, deposit steps, a codec...) and never looks at
// `kind` itself.

/** The static profile of a configured chain, from its config alone. */
export function profileOf(chain: ChainConfig): ChainProfile {
  const base = { chainId: chain.id, codec: codecOf(chain.kind) };
  switch (chain.kind) {
    case 'evm':
      return {
        ...base,
        vmType: 'evm',
        nativeIsGas: true,
        destinationCalls: true,
        nonceMappings: false,
        depositAddresses: Boolean(chain.depositAddressFactory),
        appBalanceDeposits: chain.appBalanceDeposits,
        depository: chain.depository,
        contracts: { relayReceiver: chain.depository, depository: chain.depository, filler: chain.filler },
        permitCurrencies: new Set(chain.currencies.filter((c) => c.permit).map((c) => c.address)),
      };
    case 'svm':
      return {
        ...base,
        vmType: 'svm',
        nativeIsGas: true,
        destinationCalls: false,
        nonceMappings: false,
        depositAddresses: false,
        appBalanceDeposits: false,
        depository: chain.vault,
        contracts: { vault: chain.vault },
        permitCurrencies: new Set(),
      };
    case 'exchange':
      // The exchange's native currency is its perps USD, not a gas token; deposits from it are tied
      // to requests by a signed nonce mapping.
      return {
        ...base,
        vmType: 'hypevm',
        nativeIsGas: false,
        destinationCalls: false,
        nonceMappings: true,
        depositAddresses: false,
        appBalanceDeposits: false,
        depository: null,
        contracts: {},
        permitCurrencies: new Set(),
      };
  }
}

/** What serves a configured chain: its adapter, and the ports only some kinds of chain have. */
export interface ChainParts {
  adapter: ChainAdapter;
  /** The audit's reader of the solver's books from an opening block (EVM chains). */
  audit?: AuditReader;
}

/** The adapter that serves a configured chain, and the ports only its kind has. */
export function createChain(chain: ChainConfig, d: AdapterDeps): ChainParts {
  switch (chain.kind) {
    case 'evm': {
      const adapter = new EvmAdapter(chain, d.config, d.ledger, d.hooks, d.metrics, d.log, d.gate, d.seenPrices);
      return { adapter, audit: new EvmAuditReader(adapter) };
    }
    case 'svm':
      return { adapter: new SvmAdapter(chain, d.config, d.ledger, d.hooks, d.metrics, d.log, d.gate) };
    case 'exchange':
      return { adapter: new ExchangeAdapter(chain, d.config, d.ledger, d.hooks, d.metrics, d.log, d.gate) };
  }
}

/** The price feed reader of a configured chain (over its providers, by their quorum); undefined where the node reads no feeds (non-EVM chains). */
export function priceFeedOf(chain: ChainConfig, metrics?: Metrics, log?: Logger): PriceFeedReader | undefined {
  switch (chain.kind) {
    case 'evm':
      return new EvmPriceFeedReader(chain, metrics, log?.child({ chain: chain.id, reader: 'price feed' }));
    case 'svm':
    case 'exchange':
      return undefined;
  }
}

/**
 * The chains of a node: every chain's profile, and when built with adapter deps (a node that talks
 * to chains, not a read-only API replica) its adapter, handed out as narrow ports.
 */
export class ChainRegistry implements ChainPorts, ChainProfiles, PriceFeeds {
  /** The adapters by chain id: the chains' lifecycle handles (start/stop); tests and diagnostics read them too. */
  readonly adapters = new Map<number, ChainAdapter>();
  readonly #ledger: Ledger | undefined;
  readonly #audits = new Map<number, AuditReader>();
  readonly #profiles = new Map<number, ChainProfile>();
  readonly #feeds = new Map<number, PriceFeedReader>();

  /** Builds every chain's profile and, with `deps`, its adapter (nothing starts here). */
  constructor(chains: ChainConfig[], deps?: AdapterDeps) {
    // Every payout signed after a start waits until the deposit it pays out of was read against its chain since then
    // (mayPay): a deposit a reorg took back while the node was down, its fill (or refund, or a withdrawal of what the
    // depository holds) queued before, was otherwise paid by the restarted submitter before its indexer looked.
    this.#ledger = deps?.ledger;
    const adapterDeps = deps && {
      ...deps,
      hooks: {
        ...deps.hooks,
        mayPay: (p: PayoutRow) => this.mayPay(p),
        depositsChecked: () => {
          for (const a of this.adapters.values()) a.payoutsQueued();
        },
      },
    };
    for (const chain of chains) {
      this.#profiles.set(chain.id, profileOf(chain));
      const feed = priceFeedOf(chain, deps?.metrics, deps?.log);
      if (feed) this.#feeds.set(chain.id, feed);
      if (!adapterDeps) continue;
      const parts = createChain(chain, adapterDeps);
      this.adapters.set(chain.id, parts.adapter);
      if (parts.audit) this.#audits.set(chain.id, parts.audit);
    }
  }

  // A chain no longer configured has no indexer to wait for.
  mayPay(p: PayoutRow): boolean {
    if (p.deposit_id) {
      const d = this.#ledger?.deposits.get(p.deposit_id);
      const a = d && this.adapters.get(d.chain_id);
      return !a || a.mayPayOutOf(d);
    }
    return p.kind !== 'withdrawal' || this.adapters.get(p.chain_id)?.depositsChecked !== false;
  }

  /** Starts every chain's indexing and payouts. */
  async start(): Promise<void> {
    await Promise.all([...this.adapters.values()].map((a) => a.start()));
  }

  /** Stops every chain (each waits for what it has under way). */
  async stop(): Promise<void> {
    await Promise.all([...this.adapters.values()].map((a) => a.stop()));
  }

  profile(chainId: number): ChainProfile | undefined {
    return this.#profiles.get(chainId);
  }

  priceFeed(chainId: number): PriceFeedReader | undefined {
    return this.#feeds.get(chainId);
  }

  ids(): number[] {
    return [...this.adapters.keys()];
  }

  costs(chainId: number): CostOracle | undefined {
    return this.adapters.get(chainId);
  }

  deposits(chainId: number): DepositSteps | undefined {
    return this.adapters.get(chainId);
  }

  relay(chainId: number): RelaySimulator | undefined {
    const a = this.adapters.get(chainId);
    return a?.simulateRelay ? (a as RelaySimulator) : undefined;
  }

  intake(chainId: number): ChainIntake | undefined {
    return this.adapters.get(chainId);
  }

  wallet(chainId: number): SolverWallet | undefined {
    return this.adapters.get(chainId);
  }

  signedCalls(chainId: number): SignedCalls | undefined {
    const a = this.adapters.get(chainId);
    return a?.callOutcome ? (a as SignedCalls) : undefined;
  }

  txFees(chainId: number): TxFeeReader | undefined {
    const a = this.adapters.get(chainId);
    return a?.txFee ? (a as TxFeeReader) : undefined;
  }

  reindexer(chainId: number): Reindexer | undefined {
    return this.adapters.get(chainId);
  }

  audit(chainId: number): AuditReader | undefined {
    return this.#audits.get(chainId);
  }

  payoutsQueued(chainId: number): void {
    this.adapters.get(chainId)?.payoutsQueued();
  }
}
