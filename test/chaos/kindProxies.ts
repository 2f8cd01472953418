// Fault-injecting proxies for the two chain kinds that are not EVM, each in front of the real part
// (the node is configured with the proxy's URL; the node's code is not touched), each faithful to its
// protocol:
//
// SVM (JSON-RPC over HTTP, in front of the devnet's litesvm RPC):
// - http500 / rpcError: the call never reaches the chain (an HTTP 500, or a JSON-RPC internal error);
// - dropTx: `sendTransaction` is answered with the transaction's signature (as an RPC node does when it
//   accepts it) but never forwarded: the leader dropped it. The node's same-bytes rebroadcast may land it;
// - expireTx: as dropTx, for every send of that signature: it never lands and its blockhash expires; only
//   a new transaction (a fresh blockhash, a new signature) pays;
// - lag: for a while, the proxy is an RPC node `lagSlots` behind: its slots and heights, signature
//   statuses, transactions and signature lists stop at its own slot, `getLatestBlockhash` gives the
//   blockhash it had then, and a request whose `minContextSlot` is past its slot gets the real error
//   (-32016, "Minimum context slot has not been reached"). Account state reads are not lagged (the proxy
//   cannot serve old state).
//
// Exchange (POST /info, POST /exchange, in front of the devnet's stand-in):
// - appliedLost: a POST /exchange is forwarded (the exchange applies the action) but the answer is
//   lost: an HTTP 502/504 or a closed connection;
// - notApplied: a POST /exchange is answered the same ways without being forwarded (nothing applied);
// - infoError: a POST /info answers HTTP 500.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { base58Decode, base58Encode } from '../../src/chains/svm/transactions.ts';
import type { Rng } from './prng.ts';

export const SVM_FAULT_KINDS = ['http500', 'rpcError', 'dropTx', 'expireTx', 'lag'] as const;
export type SvmFaultKind = (typeof SVM_FAULT_KINDS)[number];
export const EXCHANGE_FAULT_KINDS = ['appliedLost', 'notApplied', 'infoError'] as const;
export type ExchangeFaultKind = (typeof EXCHANGE_FAULT_KINDS)[number];

// A loopback HTTP server that hands each request's body to `handle`.
abstract class HttpProxy<K extends string> {
  readonly counts: Record<K, number>;
  requests = 0;
  #server: Server | undefined;
  #url = '';
  protected enabled = true;
  constructor(
    kinds: readonly K[],
    protected rng: Rng,
    protected rates: Partial<Record<K, number>>,
    protected limits: Partial<Record<K, number>> = {},
  ) {
    this.counts = Object.fromEntries(kinds.map((k) => [k, 0])) as Record<K, number>;
  }
  get url(): string {
    return this.#url;
  }
  get total(): number {
    return (Object.values(this.counts) as number[]).reduce((a, b) => a + b, 0);
  }
  setEnabled(on: boolean): void {
    this.enabled = on;
  }
  protected draw(kind: K): boolean {
    const rate = this.rates[kind] ?? 0;
    if (rate <= 0 || !this.enabled) return false;
    const limit = this.limits[kind];
    if (limit !== undefined && this.counts[kind] >= limit) return false;
    if (!this.rng.chance(rate)) return false;
    this.counts[kind]++;
    return true;
  }
  protected abstract handle(req: IncomingMessage, body: string, res: ServerResponse): Promise<void>;
  async start(): Promise<string> {
    this.#server = createServer((req, res) => {
      void (async () => {
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        this.requests++;
        await this.handle(req, Buffer.concat(chunks).toString(), res);
      })().catch(() => res.destroy());
    });
    this.#server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      this.#server!.once('error', reject);
      this.#server!.listen(0, '127.0.0.1', () => resolve());
    });
    this.#url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this.#url;
  }
  async stop(): Promise<void> {
    if (!this.#server) return;
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server!.close(() => resolve()));
  }
}

