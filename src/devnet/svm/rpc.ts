// A local Solana JSON-RPC endpoint (HTTP + a small WebSocket pub/sub) in front of an in-process LiteSVM.
//
// The node only talks to SVM chains through @solana/web3.js `Connection`, so the devnet and tests run this
// server and hand its URL to the node. It serves the methods the node and wallets use with Solana's response
// shapes. Slots advance on a timer; each slot gets a fresh blockhash and the last 150 stay valid.
// Every executed transaction is recorded so history queries (getTransaction, getSignaturesForAddress,
// getSignatureStatuses) can be answered.
//
// WebSocket: web3.js confirms transactions through `signatureSubscribe` on the RPC port + 1, so the server
// also accepts WebSocket upgrades on its own port and (when it can bind it) on port + 1.
//
// The server is split by concern under ./rpc/: chainState (slots, blockhashes, records), accounts,
// transactions, txEncoding (getTransaction's shapes), subscriptions (WebSocket pub/sub), methods (the
// JSON-RPC table); this module serves them over HTTP and WebSocket.

import http from 'node:http';
import type { LiteSVM } from 'litesvm';
import type { Keypair, PublicKey } from '@solana/web3.js';
import { errText } from '../../lib/errors.ts';
import { createAccounts } from './rpc/accounts.ts';
import { ChainState } from './rpc/chainState.ts';
import { invalidParams, RpcError, type Json } from './rpc/codec.ts';
import { createMethods } from './rpc/methods.ts';
import { createSubscriptions } from './rpc/subscriptions.ts';
import { createTransactions } from './rpc/transactions.ts';
import { createTxEncoding } from './rpc/txEncoding.ts';

export {
  ATA_PROGRAM,
  COMPUTE_BUDGET_PROGRAM,
  MEMO_V1_PROGRAM,
  MEMO_V2_PROGRAM,
  RpcError,
  SYSTEM_PROGRAM,
  TOKEN_2022_PROGRAM,
  TOKEN_PROGRAM,
} from './rpc/codec.ts';
export type { UiTokenAmount } from './rpc/codec.ts';
export type { CreateMintOptions } from './rpc/transactions.ts';
import type { CreateMintOptions } from './rpc/transactions.ts';

// ---------------------------------------------------------------------------------------------------------
// The server

/** Where the stand-in listens and how fast its slots advance. */
export interface StartSvmRpcOptions {
  host?: string;
  port?: number;
  slotIntervalMs?: number;
}

/** A running stand-in: its URLs, its litesvm, the devnet's helpers, and stop(). */
export interface SvmRpc {
  /** HTTP JSON-RPC URL. */
  url: string;
  /** WebSocket URL (port + 1 when it could be bound, as web3.js expects; else the HTTP port). */
  wsUrl: string;
  svm: LiteSVM;
  /** Funds the faucet's transfers; the default mint authority of `createMint`. */
  authority: Keypair;
  stop(): Promise<void>;
  /** Transfers lamports from the faucet (a recorded transaction); returns the signature. */
  airdrop(pubkey: PublicKey | string, lamports: number | bigint): string;
  /** Creates a mint (SPL Token, or Token-2022 with an optional transfer fee); returns its address. */
  createMint(decimals: number, opts?: CreateMintOptions): PublicKey;
  /** Mints to `owner`'s associated token account (created if missing); returns that account. */
  mintTo(mint: PublicKey | string, owner: PublicKey | string, amount: number | bigint, authority?: Keypair): PublicKey;
  /** Current slot (= block height). */
  slot(): number;
  /** Advances `n` slots at once (expires blockhashes older than 150 blocks). */
  advanceSlots(n: number): void;
  /**
   * Submits a wire transaction like `sendTransaction` does (preflight unless `skipPreflight`).
   * Throws RpcError like the RPC method.
   */
  submit(wire: Uint8Array, opts?: { skipPreflight?: boolean }): string;
}

