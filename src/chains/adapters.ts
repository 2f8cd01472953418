import type { Config } from '../config/load.ts';
import type { ChainConfig } from '../config/schema.ts';
import type { Ledger } from '../ledger/index.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { ChainAdapter, ChainEvents, PayoutHooks } from './adapter.ts';
import { EvmAdapter } from './evm/adapter.ts';
import { SvmAdapter } from './svm/adapter.ts';
import { ExchangeAdapter } from './exchange/adapter.ts';

export interface AdapterDeps {
  config: Config;
  ledger: Ledger;
  hooks: PayoutHooks & ChainEvents;
  metrics: Metrics;
  log: Logger;
}

// The one place that knows which adapter serves which kind of chain.
export function createAdapter(chain: ChainConfig, d: AdapterDeps): ChainAdapter {
  switch (chain.kind) {
    case 'evm':
      return new EvmAdapter(chain, d.config, d.ledger, d.hooks, d.metrics, d.log);
    case 'svm':
      return new SvmAdapter(chain, d.config, d.ledger, d.hooks, d.metrics, d.log);
    case 'exchange':
      return new ExchangeAdapter(chain, d.config, d.ledger, d.hooks, d.metrics, d.log);
  }
}
