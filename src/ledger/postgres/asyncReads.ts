import pg from 'pg';
import { LedgerQueryError, LedgerUnavailable } from '../errors.ts';
import { hideUrl } from '../pgUrl.ts';
import { STATUS_BY_ID, statusFromRow, type StatusRecord, type StatusRow } from '../statusRecord.ts';
import { DEFAULT_TIMEOUT_MS, OID } from './syncClient.ts';
import { translate } from './pgDb.ts';
import { StatusCache, type StatusCacheOptions } from './statusCache.ts';
import { StatusListener } from './statusListener.ts';

// Integers as numbers, as the stores read them through PgDb (better-sqlite3's numbers): chain ids and times here.
const INTEGERS: number[] = [OID.int2, OID.int4, OID.int8, OID.numeric];
const TYPES = {
  getTypeParser: ((oid: number, format?: string) =>
    INTEGERS.includes(oid) ? (text: string) => Number(text) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

const STATUS = { name: 'rn_status_by_id', text: translate(STATUS_BY_ID).text };

/**
 * Reads served without blocking the event loop, on a small pool of connections of their own. The stores reach
 * PostgreSQL through a synchronous bridge (SyncPgClient): each call holds the whole process for a round trip,
 * which caps an API at one request per round trip. A read that is one statement outside any transaction (GET
 * /intents/status by id: STATUS_BY_ID) gains nothing from that connection and goes here instead; it sees what
 * is committed, as the bridge's own read outside a transaction would. Opened on first use.
 *
 * `cache` (an API replica, which writes nothing): records are kept in memory between their changes (StatusCache,
 * told of each change by PostgreSQL's notifications: StatusListener). A record is then served up to one
 * notification's delivery after a change commits, as a read replica lags; the node that writes the changes reads
 * its own writes, so it keeps nothing.
 */
export class PgAsyncReads {
  readonly #pool: pg.Pool;
  readonly #url: string;
  readonly #cache: { records: StatusCache; listener: StatusListener } | undefined;

  constructor(url: string, opts: { timeoutMs?: number; readonly?: boolean; max?: number; cache?: StatusCacheOptions } = {}) {
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#url = url;
    if (opts.cache) {
      const records = new StatusCache(opts.cache);
      this.#cache = { records, listener: new StatusListener(url, records, timeoutMs) };
    }
    this.#pool = new pg.Pool({
      connectionString: url,
      max: opts.max ?? 2,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
      keepAlive: true,
      // Idle connections do not keep a finished process alive.
      allowExitOnIdle: true,
      types: TYPES,
      ...(opts.readonly ? { options: '-c default_transaction_read_only=on' } : {}),
    });
    // A pooled connection lost while idle: the pool drops it and the next read opens another.
    this.#pool.on('error', () => {});
  }

  /** The request's Status record (the same statement and record as Requests.status); undefined if there is none. */
  status(id: string): Promise<StatusRecord | undefined> {
    return this.#cache ? this.#cache.records.get(id, () => this.#status(id)) : this.#status(id);
  }

  async #status(id: string): Promise<StatusRecord | undefined> {
    let r: pg.QueryResult;
    try {
      r = await this.#pool.query({ ...STATUS, values: [id] });
    } catch (e) {
      throw this.#error(e);
    }
    const row = r.rows[0] as StatusRow | undefined;
    return row && statusFromRow(row);
  }

  /** Closes the pool's connections. */
  async close(): Promise<void> {
    await Promise.all([this.#cache?.listener.close(), this.#pool.end().catch(() => {})]);
  }

  // As the bridge reports them (SyncPgClient's #failure): a statement refused (with its SQLSTATE), or the ledger
  // unreachable with the driver's text in details; never the URL, in the message or the detail.
  #error(e: unknown): Error {
    const err = e as { message?: string; code?: unknown; detail?: string; constraint?: string };
    const message = hideUrl(String(err?.message ?? e), this.#url);
    const code = typeof err?.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code) ? err.code : undefined;
    if (code === undefined || /^(08|57)/.test(code)) return new LedgerUnavailable('the ledger database is unreachable', { details: message });
    return new LedgerQueryError(message, code, err.detail === undefined ? undefined : hideUrl(err.detail, this.#url), err.constraint);
  }
}
