// A loopback JSON-RPC proxy in front of the devnet's SVM RPC that can stand for a load-balanced
// provider one of whose backends lags: while `lagAt(slot)` is on, the methods named in `methods`
// are answered by a backend stuck at that slot (as a real one would answer): a `minContextSlot`
// past it is refused (-32016), `context.slot` says the old slot, signatures and transactions that
// landed after it do not exist yet. Every other method is answered by the current backend.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface Call {
  jsonrpc?: string;
  id?: unknown;
  method: string;
  params?: unknown[];
}

export class SvmLagProxy {
  url = '';
  #server: Server | undefined;
  #at: number | undefined;
  #methods = new Set<string>();
  /** Answers given by the lagging backend (counted per method). */
  readonly lagged: Record<string, number> = {};

  constructor(private target: string) {}

  async start(): Promise<this> {
    this.#server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', async () => {
        try {
          const parsed = JSON.parse(body) as Call | Call[];
          const out = Array.isArray(parsed) ? await Promise.all(parsed.map((c) => this.#answer(c))) : await this.#answer(parsed);
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
        } catch (e) {
          res.writeHead(502).end(String(e));
        }
      });
    });
    await new Promise<void>((r) => this.#server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((r) => this.#server?.close(r));
  }

  #values: Record<string, unknown> = {};

  /**
   * From now on `methods` are answered by a backend stuck at `slot`; `values` are what it holds
   * there for value reads (e.g. getBalance: the lamports at that slot).
   */
  lagAt(slot: number, methods: string[], values: Record<string, unknown> = {}): void {
    this.#at = slot;
    this.#methods = new Set(methods);
    this.#values = values;
  }

  /** The lagging backend catches up. */
  catchUp(): void {
    this.#at = undefined;
  }

  async #forward(c: Call): Promise<{ result?: any; error?: unknown }> {
    const res = await fetch(this.target, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: c.method, params: c.params ?? [] }),
    });
    return (await res.json()) as { result?: any; error?: unknown };
  }

  async #answer(c: Call): Promise<unknown> {
    const at = this.#at;
    const head = { jsonrpc: '2.0', id: c.id };
    if (at === undefined || !this.#methods.has(c.method)) return { ...(await this.#forward(c)), ...head };
    this.lagged[c.method] = (this.lagged[c.method] ?? 0) + 1;
    const min = (c.params ?? [])
      .map((p) => (p && typeof p === 'object' ? (p as { minContextSlot?: unknown }).minContextSlot : undefined))
      .find((m) => typeof m === 'number') as number | undefined;
    if (min !== undefined && min > at)
      return { ...head, error: { code: -32016, message: 'Minimum context slot has not been reached', data: { contextSlot: at } } };
    const a = await this.#forward(c);
    if (!('result' in a) || a.result === null) return { ...a, ...head };
    let result = a.result;
    if (c.method in this.#values && result && typeof result === 'object' && 'value' in result) result = { ...result, value: this.#values[c.method] };
    switch (c.method) {
      case 'getSlot':
      case 'getBlockHeight':
        result = Math.min(result, at);
        break;
      case 'getTransaction':
        if (result.slot > at) result = null;
        break;
      case 'getSignaturesForAddress':
        result = result.filter((s: { slot: number }) => s.slot <= at);
        break;
      case 'getSignatureStatuses':
        result = { ...result, value: result.value.map((s: { slot: number } | null) => (s && s.slot <= at ? s : null)) };
        break;
    }
    if (result && typeof result === 'object' && 'context' in result)
      result = { ...result, context: { ...result.context, slot: Math.min(result.context.slot, at) } };
    return { ...head, result };
  }
}
