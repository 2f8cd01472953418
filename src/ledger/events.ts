import { randomBytes } from 'node:crypto';
import { dialectOf } from './dialect.ts';
import type { SqlDb as Db } from './sqlDb.ts';
import { STATUS_BY_ID, statusFromRow, type StatusRow } from './statusRecord.ts';

// Event ids take 12 random bytes each from a pool filled 4 KiB at a time: a randomBytes call per
// event was a system call per status change (about 1% of the fill path's CPU in a profile).
let pool = Buffer.alloc(0);
let poolAt = 0;
function eventIdBytes(): string {
  if (poolAt + 12 > pool.length) {
    pool = randomBytes(4096);
    poolAt = 0;
  }
  poolAt += 12;
  return pool.toString('hex', poolAt - 12, poolAt);
}

// The status events outbox. Every status change of a request appends one event (the Status record
// at that change) and one pending delivery per live webhook of the key that created the request,
// in the transaction of the change: a change is never committed without its event, nor an event
// without its change. The websocket stream reads the same rows in `seq` order.

export const EVENT_TYPE_STATUS = 'request.status';

export interface EventRow {
  seq: number;
  id: string;
  request_id: string;
  api_key_id: string | null;
  type: string;
  status: string;
  payload: string;
  created_at: number;
}

/** An event with the wallet (the request's user) the websocket stream filters on. */
export interface StreamEventRow extends EventRow {
  user: string | null;
}

export interface WebhookRow {
  id: string;
  api_key_id: string;
  url: string;
  secret: string;
  created_at: number;
  removed_at: number | null;
}

export type DeliveryState = 'pending' | 'delivered' | 'dead';

export interface DeliveryRow {
  event_id: string;
  webhook_id: string;
  request_id: string;
  event_seq: number;
  state: DeliveryState;
  attempts: number;
  next_attempt_at: number;
  last_status: number | null;
  last_error: string | null;
  delivered_at: number | null;
}

/** A delivery due, named: its event and webhook, and the webhook's API key. */
export type DueDeliveryRef = Pick<DueDelivery, 'event_id' | 'webhook_id' | 'api_key_id'>;

/** A delivery that may be attempted now, with what it takes to send it. */
export interface DueDelivery {
  event_id: string;
  webhook_id: string;
  request_id: string;
  event_seq: number;
  attempts: number;
  type: string;
  status: string;
  payload: string;
  created_at: number;
  url: string;
  secret: string;
  api_key_id: string;
}

export class Events {
  #db: Db;
  #statusRow;
  #insertEvent;
  #insertDeliveries;
  #since;
  #maxSeq;
  #get;
  #forRequest;
  #insertWebhook;
  #webhook;
  #webhooksOfKey;
  #allWebhooks;
  #removeWebhook;
  #killPending;
  #due;
  #pendingDelivery;
  #delivered;
  #failed;
  #pendingCount;
  #deliveries;
  #redeliverEvent;
  #redeliverDead;
  #anyDead;
  #counts;
  #holdBehind;
  #listeners = new Set<() => void>();
  #dirty = false;