/** Starts the stand-in: a chain at slot 0, served on HTTP (and WebSocket on port + 1 when it can be bound). */
export async function startSvmRpc(opts: StartSvmRpcOptions = {}): Promise<SvmRpc> {
  const host = opts.host ?? '127.0.0.1';
  const slotIntervalMs = opts.slotIntervalMs ?? 400;

  const chain = new ChainState();
  const { svm, authority } = chain;
  const accounts = createAccounts(chain);
  const { subs, conns, afterTransaction, onSlot, onUpgrade } = createSubscriptions(chain, accounts);
  const transactions = createTransactions(chain, accounts, afterTransaction);
  const { submit, airdrop, createMint, mintTo } = transactions;
  const { methods } = createMethods(chain, accounts, transactions, createTxEncoding(chain));

  function advanceSlot() {
    chain.advance();
    onSlot();
  }

  function handleOne(req: unknown): Json | undefined {
    if (!req || typeof req !== 'object' || Array.isArray(req)) {
      return { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id: null };
    }
    const r = req as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    const id = r.id ?? null;
    if (r.jsonrpc !== '2.0' || typeof r.method !== 'string') {
      return { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id };
    }
    const fn = Object.hasOwn(methods, r.method) ? methods[r.method] : undefined;
    let response: Json;
    if (!fn) response = { jsonrpc: '2.0', error: { code: -32601, message: 'Method not found' }, id };
    else {
      try {
        const params = r.params === undefined || r.params === null ? [] : r.params;
        if (!Array.isArray(params)) throw invalidParams('Invalid params: expected an array');
        response = { jsonrpc: '2.0', result: fn(params), id };
      } catch (e) {
        const err = e instanceof RpcError ? e : new RpcError(-32603, `Internal error: ${errText(e)}`);
        response = {
          jsonrpc: '2.0',
          error: { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) },
          id,
        };
      }
    }
    return r.id === undefined ? undefined : response;
  }

  function onRequest(req: http.IncomingMessage, res: http.ServerResponse) {
    if (req.method === 'GET' && req.url === '/health') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: unknown;
      let out: Json;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        out = { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
        return;
      }
      if (Array.isArray(body)) {
        out =
          body.length === 0
            ? { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id: null }
            : body.map(handleOne).filter((x) => x !== undefined);
      } else out = handleOne(body) ?? null;
      res.writeHead(200, { 'content-type': 'application/json' }).end(out === null ? '' : JSON.stringify(out));
    });
  }

  // ------------------------------------------------------------------ listen

  const servers: http.Server[] = [];
  const mkServer = () => {
    const s = http.createServer(onRequest);
    s.on('upgrade', onUpgrade);
    s.keepAliveTimeout = 5_000;
    return s;
  };
  const listen = (s: http.Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      const onErr = (e: Error) => reject(e);
      s.once('error', onErr);
      s.listen(port, host, () => {
        s.off('error', onErr);
        resolve((s.address() as { port: number }).port);
      });
    });
  const closeServer = (s: http.Server) =>
    new Promise<void>((resolve) => {
      s.closeAllConnections();
      s.close(() => resolve());
    });

  let port = 0;
  let wsPort = 0;
  for (let attempt = 0; attempt < 20; attempt++) {
    const main = mkServer();
    port = await listen(main, opts.port ?? 0);
    const ws = mkServer();
    try {
      wsPort = await listen(ws, port + 1);
      servers.push(main, ws);
      break;
    } catch {
      if (opts.port !== undefined && opts.port !== 0) {
        servers.push(main);
        wsPort = port;
        break;
      }
      await closeServer(main);
    }
  }
  if (servers.length === 0) throw new Error('startSvmRpc: could not bind a port pair');

  const timer = setInterval(advanceSlot, slotIntervalMs);
  timer.unref();

  const hostForUrl = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${hostForUrl}:${port}`,
    wsUrl: `ws://${hostForUrl}:${wsPort}`,
    svm,
    authority,
    async stop() {
      clearInterval(timer);
      for (const c of [...conns]) c.close();
      subs.clear();
      await Promise.all(servers.map(closeServer));
    },
    airdrop,
    createMint,
    mintTo,
    slot: () => chain.slot,
    advanceSlots(n: number) {
      for (let i = 0; i < n; i++) advanceSlot();
    },
    submit,
  };
}
