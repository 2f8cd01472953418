import WebSocket from 'ws';
import { failureOfAnswer, ProviderFailure, type ProviderFailureKind } from './provider.ts';

/** One JSON-RPC answer of a batch, as the provider sent it. */
export interface WireAnswer {
  id: number;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

interface InFlight {
  ids: number[];
  resolve: (a: WireAnswer[]) => void;
  reject: (e: ProviderFailure) => void;
  timer: NodeJS.Timeout;
}

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 15_000;

/**
 * The websocket connection of one provider (ws:// or wss://): opened on the first call, JSON-RPC
 * batches sent as arrays and their answers matched by id, each batch failed as `timeout` when not
 * answered in time. A dropped socket fails the batches on it as `network` (the pool asks elsewhere)
 * and is opened again on a later call, no sooner than a growing backoff allows. Errors name the
 * provider, never the URL (it carries keys).
 */
export class WsChannel {
  readonly #url: string;
  readonly #name: string;
  readonly #timeoutMs: number;
  #socket: WebSocket | undefined;
  #opening: Promise<WebSocket> | undefined;
  readonly #inFlight = new Map<number, InFlight>();
  #backoffMs = 0;
  #retryAt = 0;
  #closed = false;
  #pinging = false;
  /** The newHeads subscription on the open connection (undefined: none, heads are polled). */
  #subscription: string | undefined;
  #subscribeId = 0;
  #headAt = 0;
  readonly #onHead: ((n: bigint) => void) | undefined;

