import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from 'node:worker_threads';
import { LedgerQueryError, LedgerUnavailable } from '../errors.ts';
import { ledgerCallEnded, ledgerCallStarted } from '../../lib/threadLife.ts';
import { hideUrl } from '../pgUrl.ts';

/** One statement of a batch: text with `$n` placeholders, its values, and a name to prepare it once per connection. */
export interface SyncStatement {
  sql: string;
  params?: readonly unknown[];
  /** Set: PostgreSQL parses and plans it once per connection (a named prepared statement). */
  name?: string;
}

/** A column of a result: its name and PostgreSQL type OID (pg_type). */
export interface SyncField {
  name: string;
  oid: number;
}

/** A statement's result as PostgreSQL sent it: each row an array of column texts (null for NULL). */
export interface RawResult {
  /** The command tag's verb (SELECT, INSERT, COMMIT, or ROLLBACK for a COMMIT of a failed transaction). */
  command: string;
  rows: (string | null)[][];
  rowCount: number;
  fields: SyncField[];
}

/** A result with rows as objects, values typed (see `typedValue`). */
export interface QueryResult {
  rows: Record<string, unknown>[];
  rowCount: number;
  fields: SyncField[];
}

/** PostgreSQL type OIDs this bridge converts (pg_type.h). */
export const OID = { bool: 16, bytea: 17, int8: 20, int2: 21, int4: 23, oid: 26, float4: 700, float8: 701, numeric: 1700, json: 114, jsonb: 3802 } as const;

/**
 * A column text as a JS value: integers as numbers (int8 as bigint), numeric as its exact decimal string, floats
 * as numbers, booleans, JSON parsed, everything else as text.
 */
export function typedValue(text: string | null, oid: number): unknown {
  if (text === null) return null;
  switch (oid) {
    case OID.int2:
    case OID.int4:
    case OID.oid:
    case OID.float4:
    case OID.float8:
      return Number(text);
    case OID.int8:
      return BigInt(text);
    case OID.bool:
      return text === 't';
    case OID.json:
    case OID.jsonb:
      return JSON.parse(text);
    default:
      return text;
  }
}

interface Answer {
  id: number;
  ok: boolean;
  results?: RawResult[];
  value?: unknown;
  error?: { message: string; code?: string; detail?: string; constraint?: string; connection: boolean; index: number };
}

/** Default bound of one call (connect included) before the ledger is declared unavailable. */
export const DEFAULT_TIMEOUT_MS = 5_000;
/** Bound of a worker thread's boot (loading pg), which is this host's time, not the database's. */
const BOOT_TIMEOUT_MS = 60_000;

/**
 * A synchronous PostgreSQL client: the node calls its ledger synchronously (better-sqlite3's model), so the one
 * connection lives in a worker thread (syncWorker.mjs) and each call posts a batch to it on a MessagePort, then
 * blocks the calling thread with `Atomics.wait` until the worker answers (the technique of the synckit package).
 * One connection per process, pinned: while a transaction's statements run nothing else can interleave, because
 * the caller is blocked.
 *
 * A call that does not complete within `timeoutMs` (a server paused, a network cut) throws `LedgerUnavailable`
 * and drops the connection with its worker: an open transaction there is rolled back by the server. The next call
 * opens a new connection. A timed-out COMMIT has an unknown outcome, as after a crash.
 *
 * The URL is a secret: it is handed to the worker only, and never appears in an error this client throws.
 */
export class SyncPgClient {
  readonly #url: string;
  readonly #timeoutMs: number;
  readonly #readonly: boolean;
  #worker: Worker | undefined;
  #port: MessagePort | undefined;
  #wake: Int32Array | undefined;
  #seq = 0;
  #closed = false;
  #generation = 0;
  #roundTrips = 0;
  #posted = 0;
  // After a call found the database unreachable: until then, calls fail at once instead of each waiting its bound.
  #downUntil = 0;

  /** `readonly`: every session is read-only in PostgreSQL itself (an API replica on the primary cannot write by mistake). */
  constructor(url: string, opts: { timeoutMs?: number; readonly?: boolean } = {}) {
    this.#url = url;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#readonly = opts.readonly ?? false;
  }

  /** Runs one statement; rows as objects with typed values (`typedValue`). */
  query(sql: string, params: readonly unknown[] = []): QueryResult {
    const [r] = this.batch([{ sql, params }]);
    const rows = r.rows.map((row) => {
      const o: Record<string, unknown> = {};
      r.fields.forEach((f, i) => {
        o[f.name] = typedValue(row[i], f.oid);
      });
      return o;
    });
    return { rows, rowCount: r.rowCount, fields: r.fields };
  }

