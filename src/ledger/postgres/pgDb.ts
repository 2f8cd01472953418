import { LedgerQueryError, LedgerUnavailable } from '../errors.ts';
import type { SqlAggregate, SqlDb, SqlRunResult, SqlStatement, SqlTransaction } from '../sqlDb.ts';
import { OID, type RawResult, SyncPgClient, type SyncStatement } from './syncClient.ts';

/**
 * The key of the one advisory lock every write transaction takes right after BEGIN: PostgreSQL's form of SQLite's
 * `BEGIN IMMEDIATE` — one writer at a time across every process on the ledger (nodes, API replicas, CLI), so each
 * check-then-write in the stores sees the state it writes over.
 */
export const WRITER_LOCK_KEY = 0x72656c61795f6c6en; // 'relay_ln'

const BEGIN_WRITE: SyncStatement[] = [{ sql: 'BEGIN' }, { sql: `SELECT pg_advisory_xact_lock(${WRITER_LOCK_KEY})` }];
const BEGIN_READ: SyncStatement[] = [{ sql: 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' }];
const COMMIT: SyncStatement = { sql: 'COMMIT' };

/**
 * What a round trip carried (PgDb.trips): a read alone (`single`), a write alone in its own transaction
 * (`bareWrite`), a write transaction's first statement (with BEGIN and the lock), a later read or write in it, its
 * COMMIT (`commitNoWrite`: it wrote nothing), a snapshot's first and later trips and its end (posted, not waited
 * for: see SyncPgClient.post), a ROLLBACK.
 */
export type TripKind =
  | 'single'
  | 'bareWrite'
  | 'txFirst'
  | 'txRead'
  | 'txWrite'
  | 'commit'
  | 'commitNoWrite'
  | 'snapshotFirst'
  | 'snapshotNext'
  | 'snapshotEnd'
  | 'rollback';

/** Where the outcome of a write sent later (PgDb.defer) lands once its batch ran. */
interface Slot {
  result?: RawResult;
}

/** A statement waiting to travel with the next one; a deferred write carries the slot of its outcome. */
type Pending = SyncStatement & { slot?: Slot };

/** Where a `$n` of the translated text takes its value from: a position among the anonymous values, or a name. */
type Source = { pos: number } | { name: string };

/** A statement translated once, at prepare time, from the stores' (SQLite) form to PostgreSQL's. */
export interface Translated {
  text: string;
  sources: Source[];
  /** Changes rows (or the schema): outside a transaction it runs in one of its own, under the writer's lock. */
  write: boolean;
  returning: boolean;
}

/**
 * Translates placeholders the way better-sqlite3 binds them: `?` (the anonymous values in order) and `@name`,
 * `:name`, `$name` (one object of named values; a name used twice is one value) become `$1…$n`. String literals,
 * quoted identifiers and comments are left as they are.
 */
export function translate(sql: string): Translated {
  let out = '';
  let bare = ''; // the text outside literals and comments, to classify the statement
  const sources: Source[] = [];
  const named = new Map<string, number>();
  let positional = 0;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    const next = sql[i + 1];
    if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      while (j < sql.length) {
        if (sql[j] === c) {
          if (sql[j + 1] === c) j += 2;
          else break;
        } else j++;
      }
      out += sql.slice(i, j + 1);
      bare += ' ';
      i = j + 1;
    } else if (c === '-' && next === '-') {
      const j = sql.indexOf('\n', i);
      const end = j < 0 ? sql.length : j;
      out += sql.slice(i, end);
      i = end;
    } else if (c === '/' && next === '*') {
      const j = sql.indexOf('*/', i + 2);
      const end = j < 0 ? sql.length : j + 2;
      out += sql.slice(i, end);
      i = end;
    } else if (c === '?') {
      sources.push({ pos: positional++ });
      out += `$${sources.length}`;
      bare += ' ';
      i++;
    } else if ((c === '@' || c === '$' || (c === ':' && next !== ':' && sql[i - 1] !== ':')) && /[A-Za-z_]/.test(next ?? '')) {
      let j = i + 1;
      while (j < sql.length && /[A-Za-z0-9_]/.test(sql[j])) j++;
      const name = sql.slice(i + 1, j);
      let n = named.get(name);
      if (n === undefined) {
        sources.push({ name });
        n = sources.length;
        named.set(name, n);
      }
      out += `$${n}`;
      bare += ' ';
      i = j;
    } else {
      out += c;
      bare += c;
      i++;
    }
  }
  const head = /^[\s(]*([A-Za-z]+)/.exec(bare)?.[1]?.toUpperCase() ?? '';
  const reads =
    head === 'SELECT' || head === 'VALUES' || head === 'SHOW' || head === 'EXPLAIN' || (head === 'WITH' && !/\b(INSERT|UPDATE|DELETE)\b/i.test(bare));
  return { text: out, sources, write: !reads, returning: /\bRETURNING\b/i.test(bare) };
}

// A prepared statement and its values as one string, each value typed and length-prefixed (no two differ alike).
function readKey(s: SyncStatement): string {
  let key = s.name!;
  for (const v of s.params ?? []) {
    const text = Buffer.isBuffer(v) ? v.toString('hex') : String(v);
    key += `|${Buffer.isBuffer(v) ? 'buffer' : v === null ? 'null' : typeof v}${text.length}:${text}`;
  }
  return key;
}

// better-sqlite3's binding: arrays are spread, one plain object carries the named values.
function bind(t: Translated, args: unknown[]): unknown[] {
  const anonymous: unknown[] = [];
  let names: Record<string, unknown> | undefined;
  const take = (v: unknown) => {
    if (Array.isArray(v)) for (const x of v) take(x);
    else if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
      if (names) throw new TypeError('one object of named parameters at most');
      names = v as Record<string, unknown>;
    } else anonymous.push(v);
  };
  for (const a of args) take(a);
  let used = 0;
  const values = t.sources.map((s) => {
    if ('pos' in s) {
      if (s.pos >= anonymous.length) throw new RangeError('Too few parameter values were provided');
      used = Math.max(used, s.pos + 1);
      return anonymous[s.pos];
    }
    if (!names || !(s.name in names)) throw new RangeError(`Missing named parameter "${s.name}"`);
    return names[s.name];
  });
  if (anonymous.length > used) throw new RangeError('Too many parameter values were provided');
  return values;
}

