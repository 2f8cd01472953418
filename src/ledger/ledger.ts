import type { ApiKeys } from './apiKeys.ts';
import type { ApiUsage } from './apiUsage.ts';
import type { Audits } from './audits.ts';
import type { AppFees, Balances } from './balances.ts';
import type { Deposits, Recorded } from './deposits.ts';
import type { Events } from './events.ts';
import type { ExchangeNonces } from './exchangeNonces.ts';
import type { FinalRange } from './finalRange.ts';
import type { FundingCredits } from './funding.ts';
import type { IndexerState } from './indexerState.ts';
import type { Leases } from './leases.ts';
import type { Operations } from './operations.ts';
import type { Payouts } from './payouts.ts';
import type { RelayedAuthorizations } from './relays.ts';
import type { Requests } from './requests.ts';
import type { SignatureNonces } from './signatureNonces.ts';
import type { UsedPermits } from './usedPermits.ts';
import type { StatusRecord } from './statusRecord.ts';
import type { Withdrawals } from './withdrawals.ts';

/** The public face of a store: its methods, without the statements an implementation prepares (private fields). */
export type Store<T> = { [K in keyof T]: T[K] };

/**
 * How a transaction commits. `lazy`: bookkeeping the node can read again from the chain (that a node
 * accepted a broadcast, a scan's cursor, a deposit's fee, a range of final blocks' deposits with the
 * cursor past them), committed without waiting for the disk: a power failure (never a crash of the
 * process) may lose it until the next durable commit, which makes it durable too. Ignored inside
 * another transaction (it joins that one's commit). Nothing that decides or announces a state of an
 * order may be lazy.
 */
export interface TxOptions {
  lazy?: boolean;
}

/**
 * The ledger the rest of the node depends on: the hub every stage reads its work from and writes
 * its result to, one transaction per state change. The SQLite implementation (sqlite.ts) is the
 * one today; a second (PostgreSQL) implements this interface. Consumers import this type only;
 * `Ledger.open` (index.ts) is where the implementation is chosen.
 */
export interface Ledger {
  readonly requests: Store<Requests>;
  readonly deposits: Store<Deposits>;
  readonly payouts: Store<Payouts>;
  readonly indexer: Store<IndexerState>;
  readonly balances: Store<Balances>;
  readonly appFees: Store<AppFees>;
  readonly apiKeys: Store<ApiKeys>;
  /** App balance credits and their on-chain evidence (funding.ts). */
  readonly funding: Store<FundingCredits>;
  /** The status events outbox and webhooks (events.ts). */
  readonly events: Store<Events>;
  /** Nonces of signed messages already acted on (links, unlinks, claims). */
  readonly signatureNonces: Store<SignatureNonces>;
  /** EIP-2612 permits that funded a signed deposit, each one request (usedPermits.ts). */
  readonly usedPermits: Store<UsedPermits>;
  /** Admin actions, pauses, dry run, postponed deposits, admin keys (operations.ts). */
  readonly operations: Store<Operations>;
  /** Deposits owed to the solver and the withdrawals that took them (withdrawals.ts). */
  readonly withdrawals: Store<Withdrawals>;
  /** EIP-7702 authorizations relayed by POST /execute rawCalls, each once (relays.ts). */
  readonly relayedAuthorizations: Store<RelayedAuthorizations>;
  /** Which request an exchange wallet's transfer nonce pays for (exchangeNonces.ts); prepared on first use. */
  readonly exchangeNonces: Store<ExchangeNonces>;
  /** Audit runs and the SVM chains' opening balances (audits.ts); prepared on first use. */
  readonly audits: Store<Audits>;
  /** API calls counted per key, minute, route and status (apiUsage.ts); prepared on first use. */
  readonly apiUsage: Store<ApiUsage>;
  /** The leader lease of active/standby nodes (leases.ts); prepared on first use. */
  readonly leases: Store<Leases>;
  /** Runs fn in one transaction that takes the write lock up front; nested calls join it. */
  tx<T>(fn: () => T, opts?: TxOptions): T;
  /**
   * Writes a range of final blocks' deposits with the indexer's cursor past them, in one lazy transaction; resolves
   * with how many deposits were new to the ledger (and confirmed). Where the ledger can (SQLite with its writer thread), on a
   * connection and thread of their own, so that the caller's thread reads the next range meanwhile.
   */
  writeFinalRange(range: FinalRange): Promise<Recorded>;
  /** Runs fn's reads as one consistent snapshot (one read transaction; nested in tx, it joins it). */
  read<T>(fn: () => T): T;
  /**
   * A request's Status record by id (GET /intents/status), the same as `requests.status`, read without holding the
   * event loop where the ledger allows it (PostgreSQL: a pooled connection of its own; SQLite: in place).
   */
  statusOf(id: string): Promise<StatusRecord | undefined>;
  /** Throws if the ledger does not answer (liveness). */
  ping(): void;
  close(): void;
}
