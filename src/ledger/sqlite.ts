import { ApiKeys } from './apiKeys.ts';
import { ApiUsage } from './apiUsage.ts';
import { Audits } from './audits.ts';
import { AppFees, Balances } from './balances.ts';
import { openDb, migrate, type Db } from './db.ts';
import { Deposits } from './deposits.ts';
import { Events } from './events.ts';
import { FundingCredits } from './funding.ts';
import { IndexerState } from './indexerState.ts';
import { Operations } from './operations.ts';
import { Payouts } from './payouts.ts';
import { Requests } from './requests.ts';
import { RelayedAuthorizations } from './relays.ts';
import { SignatureNonces } from './signatureNonces.ts';
import { Withdrawals } from './withdrawals.ts';
import { ExchangeNonces } from './exchangeNonces.ts';
import type { Ledger, TxOptions } from './ledger.ts';

/** The ledger in SQLite (better-sqlite3): every stage reads its work here and writes its result back in one SQLite transaction. */
export class SqliteLedger implements Ledger {
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
  /** Admin actions, pauses, dry run, postponed deposits, admin keys (src/ledger/operations.ts). */
  readonly operations: Operations;
  /** Deposits owed to the solver and the withdrawals that took them (src/ledger/withdrawals.ts). */
  readonly withdrawals: Withdrawals;
  /** EIP-7702 authorizations relayed by POST /execute rawCalls, each once (src/ledger/relays.ts). */
  readonly relayedAuthorizations: RelayedAuthorizations;
  #exchangeNonces: ExchangeNonces | undefined;
  #audits: Audits | undefined;
  #apiUsage: ApiUsage | undefined;
  #ping;

  /**
   * @param db The SQLite connection. SQLite-only, so it is on this class and not on `Ledger`: the
   *   node's stages reach the ledger through its stores only. It stays public for what is SQLite by
   *   nature: tests' and benchmarks' set-up (seeding rows, pragmas, VACUUM INTO) and reads of
   *   rows no store serves.
   */
  constructor(readonly db: Db) {
    this.deposits = new Deposits(db);
    this.payouts = new Payouts(db);
    this.events = new Events(db, this);
    this.requests = new Requests(db, this.events);
    this.indexer = new IndexerState(db);
    this.balances = new Balances(db);
    this.appFees = new AppFees(db);
    this.apiKeys = new ApiKeys(db);
    this.funding = new FundingCredits(db, this.balances);
    this.signatureNonces = new SignatureNonces(db);
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

  /** Opens (and unless read-only, migrates) the SQLite ledger at `path`. */
  static open(path: string, opts: { readonly?: boolean } = {}): SqliteLedger {
    const db = openDb(path, opts);
    if (!opts.readonly) migrate(db);
    return new SqliteLedger(db);
  }

  /**
   * Runs fn in one transaction (IMMEDIATE: takes the write lock up front, so a concurrent API
   * replica never sees half of it).
   */
  tx<T>(fn: () => T, opts: TxOptions = {}): T {
    // A lazy commit (TxOptions) skips the disk flush: WAL at synchronous=NORMAL for this commit only.
    const lazy = opts.lazy === true && !this.db.inTransaction;
    if (lazy) this.db.pragma('synchronous = NORMAL');
    let result: T;
    try {
      result = this.db.transaction(fn).immediate();
    } finally {
      if (lazy) this.db.pragma('synchronous = FULL');
    }
    // Committed: wake the status event deliverer and stream if the transaction appended events.
    this.events.committed();
    return result;
  }

  /** Runs fn in one (deferred) SQLite transaction: its reads see one snapshot, and it takes no write lock unless it writes. */
  read<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }

  /** Throws if the ledger does not answer. */
  ping(): void {
    this.#ping.get();
  }

  close(): void {
    this.db.close();
  }
}