  /**
   * Runs statements in order in one round trip to the worker (BEGIN, a lock, a write and COMMIT travel together);
   * the first that fails stops the batch and is thrown as a `LedgerQueryError` (with `rollbackOnError`, the open
   * transaction is rolled back first) or, for a connection failure or timeout, `LedgerUnavailable`.
   */
  batch(statements: readonly SyncStatement[], opts: { rollbackOnError?: boolean } = {}): RawResult[] {
    if (this.#closed) throw new LedgerUnavailable('the ledger connection is closed');
    const answer = this.#call({
      batch: statements.map((s) => ({ sql: s.sql, params: s.params?.map(toParam), name: s.name })),
      rollbackOnError: opts.rollbackOnError ?? false,
    });
    if (answer.ok) return answer.results!;
    throw this.#failure(answer.error!);
  }

  /**
   * Posts statements without waiting for them (a read-only transaction's COMMIT: there is no outcome to wait for).
   * The worker runs them before the next call's batch (it takes messages one at a time, in order), so that call's
   * bound covers them too; their failure is not reported (a lost connection is found by the next call). Without a
   * connection there is nothing open to end, and nothing is posted.
   */
  post(statements: readonly SyncStatement[]): void {
    if (this.#closed || !this.#port) return;
    this.#posted++;
    this.#port.postMessage({
      id: ++this.#seq,
      batch: statements.map((s) => ({ sql: s.sql, params: s.params?.map(toParam), name: s.name })),
      rollbackOnError: false,
    });
  }

  /** Batches posted without waiting (`post`): not round trips. */
  get posted(): number {
    return this.#posted;
  }

  /** Round trips to the worker so far (each a batch of statements). */
  get roundTrips(): number {
    return this.#roundTrips;
  }

  /**
   * Runs `fn(client)` of the module at `moduleUrl` in the worker, with a pg client of its own on the same database,
   * and blocks until it resolves (within `timeoutMs`): how the async migrations (migratePostgres) run from a
   * synchronous `open`.
   */
  callModule(moduleUrl: string, fn: string, timeoutMs: number): unknown {
    if (this.#closed) throw new LedgerUnavailable('the ledger connection is closed');
    const answer = this.#call({ call: { module: moduleUrl, fn } }, timeoutMs);
    if (answer.ok) return answer.value;
    throw this.#failure(answer.error!);
  }

  /** Which connection the next call uses: it changes when a connection is dropped, and a transaction open on the old one is gone. */
  get generation(): number {
    return this.#generation + (this.#worker ? 0 : 1);
  }

  /** Closes the connection and stops the worker. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#worker) {
      try {
        this.#call({ close: true });
      } catch {
        // Unreachable: the worker is terminated below anyway.
      }
      this.#drop();
    }
  }

  #start(): void {
    this.#generation++;
    const { port1, port2 } = new MessageChannel();
    const signal = new SharedArrayBuffer(4);
    this.#worker = new Worker(new URL('./syncWorker.mjs', import.meta.url), {
      workerData: { url: this.#url, port: port2, signal, timeoutMs: this.#timeoutMs, readonly: this.#readonly },
      transferList: [port2],
    });
    // The worker never keeps the process alive, and its failures surface as the caller's timeout.
    this.#worker.unref();
    this.#worker.on('error', () => {});
    port1.unref();
    this.#port = port1;
    this.#wake = new Int32Array(signal);
    // Blocks until the worker has loaded (its first message, id 0).
    this.#await(0, BOOT_TIMEOUT_MS, 'the ledger connection thread did not start');
  }

  // Terminates the worker (its socket with it: the server rolls back what was open) — the next call starts anew.
  #drop(): void {
    const w = this.#worker;
    this.#worker = undefined;
    this.#port?.close();
    this.#port = undefined;
    this.#wake = undefined;
    if (w) void w.terminate().catch(() => {});
  }

  #call(request: Record<string, unknown>, timeoutMs = this.#timeoutMs): Answer {
    // The database did not answer a moment ago: every stage calling now would block the thread for the whole bound
    // in turn, so they fail at once until the next attempt is due (one call per bound tries again).
    const wait = this.#downUntil - Date.now();
    if (wait > 0) throw new LedgerUnavailable(`the ledger database is unreachable; next attempt in ${wait} ms`);
    if (!this.#worker) this.#start();
    const port = this.#port!;
    const id = ++this.#seq;
    this.#roundTrips++;
    port.postMessage({ id, ...request });
    const m = this.#await(id, timeoutMs, `the ledger database did not answer within ${timeoutMs} ms`);
    this.#downUntil = m.ok || !m.error?.connection ? 0 : Date.now() + this.#timeoutMs;
    return m;
  }

  // The thread waits on the ledger, within a bound: alive meanwhile, for the lease's renewer (src/lib/threadLife.ts).
  #await(id: number, timeoutMs: number, late: string): Answer {
    const before = ledgerCallStarted(timeoutMs);
    try {
      return this.#awaitAnswer(id, timeoutMs, late);
    } finally {
      ledgerCallEnded(before);
    }
  }

  // Blocks until the worker's answer `id` arrives; past `timeoutMs` the worker is dropped and the call fails.
  #awaitAnswer(id: number, timeoutMs: number, late: string): Answer {
    const port = this.#port!;
    const wake = this.#wake!;
    const deadline = Date.now() + timeoutMs;
    let seen = Atomics.load(wake, 0);
    for (;;) {
      const m = receiveMessageOnPort(port)?.message as Answer | undefined;
      if (m?.id === id) return m;
      if (m) continue; // an answer to nothing pending: skip it
      const left = deadline - Date.now();
      if (left <= 0) {
        this.#drop();
        this.#downUntil = Date.now() + this.#timeoutMs;
        throw new LedgerUnavailable(late);
      }
      Atomics.wait(wake, 0, seen, left);
      seen = Atomics.load(wake, 0);
    }
  }

  #failure(e: NonNullable<Answer['error']>): Error {
    const message = this.#scrub(e.message);
    if (e.connection) return new LedgerUnavailable('the ledger database is unreachable', { details: message });
    return new LedgerQueryError(message, e.code, e.detail === undefined ? undefined : this.#scrub(e.detail), e.constraint);
  }

  // The URL and its password never leave this class, even inside a driver's message.
  #scrub(text: string): string {
    return hideUrl(text, this.#url);
  }
}

// What pg sends: bigints as decimal text, booleans as SQLite stores them (1/0), the rest as is.
function toParam(v: unknown): unknown {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (v === undefined) return null;
  return v;
}