  constructor(url: string, name: string, timeoutMs: number, onHead?: (n: bigint) => void) {
    this.#onHead = onHead;
    this.#url = url;
    this.#name = name;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Whether the provider's head arrives by a newHeads subscription on an open connection, a head
   * having come within the timeout (no need to poll it). A quiet subscription (no blocks, or a
   * connection that died silently) goes back to polling, whose timeout finds a dead connection.
   */
  followsHeads(now = Date.now()): boolean {
    return this.#socket !== undefined && this.#subscription !== undefined && now - this.#headAt < this.#timeoutMs;
  }

  /** Milliseconds until a dropped connection may be opened again (0: now, or it is open). */
  retryIn(now = Date.now()): number {
    return this.#socket || this.#opening ? 0 : Math.max(0, this.#retryAt - now);
  }

  /** Sends one batch; resolves with the provider's answers to it, or rejects with a ProviderFailure. */
  async send(body: { id: number }[]): Promise<WireAnswer[]> {
    const socket = await this.#open();
    return new Promise((resolve, reject) => {
      const ids = body.map((b) => b.id);
      const entry: InFlight = {
        ids,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#forget(entry);
          reject(this.#failure('timeout', `no answer within ${this.#timeoutMs} ms`));
          this.#checkAlive(socket);
        }, this.#timeoutMs),
      };
      for (const id of ids) this.#inFlight.set(id, entry);
      socket.send(JSON.stringify(body), (err) => {
        if (!err) return;
        this.#forget(entry);
        reject(this.#failure('network', 'could not send on the connection'));
      });
    });
  }

  /** Closes the connection for good: batches in flight fail as `network`, later calls too. */
  close(): void {
    this.#closed = true;
    const socket = this.#socket;
    this.#dropped();
    socket?.terminate();
  }

  #open(): Promise<WebSocket> {
    if (this.#closed) return Promise.reject(this.#failure('network', 'provider closed'));
    if (this.#socket) return Promise.resolve(this.#socket);
    if (this.#opening) return this.#opening;
    if (Date.now() < this.#retryAt) return Promise.reject(this.#failure('network', 'reconnecting after a dropped connection'));
    this.#opening = new Promise<WebSocket>((resolve, reject) => {
      const socket = new WebSocket(this.#url, { handshakeTimeout: this.#timeoutMs });
      // The ws library's errors may quote the URL: only their kind leaves this class.
      socket.on('error', () => {
        if (this.#opening) {
          this.#opening = undefined;
          this.#backOff();
          reject(this.#failure('network', 'connection failed'));
        }
        socket.terminate();
      });
      socket.on('open', () => {
        this.#opening = undefined;
        if (this.#closed) {
          socket.terminate();
          reject(this.#failure('network', 'provider closed'));
          return;
        }
        this.#socket = socket;
        resolve(socket);
        if (this.#onHead) this.#subscribe(socket);
      });
      socket.on('message', (data) => this.#message(data.toString()));
      socket.on('close', () => {
        if (this.#opening) {
          this.#opening = undefined;
          this.#backOff();
          reject(this.#failure('network', 'connection failed'));
        }
        if (this.#socket !== socket) return;
        this.#backOff();
        this.#dropped();
      });
    });
    return this.#opening;
  }

  // A connection can die without a close (a load balancer forgetting it): after a timeout, a ping
  // unanswered within the timeout drops the connection, and the next call opens a new one.
  #checkAlive(socket: WebSocket): void {
    if (this.#pinging || this.#socket !== socket) return;
    this.#pinging = true;
    const dead = setTimeout(() => {
      if (this.#socket === socket) socket.terminate();
    }, this.#timeoutMs);
    dead.unref();
    socket.once('pong', () => {
      clearTimeout(dead);
      this.#pinging = false;
    });
    socket.ping();
  }

  // Asks for the provider's new heads on this connection; without an answer, heads stay polled.
  #subscribe(socket: WebSocket): void {
    const id = -++this.#subscribeId; // negative: never one of the batches' ids
    const entry: InFlight = {
      ids: [id],
      resolve: ([a]) => {
        if (this.#socket === socket && typeof a?.result === 'string') this.#subscription = a.result;
      },
      reject: () => {},
      timer: setTimeout(() => this.#forget(entry), this.#timeoutMs),
    };
    this.#inFlight.set(id, entry);
    socket.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_subscribe', params: ['newHeads'] }), () => {});
  }

  #message(text: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return; // not an answer to anything: the batch it was meant for times out
    }
    const note = parsed as { method?: string; params?: { subscription?: string; result?: { number?: unknown } } };
    if (note?.method === 'eth_subscription') {
      const n = note.params?.result?.number;
      if (note.params?.subscription !== this.#subscription || typeof n !== 'string' || !/^0x[0-9a-f]+$/i.test(n)) return;
      this.#headAt = Date.now();
      this.#onHead?.(BigInt(n));
      return;
    }
    // An answer on this connection: it works, a later drop starts the backoff afresh.
    this.#backoffMs = 0;
    const answers = (Array.isArray(parsed) ? parsed : [parsed]) as WireAnswer[];
    const entry = answers.map((a) => this.#inFlight.get(a?.id)).find(Boolean);
    if (entry) {
      this.#forget(entry);
      entry.resolve(answers);
      return;
    }
    // A whole batch refused with one error object (no id): the batch it answers is the only one in flight, if so.
    const err = (parsed as { error?: { code: number; message: string }; id?: unknown }).error;
    const pending = new Set(this.#inFlight.values());
    if (err && !Array.isArray(parsed) && pending.size === 1) {
      const [only] = pending;
      this.#forget(only!);
      only!.reject(this.#failure(failureOfAnswer(err) ?? 'internal', `batch refused (${err.code})`));
    }
  }

  #forget(entry: InFlight): void {
    clearTimeout(entry.timer);
    for (const id of entry.ids) this.#inFlight.delete(id);
  }

  // The connection is gone: what was in flight on it fails as `network`.
  #dropped(): void {
    this.#socket = undefined;
    this.#pinging = false;
    this.#subscription = undefined;
    const entries = new Set(this.#inFlight.values());
    for (const e of entries) {
      this.#forget(e);
      e.reject(this.#failure('network', 'connection closed'));
    }
  }

  #backOff(): void {
    this.#backoffMs = Math.min(RECONNECT_MAX_MS, Math.max(RECONNECT_MIN_MS, this.#backoffMs * 2));
    this.#retryAt = Date.now() + this.#backoffMs;
  }

  #failure(kind: ProviderFailureKind, detail: string): ProviderFailure {
    return new ProviderFailure(this.#name, kind, detail);
  }
}
