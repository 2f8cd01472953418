import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One JSON-RPC call as a proxy received it. */
export interface RpcCall {
  id?: unknown;
  method: string;
  params?: unknown[];
}

/** An answer of the real RPC: a result or an error. */
export type RpcAnswer = { result?: any; error?: unknown };

/**
 * A loopback JSON-RPC proxy in front of one RPC (single calls and batches): a subclass decides each call's answer in
 * `answer`, asking the real RPC through `forward`.
 */
export abstract class JsonRpcProxy {
  url = '';
  #server: Server | undefined;

  constructor(private target: string) {}

  /** The answer to one call (its `jsonrpc` and `id` are set by the caller's head). */
  protected abstract answer(c: RpcCall): Promise<unknown>;

  /** Asks the real RPC. */
  protected async forward(method: string, params: unknown[] = []): Promise<RpcAnswer> {
    const res = await fetch(this.target, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await res.json()) as RpcAnswer;
  }

  async start(): Promise<this> {
    this.#server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', async () => {
        try {
          const parsed = JSON.parse(body) as RpcCall | RpcCall[];
          const out = Array.isArray(parsed) ? await Promise.all(parsed.map((c) => this.answer(c))) : await this.answer(parsed);
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
}

/**
 * A startStack `chains` option putting one proxy in front of the SVM chain's RPC (the node's only provider there):
 * `start` is given the chain's RPC URL and returns the started proxy's URL.
 */
export function svmBehind(start: (rpcUrl: string) => Promise<string>): (devnet: unknown, chains: unknown[]) => Promise<unknown[]> {
  return (_devnet, chains) =>
    Promise.all(
      (chains as { kind?: string; rpcUrl: string }[]).map(async (c) => (c.kind === 'svm' ? { ...c, rpcUrl: await start(c.rpcUrl), rpc: undefined } : c)),
    );
}
