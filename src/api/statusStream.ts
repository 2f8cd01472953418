import websocket from '@fastify/websocket';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { getAddress, isAddress } from 'viem';
import type WebSocket from 'ws';
import type { ApiContext } from './context.ts';
import type { ApiLimits } from './limits.ts';
import type { StreamEventRow } from '../ledger/events.ts';
import type { StatusRecord } from '../ledger/statusRecord.ts';
import { errText } from '../lib/errors.ts';
import { clientOf } from './clientAddress.ts';

// GET /intents/status/ws: the status stream. A client subscribes to request ids, or (with an API
// key) to a wallet; it gets the current status of each first, then every change in the order of
// the ledger's outbox (`seq`), which is the order the webhooks see. Slow clients are closed with
// 4008 rather than buffered without bound. See README "Webhooks and status stream".

export const STREAM_PATH = '/intents/status/ws';
export const CLOSE_SLOW_CLIENT = 4008;
/** Closed for sending far more messages than its limit (policy violation). */
export const CLOSE_TOO_MANY_MESSAGES = 1008;
const MAX_REQUEST_SUBSCRIPTIONS = 1_000;
const MAX_WALLET_SUBSCRIPTIONS = 10;
const WALLET_SNAPSHOT_LIMIT = 100;
const POLL_MS = 500;
/**
 * The event the public SDK (@relayprotocol/relay-sdk, trackRequestStatus) subscribes to, as
 * `{"type":"subscribe","event":"request.status.updated","filters":{"id":"0x…"}}`. It reads an update from any message
 * with this `event` and the Status record as `data`, and ignores every other message: a client subscribed this way gets
 * the stream's own messages with `event` added. Without it the SDK, told to use the stream, waited for good (it polls
 * the status only once its websocket fails, and the stream kept it open).
 */
export const HOSTED_EVENT = 'request.status.updated';

interface Client {
  socket: WebSocket;
  /** Subscriptions, each with the last outbox seq the client's view already includes. */
  requests: Map<string, number>;
  wallets: Map<string, number>;
  queue: string[];
  closed: boolean;
  alive: boolean;
  apiKeyId: string | undefined;
  ip: string;
  /** Its own bucket in the per-connection limiter. */
  limiterId: string;
  /** Messages dropped over the limit since the last one taken; the first gets one error answer. */
  dropped: number;
  /** Subscribed as the public SDK does (HOSTED_EVENT): its updates also name the event, as the SDK reads them. */
  hosted: boolean;
  release: () => void;
}
let connectionSeq = 0;

// How a wallet is stored on requests: checksummed EVM addresses, lower-case other hex, as is otherwise.
function normalizeWallet(v: string): string {
  if (isAddress(v, { strict: false })) return getAddress(v);
  if (/^0x[0-9a-fA-F]+$/.test(v)) return v.toLowerCase();
  return v;
}

export class StatusStream {
  readonly #ctx: ApiContext;
  readonly #clients = new Set<Client>();
  readonly #byRequest = new Map<string, Set<Client>>();
  readonly #byWallet = new Map<string, Set<Client>>();
  #lastSeq = 0;
  #scheduled = false;
  #unsubscribe: () => void;
  #poll: NodeJS.Timeout;
  #heartbeat: NodeJS.Timeout;
  #closed = false;

  readonly #limits: ApiLimits;

  constructor(ctx: ApiContext, limits: ApiLimits) {
    this.#ctx = ctx;
    this.#limits = limits;
    this.#unsubscribe = ctx.ledger.events.onAppended(() => this.wake());
    // Also polls: a read-only replica sees the node's commits only through the database.
    this.#poll = setInterval(() => this.wake(), POLL_MS);
    this.#poll.unref();
    this.#heartbeat = this.#scheduleBeat();
  }