type Convert = (text: string) => unknown;

// A column's text as better-sqlite3 would give the value: integers (and integral sums, which PostgreSQL types
// numeric) as numbers, or bigints under safeIntegers; booleans as 1/0 (SQLite has no boolean); BLOBs as Buffers.
function converter(oid: number, safe: boolean): Convert | undefined {
  switch (oid) {
    case OID.int2:
    case OID.int4:
    case OID.int8:
    case OID.oid:
      return safe ? BigInt : Number;
    case OID.numeric:
      return (t) => (/^-?\d+$/.test(t) ? (safe ? BigInt(t) : Number(t)) : Number(t));
    case OID.float4:
    case OID.float8:
      return Number;
    case OID.bool:
      return safe ? (t) => (t === 't' ? 1n : 0n) : (t) => (t === 't' ? 1 : 0);
    case OID.bytea:
      return (t) => Buffer.from(t.slice(2), 'hex');
    default:
      return undefined;
  }
}

class PgStatement implements SqlStatement {
  #pluck = false;
  #safe = false;
  #raw = false;

  constructor(
    private readonly db: PgDb,
    private readonly t: Translated,
    private readonly name: string,
  ) {}

  pluck(toggle = true): this {
    this.#pluck = toggle;
    return this;
  }
  safeIntegers(toggle = true): this {
    this.#safe = toggle;
    return this;
  }
  raw(toggle = true): this {
    this.#raw = toggle;
    return this;
  }

