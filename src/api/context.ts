import type { Address } from 'viem';
import type { ChainPorts, ChainProfiles } from '../chains/ports.ts';
import type { Config } from '../config/load.ts';
import type { Registry } from '../config/registry.ts';
import type { Ledger } from '../ledger/index.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { PriceSource } from '../quote/prices.ts';
import type { SolverPort } from '../solver/port.ts';
import type { ListingPool } from './listing/pool.ts';

export interface ApiContext {
  config: Config;
  registry: Registry;
  ledger: Ledger;
  metrics: Metrics;
  log: Logger;
  prices: PriceSource;
  solver: Address;
  /** Every chain's static profile (its codec, contracts, what it supports): on every replica. */
  chains: ChainProfiles;
  /** The chains' ports. Absent on a read-only API replica: routes that write or speak to chains answer 503 there. */
  ports?: ChainPorts;
  /**
   * What the API asks of the solver (fast fills, claims, relays, signed deposits): the solver writes
   * the payouts. Absent on a read-only API replica.
   */
  solverPort?: SolverPort;
  now: () => number;
  /** Worker threads for the request listings (absent: they run inline, on this event loop). */
  listings?: ListingPool;
  /** Active/standby (config.ha): whether this node acts on chains now; absent without a lease. */
  role?: () => 'leader' | 'standby';
}
