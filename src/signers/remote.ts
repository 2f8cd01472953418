// A signer in another process, over JSON-RPC as web3signer's eth1 API and clef speak it:
// eth_signTransaction (returns the signed raw transaction), eth_signTypedData_v4, personal_sign.
// The node never holds the key; it hands the signer fully prepared transactions (nonce, gas and fees
// set) and broadcasts the raw transactions it gets back itself, as with a local key.
import {
  formatTransactionRequest,
  getAddress,
  getTypesForEIP712Domain,
  isHex,
  numberToHex,
  parseTransaction,
  recoverTransactionAddress,
  serializeTypedData,
  toHex,
  type Address,
  type Hex,
  type LocalAccount,
} from 'viem';
import { toAccount } from 'viem/accounts';
import { RelayNodeError } from '../lib/errors.ts';

export class RemoteSignerError extends RelayNodeError {
  override name = 'RemoteSignerError';
}

export interface RemoteSignerOptions {
  url: string;
  /** Per chain id, the endpoint that signs that chain's transactions (a signer bound to one chain). */
  chainUrls?: Record<string, string>;
  address: Address;
  timeoutMs?: number;
  /** For the messages: which config field this signer is (e.g. "solverSigner"). */
  label?: string;
}

/**
 * The signer's URL split into what fetch may be given and what may be shown: credentials in the URL
 * (https://user:pass@host) become a Basic Authorization header; messages show only the host, since a
 * path or query may carry an API key too.
 */
export function remoteEndpoint(url: string): { href: string; headers: Record<string, string>; shown: string } {
  const u = new URL(url);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (u.username || u.password) {
    headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
    u.username = '';
    u.password = '';
  }
  return { href: u.href, headers, shown: u.host };
}

/** A viem account whose signatures come from a remote JSON-RPC signer. */
export function remoteAccount(opts: RemoteSignerOptions): LocalAccount {
  const address = getAddress(opts.address);
  const defaultEndpoint = remoteEndpoint(opts.url);
  const perChain = new Map(Object.entries(opts.chainUrls ?? {}).map(([id, url]) => [Number(id), remoteEndpoint(url)]));
  const label = opts.label ?? 'remote signer';
  const timeoutMs = opts.timeoutMs ?? 10_000;
  let id = 0;

  async function call(method: string, params: unknown[], chainId?: number): Promise<Hex> {
    const endpoint = (chainId !== undefined && perChain.get(chainId)) || defaultEndpoint;
    let res: Response;
    try {
      res = await fetch(endpoint.href, {
        method: 'POST',
        headers: endpoint.headers,
        body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      // The cause's message may carry the URL: only its kind is kept.
      throw new RemoteSignerError(
        `${label}: ${method} to ${endpoint.shown} failed: ${(e as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : 'cannot connect'}`,
      );
    }
    if (!res.ok) throw new RemoteSignerError(`${label}: ${method} to ${endpoint.shown} answered HTTP ${res.status}`);
    let body: { result?: unknown; error?: { code?: number; message?: string } };
    try {
      body = (await res.json()) as typeof body;
    } catch {
      throw new RemoteSignerError(`${label}: ${method} to ${endpoint.shown} answered something that is not JSON`);
    }
    if (body.error)
      throw new RemoteSignerError(`${label}: ${method} refused: ${String(body.error.message ?? 'error').slice(0, 200)} (code ${body.error.code ?? '?'})`);
    if (typeof body.result !== 'string' || !isHex(body.result)) throw new RemoteSignerError(`${label}: ${method} answered no hex result`);
    return body.result;
  }

  return toAccount({
    address,
    async signMessage({ message }) {
      const data = typeof message === 'string' ? toHex(message) : typeof message.raw === 'string' ? message.raw : toHex(message.raw);
      return call('personal_sign', [data, address]);
    },
    async signTransaction(tx) {
      const request: Record<string, unknown> = { ...formatTransactionRequest({ ...tx, from: address } as never), from: address };
      if (tx.chainId !== undefined) request.chainId = numberToHex(tx.chainId);
      const raw = await call('eth_signTransaction', [request], tx.chainId);
      // The signer must have signed what was asked, by the key it stands for: a raw transaction to
      // another target, nonce or chain, or from another key, is never broadcast.
      const parsed = parseTransaction(raw);
      const signer = await recoverTransactionAddress({ serializedTransaction: raw as never });
      if (getAddress(signer) !== address) throw new RemoteSignerError(`${label}: eth_signTransaction was signed by ${signer}, not ${address}`);
      const same = (a: unknown, b: unknown) =>
        a === undefined || a === null ? b === undefined || b === null : String(a).toLowerCase() === String(b).toLowerCase();
      if (
        !same(parsed.to, tx.to) ||
        parsed.nonce !== tx.nonce ||
        parsed.chainId !== tx.chainId ||
        (parsed.value ?? 0n) !== (tx.value ?? 0n) ||
        (parsed.data ?? '0x') !== (tx.data ?? '0x') ||
        parsed.gas !== tx.gas
      ) {
        throw new RemoteSignerError(`${label}: eth_signTransaction returned another transaction than the one asked for`);
      }
      return raw as never;
    },
    async signTypedData(typedData) {
      const { domain = {}, message, primaryType } = typedData as { domain?: Record<string, unknown>; message: Record<string, unknown>; primaryType: string };
      // eth_signTypedData_v4 wants EIP712Domain among the types; serializeTypedData writes bigints as strings.
      const types = { EIP712Domain: getTypesForEIP712Domain({ domain: domain as never }), ...(typedData.types as Record<string, unknown>) };
      return call('eth_signTypedData_v4', [address, serializeTypedData({ domain, message, primaryType, types } as never)]);
    },
  });
}