const send = (res: ServerResponse, status: number, text: string) => {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

interface RpcReq {
  jsonrpc?: string;
  id?: unknown;
  method?: string;
  params?: unknown[];
}

// The first signature of a wire transaction (base64 or base58): a compact-u16 count, then 64-byte signatures.
export function firstSignature(wire: string, encoding: string): string | undefined {
  try {
    const bytes = encoding === 'base64' ? Buffer.from(wire, 'base64') : Buffer.from(base58Decode(wire) ?? []);
    let n = 0;
    let shift = 0;
    let i = 0;
    for (;;) {
      const b = bytes[i++]!;
      n |= (b & 0x7f) << shift;
      if (!(b & 0x80)) break;
      shift += 7;
    }
    if (n < 1 || bytes.length < i + 64) return undefined;
    return base58Encode(bytes.subarray(i, i + 64));
  } catch {
    return undefined;
  }
}
export interface SvmProxyOptions {
  target: string;
  rng: Rng;
  // Per request (lag: an episode starts), per send (dropTx, expireTx).
  rates?: Partial<Record<SvmFaultKind, number>>;
  limits?: Partial<Record<SvmFaultKind, number>>;
  lagSlots?: number;
  lagMs?: number;
}

const FINALIZE_DEPTH = 32;

export class SvmProxy extends HttpProxy<SvmFaultKind> {
  // Signatures the proxy never forwards (expireTx).
  readonly blackholed = new Set<string>();
  // Sends swallowed (each dropTx and every send of a blackholed signature) and answers cut by a lag.
  swallowedSends = 0;
  laggedAnswers = 0;
  #lagUntil = 0;
  #head: { slot: number; at: number } | undefined;
  // getLatestBlockhash answers seen, by context slot: what a lagging node hands out.
  #blockhashes: { slot: number; value: unknown }[] = [];
  constructor(private o: SvmProxyOptions) {
    super(SVM_FAULT_KINDS, o.rng, o.rates ?? {}, o.limits);
  }
  override setEnabled(on: boolean): void {
    super.setEnabled(on);
    if (!on) this.#lagUntil = 0;
  }

  async #forward(body: string): Promise<any> {
    const r = await fetch(this.o.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return JSON.parse(await r.text());
  }
  async #headSlot(): Promise<number> {
    if (this.#head && Date.now() - this.#head.at < 20) return this.#head.slot;
    const r = await this.#forward(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getSlot', params: [{ commitment: 'processed' }] }));
    this.#head = { slot: Number(r.result), at: Date.now() };
    return this.#head.slot;
  }

  protected async handle(_req: IncomingMessage, body: string, res: ServerResponse): Promise<void> {
    let parsed: RpcReq | RpcReq[] | undefined;
    try {
      parsed = JSON.parse(body);
    } catch {}
    if (this.draw('http500')) return send(res, 500, 'internal server error (injected)');
    if (!parsed) return send(res, 200, JSON.stringify(await this.#forward(body)));
    const answers = await Promise.all((Array.isArray(parsed) ? parsed : [parsed]).map((r) => this.#one(r)));
    send(res, 200, JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
  }

  async #one(r: RpcReq): Promise<object> {
    const reply = (p: object) => ({ jsonrpc: '2.0', id: r.id ?? null, ...p });
    const method = r.method ?? '';
    const params = r.params ?? [];
    if (this.draw('rpcError')) return reply({ error: { code: -32603, message: 'Internal error (injected)' } });
    if (method === 'sendTransaction') {
      const enc = ((params[1] ?? {}) as { encoding?: string }).encoding ?? 'base58';
      const sig = typeof params[0] === 'string' ? firstSignature(params[0], enc) : undefined;
      if (sig) {
        let swallow = this.blackholed.has(sig);
        if (!swallow && this.draw('expireTx')) {
          this.blackholed.add(sig);
          swallow = true;
        }
        if (!swallow && this.draw('dropTx')) swallow = true;
        if (swallow) {
          this.swallowedSends++;
          return reply({ result: sig });
        }
      }
    }
    if (this.enabled && Date.now() >= this.#lagUntil && this.draw('lag')) this.#lagUntil = Date.now() + (this.o.lagMs ?? 1_500);
    const out = await this.#forward(JSON.stringify(r));
    if (method === 'getLatestBlockhash' && out.result?.context?.slot !== undefined) {
      this.#blockhashes.push({ slot: Number(out.result.context.slot), value: out.result });
      if (this.#blockhashes.length > 200) this.#blockhashes.splice(0, 100);
    }
    if (Date.now() < this.#lagUntil) {
      const lagged = await this.#lagged(r, out);
      if (lagged) {
        this.laggedAnswers++;
        return reply(lagged);
      }
    }
    return out;
  }

  // The answer a node `lagSlots` behind gives, or undefined when it would be the same.
  async #lagged(r: RpcReq, out: any): Promise<object | undefined> {
    const lag = this.o.lagSlots ?? 5;
    const head = await this.#headSlot();
    const lagSlot = Math.max(0, head - lag);
    const params = r.params ?? [];
    const cfg = params.find((p) => p && typeof p === 'object' && !Array.isArray(p)) as { minContextSlot?: number; commitment?: string } | undefined;
    if (cfg?.minContextSlot !== undefined && cfg.minContextSlot > lagSlot) {
      return { error: { code: -32016, message: 'Minimum context slot has not been reached', data: { contextSlot: lagSlot } } };
    }
    if (!('result' in out)) return undefined;
    // What this node has at its "confirmed" view; anything in a later slot does not exist for it yet.
    const visible = (slot: number) => slot <= lagSlot - 1;
    switch (r.method) {
      case 'getSlot':
      case 'getBlockHeight':
        return { result: Math.max(0, Number(out.result) - lag) };
      case 'getSignatureStatuses':
        return {
          result: {
            ...out.result,
            context: { slot: lagSlot },
            value: (out.result.value as ({ slot: number } | null)[]).map((v) =>
              v && visible(v.slot)
                ? { ...v, ...(v.slot > lagSlot - FINALIZE_DEPTH ? { confirmationStatus: 'confirmed', confirmations: lagSlot - v.slot } : {}) }
                : null,
            ),
          },
        };
      case 'getTransaction':
        return out.result && !visible(Number(out.result.slot)) ? { result: null } : undefined;
      case 'getSignaturesForAddress':
        return { result: (out.result as { slot: number }[]).filter((x) => visible(x.slot)) };
      case 'getLatestBlockhash': {
        const old = [...this.#blockhashes].reverse().find((b) => b.slot <= lagSlot);
        return old ? { result: old.value } : undefined;
      }
      default:
        return undefined;
    }
  }
}

export interface ExchangeProxyOptions {
  target: string;
  rng: Rng;
  rates?: Partial<Record<ExchangeFaultKind, number>>;
  limits?: Partial<Record<ExchangeFaultKind, number>>;
}

export class ExchangeProxy extends HttpProxy<ExchangeFaultKind> {
  constructor(private o: ExchangeProxyOptions) {
    super(EXCHANGE_FAULT_KINDS, o.rng, o.rates ?? {}, o.limits);
  }

  async #forward(req: IncomingMessage, body: string): Promise<{ status: number; text: string }> {
    const r = await fetch(this.o.target + (req.url ?? '/'), {
      method: req.method,
      headers: { 'content-type': 'application/json' },
      body: req.method === 'GET' ? undefined : body,
    });
    return { status: r.status, text: await r.text() };
  }

  // An answer that leaves the outcome unknown: a gateway error, or the connection closed.
  #lose(res: ServerResponse): void {
    const how = this.rng.int(0, 2);
    if (how === 0) return send(res, 502, 'bad gateway (injected)');
    if (how === 1) return send(res, 504, 'gateway timeout (injected)');
    res.socket?.destroy();
  }

  protected async handle(req: IncomingMessage, body: string, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'POST' && path === '/exchange') {
      if (this.draw('notApplied')) return this.#lose(res);
      if (this.draw('appliedLost')) {
        await this.#forward(req, body).catch(() => undefined);
        return this.#lose(res);
      }
    }
    if (req.method === 'POST' && path === '/info' && this.draw('infoError')) return send(res, 500, 'internal server error (injected)');
    const out = await this.#forward(req, body);
    if (res.destroyed) return;
    res.writeHead(out.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out.text) });
    res.end(out.text);
  }
}