  // Re-reads the interval at every beat (a running node picks up a changed value).
  #scheduleBeat(): NodeJS.Timeout {
    const t = setTimeout(() => {
      // After the I/O already waiting: a beat overdue because the node itself was busy would otherwise run before
      // the pongs that arrived meanwhile are read, and drop clients for the node's own delay.
      setImmediate(() => this.#beat());
      if (!this.#closed) this.#heartbeat = this.#scheduleBeat();
    }, this.#ctx.config.events.heartbeatSeconds * 1000);
    t.unref();
    return t;
  }

  get clients(): number {
    return this.#clients.size;
  }

  /** Whether the API still has this socket open (tests wait for slow clients to be dropped). */
  has(socket: WebSocket): boolean {
    for (const c of this.#clients) if (c.socket === socket) return true;
    return false;
  }

  close(): void {
    this.#closed = true;
    this.#unsubscribe();
    clearInterval(this.#poll);
    clearTimeout(this.#heartbeat);
    for (const c of [...this.#clients]) this.#drop(c, 1001, 'server shutting down');
  }

  attach(socket: WebSocket, req: FastifyRequest): void {
    if (this.#clients.size === 0) this.#lastSeq = this.#ctx.ledger.events.maxSeq();
    // The address every per-IP bucket counts it by (an IPv6 client by its /64).
    const ip = clientOf(req.ip);
    const client: Client = {
      socket,
      requests: new Map(),
      wallets: new Map(),
      queue: [],
      closed: false,
      alive: true,
      apiKeyId: req.apiCaller?.id,
      ip,
      limiterId: `c${++connectionSeq}`,
      dropped: 0,
      hosted: false,
      release: this.#limits.wsConnected(ip),
    };
    this.#clients.add(client);
    this.#ctx.metrics.wsClients.set(this.#clients.size);
    socket.on('message', (data: { toString(): string }, isBinary: boolean) => {
      if (!this.#admit(client)) return;
      try {
        this.#onMessage(client, isBinary ? null : data.toString());
      } catch (e) {
        this.#ctx.log.error({ err: errText(e) }, 'status stream message failed');
        this.#send(client, { type: 'error', errorCode: 'INTERNAL_ERROR', message: 'internal error' });
      }
    });
    socket.on('pong', () => {
      client.alive = true;
    });
    socket.on('close', () => this.#forget(client));
    socket.on('error', () => this.#forget(client));
  }

  // Whether a message may be handled: one token from the connection's bucket and one from its IP's.
  // Over the limit a message is dropped unanswered (after one RATE_LIMITED error), and a client
  // that keeps sending is closed, so that a flood costs the node no replies.
  #admit(c: Client): boolean {
    if (c.closed) return false;
    const conn = this.#limits.wsPerConnection.take(c.limiterId);
    const ip = conn.ok ? this.#limits.wsPerIp.take(c.ip) : conn;
    if (conn.ok && ip.ok) {
      c.dropped = 0;
      return true;
    }
    c.dropped++;
    if (c.dropped === 1) this.#error(c, 'RATE_LIMITED', 'too many messages: slow down', { retryAfterMs: ip.ok ? 0 : ip.retryAfterMs });
    if (c.dropped > this.#limits.config.wsMessagesPerConnectionPerMinute) this.#drop(c, CLOSE_TOO_MANY_MESSAGES, 'too many messages');
    return false;
  }

  // A subscription reads and sends a snapshot per request: `reads` records cost as many messages (the
  // one that asked was paid already), from the connection's bucket and its address's. Subscribing and
  // unsubscribing in turn otherwise read 100 records per message, on the node's thread.
  #chargeReads(c: Client, reads: number): boolean {
    if (reads <= 1) return true;
    const conn = this.#limits.wsPerConnection.take(c.limiterId, Date.now(), reads - 1);
    const ip = conn.ok ? this.#limits.wsPerIp.take(c.ip, Date.now(), reads - 1) : conn;
    if (conn.ok && ip.ok) return true;
    this.#error(c, 'RATE_LIMITED', `subscribing to ${reads} request ids cost ${reads} messages: slow down`, { retryAfterMs: ip.ok ? 0 : ip.retryAfterMs });
    return false;
  }

  wake(): void {
    if (this.#closed || this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#closed) return;
    if (this.#clients.size === 0) return;
    try {
      // A bounded pass; a longer backlog continues in the next turn.
      for (let i = 0; i < 20; i++) {
        const rows = this.#ctx.ledger.events.since(this.#lastSeq, 500);
        for (const row of rows) {
          this.#dispatch(row);
          this.#lastSeq = row.seq;
        }
        if (rows.length < 500) return;
      }
      this.wake();
    } catch (e) {
      this.#ctx.log.error({ err: errText(e) }, 'status stream pass failed');
    }
  }

  #dispatch(row: StreamEventRow): void {
    const byRequest = this.#byRequest.get(row.request_id);
    const byWallet = row.user ? this.#byWallet.get(row.user) : undefined;
    if (!byRequest && !byWallet) return;
    let message: string | undefined;
    let hostedMessage: string | undefined;
    const fields = () =>
      `"id":${JSON.stringify(row.id)},"seq":${row.seq},"requestId":${JSON.stringify(row.request_id)},"status":${JSON.stringify(row.status)},"timestamp":${row.created_at},"data":${row.payload}}`;
    const text = (c: Client) =>
      c.hosted ? (hostedMessage ??= `{"type":"request.status","event":"${HOSTED_EVENT}",${fields()}`) : (message ??= `{"type":"request.status",${fields()}`);
    const sent = new Set<Client>();
    for (const c of byRequest ?? []) {
      const after = c.requests.get(row.request_id);
      if (after !== undefined && row.seq > after) {
        sent.add(c);
        this.#sendText(c, text(c));
      }
    }
    for (const c of byWallet ?? []) {
      if (sent.has(c) || c.closed) continue;
      const after = c.wallets.get(row.user!);
      const own = c.requests.get(row.request_id);
      if (after !== undefined && row.seq > after && (own === undefined || row.seq > own)) this.#sendText(c, text(c));
    }
  }

  #onMessage(c: Client, raw: string | null): void {
    if (c.closed) return;
    let msg: unknown;
    try {
      if (raw === null) throw new Error('binary');
      msg = JSON.parse(raw);
    } catch {
      return this.#error(c, 'INVALID_MESSAGE', 'messages are JSON text: {"type":"subscribe","requestIds":["0x…"]} or {"type":"subscribe","wallet":"0x…"}');
    }
    if (!msg || typeof msg !== 'object' || Array.isArray(msg)) return this.#error(c, 'INVALID_MESSAGE', 'a message is a JSON object with a "type"');
    const m = msg as Record<string, unknown>;
    switch (m.type) {
      case 'subscribe':
        return this.#subscribe(c, m);
      case 'unsubscribe':
        return this.#unsubscribeFrom(c, m);
      case 'ping':
        return this.#send(c, { type: 'pong', timestamp: Date.now() });
      default:
        return this.#error(
          c,
          'INVALID_MESSAGE',
          `unknown message type ${JSON.stringify(String(m.type ?? '')).slice(0, 40)}: use subscribe, unsubscribe or ping`,
        );
    }
  }

  #requestIds(c: Client, m: Record<string, unknown>): string[] | undefined {
    const ids = m.requestIds;
    if (!Array.isArray(ids) || ids.length === 0 || ids.length > 100) {
      this.#error(c, 'INVALID_MESSAGE', 'requestIds: must be an array of 1 to 100 request ids');
      return undefined;
    }
    const bad = ids.find((x) => typeof x !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(x));
    if (bad !== undefined) {
      this.#error(c, 'INVALID_MESSAGE', `requestIds: ${JSON.stringify(bad)?.slice(0, 80)} is not a 0x-prefixed 32-byte hex request id`);
      return undefined;
    }
    return [...new Set((ids as string[]).map((x) => x.toLowerCase()))];
  }

  #subscribe(c: Client, m: Record<string, unknown>): void {
    if (m.requestIds !== undefined && m.wallet !== undefined)
      return this.#error(c, 'INVALID_MESSAGE', 'subscribe to requestIds or to a wallet, one per message');
    if (m.wallet !== undefined) return this.#subscribeWallet(c, m);
    // The public SDK's form: one request id in filters.id.
    const filters = m.filters as { id?: unknown } | undefined;
    if (m.requestIds === undefined && m.event === HOSTED_EVENT && filters && typeof filters === 'object') {
      c.hosted = true;
      m = { ...m, requestIds: [filters.id] };
    }
    const ids = this.#requestIds(c, m);
    if (!ids) return;
    const fresh = ids.filter((id) => !c.requests.has(id));
    if (c.requests.size + fresh.length > MAX_REQUEST_SUBSCRIPTIONS) {
      return this.#error(c, 'TOO_MANY_SUBSCRIPTIONS', `at most ${MAX_REQUEST_SUBSCRIPTIONS} request ids per connection`);
    }
    if (!this.#chargeReads(c, fresh.length)) return;
    const ledger = this.#ctx.ledger;
    // One read: the current records and the outbox position they include.
    const { seq, records } = ledger.read(() => ({ seq: ledger.events.maxSeq(), records: fresh.map((id) => ledger.requests.status(id)) }));
    this.#send(c, { type: 'subscribed', requestIds: ids });
    fresh.forEach((id, i) => {
      c.requests.set(id, seq);
      this.#index(this.#byRequest, id, c);
      const data = records[i];
      if (data) this.#snapshot(c, id, data, seq);
      else this.#error(c, 'REQUEST_NOT_FOUND', `no request with id ${id} (yet): its changes will follow`, { requestId: id });
    });
  }

  #subscribeWallet(c: Client, m: Record<string, unknown>): void {
    if (typeof m.wallet !== 'string' || m.wallet.length === 0 || m.wallet.length > 100) return this.#error(c, 'INVALID_MESSAGE', 'wallet: must be an address');
    // A wallet's stream needs an API key: the upgrade's x-api-key, or apiKey in this message.
    let keyId = c.apiKeyId;
    if (m.apiKey !== undefined) {
      const found = typeof m.apiKey === 'string' && m.apiKey.length <= 200 ? this.#ctx.ledger.apiKeys.lookup(m.apiKey) : { state: 'unknown' as const };
      // A failed lookup costs the address's HTTP bucket too: guessing keys here is no cheaper than over HTTP.
      if (found.state !== 'valid' && !this.#limits.perIp.take(c.ip).ok) return this.#error(c, 'RATE_LIMITED', 'too many requests from this address');
      if (found.state !== 'valid')
        return this.#error(c, 'INVALID_API_KEY', found.state === 'revoked' ? 'the API key has been revoked' : 'the API key is not valid');
      keyId = found.key.id;
      c.apiKeyId = keyId;
    }
    if (!keyId) return this.#error(c, 'MISSING_API_KEY', 'a wallet subscription needs an API key: send x-api-key on the upgrade or "apiKey" in the message');
    // The connection's key was checked when it was given: revoked since, it subscribes no more wallets, as HTTP refuses it.
    if (m.apiKey === undefined && !this.#keyLive(keyId)) return this.#endWallets(c);
    const wallet = normalizeWallet(m.wallet);
    if (c.wallets.has(wallet)) return this.#send(c, { type: 'subscribed', wallet });
    if (c.wallets.size >= MAX_WALLET_SUBSCRIPTIONS)
      return this.#error(c, 'TOO_MANY_SUBSCRIPTIONS', `at most ${MAX_WALLET_SUBSCRIPTIONS} wallets per connection`);
    // One query of up to WALLET_SNAPSHOT_LIMIT records, cheaper than as many reads by id: a tenth of it.
    if (!this.#chargeReads(c, WALLET_SNAPSHOT_LIMIT / 10)) return;
    const ledger = this.#ctx.ledger;
    const { seq, records } = ledger.read(() => ({
      seq: ledger.events.maxSeq(),
      records: ledger.requests.latestStatusesOfUser(wallet, WALLET_SNAPSHOT_LIMIT),
    }));
    c.wallets.set(wallet, seq);
    this.#index(this.#byWallet, wallet, c);
    this.#send(c, { type: 'subscribed', wallet });
    for (const r of records) {
      if (c.requests.has(r.id)) continue;
      this.#snapshot(c, r.id, r.record, seq);
    }
  }

  #unsubscribeFrom(c: Client, m: Record<string, unknown>): void {
    if (typeof m.wallet === 'string') {
      const wallet = normalizeWallet(m.wallet);
      c.wallets.delete(wallet);
      this.#unindex(this.#byWallet, wallet, c);
      return this.#send(c, { type: 'unsubscribed', wallet });
    }
    const ids = this.#requestIds(c, m);
    if (!ids) return;
    for (const id of ids) {
      c.requests.delete(id);
      this.#unindex(this.#byRequest, id, c);
    }
    this.#send(c, { type: 'unsubscribed', requestIds: ids });
  }

  #snapshot(c: Client, requestId: string, data: StatusRecord, seq: number): void {
    this.#send(c, { type: 'snapshot', ...(c.hosted ? { event: HOSTED_EVENT } : {}), requestId, status: data.status, seq, data });
  }

  #index(map: Map<string, Set<Client>>, key: string, c: Client): void {
    let set = map.get(key);
    if (!set) map.set(key, (set = new Set()));
    set.add(c);
  }

  #unindex(map: Map<string, Set<Client>>, key: string, c: Client): void {
    const set = map.get(key);
    if (!set) return;
    set.delete(c);
    if (set.size === 0) map.delete(key);
  }

  #error(c: Client, errorCode: string, message: string, extra: Record<string, unknown> = {}): void {
    this.#send(c, { type: 'error', errorCode, message, ...extra });
  }

  #send(c: Client, msg: unknown): void {
    this.#sendText(c, JSON.stringify(msg));
  }

  // The socket takes messages while it holds less than wsMaxBufferedBytes unsent; beyond, they
  // queue here, and a queue longer than wsMaxBufferedMessages closes the client (4008).
  #sendText(c: Client, text: string): void {
    if (c.closed) return;
    const { wsMaxBufferedBytes, wsMaxBufferedMessages } = this.#ctx.config.events;
    if (c.queue.length === 0 && c.socket.bufferedAmount < wsMaxBufferedBytes) {
      this.#write(c, text);
      return;
    }
    c.queue.push(text);
    if (c.queue.length > wsMaxBufferedMessages) {
      this.#ctx.log.info({ queued: c.queue.length, bufferedBytes: c.socket.bufferedAmount }, 'status stream client too slow; closing it');
      this.#drop(c, CLOSE_SLOW_CLIENT, 'send buffer full: the client reads too slowly');
    }
  }

  #write(c: Client, text: string): void {
    c.socket.send(text, (err) => {
      if (err) return this.#forget(c);
      this.#flush(c);
    });
  }

  #flush(c: Client): void {
    const max = this.#ctx.config.events.wsMaxBufferedBytes;
    while (!c.closed && c.queue.length > 0 && c.socket.bufferedAmount < max) this.#write(c, c.queue.shift()!);
  }

  // Whether the key (its id) is still one HTTP accepts: a PK read.
  #keyLive(keyId: string): boolean {
    const k = this.#ctx.ledger.apiKeys.get(keyId);
    return k !== undefined && k.revoked_at === null;
  }

