import { usdMicro } from '../lib/money.ts';
import { DEFAULT_MAX_TOPUP_USD } from './types.ts';

/** A chain's caps on native currency the solver hands out against an app balance (config maxTopupGasUsd, maxTopupGasAmount). */
export interface NativeCaps {
  maxTopupGasUsd?: string;
  maxTopupGasAmount?: string;
}

/** The cap an amount passed: its config key and value (USD for maxTopupGasUsd, the smallest unit for maxTopupGasAmount). */
export interface PassedCap {
  key: 'maxTopupGasUsd' | 'maxTopupGasAmount';
  cap: string;
}

/**
 * Which of a chain's caps `native` (smallest unit, worth `micro` micro-USD) passes, if any. A gas
 * top-up and a gasless relay's value are both native currency the solver gives against a balance:
 * without a bound, a way to take the solver's gas as a spread-free swap. One bound serves both.
 */
export function nativeCapPassed(caps: NativeCaps, native: bigint, micro: bigint): PassedCap | undefined {
  const capUsd = caps.maxTopupGasUsd ?? DEFAULT_MAX_TOPUP_USD;
  if (micro > usdMicro(1n, 0, capUsd)) return { key: 'maxTopupGasUsd', cap: capUsd };
  if (caps.maxTopupGasAmount !== undefined && native > BigInt(caps.maxTopupGasAmount)) return { key: 'maxTopupGasAmount', cap: caps.maxTopupGasAmount };
  return undefined;
}
