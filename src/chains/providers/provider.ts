import type { RpcProviderConfig } from '../../config/schema.ts';
import { RelayNodeError } from '../../lib/errors.ts';
import { JsonPost, PostError } from './httpPost.ts';
import { WsChannel, type WireAnswer } from './wsChannel.ts';

/** One JSON-RPC call as sent on the wire. */
export interface RpcCall {
  method: string;
  params: unknown[];
}

/** A JSON-RPC answer: a result, or the provider's error object (code, message, data). */
export type RpcAnswer = { result: unknown } | { error: { code: number; message: string; data?: unknown } };

/**
 * Why a provider could not answer (as opposed to answering with a JSON-RPC error, which is an
 * answer): each kind is a metric label and decides what the pool does next.
 * - rate_limited: HTTP 429 or a provider's "too many requests" error: backed off, retried elsewhere;
 * - timeout, network, http: transport failures: retried elsewhere;
 * - behind: the provider has not reached the block the call needs: retried elsewhere;
 * - internal: a JSON-RPC internal error (-32603) or a server error: retried elsewhere.
 */
export type ProviderFailureKind = 'rate_limited' | 'timeout' | 'network' | 'http' | 'behind' | 'internal';

/** A provider failed to answer. Its message names the provider, never its URL. */
export class ProviderFailure extends RelayNodeError {
  override name = 'ProviderFailure';
  constructor(
    readonly provider: string,
    readonly kind: ProviderFailureKind,
    detail: string,
  ) {
    super(`provider ${provider}: ${kind}: ${detail}`);
  }
}

// Provider-specific ways of saying "slow down" (Infura, Alchemy, QuickNode, geth -32005...).
const RATE_LIMITED = /rate.?limit|too many requests|exceeded .*(capacity|quota|rate|compute units)|limit exceeded|request limit|throughput/i;
// A node that has not reached the block a call names.
const BEHIND =
  /header not found|unknown block|block not found|blockoutofrange|block.*out of range|beyond current head|requested block .* (is )?(not|ahead)|block height .* but requested|missing trie node/i;

/** Classifies a JSON-RPC error answer: a failure of the provider (retried elsewhere) or a real answer (undefined). */
export function failureOfAnswer(error: { code: number; message: string }): ProviderFailureKind | undefined {
  if (error.code === 429 || RATE_LIMITED.test(error.message)) return 'rate_limited';
  if (BEHIND.test(error.message)) return 'behind';
  if (error.code === -32603 || error.code === -32002 || error.code === -32001) return 'internal';
  return undefined;
}

const MAX_BATCH = 50;
const EWMA = 0.2;
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 15_000;

interface Pending {
  calls: RpcCall[];
  resolve: (a: RpcAnswer[]) => void;
  reject: (e: unknown) => void;
}

/**
 * One RPC endpoint: its request budget (calls per second, requests in flight), its health
 * (latency and error averages, last head, rate-limit backoff) and a batcher that sends the calls
 * made in one tick as one JSON-RPC batch, by HTTP POST or, for a ws:// or wss:// URL, over one
 * websocket connection (see WsChannel). The URL stays inside this object.
 */
export class RpcProvider {
  readonly name: string;
  readonly index: number;
  readonly weight: number;
  readonly role: RpcProviderConfig['role'];
  readonly #url: string;
  // The HTTP connection (keep-alive) of a non-websocket provider, opened on the first call.
  #conn: JsonPost | undefined;
  readonly #maxRps: number;
  readonly #maxConcurrent: number;
  readonly #timeoutMs: number;
  readonly #ws: WsChannel | undefined;
  #tokens: number;
  #refilledAt = Date.now();
  #inflight = 0;
  #queue: Pending[] = [];
  #flushScheduled = false;
  #id = 0;
  /** Average answer time (ms) and share of failed calls, both moving averages. */
  latencyMs = 50;
  errorRate = 0;
  /** The newest block this provider reported as its head (0: not known yet). */
  head = 0n;
  /** A rate-limited provider takes no calls before this time. */
  coolUntil = 0;
  #backoffMs = 0;
  lastFailure: ProviderFailureKind | undefined;

