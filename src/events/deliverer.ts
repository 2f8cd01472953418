import { backoffMs } from '../lib/backoff.ts';
import { createHmac } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Config } from '../config/load.ts';
import type { DueDelivery } from '../ledger/events.ts';
import type { Ledger } from '../ledger/index.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { LeaseLostError } from '../ledger/leases.ts';
import { type BroadcastGate, OPEN_GATE } from '../submitter/gate.ts';
import { BlockedTargetError, guardedLookup, ipLiteralHost, isNonPublicAddress, lookupOwner } from './targetGuard.ts';
import { errText } from '../lib/errors.ts';

// The most of a receiver's answer read (an acknowledgement needs none of it): past it, the connection is dropped.
const MAX_ANSWER_BYTES = 64 * 1024;
// How often at most the outbox gauge (relay_events_outbox_depth) is counted: a scan of every pending delivery.
const OUTBOX_DEPTH_EVERY_MS = 15_000;

// Webhook deliveries: at least once, signed, in order per request and webhook, with retries on an
// exponential backoff with full jitter, then dead. All state is in the ledger (event_deliveries),
// so a restart resumes where the last run stopped; a delivery cut by a stop is simply sent again.

export const SIGNATURE_HEADER = 'x-relay-signature';
export const TIMESTAMP_HEADER = 'x-relay-timestamp';
export const EVENT_ID_HEADER = 'x-relay-event-id';

/** The body of a delivery: the event, with the Status record (already JSON in the outbox) as `data`. */
export function deliveryBody(e: { event_id: string; type: string; request_id: string; status: string; created_at: number; payload: string }): string {
  return `{"id":${JSON.stringify(e.event_id)},"type":${JSON.stringify(e.type)},"requestId":${JSON.stringify(e.request_id)},"status":${JSON.stringify(e.status)},"timestamp":${e.created_at},"data":${e.payload}}`;
}

/** v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>, timestamp in seconds since the epoch. */
export function signature(secret: string, timestamp: string, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** A URL as logs may show it: no credentials, no query string, no fragment. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid url)';
  }
}

export class Deliverer {
  readonly #ledger: Ledger;
  readonly #config: Config;
  readonly #metrics: Metrics;
  readonly #log: Logger;
  readonly #gate: BroadcastGate;
  readonly #inFlight = new Map<string, { abort: AbortController; done: Promise<void>; apiKey: string }>();
  #unsubscribe: (() => void) | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #retryAt = Infinity;
  #scheduled = false;
  #stopped = true;
  // Outcomes of finished attempts, written together in one transaction at the next pass (one
  // fsync for many deliveries). Until then their deliveries count as in flight.
  #outcomes: { key: string; write: () => void }[] = [];
  // When the outbox gauge was last counted.
  #depthAt = 0;
  // Keep-alive agents whose DNS lookup refuses private targets at connect time (see targetGuard.ts).
  readonly #agents: { http: HttpAgent; https: HttpsAgent };

  /**
   * `gate`: on an active/standby node, the leader lease (src/lease/leadership.ts), checked right before
   * deliveries are sent, as every broadcast checks it: a leader paused past its lease and resumed sends
   * nothing (the new leader delivers), it stops instead. A single node's gate is always open.
   */
  constructor(opts: { ledger: Ledger; config: Config; metrics: Metrics; log: Logger; gate?: BroadcastGate }) {
    this.#ledger = opts.ledger;
    this.#gate = opts.gate ?? OPEN_GATE;
    this.#config = opts.config;
    this.#metrics = opts.metrics;
    this.#log = opts.log.child({ component: 'webhooks' });
    const lookup: LookupFunction = guardedLookup(() => this.#cfg.allowPrivateTargets);
    this.#agents = { http: new HttpAgent({ keepAlive: true, lookup } as object), https: new HttpsAgent({ keepAlive: true, lookup } as object) };
  }

  // Read at every use, so that a running node picks up a changed value (tests shorten the backoff).
  get #cfg() {
    return this.#config.events;
  }

  start(): this {
    this.#stopped = false;
    this.#unsubscribe = this.#ledger.events.onAppended(() => this.wake());
    this.wake();
    return this;
  }