  // A client's wallet subscriptions hold while its API key does: a key revoked since ends them (checked every
  // heartbeat, one key read per keyed client with wallets), as every HTTP call with it is refused at once.
  #endRevokedWallets(c: Client, live: Map<string, boolean>): void {
    if (c.wallets.size === 0 || c.apiKeyId === undefined) return;
    const keyId = c.apiKeyId;
    let ok = live.get(keyId);
    if (ok === undefined) live.set(keyId, (ok = this.#keyLive(keyId)));
    if (!ok) this.#endWallets(c);
  }

  // The connection's key is revoked: it is forgotten, with the wallet subscriptions it allowed (named in the error).
  #endWallets(c: Client): void {
    const wallets = [...c.wallets.keys()];
    for (const w of wallets) this.#unindex(this.#byWallet, w, c);
    c.wallets.clear();
    c.apiKeyId = undefined;
    this.#error(c, 'INVALID_API_KEY', 'the API key has been revoked; wallet subscriptions need a valid one', { wallets });
  }

  #beat(): void {
    const now = Date.now();
    const live = new Map<string, boolean>();
    for (const c of [...this.#clients]) {
      if (!c.alive) {
        // No pong since the last heartbeat: the connection is gone.
        this.#forget(c);
        c.socket.terminate();
        continue;
      }
      c.alive = false;
      try {
        this.#endRevokedWallets(c, live);
      } catch (e) {
        // The ledger did not answer: the check runs again at the next beat.
        this.#ctx.log.warn({ err: errText(e) }, 'status stream key check failed');
      }
      try {
        c.socket.ping();
      } catch {
        // closing
      }
      this.#send(c, { type: 'heartbeat', timestamp: now });
    }
  }