  constructor(
    spec: RpcProviderConfig,
    index: number,
    timeoutMs: number,
    private readonly observe: {
      exchange(ms: number, calls: number): void;
      failure(kind: ProviderFailureKind): void;
      /** A head the provider announced by itself (a websocket newHeads subscription). */
      head?(n: bigint): void;
    } = { exchange() {}, failure() {} },
  ) {
    this.name = spec.name ?? `p${index}`;
    this.index = index;
    this.weight = spec.weight;
    this.role = spec.role;
    this.#url = spec.url;
    this.#maxRps = spec.maxRps;
    this.#maxConcurrent = spec.maxConcurrent;
    this.#timeoutMs = timeoutMs;
    this.#tokens = spec.maxRps > 0 ? Math.max(1, spec.maxRps) : Infinity;
    this.#ws = /^wss?:/i.test(spec.url) ? new WsChannel(spec.url, this.name, timeoutMs, observe.head && ((n) => observe.head!(n))) : undefined;
  }

  /** Whether the provider's head arrives by subscription (its websocket is open and subscribed to newHeads): no need to poll it. */
  followsHeads(): boolean {
    return this.#ws?.followsHeads() ?? false;
  }

  /** Closes the provider's websocket connection, if it has one (the pool is stopping). */
  close(): void {
    this.#ws?.close();
    this.#conn?.close();
    this.#conn = undefined;
  }

  /** Whether the provider takes calls now (not backing off a rate limit). */
  cooling(now = Date.now()): boolean {
    return now < this.coolUntil;
  }