  #execute(args: unknown[]): RawResult {
    return this.db.execute({ sql: this.t.text, params: bind(this.t, args), name: this.name }, this.t.write);
  }

  #rows(r: RawResult): unknown[] {
    const conv = r.fields.map((f) => converter(f.oid, this.#safe));
    const value = (row: (string | null)[], i: number) => {
      const t = row[i];
      return t === null ? null : conv[i] ? conv[i]!(t) : t;
    };
    if (this.#pluck) return r.rows.map((row) => value(row, 0));
    if (this.#raw) return r.rows.map((row) => row.map((_, i) => value(row, i)));
    return r.rows.map((row) => {
      const o: Record<string, unknown> = {};
      for (let i = 0; i < r.fields.length; i++) o[r.fields[i].name] = value(row, i);
      return o;
    });
  }

  run(...args: unknown[]): SqlRunResult {
    if (this.t.write && !this.t.returning && this.db.defers) {
      const slot = this.db.defer({ sql: this.t.text, params: bind(this.t, args), name: this.name });
      // Sent with the transaction's next statement or its COMMIT, unless the caller looks at the outcome first.
      const outcome = () => this.db.outcome(slot);
      return {
        get changes() {
          return outcome().rowCount;
        },
        get lastInsertRowid() {
          return (outcome(), 0);
        },
      };
    }
    const r = this.#execute(args);
    const first = this.t.returning ? r.rows[0]?.[0] : undefined;
    return { changes: r.rowCount, lastInsertRowid: first == null ? 0 : this.#safe ? BigInt(first) : Number(first) };
  }
  get(...args: unknown[]): unknown {
    return this.#rows(this.#execute(args))[0];
  }
  all(...args: unknown[]): unknown[] {
    return this.#rows(this.#execute(args));
  }
  *iterate(...args: unknown[]): IterableIterator<unknown> {
    yield* this.all(...args);
  }
}

/**
 * better-sqlite3's API (the subset the stores use, `SqlDb`) over one synchronous PostgreSQL connection
 * (`SyncPgClient`), so the same stores run on PostgreSQL:
 * - statements are translated once when prepared (`translate`) and prepared once per connection on the server;
 * - `transaction(fn)` is BEGIN + the writer's advisory lock (`WRITER_LOCK_KEY`) in every variant (deferred,
 *   immediate, exclusive: a deferred SQLite transaction that writes takes the same lock, later), SAVEPOINTs
 *   when nested; `snapshot(fn)` is a REPEATABLE READ READ ONLY transaction (one snapshot, no lock);
 * - a write outside a transaction runs in one of its own, under the lock, in a single round trip;
 * - BEGIN, the lock and SAVEPOINTs are not sent on their own: they travel with the next statement (or COMMIT), so
 *   a transaction of n statements costs at most n + 1 round trips, and one that ran none costs nothing;
 * - in a write transaction, a write whose outcome (`changes`) nobody reads travels with the next statement or the
 *   COMMIT too (`defer`), and a read repeated with nothing written since is answered from the first (`cachedReads`);
 * - `aggregate` registrations are no-ops: the PostgreSQL schema defines those functions; `pragma` answers nothing.
 */
export class PgDb implements SqlDb {
  readonly dialect = 'postgres';
  readonly #client: SyncPgClient;
  readonly #prepared = new Map<string, { t: Translated; name: string }>();
  #pending: Pending[] = [];
  #depth = 0;
  #sent = false;
  #kind: 'write' | 'read' = 'write';
  #wrote = false;
  // The reads of the open transaction, by statement and values, until it writes anything: in a write transaction
  // no other session writes (every writer holds the writer's lock, taken with its first statement), in a snapshot
  // nothing changes, so a read repeated with nothing written since (a store re-reading a row another store just
  // read) is answered without a round trip. Any write, any statement without a name (exec), a rollback to a
  // savepoint and the transaction's end clear it.
  readonly #reads = new Map<string, RawResult>();
  #cachedReads = 0;
  #deferred = 0;
  // A statement of the open transaction failed (the server aborted it).
  #failed = false;
  readonly #trips: Record<TripKind, number> = {
    single: 0,
    bareWrite: 0,
    txFirst: 0,
    txRead: 0,
    txWrite: 0,
    commit: 0,
    commitNoWrite: 0,
    snapshotFirst: 0,
    snapshotNext: 0,
    snapshotEnd: 0,
    rollback: 0,
  };

  /** Opened for an API replica (which writes nothing of its own; a streaming standby refuses writes anyway). */
  readonly readonly: boolean;

  constructor(url: string, opts: { timeoutMs?: number; readonly?: boolean } = {}) {
    this.#client = new SyncPgClient(url, opts);
    this.readonly = opts.readonly ?? false;
  }

  /** The connection, for what the stores do not do (migrations, tests' set-up). */
  get client(): SyncPgClient {
    return this.#client;
  }

  /** Round trips so far by what each carried (the sum is `client.roundTrips` less the migrations'): where they go. */
  get trips(): Readonly<Record<TripKind, number>> {
    return this.#trips;
  }

  /** Whether a transaction (or snapshot) is open. */
  get inTransaction(): boolean {
    return this.#depth > 0;
  }

  prepare(sql: string): SqlStatement {
    // The same text is one server-side prepared statement, however often a store prepares it.
    let p = this.#prepared.get(sql);
    if (!p) {
      p = { t: translate(sql), name: `rn${this.#prepared.size + 1}` };
      this.#prepared.set(sql, p);
    }
    return new PgStatement(this, p.t, p.name);
  }

  exec(sql: string): this {
    // No values: PostgreSQL's simple protocol, which takes several statements in one text.
    this.execute({ sql }, translate(sql).write);
    return this;
  }

  /** Runs one statement: in the open transaction (with what waits to be sent), else on its own. */
  execute(s: SyncStatement, write: boolean): RawResult {
    if (this.#depth > 0) {
      // A read the transaction already made, with nothing written since, has the same answer (see #reads).
      const key = !write && s.name ? readKey(s) : undefined;
      if (key !== undefined) {
        const hit = this.#reads.get(key);
        if (hit) {
          this.#cachedReads++;
          return hit;
        }
      } else this.#reads.clear();
      this.#trips[this.#kind === 'read' ? (this.#sent ? 'snapshotNext' : 'snapshotFirst') : !this.#sent ? 'txFirst' : write ? 'txWrite' : 'txRead']++;
      if (write) this.#wrote = true;
      const results = this.#send([s]);
      const result = results[results.length - 1];
      if (key !== undefined) this.#reads.set(key, result);
      return result;
    }
    this.#trips[write ? 'bareWrite' : 'single']++;
    if (!write) return this.#client.batch([s])[0];
    const results = this.#client.batch([...BEGIN_WRITE, s, COMMIT], { rollbackOnError: true });
    return results[BEGIN_WRITE.length];
  }

  /** Reads answered from the transaction's own earlier read of the same statement and values (no round trip). */
  get cachedReads(): number {
    return this.#cachedReads;
  }

  /** Whether a write's `run` may be sent later (`defer`): inside a write transaction of a connection that writes. */
  get defers(): boolean {
    return this.#depth > 0 && this.#kind === 'write' && !this.readonly;
  }

  /**
   * Queues a write of the open write transaction to travel with its next statement, or with its COMMIT: a write
   * whose outcome nobody reads costs no round trip of its own. The lock is not concerned (it was queued first,
   * with BEGIN), nor the order (statements run in the order queued). What changes is when a failing write throws:
   * at the transaction's next round trip (a statement, a nested transaction's end, `outcome`, COMMIT), and the
   * transaction fails as a whole, as any failed statement makes a PostgreSQL transaction fail.
   */
  defer(s: SyncStatement): Slot {
    const slot: Slot = {};
    this.#pending.push({ ...s, slot });
    this.#reads.clear();
    this.#wrote = true;
    this.#deferred++;
    return slot;
  }

  /** A deferred write's outcome: sent now (with what waits) if it was not yet. */
  outcome(slot: Slot): RawResult {
    if (!slot.result && this.#pending.some((p) => p.slot === slot)) {
      this.#trips.txWrite++;
      this.#send([]);
    }
    if (!slot.result) throw new LedgerQueryError('the write was not run: its transaction or savepoint was rolled back', undefined);
    return slot.result;
  }

  /** Writes sent later than their call (with a next statement or COMMIT, see `defer`). */
  get deferredWrites(): number {
    return this.#deferred;
  }

  // Sends what waits, then `more`, in one round trip of the open transaction; each deferred write gets its outcome.
  #send(more: SyncStatement[]): RawResult[] {
    const batch = [...this.#pending, ...more];
    this.#pending = [];
    this.#sent = true;
    let results: RawResult[];
    try {
      results = this.#client.batch(batch);
    } catch (e) {
      // The transaction failed in the server: a read after this fails there too, as it would have without a cache.
      this.#reads.clear();
      if (e instanceof LedgerQueryError) this.#failed = true;
      throw e;
    }
    for (let i = 0; i < batch.length; i++) {
      const slot = (batch[i] as Pending).slot;
      if (slot) slot.result = results[i];
    }
    return results;
  }

  // biome-ignore lint/suspicious/noExplicitAny: any function may run in a transaction
  transaction<F extends (...args: any[]) => unknown>(fn: F): SqlTransaction<F> {
    const run = (...args: unknown[]) => this.#transact(() => fn(...args) as ReturnType<F>, BEGIN_WRITE);
    return Object.assign(run, { deferred: run, immediate: run, exclusive: run, default: run }) as unknown as SqlTransaction<F>;
  }

  /** Runs fn's reads in one snapshot (REPEATABLE READ READ ONLY, no lock); inside a transaction, it joins it. */
  snapshot<T>(fn: () => T): T {
    if (this.#depth > 0) return fn();
    return this.#transact(fn, BEGIN_READ);
  }

  #transact<T>(fn: () => T, begin: SyncStatement[]): T {
    if (this.#depth > 0) return this.#savepoint(fn);
    const generation = this.#client.generation;
    this.#pending = [...begin];
    this.#sent = false;
    this.#wrote = false;
    this.#failed = false;
    this.#kind = begin === BEGIN_READ ? 'read' : 'write';
    this.#depth = 1;
    try {
      const result = fn();
      if (this.#kind === 'read' && this.#sent) {
        // A snapshot's end has no outcome to wait for: its COMMIT goes without a round trip of its own, ahead of the
        // next call. One of its reads failed and the caller went on: it throws as a COMMIT turned ROLLBACK would.
        this.#trips.snapshotEnd++;
        const failed = this.#failed;
        this.#client.post([...this.#pending, failed ? { sql: 'ROLLBACK' } : COMMIT]);
        this.#sent = false; // ended: nothing for the catch below to roll back
        if (failed) throw new LedgerQueryError('the transaction was rolled back: a statement in it failed', '25P02');
        return result;
      }
      const deferred = this.#pending.some((p) => p.slot);
      if (this.#sent || deferred) {
        this.#trips[this.#wrote ? 'commit' : 'commitNoWrite']++;
        let results: RawResult[];
        try {
          results = this.#send([COMMIT]);
        } catch (e) {
          // A write sent with the COMMIT failed: nothing was committed (the ROLLBACK below ends the transaction).
          if (deferred && e instanceof LedgerQueryError)
            throw new LedgerQueryError(`the transaction was rolled back: a statement in it failed: ${e.message}`, e.code, e.detail, e.constraint);
          throw e;
        }
        // A COMMIT of a transaction in which a statement failed (and the caller went on) is a ROLLBACK.
        if (results[results.length - 1].command === 'ROLLBACK')
          throw new LedgerQueryError('the transaction was rolled back: a statement in it failed', '25P02');
      }
      return result;
    } catch (e) {
      // Nothing to undo if nothing was sent, or if the connection (and its transaction) is gone.
      if (this.#sent && this.#client.generation === generation && !(e instanceof LedgerUnavailable)) {
        try {
          this.#trips.rollback++;
          // A snapshot's ROLLBACK has no outcome to wait for either.
          if (this.#kind === 'read') this.#client.post([{ sql: 'ROLLBACK' }]);
          else this.#client.batch([{ sql: 'ROLLBACK' }]);
        } catch {
          // The connection failed: the server rolls the transaction back with it.
        }
      }
      throw e;
    } finally {
      this.#pending = [];
      this.#reads.clear();
      this.#depth = 0;
    }
  }

  // A nested transaction: a SAVEPOINT, rolled back to on throw (the outer transaction goes on), as better-sqlite3 does.
  #savepoint<T>(fn: () => T): T {
    const name = `rn_sp${this.#depth}`;
    const mark = this.#pending.length;
    this.#pending.push({ sql: `SAVEPOINT ${name}` });
    this.#depth++;
    try {
      const result = fn();
      this.#pending.push({ sql: `RELEASE SAVEPOINT ${name}` });
      // A write of it still waiting is sent now: if it fails, it fails here, inside, and only the savepoint is undone.
      if (this.#pending.some((p) => p.slot)) {
        this.#trips.txWrite++;
        this.#send([]);
      }
      return result;
    } catch (e) {
      // Not sent yet: forget it; sent: undo to it with the next statement (or at COMMIT). What was read after
      // its writes is undone with them.
      this.#reads.clear();
      const unsent = this.#pending.findIndex((s, i) => i >= mark && s.sql === `SAVEPOINT ${name}`);
      if (unsent >= 0) this.#pending.length = unsent;
      else this.#pending.push({ sql: `ROLLBACK TO SAVEPOINT ${name}` }, { sql: `RELEASE SAVEPOINT ${name}` });
      throw e;
    } finally {
      this.#depth--;
    }
  }

  pragma(_source: string, options?: { simple?: boolean }): unknown {
    return options?.simple ? undefined : [];
  }

  aggregate(_name: string, _options: SqlAggregate): this {
    return this;
  }

  close(): this {
    this.#client.close();
    return this;
  }
}