  /** Runs a pass soon (coalesced): after commits that appended events, after a delivery ended. */
  wake(): void {
    if (this.#stopped || this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#tick();
    });
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    clearTimeout(this.#pollTimer);
    clearTimeout(this.#retryTimer);
    // Cut what is in flight: those deliveries stay pending and go again after a restart.
    const pending = [...this.#inFlight.values()];
    for (const f of pending) f.abort.abort();
    await Promise.all(pending.map((f) => f.done));
    this.#writeOutcomes();
    this.#agents.http.destroy();
    this.#agents.https.destroy();
  }

  #writeOutcomes(): void {
    if (this.#outcomes.length === 0) return;
    const outcomes = this.#outcomes;
    this.#outcomes = [];
    try {
      this.#ledger.tx(() => {
        for (const o of outcomes) o.write();
      });
    } finally {
      for (const o of outcomes) this.#inFlight.delete(o.key);
    }
  }

  #tick(): void {
    if (this.#stopped) return;
    clearTimeout(this.#pollTimer);
    try {
      this.#writeOutcomes();
      const free = this.#cfg.concurrency - this.#inFlight.size;
      if (free > 0) {
        const perKey = this.#cfg.perKeyConcurrency ?? Math.max(1, Math.floor(this.#cfg.concurrency / 4));
        const ofKey = new Map<string, number>();
        for (const f of this.#inFlight.values()) ofKey.set(f.apiKey, (ofKey.get(f.apiKey) ?? 0) + 1);
        // A key's own deliveries in flight are still pending in the ledger and among its earliest:
        // twice its share shows what else it may start.
        const due = this.#ledger.events.due(Date.now(), 2 * perKey);
        let started = 0;
        for (const { event_id, webhook_id, api_key_id } of due) {
          if (started >= free) break;
          const key = `${event_id}|${webhook_id}`;
          const inFlightOfKey = ofKey.get(api_key_id) ?? 0;
          if (this.#inFlight.has(key) || inFlightOfKey >= perKey) continue;
          const d = this.#ledger.events.pendingDelivery(event_id, webhook_id);
          if (!d) continue;
          // After the reads (which may have waited on the database): this node must still lead when it sends.
          if (started === 0) this.#gate.check();
          this.#launch(key, d);
          ofKey.set(api_key_id, inFlightOfKey + 1);
          started++;
        }
      }
      // The gauge counts the whole outbox: a key whose receivers never answer keeps a backlog of millions (a
      // pass follows every event appended and every delivery ended), so it is counted every so often only.
      const now = Date.now();
      if (now - this.#depthAt >= OUTBOX_DEPTH_EVERY_MS) {
        this.#depthAt = now;
        this.#metrics.outboxDepth.set(this.#ledger.events.pendingCount());
      }
    } catch (e) {
      // No longer the leader (the gate, or a fenced write of outcomes): the node stops acting; so does this.
      if (e instanceof LeaseLostError)
        return void this.#log.warn({ err: errText(e) }, 'webhook deliveries stopped: this node no longer holds the leader lease');
      this.#log.error({ err: errText(e) }, 'webhook delivery pass failed');
    }
    this.#pollTimer = setTimeout(() => this.#tick(), this.#cfg.pollIntervalMs);
    this.#pollTimer.unref();
  }

  // Wakes at `at` for a retry that comes due before the next poll.
  #wakeAt(at: number): void {
    if (this.#stopped || at >= this.#retryAt) return;
    clearTimeout(this.#retryTimer);
    this.#retryAt = at;
    this.#retryTimer = setTimeout(
      () => {
        this.#retryAt = Infinity;
        this.wake();
      },
      Math.max(0, at - Date.now()),
    );
    this.#retryTimer.unref();
  }

  #launch(key: string, d: DueDelivery): void {
    const abort = new AbortController();
    const done = this.#deliver(d, abort)
      .then((write) => {
        // Written at the next pass; the delivery stays in flight until then.
        if (write) this.#outcomes.push({ key, write });
        else this.#inFlight.delete(key);
      })
      .catch((e) => {
        this.#inFlight.delete(key);
        this.#log.error({ err: errText(e), event: d.event_id, webhook: d.webhook_id, requestId: d.request_id }, 'webhook delivery failed');
      })
      .finally(() => {
        // The next event of the request (or another due delivery) may go now.
        this.wake();
      });
    this.#inFlight.set(key, { abort, done, apiKey: d.api_key_id });
  }

  // POSTs with node:http(s) through the guarded agents; resolves with the answer's status. The body is
  // drained so the connection can be reused (its content does not matter), but only so far: past
  // MAX_ANSWER_BYTES, or still arriving deliveryTimeoutMs after the status, the connection is dropped.
  // A receiver that answers 200 and then sends without end would otherwise hold its socket for good.
  // `owner` (the webhook's API key) is whose turn its DNS lookup waits for (targetGuard.ts).
  #post(owner: string, url: string, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<number> {
    const u = new URL(url);
    const literal = ipLiteralHost(u.hostname);
    // An IP literal is connected to without a lookup: it is checked here instead.
    if (literal !== undefined && !this.#cfg.allowPrivateTargets && isNonPublicAddress(literal)) return Promise.reject(new BlockedTargetError());
    const https = u.protocol === 'https:';
    return new Promise<number>((resolve, reject) => {
      const req = lookupOwner.run(owner, () =>
        (https ? httpsRequest : httpRequest)(
          u,
          {
            method: 'POST',
            headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
            agent: https ? this.#agents.https : this.#agents.http,
            signal,
          },
          (res: IncomingMessage) => {
            res.on('error', () => {});
            const cut = setTimeout(() => res.destroy(), this.#cfg.deliveryTimeoutMs);
            res.on('close', () => clearTimeout(cut));
            let read = 0;
            res.on('data', (chunk: Buffer) => {
              read += chunk.length;
              if (read > MAX_ANSWER_BYTES) res.destroy();
            });
            resolve(res.statusCode ?? 0);
          },
        ),
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  // Sends one delivery; returns the write that records its outcome (none when cut by a stop).
  async #deliver(d: DueDelivery, stop: AbortController): Promise<(() => void) | undefined> {
    const body = deliveryBody(d);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const timeoutMs = this.#cfg.deliveryTimeoutMs;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      stop.abort();
    }, timeoutMs);
    let status: number | null = null;
    let error: string | undefined;
    try {
      status = await this.#post(
        d.api_key_id,
        d.url,
        {
          'content-type': 'application/json',
          'user-agent': 'relay-node-webhooks/1',
          [EVENT_ID_HEADER]: d.event_id,
          [TIMESTAMP_HEADER]: timestamp,
          [SIGNATURE_HEADER]: signature(d.secret, timestamp, body),
        },
        body,
        stop.signal,
      );
      // A redirect is an answer that is not 2xx (never followed): the receiver should register the final URL.
      if (status < 200 || status > 299) error = `HTTP ${status}`;
    } catch (e) {
      if (stop.signal.aborted && !timedOut) return undefined; // stopping: stays pending, sent again after the restart
      error = timedOut ? `timed out after ${timeoutMs} ms` : describeDeliveryError(e);
    } finally {
      clearTimeout(timer);
    }
    if (this.#stopped && stop.signal.aborted && !timedOut) return undefined;
    const now = Date.now();
    const where = { webhook: d.webhook_id, url: redactUrl(d.url), event: d.event_id, requestId: d.request_id, status: d.status };
    const events = this.#ledger.events;
    if (error === undefined) {
      this.#metrics.webhookDeliveries.inc({ outcome: 'delivered' });
      this.#metrics.webhookLatency.observe(Math.max(0, now - d.created_at) / 1000);
      this.#log.debug({ ...where, attempt: d.attempts + 1, httpStatus: status }, 'webhook delivered');
      return () => events.markDelivered(d.event_id, d.webhook_id, status!, now);
    }
    const attempt = d.attempts + 1;
    const cfg = this.#cfg;
    if (attempt >= cfg.maxAttempts) {
      this.#metrics.webhookDeliveries.inc({ outcome: 'dead' });
      this.#log.warn({ ...where, attempt, error }, 'webhook delivery dead after its last attempt');
      return () => events.markFailed(d.event_id, d.webhook_id, { status, error: error!, nextAttemptAt: null });
    }
    const next = now + backoffMs(attempt, { baseMs: cfg.backoffBaseMs, maxMs: cfg.backoffMaxMs });
    this.#metrics.webhookDeliveries.inc({ outcome: 'retry' });
    this.#log.info({ ...where, attempt, error, retryInMs: next - now }, 'webhook delivery failed; retrying');
    this.#wakeAt(next);
    return () => events.markFailed(d.event_id, d.webhook_id, { status, error: error!, nextAttemptAt: next });
  }
}

// What went wrong, as the webhook's owner sees it (GET /webhooks/:id/deliveries): the kind of
// failure only. No error code, address or port of the target: that would make the deliveries
// listing a network scanner (refused vs. unreachable vs. open) for whoever holds a key.
function describeDeliveryError(e: unknown): string {
  if (e instanceof BlockedTargetError) return 'target refused: it resolves to a private, loopback or link-local address';
  const code = (e as { code?: string }).code;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'the host name does not resolve';
  return 'could not connect to the target or the connection failed';
}
