// A loopback JSON-RPC proxy in front of one anvil, that the chaos harness controls: the node is
// configured with the proxy's URL, and the proxy forwards to anvil, injecting faults at seeded rates.
//
// Faults (each counted by kind):
// - http500 / http502: an HTTP error, the request never reaches the chain;
// - rpcError: a JSON-RPC error answer (internal error or "limit exceeded"), never forwarded;
// - timeout: forwarded, then the answer is held past the client's timeout and the socket closed;
// - drop: the connection is destroyed before forwarding;
// - lostResponse: forwarded (the chain did it: a broadcast went out) but the answer is lost;
// - stale: `eth_blockNumber` / `eth_getBlockByNumber("latest")` answer a few blocks behind;
// - lag: for a while, the proxy is a node N blocks behind: its head, its `latest` state, its logs,
//   blocks and receipts above that head do not exist yet;
// - split: for a while, a load-balanced provider whose backends disagree: each call is answered
//   either by the lagging backend or by the current one (a receipt missing while the nonce moved on,
//   a simulation that reverts while a read says otherwise).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Rng } from './prng.ts';

export const FAULT_KINDS = ['http500', 'http502', 'rpcError', 'timeout', 'drop', 'lostResponse', 'stale', 'lag', 'split'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface ProxyOptions {
  target: string;
  rng: Rng;
  // Probability per request of each fault (a lag is an episode started with that probability).
  rates?: Partial<Record<FaultKind, number>>;
  // At most this many of a kind (e.g. timeouts, which cost the client its whole timeout).
  limits?: Partial<Record<FaultKind, number>>;
  // How long a timeout holds the answer (past the node's RPC timeout of 10 s).
  holdMs?: number;
  // Blocks behind for a lagging node, and how long a lag episode lasts.
  lagBlocks?: number;
  lagMs?: number;
  // Methods never faulted (e.g. the harness's own probes); none by default.
  spare?: (method: string) => boolean;
  label?: string;
  // Standing behaviours of one provider (not drawn at random), for several providers per chain:
  // leadBlocks: it lies about `latest`: eth_blockNumber answers this many blocks past the real head;
  // maxRps: beyond this many calls per second it answers HTTP 429 (as paid providers do);
  // rewrite: changes a result it forwards (a provider that lies about state).
  leadBlocks?: number;
  maxRps?: number;
  rewrite?: (method: string, params: unknown[], result: unknown) => unknown;
}

interface RpcReq {
  jsonrpc?: string;
  id?: unknown;
  method?: string;
  params?: unknown[];
}

// Methods whose last parameter is a block tag: a lagging node answers them as of its own head.
const TAGGED = new Set(['eth_getBalance', 'eth_getTransactionCount', 'eth_call', 'eth_getCode', 'eth_getStorageAt']);

export class RpcProxy {
  readonly counts: Record<FaultKind, number> = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  requests = 0;
  #server: Server | undefined;
  #url = '';
  #rates: Partial<Record<FaultKind, number>>;
  #enabled = true;
  #lagUntil = 0;
  #splitUntil = 0;
  #held = new Set<ServerResponse>();
  #head: { n: bigint; at: number } | undefined;
  #blocked = new Set<string>();
  // Requests refused because their method was blocked (not counted as random faults).
  blockedAnswers = 0;
  // Answers of the standing behaviours: HTTP 429s, heads claimed ahead, results rewritten.
  rateLimited = 0;
  liedHeads = 0;
  rewritten = 0;
  #window = { at: 0, n: 0 };

  constructor(private opts: ProxyOptions) {
    this.#rates = { ...(opts.rates ?? {}) };
  }

  get url(): string {
    return this.#url;
  }
  get total(): number {
    return FAULT_KINDS.reduce((a, k) => a + this.counts[k], 0);
  }

  // Faults on or off (off: a transparent proxy), e.g. to let the node settle before the checks.
  setEnabled(on: boolean): void {
    this.#enabled = on;
    if (!on) this.#lagUntil = this.#splitUntil = 0;
  }
  // Every call of these methods is answered with a JSON-RPC error until unblocked (e.g. to hold a
  // payout unsigned by refusing its gas estimate).
  block(methods: string[]): void {
    this.#blocked = new Set(methods);
  }
  setRates(rates: Partial<Record<FaultKind, number>>): void {
    this.#rates = { ...rates };
  }

  async start(port = 0): Promise<string> {
    this.#server = createServer((req, res) => void this.#handle(req, res).catch(() => res.destroy()));
    this.#server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      this.#server!.once('error', reject);
      this.#server!.listen(port, '127.0.0.1', () => resolve());
    });
    this.#url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this.#url;
  }

  async stop(): Promise<void> {
    for (const r of this.#held) r.destroy();
    this.#held.clear();
    if (!this.#server) return;
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server!.close(() => resolve()));
  }

  #draw(kind: FaultKind): boolean {
    const rate = this.#rates[kind] ?? 0;
    if (rate <= 0 || !this.#enabled) return false;
    const limit = this.opts.limits?.[kind];
    if (limit !== undefined && this.counts[kind] >= limit) return false;
    if (!this.opts.rng.chance(rate)) return false;
    this.counts[kind]++;
    return true;
  }

  async #forward(body: string): Promise<{ status: number; text: string }> {
    const res = await fetch(this.opts.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return { status: res.status, text: await res.text() };
  }

  async #call(method: string, params: unknown[]): Promise<any> {
    const r = await this.#forward(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }));
    return (JSON.parse(r.text) as { result?: unknown }).result;
  }

  async #chainHead(): Promise<bigint> {
    if (this.#head && Date.now() - this.#head.at < 20) return this.#head.n;
    const n = BigInt((await this.#call('eth_blockNumber', [])) as string);
    this.#head = { n, at: Date.now() };
    return n;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString();
    this.requests++;
    let parsed: RpcReq | RpcReq[] | undefined;
    try {
      parsed = JSON.parse(body);
    } catch {}
    const single = parsed && !Array.isArray(parsed) ? parsed : undefined;
    const method = single?.method ?? '';
    const spared = this.opts.spare?.(method) ?? false;

    const send = (status: number, text: string) => {
      if (res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    const rpcAnswer = (payload: object) => send(200, JSON.stringify({ jsonrpc: '2.0', id: single?.id ?? null, ...payload }));

    if (this.opts.maxRps !== undefined) {
      const now = Date.now();
      if (now - this.#window.at >= 1000) this.#window = { at: now, n: 0 };
      this.#window.n += Array.isArray(parsed) ? parsed.length : 1;
      if (this.#window.n > this.opts.maxRps) {
        this.rateLimited++;
        return send(429, JSON.stringify({ jsonrpc: '2.0', id: single?.id ?? null, error: { code: 429, message: 'Too Many Requests (injected)' } }));
      }
    }
    if (single && this.#blocked.has(method)) {
      this.blockedAnswers++;
      return rpcAnswer({ error: { code: -32603, message: `${method} unavailable (blocked by the harness)` } });
    }
    // Faults of the HTTP exchange hit a whole batch; the others (below) each of its requests.
    if (!spared) {
      if (this.#draw('http500')) return send(500, 'internal server error (injected)');
      if (this.#draw('http502')) return send(502, 'bad gateway (injected)');
      if (this.#draw('drop')) {
        res.socket?.destroy();
        return;
      }
      if (this.#draw('timeout')) {
        // The chain does the work; the client never hears of it.
        await this.#forward(body).catch(() => undefined);
        this.#held.add(res);
        await new Promise((r) => setTimeout(r, this.opts.holdMs ?? 10_500));
        this.#held.delete(res);
        res.destroy();
        return;
      }
      if (this.#draw('lostResponse')) {
        await this.#forward(body).catch(() => undefined);
        res.socket?.destroy();
        return;
      }
    }
    if (parsed === undefined) {
      const out = await this.#forward(body).catch(() => undefined);
      if (!out) return void res.socket?.destroy();
      return send(out.status, out.text);
    }
    let answers: object[];
    try {
      answers = await Promise.all((Array.isArray(parsed) ? parsed : [parsed]).map((r) => this.#answerOne(r)));
    } catch {
      res.socket?.destroy();
      return;
    }
    send(200, JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
  }

  // One JSON-RPC request, alone or from a batch: blocked, an injected error, a lagging or stale
  // answer, or the chain's own.
  async #answerOne(r: RpcReq): Promise<object> {
    const method = r.method ?? '';
    const spared = this.opts.spare?.(method) ?? false;
    const reply = (payload: object) => ({ jsonrpc: '2.0', id: r.id ?? null, ...payload });
    if (this.#blocked.has(method)) {
      this.blockedAnswers++;
      return reply({ error: { code: -32603, message: `${method} unavailable (blocked by the harness)` } });
    }
    if (!spared && this.#draw('rpcError')) {
      return reply({
        error: this.opts.rng.chance(0.5) ? { code: -32603, message: 'internal error (injected)' } : { code: -32005, message: 'limit exceeded (injected)' },
      });
    }
    if (!spared && this.#enabled) {
      // A lag episode: the node behind the proxy is N blocks behind, consistently, for a while.
      if (Date.now() >= this.#lagUntil && this.#draw('lag')) this.#lagUntil = Date.now() + (this.opts.lagMs ?? 1_500);
      if (Date.now() >= this.#splitUntil && this.#draw('split')) this.#splitUntil = Date.now() + (this.opts.lagMs ?? 1_500);
      if (Date.now() < this.#lagUntil || (Date.now() < this.#splitUntil && this.opts.rng.chance(0.5))) {
        let out: object | undefined;
        if (await this.#lagging(r, (p) => void (out = reply(p)))) return out!;
      } else if ((method === 'eth_blockNumber' || (method === 'eth_getBlockByNumber' && r.params?.[0] === 'latest')) && this.#draw('stale')) {
        const head = await this.#chainHead();
        const behind = head - BigInt(this.opts.rng.int(1, 3));
        const n = behind < 0n ? 0n : behind;
        if (method === 'eth_blockNumber') return reply({ result: `0x${n.toString(16)}` });
        return reply({ result: await this.#call('eth_getBlockByNumber', [`0x${n.toString(16)}`, r.params?.[1] ?? false]) });
      }
    }
    if (method === 'eth_blockNumber' && this.opts.leadBlocks) {
      this.liedHeads++;
      return reply({ result: `0x${((await this.#chainHead()) + BigInt(this.opts.leadBlocks)).toString(16)}` });
    }
    const out = await this.#forward(JSON.stringify(r));
    const parsedOut = JSON.parse(out.text) as { result?: unknown };
    if (this.opts.rewrite && 'result' in parsedOut) {
      const result = this.opts.rewrite(method, r.params ?? [], parsedOut.result);
      if (JSON.stringify(result) !== JSON.stringify(parsedOut.result)) this.rewritten++;
      return { ...parsedOut, result };
    }
    return parsedOut;
  }

  // Answers `req` as a node `lagBlocks` behind would, or returns false to forward it unchanged.
  async #lagging(req: RpcReq, answer: (p: object) => void): Promise<boolean> {
    const head = await this.#chainHead();
    const lagHead = head - BigInt(this.opts.lagBlocks ?? 3);
    if (lagHead < 0n) return false;
    const hex = (n: bigint) => `0x${n.toString(16)}`;
    const num = (tag: unknown): bigint | undefined =>
      tag === 'latest' || tag === 'pending' || tag === 'safe' || tag === 'finalized'
        ? lagHead
        : typeof tag === 'string' && tag.startsWith('0x')
          ? BigInt(tag)
          : undefined;
    const params = req.params ?? [];
    switch (req.method) {
      case 'eth_blockNumber':
        answer({ result: hex(lagHead) });
        return true;
      case 'eth_getBlockByNumber': {
        const n = num(params[0]);
        if (n === undefined) return false;
        answer({ result: n > lagHead ? null : await this.#call('eth_getBlockByNumber', [hex(n), params[1] ?? false]) });
        return true;
      }
      case 'eth_getLogs': {
        const f = (params[0] ?? {}) as { toBlock?: string; fromBlock?: string; blockHash?: string };
        const to = num(f.toBlock ?? 'latest');
        if (f.blockHash || to === undefined) return false;
        // As geth does: a range beyond the node's head is refused, not silently cut short.
        if (to > lagHead) {
          answer({ error: { code: -32000, message: 'block range extends beyond current head block (injected lag)' } });
          return true;
        }
        return false;
      }
      case 'eth_getTransactionReceipt':
      case 'eth_getTransactionByHash': {
        const result = await this.#call(req.method, params);
        const bn = result && typeof result === 'object' ? (result as { blockNumber?: string | null }).blockNumber : null;
        answer({
          result:
            bn && BigInt(bn) > lagHead
              ? req.method === 'eth_getTransactionReceipt'
                ? null
                : { ...result, blockNumber: null, blockHash: null, transactionIndex: null }
              : result,
        });
        return true;
      }
      case 'eth_estimateGas':
      case 'eth_createAccessList': {
        // Simulated on the lagging node's own head, as the node behind it would; a block past that head
        // does not exist there yet (as geth answers).
        const at = num(params[1] ?? 'latest');
        if (at !== undefined && at > lagHead) {
          answer({ error: { code: -32000, message: 'header not found' } });
          return true;
        }
        const r = await this.#forward(JSON.stringify({ ...req, params: [params[0], hex(at ?? lagHead)] }));
        answer(JSON.parse(r.text));
        return true;
      }
      default:
        if (TAGGED.has(req.method ?? '') && params.length > 0) {
          const last = params[params.length - 1];
          // A block past its head does not exist yet on the lagging node (as geth answers).
          if (typeof last === 'string' && last.startsWith('0x') && BigInt(last) > lagHead) {
            answer({ error: { code: -32000, message: 'header not found' } });
            return true;
          }
          if (last === 'latest' || last === 'pending') {
            // State as of the lagging head (a stale nonce, balance or call result).
            const r = await this.#forward(JSON.stringify({ ...req, params: [...params.slice(0, -1), hex(lagHead)] }));
            answer(JSON.parse(r.text));
            return true;
          }
        }
        return false;
    }
  }
}

// One proxy per chain, from a base seed.
export async function startProxies(
  chains: { id: number; rpcUrl: string }[],
  rng: Rng,
  opts: Omit<ProxyOptions, 'target' | 'rng'>,
): Promise<Map<number, RpcProxy>> {
  const out = new Map<number, RpcProxy>();
  for (const c of chains) {
    const p = new RpcProxy({ ...opts, target: c.rpcUrl, rng: rng.fork(`proxy:${c.id}`), label: String(c.id) });
    await p.start();
    out.set(c.id, p);
  }
  return out;
}