  constructor(db: Db) {
    this.#db = db;
    this.#statusRow = db.prepare(STATUS_BY_ID);
    this.#insertEvent = db.prepare(`INSERT INTO events (id, request_id, api_key_id, type, status, payload, created_at)
      VALUES (@id, @request_id, @api_key_id, @type, @status, @payload, @created_at) RETURNING seq`);
    // One pending delivery per live webhook of the request's key (a revoked key's webhooks get nothing).
    this.#insertDeliveries = db.prepare(`INSERT INTO event_deliveries (event_id, webhook_id, request_id, event_seq, state, attempts, next_attempt_at)
      SELECT @event_id, w.id, @request_id, @event_seq, 'pending', 0, @now FROM webhooks w
      WHERE w.api_key_id = @api_key_id AND w.removed_at IS NULL
        AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = w.api_key_id AND k.revoked_at IS NOT NULL)`);
    this.#since = db.prepare(`SELECT e.*, r."user" AS "user" FROM events e LEFT JOIN requests r ON r.id = e.request_id
      WHERE e.seq > ? ORDER BY e.seq LIMIT ?`);
    this.#maxSeq = db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM events');
    this.#get = db.prepare('SELECT * FROM events WHERE id = ?');
    this.#forRequest = db.prepare('SELECT * FROM events WHERE request_id = ? ORDER BY seq');
    this.#insertWebhook = db.prepare('INSERT INTO webhooks (id, api_key_id, url, secret, created_at) VALUES (?, ?, ?, ?, ?)');
    this.#webhook = db.prepare('SELECT * FROM webhooks WHERE id = ?');
    this.#webhooksOfKey = db.prepare('SELECT * FROM webhooks WHERE api_key_id = ? AND removed_at IS NULL ORDER BY created_at, id');
    this.#allWebhooks = db.prepare('SELECT * FROM webhooks WHERE removed_at IS NULL ORDER BY created_at, id');
    this.#removeWebhook = db.prepare('UPDATE webhooks SET removed_at = ? WHERE id = ? AND removed_at IS NULL');
    // A chunk of a removed webhook's pending deliveries (through event_deliveries_webhook_due, migration 29).
    this.#killPending = db.prepare(`UPDATE event_deliveries SET state = 'dead', last_error = 'webhook removed'
      WHERE webhook_id = @webhook_id AND state = 'pending' AND event_id IN (SELECT event_id FROM event_deliveries
        WHERE webhook_id = @webhook_id AND state = 'pending' LIMIT @limit)
        AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = @webhook_id AND w.removed_at IS NOT NULL)`);
    // Due, and not behind an earlier pending event of the same request to the same webhook (that keeps
    // every webhook's events of one request in order). Each live webhook's earliest are read through its
    // own index range, then at most @per_key of each key's are kept: a key with a long backlog (receivers
    // that never answer) is neither walked past nor read whole to reach the other keys' deliveries.
    const dueOfWebhook = `SELECT x.event_id, x.webhook_id, x.next_attempt_at, x.event_seq FROM event_deliveries x
        WHERE x.webhook_id = w.id AND x.state = 'pending' AND x.next_attempt_at <= @now
          AND NOT EXISTS (SELECT 1 FROM event_deliveries p
            WHERE p.webhook_id = x.webhook_id AND p.request_id = x.request_id AND p.state = 'pending' AND p.event_seq < x.event_seq)
        ORDER BY x.next_attempt_at, x.event_seq LIMIT @per_key`;
    // PostgreSQL reads each webhook's rows with a lateral join; SQLite, which has none, by rowid.
    const dueOfWebhooks =
      dialectOf(db) === 'postgres'
        ? `webhooks w CROSS JOIN LATERAL (${dueOfWebhook}) d`
        : `webhooks w JOIN event_deliveries d ON d.rowid IN (${dueOfWebhook.replace(/^SELECT .*? FROM/, 'SELECT x.rowid FROM')})`;
    this.#due = db.prepare(`SELECT event_id, webhook_id, api_key_id FROM (
        SELECT d.event_id, d.webhook_id, w.api_key_id, d.next_attempt_at, d.event_seq,
          ROW_NUMBER() OVER (PARTITION BY w.api_key_id ORDER BY d.next_attempt_at, d.event_seq) AS of_key
        FROM ${dueOfWebhooks} WHERE w.removed_at IS NULL) k
      WHERE of_key <= @per_key ORDER BY next_attempt_at, event_seq`);
    this.#pendingDelivery = db.prepare(`SELECT d.event_id, d.webhook_id, d.request_id, d.event_seq, d.attempts, e.type, e.status, e.payload,
        e.created_at, w.url, w.secret, w.api_key_id
      FROM event_deliveries d JOIN events e ON e.seq = d.event_seq JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.event_id = ? AND d.webhook_id = ? AND d.state = 'pending'`);
    this.#delivered = db.prepare(`UPDATE event_deliveries SET state = 'delivered', attempts = attempts + 1, last_status = @status,
      last_error = NULL, delivered_at = @now WHERE event_id = @event_id AND webhook_id = @webhook_id AND state = 'pending'`);
    this.#failed = db.prepare(`UPDATE event_deliveries SET state = @state, attempts = attempts + 1, next_attempt_at = @next,
      last_status = @status, last_error = @error WHERE event_id = @event_id AND webhook_id = @webhook_id AND state = 'pending'`);
    this.#pendingCount = db.prepare(`SELECT COUNT(*) AS n FROM event_deliveries WHERE state = 'pending'`);
    this.#deliveries = db.prepare(`SELECT d.*, e.type, e.status FROM event_deliveries d JOIN events e ON e.seq = d.event_seq
      WHERE d.webhook_id = @webhook_id AND (CAST(@state AS TEXT) IS NULL OR d.state = @state) ORDER BY d.event_seq DESC LIMIT @limit`);
    // The events queued behind a delivery that waits for a retry wait as long (they could not go
    // before it anyway): the due scan then reads only what may really go.
    this.#holdBehind = db.prepare(`UPDATE event_deliveries SET next_attempt_at = CASE WHEN next_attempt_at > @next THEN next_attempt_at ELSE @next END
      WHERE webhook_id = @webhook_id AND request_id = (SELECT request_id FROM event_deliveries WHERE event_id = @event_id AND webhook_id = @webhook_id)
        AND state = 'pending' AND event_seq > (SELECT event_seq FROM event_deliveries WHERE event_id = @event_id AND webhook_id = @webhook_id)`);
    this.#counts = db.prepare('SELECT state, COUNT(*) AS n FROM event_deliveries WHERE webhook_id = ? GROUP BY state');
    this.#redeliverEvent = db.prepare(`UPDATE event_deliveries SET state = 'pending', attempts = 0, next_attempt_at = @now, last_error = NULL
      WHERE event_id = @event_id AND (CAST(@webhook_id AS TEXT) IS NULL OR webhook_id = @webhook_id)
        AND webhook_id IN (SELECT id FROM webhooks WHERE removed_at IS NULL AND (CAST(@api_key_id AS TEXT) IS NULL OR api_key_id = @api_key_id))`);
    // A chunk of one webhook's dead deliveries, each request's oldest first (through event_deliveries_dead, migration 33).
    this.#redeliverDead = db.prepare(`UPDATE event_deliveries SET state = 'pending', attempts = 0, next_attempt_at = @now, last_error = NULL
      WHERE webhook_id = @webhook_id AND state = 'dead' AND event_id IN (SELECT event_id FROM event_deliveries
        WHERE webhook_id = @webhook_id AND state = 'dead' ORDER BY request_id, event_seq LIMIT @limit)
        AND webhook_id IN (SELECT id FROM webhooks WHERE removed_at IS NULL AND (CAST(@api_key_id AS TEXT) IS NULL OR api_key_id = @api_key_id))`);
    this.#anyDead = db.prepare(`SELECT 1 AS dead FROM event_deliveries WHERE webhook_id = ? AND state = 'dead' LIMIT 1`);
  }

  // --- the outbox ------------------------------------------------------------------------------

  /**
   * Appends the event of a change of request `requestId` (already written: its Status record is read back, one
   * statement) and its deliveries. Called by Requests inside the transaction of the change.
   */
  record(requestId: string, now = Date.now()): EventRow {
    const row = this.#statusRow.get(requestId) as StatusRow | undefined;
    if (!row) throw new Error(`request ${requestId} not found`);
    return this.recordRow(requestId, row, now);
  }

  /** As record, for a change whose Status record (a row of STATUS_BY_ID as the change left it) the caller has. */
  recordRow(requestId: string, row: StatusRow, now = Date.now()): EventRow {
    const ev = {
      id: `evt_${eventIdBytes()}`,
      request_id: requestId,
      api_key_id: row.api_key_id ?? null,
      type: EVENT_TYPE_STATUS,
      status: row.status,
      payload: JSON.stringify(statusFromRow(row)),
      created_at: now,
    };
    const seq = Number((this.#insertEvent.get(ev) as { seq: number | bigint }).seq);
    if (ev.api_key_id) this.#insertDeliveries.run({ event_id: ev.id, request_id: requestId, event_seq: seq, now, api_key_id: ev.api_key_id });
    this.#dirty = true;
    return { seq, ...ev };
  }

  /**
   * Called after a write that may have appended events: once nothing is left uncommitted, wakes
   * the listeners (the deliverer, the websocket stream) outside the transaction. Inside an open
   * transaction it waits for Ledger.tx to call it again after the commit.
   */
  committed(): void {
    if (!this.#dirty || this.#db.inTransaction) return;
    this.#dirty = false;
    if (this.#listeners.size === 0) return;
    setImmediate(() => {
      for (const l of this.#listeners) {
        try {
          l();
        } catch {
          // a listener's failure is its own
        }
      }
    });
  }

  /** Called right after commits that appended events. Returns the unsubscribe function. */
  onAppended(fn: () => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  since(seq: number, limit = 500): StreamEventRow[] {
    return this.#since.all(seq, limit) as StreamEventRow[];
  }

  maxSeq(): number {
    return (this.#maxSeq.get() as { seq: number }).seq;
  }

  get(id: string): EventRow | undefined {
    return this.#get.get(id) as EventRow | undefined;
  }

  forRequest(requestId: string): EventRow[] {
    return this.#forRequest.all(requestId) as EventRow[];
  }

  // --- webhooks --------------------------------------------------------------------------------

  /** Returns the secret once; it is what signs the deliveries. */
  addWebhook(apiKeyId: string, url: string, now = Date.now()): { id: string; secret: string; created_at: number } {
    const id = `wh_${randomBytes(8).toString('hex')}`;
    const secret = `whsec_${randomBytes(32).toString('hex')}`;
    this.#insertWebhook.run(id, apiKeyId, url, secret, now);
    return { id, secret, created_at: now };
  }

  webhook(id: string): WebhookRow | undefined {
    return this.#webhook.get(id) as WebhookRow | undefined;
  }

  /** Live webhooks, of one key or of all. */
  webhooks(apiKeyId?: string): WebhookRow[] {
    return (apiKeyId === undefined ? this.#allWebhooks.all() : this.#webhooksOfKey.all(apiKeyId)) as WebhookRow[];
  }

  /**
   * False when there is no such live webhook. Nothing more is delivered to it (the due read skips a removed webhook);
   * its pending deliveries are ended by endPending, a chunk at a time.
   */
  removeWebhook(id: string, now = Date.now()): boolean {
    return this.#removeWebhook.run(now, id).changes === 1;
  }

  /**
   * Ends at most `limit` pending deliveries of a removed webhook (dead, 'webhook removed'); returns how many. One
   * write per chunk: a webhook's backlog (hundreds of thousands, a receiver that never answered) rewritten in one
   * statement held the node's only connection, and every fill, for seconds.
   */
  endPending(webhookId: string, limit: number): number {
    return this.#killPending.run({ webhook_id: webhookId, limit }).changes;
  }

  // --- deliveries ------------------------------------------------------------------------------

  /** Deliveries that may go now (named only), earliest first, at most `perKey` of any one API key's webhooks. */
  due(now: number, perKey: number): DueDeliveryRef[] {
    return this.#due.all({ now, per_key: perKey }) as DueDeliveryRef[];
  }

  /** A pending delivery with what it takes to send it; undefined once it is not pending. */
  pendingDelivery(eventId: string, webhookId: string): DueDelivery | undefined {
    return this.#pendingDelivery.get(eventId, webhookId) as DueDelivery | undefined;
  }

  markDelivered(eventId: string, webhookId: string, status: number, now = Date.now()): boolean {
    return this.#delivered.run({ event_id: eventId, webhook_id: webhookId, status, now }).changes === 1;
  }

  /** A failed attempt: retried at `nextAttemptAt`, or dead when that is null. */
  markFailed(eventId: string, webhookId: string, f: { status: number | null; error: string; nextAttemptAt: number | null }): boolean {
    const dead = f.nextAttemptAt === null;
    const r = this.#failed.run({
      event_id: eventId,
      webhook_id: webhookId,
      state: dead ? 'dead' : 'pending',
      next: f.nextAttemptAt ?? Date.now(),
      status: f.status,
      error: f.error.slice(0, 500),
    });
    if (r.changes === 1 && !dead) this.#holdBehind.run({ event_id: eventId, webhook_id: webhookId, next: f.nextAttemptAt });
    return r.changes === 1;
  }

  deliveryCounts(webhookId: string): Record<DeliveryState, number> {
    const out: Record<DeliveryState, number> = { pending: 0, delivered: 0, dead: 0 };
    for (const r of this.#counts.all(webhookId) as { state: DeliveryState; n: number }[]) out[r.state] = r.n;
    return out;
  }

  pendingCount(): number {
    return (this.#pendingCount.get() as { n: number }).n;
  }

  deliveries(webhookId: string, opts: { state?: DeliveryState; limit?: number } = {}): (DeliveryRow & { type: string; status: string })[] {
    return this.#deliveries.all({ webhook_id: webhookId, state: opts.state ?? null, limit: opts.limit ?? 100 }) as (DeliveryRow & {
      type: string;
      status: string;
    })[];
  }

  /**
   * Manual redelivery of an event: its deliveries (to one webhook, or to all of them) go back to pending with a
   * fresh schedule. Scoped to a key's webhooks when apiKeyId is given. Returns how many deliveries were reset.
   */
  redeliver(target: { eventId: string; webhookId?: string; apiKeyId?: string }, now = Date.now()): number {
    const n = this.#redeliverEvent.run({ webhook_id: target.webhookId ?? null, api_key_id: target.apiKeyId ?? null, now, event_id: target.eventId }).changes;
    return this.#requeued(n);
  }

  /**
   * Manual redelivery of a live webhook's dead deliveries (of key apiKeyId's webhooks only, when given): at most
   * `limit` of them go back to pending, each request's oldest first, so that one call costs the ledger a bounded
   * write however many died. `more`: whether dead ones are left for another call.
   */
  redeliverDead(webhookId: string, opts: { apiKeyId?: string; limit: number; now?: number }): { redelivered: number; more: boolean } {
    const args = { webhook_id: webhookId, api_key_id: opts.apiKeyId ?? null, now: opts.now ?? Date.now(), limit: opts.limit };
    const n = this.#requeued(this.#redeliverDead.run(args).changes);
    return { redelivered: n, more: n === opts.limit && this.#anyDead.get(webhookId) !== undefined };
  }

  #requeued(n: number): number {
    if (n > 0) {
      this.#dirty = true;
      this.committed();
    }
    return n;
  }
}