  #drop(c: Client, code: number, reason: string): void {
    this.#forget(c);
    try {
      c.socket.close(code, reason);
    } catch {
      c.socket.terminate();
    }
  }

  #forget(c: Client): void {
    if (c.closed) return;
    c.closed = true;
    c.queue.length = 0;
    c.release();
    for (const id of c.requests.keys()) this.#unindex(this.#byRequest, id, c);
    for (const w of c.wallets.keys()) this.#unindex(this.#byWallet, w, c);
    this.#clients.delete(c);
    this.#ctx.metrics.wsClients.set(this.#clients.size);
  }
}

/** Registers the websocket plugin and the stream route. Returns the stream (its clients, for tests). */
export function statusStreamRoutes(app: FastifyInstance, ctx: ApiContext, limits: ApiLimits): StatusStream {
  const stream = new StatusStream(ctx, limits);
  app.register(websocket, { options: { maxPayload: 64 * 1024 } });
  app.register(async (f) => {
    f.get(STREAM_PATH, { websocket: true }, (socket, req) => stream.attach(socket, req));
  });
  app.addHook('onClose', async () => stream.close());
  // An upgrade refused before the handler (429, 403) is answered on the raw socket, which no HTTP
  // server tracks: close it after the answer, or it stays open (and holds the server's close).
  app.addHook('onResponse', async (req, reply) => {
    if (reply.statusCode >= 300 && String(req.headers.upgrade ?? '').toLowerCase() === 'websocket') req.raw.socket?.destroySoon();
  });
  return stream;
}

declare module 'fastify' {
  interface FastifyInstance {
    statusStream: StatusStream;
  }
}