  /**
   * Milliseconds until the budget allows `n` more calls (0: now). `yielding` (a read for the public API): only while
   * half the budget (calls per second, and in flight) is left over for the node's own reads, which take it first.
   */
  waitFor(n: number, now = Date.now(), yielding = false): number {
    if (this.cooling(now)) return this.coolUntil - now;
    // A dropped websocket is opened again after its backoff: calls wait for it or go elsewhere.
    const reconnect = this.#ws?.retryIn(now) ?? 0;
    if (reconnect > 0) return reconnect;
    if (this.#inflight >= (yielding ? Math.max(1, Math.floor(this.#maxConcurrent / 2)) : this.#maxConcurrent)) return 5;
    if (this.#maxRps <= 0) return 0;
    this.#refill(now);
    const need = Math.min(n + (yielding ? Math.floor(this.#maxRps / 2) : 0), this.#maxRps);
    return this.#tokens >= need ? 0 : Math.ceil(((need - this.#tokens) / this.#maxRps) * 1000);
  }

  #refill(now: number): void {
    this.#tokens = Math.min(Math.max(1, this.#maxRps), this.#tokens + ((now - this.#refilledAt) / 1000) * this.#maxRps);
    this.#refilledAt = now;
  }

  /**
   * Spends `n` calls of the budget, when the provider is picked for them: calls picked in one tick (before any is
   * sent) then see each other's share, and no burst passes one check together.
   */
  take(n: number, now = Date.now()): void {
    if (this.#maxRps <= 0) return;
    this.#refill(now);
    this.#tokens -= n;
  }

  /**
   * Sends calls (batched with the others of this tick), their budget already taken; resolves with one answer per
   * call, or rejects with a ProviderFailure.
   */
  send(calls: RpcCall[]): Promise<RpcAnswer[]> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ calls, resolve, reject });
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        queueMicrotask(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#flushScheduled = false;
    while (this.#queue.length) {
      const group: Pending[] = [];
      let n = 0;
      while (this.#queue.length && (group.length === 0 || n + this.#queue[0]!.calls.length <= MAX_BATCH)) {
        const p = this.#queue.shift()!;
        group.push(p);
        n += p.calls.length;
      }
      void this.#post(group);
    }
  }

  async #post(group: Pending[]): Promise<void> {
    const body = group.flatMap((p) => p.calls.map((c) => ({ jsonrpc: '2.0', id: ++this.#id, method: c.method, params: c.params })));
    const started = Date.now();
    this.#inflight++;
    try {
      const answers = this.#ws ? await this.#ws.send(body) : await this.#http(body);
      const byId = new Map(answers.map((a) => [a.id, a]));
      let i = 0;
      let limited: RpcAnswer | undefined;
      for (const p of group) {
        const out: RpcAnswer[] = p.calls.map(() => {
          const a = byId.get(body[i++]!.id);
          if (!a) return { error: { code: -32603, message: 'no answer for this call in the batch' } };
          return a.error ? { error: a.error } : { result: a.result };
        });
        for (const a of out) if ('error' in a && failureOfAnswer(a.error) === 'rate_limited') limited = a;
        p.resolve(out);
      }
      this.observe.exchange(Date.now() - started, body.length);
      if (limited) this.rateLimited();
      else this.#ok(Date.now() - started);
    } catch (e) {
      const failure = e instanceof ProviderFailure ? e : new ProviderFailure(this.name, 'network', 'request failed');
      if (failure.kind === 'rate_limited') this.rateLimited();
      else this.failed(failure.kind);
      for (const p of group) p.reject(failure);
    } finally {
      this.#inflight--;
    }
  }

  async #http(body: { id: number }[]): Promise<WireAnswer[]> {
    let res: { status: number; text: string };
    try {
      this.#conn ??= new JsonPost(this.#url, this.#maxConcurrent > 0 ? this.#maxConcurrent : Number.POSITIVE_INFINITY);
      res = await this.#conn.post(JSON.stringify(body), this.#timeoutMs);
    } catch (e) {
      // Only the error's kind leaves this function (never the URL).
      const kind = e instanceof PostError ? e.kind : 'network';
      if (kind === 'timeout') throw new ProviderFailure(this.name, 'timeout', `no answer within ${this.#timeoutMs} ms`);
      throw new ProviderFailure(this.name, 'network', kind === 'read' ? 'connection lost while reading the answer' : 'connection failed');
    }
    if (res.status === 429) throw new ProviderFailure(this.name, 'rate_limited', 'HTTP 429');
    const text = res.text;
    if (res.status < 200 || res.status > 299) throw new ProviderFailure(this.name, 'http', `HTTP ${res.status}`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ProviderFailure(this.name, 'http', 'answer is not JSON');
    }
    if (!Array.isArray(parsed)) {
      // Some providers answer a whole batch with one error object (e.g. a rate limit).
      const err = (parsed as { error?: { code: number; message: string } }).error;
      if (err) throw new ProviderFailure(this.name, failureOfAnswer(err) ?? 'internal', `batch refused (${err.code})`);
      throw new ProviderFailure(this.name, 'http', 'answer to a batch is not a list');
    }
    return parsed as WireAnswer[];
  }

  #ok(latencyMs: number): void {
    this.latencyMs = this.latencyMs * (1 - EWMA) + latencyMs * EWMA;
    this.errorRate *= 1 - EWMA;
    this.#backoffMs = 0;
  }

  /** Records a failure of this provider (a transport failure, an internal error, a call it was behind for). */
  failed(kind: ProviderFailureKind): void {
    this.lastFailure = kind;
    this.observe.failure(kind);
    if (kind === 'behind') return; // lag is scored by head, not as an error
    this.errorRate = this.errorRate * (1 - EWMA) + EWMA;
    if (kind === 'timeout') this.latencyMs = Math.max(this.latencyMs, this.#timeoutMs);
  }

  /** The provider said "slow down": it takes no calls for a growing while (work goes elsewhere or waits). */
  rateLimited(): void {
    this.lastFailure = 'rate_limited';
    this.observe.failure('rate_limited');
    // The calls in flight when the limit hit all hear it: one step of backoff per cool-down.
    if (this.cooling()) return;
    this.#backoffMs = Math.min(BACKOFF_MAX_MS, Math.max(BACKOFF_MIN_MS, this.#backoffMs * 2));
    this.coolUntil = Date.now() + this.#backoffMs;
  }
}
