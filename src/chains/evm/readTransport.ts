import { http, webSocket, type Transport } from 'viem';

/**
 * A viem transport for the node's side readers of an EVM chain (the audit, the price feeds), which read over a
 * client of their own rather than the provider pool: a websocket for a `ws://`/`wss://` URL, else HTTP. A chain whose
 * only providers are websockets has a websocket `rpcUrl` (the config fills it from the first provider).
 */
export function readTransport(url: string, opts: { timeout?: number; batch?: { batchSize: number } } = {}): Transport {
  if (/^wss?:/i.test(url)) return webSocket(url, { timeout: opts.timeout });
  return http(url, { timeout: opts.timeout, batch: opts.batch ? { ...opts.batch, wait: 0 } : undefined });
}
