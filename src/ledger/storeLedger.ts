import { ApiKeys } from './apiKeys.ts';
import { ApiUsage } from './apiUsage.ts';
import { Audits } from './audits.ts';
import { AppFees, Balances } from './balances.ts';
import type { SqlDb } from './sqlDb.ts';
import { Deposits, type Recorded } from './deposits.ts';
import { Events } from './events.ts';
import { FundingCredits } from './funding.ts';
import { IndexerState } from './indexerState.ts';
import { Leases } from './leases.ts';
import { Operations } from './operations.ts';
import { Payouts } from './payouts.ts';
import { Requests } from './requests.ts';
import { RelayedAuthorizations } from './relays.ts';
import { SignatureNonces } from './signatureNonces.ts';
import { UsedPermits } from './usedPermits.ts';
import { Withdrawals } from './withdrawals.ts';
import { ExchangeNonces } from './exchangeNonces.ts';
import { type FinalRange, writeFinalRange } from './finalRange.ts';
import type { Ledger, TxOptions } from './ledger.ts';
import type { StatusRecord } from './statusRecord.ts';

/**
 * The ledger built from its stores over one connection (`SqlDb`): SQLite's (sqlite.ts) and PostgreSQL's
 * (postgres/ledger.ts) are this class over their connection, so both hold the very same stores and statements.
 */
export abstract class StoreLedger<D extends SqlDb = SqlDb> implements Ledger {
  readonly requests: Requests;
  readonly deposits: Deposits;
  readonly payouts: Payouts;
  readonly indexer: IndexerState;
  readonly balances: Balances;
  readonly appFees: AppFees;
  readonly apiKeys: ApiKeys;
  /** App balance credits and their on-chain evidence (src/ledger/funding.ts). */
  readonly funding: FundingCredits;
  /** The status events outbox and webhooks (src/ledger/events.ts). */
  readonly events: Events;
  /** Nonces of signed messages already acted on (links, unlinks, claims). */
  readonly signatureNonces: SignatureNonces;
  /** EIP-2612 permits that funded a signed deposit, each one request (src/ledger/usedPermits.ts). */
  readonly usedPermits: UsedPermits;
  /** Admin actions, pauses, dry run, postponed deposits, admin keys (src/ledger/operations.ts). */
  readonly operations: Operations;
  /** Deposits owed to the solver and the withdrawals that took them (src/ledger/withdrawals.ts). */
  readonly withdrawals: Withdrawals;
  /** EIP-7702 authorizations relayed by POST /execute rawCalls, each once (src/ledger/relays.ts). */
  readonly relayedAuthorizations: RelayedAuthorizations;
  #exchangeNonces: ExchangeNonces | undefined;
  #audits: Audits | undefined;
  #apiUsage: ApiUsage | undefined;
  #leases: Leases | undefined;
  #ping;

  /**
   * @param db The connection. Not on `Ledger`: the node's stages reach the ledger through its stores only. It
   *   stays public for tests' and benchmarks' set-up (seeding rows) and reads of rows no store serves.
   */
  constructor(readonly db: D) {
    this.deposits = new Deposits(db);
    this.payouts = new Payouts(db);
    this.events = new Events(db);
    this.requests = new Requests(db, this.events);
    this.indexer = new IndexerState(db);
    this.balances = new Balances(db);
    this.appFees = new AppFees(db);
    this.apiKeys = new ApiKeys(db);
    this.funding = new FundingCredits(db, this.balances);
    this.signatureNonces = new SignatureNonces(db);
    this.usedPermits = new UsedPermits(db);
    this.operations = new Operations(db);
    this.withdrawals = new Withdrawals(db);
    this.relayedAuthorizations = new RelayedAuthorizations(db);
    this.#ping = db.prepare('SELECT 1');
  }

  /** Prepared on first use: a read-only replica may open an older ledger without the table. */
  get exchangeNonces(): ExchangeNonces {
    return (this.#exchangeNonces ??= new ExchangeNonces(this.db));
  }

  /** Prepared on first use, like exchangeNonces: a read-only replica may open an older ledger without the audits' tables. */
  get audits(): Audits {
    return (this.#audits ??= new Audits(this.db));
  }

  /** Prepared on first use, like exchangeNonces: the table came with a later migration than a replica's ledger may have. */
  get apiUsage(): ApiUsage {
    return (this.#apiUsage ??= new ApiUsage(this.db));
  }

  /** Prepared on first use, like exchangeNonces: a replica's ledger may predate the lease's migration. */
  get leases(): Leases {
    return (this.#leases ??= new Leases(this.db));
  }

  /**
   * Runs fn in one transaction that takes the write lock up front (SQLite's IMMEDIATE; on PostgreSQL the
   * writer's advisory lock), so a concurrent API replica never sees half of it.
   */
  tx<T>(fn: () => T, _opts?: TxOptions): T {
    const result = this.db.transaction(fn).immediate();
    // Committed: wake the status event deliverer and stream if the transaction appended events.
    this.events.committed();
    return result;
  }

  /** As the Ledger's: here, on the caller's thread (a transaction of its own, lazy). */
  async writeFinalRange(range: FinalRange): Promise<Recorded> {
    return this.tx(() => writeFinalRange(this, range), { lazy: true });
  }

  /** Runs fn's reads as one consistent snapshot; nested in tx, it joins it. */
  abstract read<T>(fn: () => T): T;

  /** As `requests.status`; PostgreSQL's reads it on a connection of its own (see PostgresLedger). */
  async statusOf(id: string): Promise<StatusRecord | undefined> {
    return this.requests.status(id);
  }

  /** Throws if the ledger does not answer. */
  ping(): void {
    this.#ping.get();
  }

  close(): void {
    this.db.close();
  }
}
