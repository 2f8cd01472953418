import pg from 'pg';
import { backoffMs } from '../../lib/backoff.ts';
import { STATUS_NOTIFY_VERSION } from '../migrations.ts';
import type { StatusCache } from './statusCache.ts';

/** The channel the ledger's triggers notify with a request id when its Status record changes (migration 26). */
export const STATUS_CHANNEL = 'relay_status';
/** The listening connection's application_name (seen in pg_stat_activity). */
export const LISTENER_NAME = 'relay-node status listener';
// Retries after a lost connection: full jitter under 250 ms doubling up to 10 s (replicas that lost one server spread out).
const RETRY = { baseMs: 250, maxMs: 10_000 };

/**
 * Keeps `cache` told of changes: one connection of its own LISTENs on the ledger's status channel and drops the
 * record of each request notified. The cache keeps records only while this connection listens: it is `live` once
 * LISTEN has returned (a change committed later is notified), and `stopped` as soon as the connection fails or ends
 * (a change may then go unnoticed). A lost connection is opened again (after a random wait under 250 ms, the bound
 * doubling up to 10 s); so is one to a ledger whose writer has not made the triggers yet (migration 26: nothing
 * would be notified).
 */
export class StatusListener {
  readonly #url: string;
  readonly #cache: StatusCache;
  readonly #timeoutMs: number;
  #client: pg.Client | undefined;
  #attempt = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(url: string, cache: StatusCache, timeoutMs: number) {
    this.#url = url;
    this.#cache = cache;
    this.#timeoutMs = timeoutMs;
    void this.#connect();
  }

  /** Stops listening for good; the cache keeps nothing more. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#cache.stopped();
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client({
      connectionString: this.#url,
      application_name: LISTENER_NAME,
      connectionTimeoutMillis: this.#timeoutMs,
      // LISTEN and the migration's check answer within the bound, or the connection is opened again.
      query_timeout: this.#timeoutMs,
      keepAlive: true,
    });
    this.#client = client;
    let lost = false;
    const onLost = () => {
      if (lost) return;
      lost = true;
      this.#cache.stopped();
      if (this.#client === client) this.#client = undefined;
      void client.end().catch(() => {});
      this.#retry();
    };
    client.on('error', onLost);
    client.on('end', onLost);
    client.on('notification', (n) => {
      if (n.channel === STATUS_CHANNEL && n.payload) this.#cache.invalidate(n.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${STATUS_CHANNEL}`);
      const made = await client.query('SELECT 1 FROM schema_migrations WHERE version = $1', [STATUS_NOTIFY_VERSION]);
      if (made.rowCount !== 1) throw new Error('the ledger has no status triggers yet');
    } catch {
      onLost();
      return;
    }
    if (lost || this.#closed) return;
    this.#attempt = 0;
    this.#cache.live();
  }

  #retry(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => void this.#connect(), backoffMs(++this.#attempt, RETRY));
    this.#timer.unref();
  }
}
