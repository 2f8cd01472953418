// Client for the Hyperliquid-like perpetuals exchange (chain id 1337): `POST {url}/info` and
// `POST {url}/exchange`. Errors name the endpoint; private keys never appear in errors or logs.

import { privateKeyToAccount } from 'viem/accounts';
import { JsonPost, PostError } from '../providers/httpPost.ts';
import { getAddress, isAddress, type Address, type Hex, type LocalAccount } from 'viem';
import { buildSendAssetAction, sendAssetTypedData, splitSignature, type SendAssetParameters, type SignedSendAsset } from './typedData.ts';
import { errText, RelayNodeError } from '../../lib/errors.ts';
import { requestWeight, WeightBudget } from './requestWeight.ts';

// The most updates the exchange answers for one time range ("use the last returned timestamp as the next
// startTime for pagination", its info endpoint documents).
const LEDGER_PAGE = 500;

export interface ClearinghouseState {
  marginSummary: { accountValue: string; totalNtlPos: string; totalRawUsd: string; totalMarginUsed: string };
  crossMarginSummary: { accountValue: string; totalNtlPos: string; totalRawUsd: string; totalMarginUsed: string };
  crossMaintenanceMarginUsed: string;
  /** human-readable USD */
  withdrawable: string;
  assetPositions: unknown[];
  time: number;
}

export interface SpotBalance {
  coin: string;
  /** token index in spotMeta */
  token: number;
  total: string;
  hold: string;
  entryNtl: string;
}

export interface SpotMetaToken {
  name: string;
  szDecimals: number;
  weiDecimals: number;
  index: number;
  tokenId: Hex;
  isCanonical: boolean;
  evmContract: { address: Address; evm_extra_wei_decimals: number } | null;
  fullName: string | null;
  deployerTradingFeeShare?: string;
}

export interface SpotMeta {
  tokens: SpotMetaToken[];
  universe: { tokens: number[]; name: string; index: number; isCanonical: boolean }[];
}

export interface SendLedgerDelta {
  type: 'send';
  user: Address;
  destination: Address;
  sourceDex: string;
  destinationDex: string;
  token: string;
  amount: string;
  usdcValue: string;
  fee: string;
  nativeTokenFee: string;
  nonce: number;
  feeToken: string;
}

export interface SpotTransferLedgerDelta {
  type: 'spotTransfer';
  token: string;
  amount: string;
  usdcValue: string;
  user: Address;
  destination: Address;
  fee: string;
  nativeTokenFee: string;
  nonce: number | null;
  feeToken: string;
}

export interface LedgerUpdate {
  time: number;
  hash: Hex;
  delta: SendLedgerDelta | SpotTransferLedgerDelta | ({ type: string } & Record<string, unknown>);
}

export interface ExchangeClientOptions {
  /** {exchange_url}, without a trailing `/info` or `/exchange`. */
  url: string;
  /** Per-request timeout, default 10 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** The request weight the node may spend a minute (0, the default: no budget but the exchange's own limit). */
  weightPerMinute?: number;
}

/** Transport failure or unexpected answer from an exchange endpoint. */
export class ExchangeHttpError extends RelayNodeError {
  constructor(
    message: string,
    readonly endpoint: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ExchangeHttpError';
  }
}

/** The exchange answered `{status: 'err', response}` to an action. */
export class ExchangeActionError extends RelayNodeError {
  constructor(
    readonly exchangeMessage: string,
    readonly endpoint: string,
  ) {
    super(`exchange rejected action at ${endpoint}: ${exchangeMessage}`);
    this.name = 'ExchangeActionError';
  }
}

/**
 * Parses a non-negative decimal string ("12.345678", "3", "0.1234567") into integer units with
 * `decimals` places, truncating extra precision (never rounds up a balance). No floats.
 */
export function parseDecimalFloor(value: string, decimals: number): bigint {
  if (typeof value !== 'string' || !/^\d+(\.\d*)?$/.test(value)) throw new Error(`invalid decimal ${JSON.stringify(value)}`);
  const [whole, frac = ''] = value.split('.') as [string, string?];
  return BigInt(whole) * 10n ** BigInt(decimals) + BigInt(frac.slice(0, decimals).padEnd(decimals, '0') || '0');
}

/** Like parseDecimalFloor, but rounds extra precision up (a cost is never under-charged). */
export function parseDecimalCeil(value: string, decimals: number): bigint {
  const floor = parseDecimalFloor(value, decimals);
  const frac = value.split('.')[1] ?? '';
  return /[1-9]/.test(frac.slice(decimals)) ? floor + 1n : floor;
}

/** Signs a sendAsset action with the solver's signer (a local key or a remote signer), or a private key; returns the `/exchange` body. */
export async function signSendAsset(signer: Hex | LocalAccount, params: SendAssetParameters, opts: { signatureChainId: number }): Promise<SignedSendAsset> {
  const action = buildSendAssetAction(params, opts.signatureChainId);
  let account: LocalAccount;
  try {
    account = typeof signer === 'string' ? privateKeyToAccount(signer) : signer;
  } catch {
    // viem's message may echo the input; never let the key reach an error or a log.
    throw new Error('signSendAsset: invalid private key');
  }
  const signature = await account.signTypedData(sendAssetTypedData(action));
  return { action, nonce: action.nonce, signature: splitSignature(signature) };
}

export class ExchangeClient {
  readonly url: string;
  private readonly timeoutMs: number;
  // Injected (tests): fetch; otherwise node:http keep-alive connections, one per endpoint (a third of
  // fetch's CPU per call: the node polls the exchange's ledger updates every poll interval).
  private readonly fetchImpl: typeof fetch | undefined;
  private readonly posts = new Map<string, JsonPost>();
  /** What the node may spend of the exchange's request weight (src/chains/exchange/requestWeight.ts). */
  readonly budget: WeightBudget;

  constructor(options: ExchangeClientOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.fetchImpl = options.fetch;
    this.budget = new WeightBudget(options.weightPerMinute ?? 0);
  }

  private async post(path: '/info' | '/exchange', body: Record<string, unknown>, what: string): Promise<unknown> {
    const endpoint = `${this.url}${path}`;
    const label = `POST ${endpoint} (${what})`;
    await this.budget.take(requestWeight(path, body));
    const res = await this.send(endpoint, JSON.stringify(body), label);
    if (res.status === 429) this.budget.rateLimited();
    else this.budget.answered();
    const text = res.text;
    if (res.status < 200 || res.status > 299) {
      throw new ExchangeHttpError(`${label} answered HTTP ${res.status}: ${text.slice(0, 300)}`, endpoint, res.status);
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new ExchangeHttpError(`${label} answered non-JSON: ${text.slice(0, 300)}`, endpoint, res.status);
    }
  }

  // One POST: its status and text, or an ExchangeHttpError saying why there is none.
  private async send(endpoint: string, body: string, label: string): Promise<{ status: number; text: string }> {
    if (!this.fetchImpl) {
      let post = this.posts.get(endpoint);
      if (!post) this.posts.set(endpoint, (post = new JsonPost(endpoint, 16)));
      try {
        return await post.post(body, this.timeoutMs);
      } catch (err) {
        const kind = err instanceof PostError ? err.kind : 'network';
        if (kind === 'read') throw new ExchangeHttpError(`${label} failed reading the response: connection lost`, endpoint);
        throw new ExchangeHttpError(`${label} failed: ${kind === 'timeout' ? `timed out after ${this.timeoutMs} ms` : 'connection failed'}`, endpoint);
      }
    }
    let res: Response;
    try {
      res = await this.fetchImpl(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const e = err as Error;
      const reason = e.name === 'TimeoutError' ? `timed out after ${this.timeoutMs} ms` : e.message;
      throw new ExchangeHttpError(`${label} failed: ${reason}`, endpoint);
    }
    try {
      return { status: res.status, text: await res.text() };
    } catch (err) {
      throw new ExchangeHttpError(`${label} failed reading the response: ${errText(err)}`, endpoint, res.status);
    }
  }

  private async info<T>(body: Record<string, unknown>, check: (v: unknown) => boolean): Promise<T> {
    const what = String(body.type);
    const result = await this.post('/info', body, what);
    if (!check(result)) {
      throw new ExchangeHttpError(`POST ${this.url}/info (${what}) answered an unexpected shape`, `${this.url}/info`);
    }
    return result as T;
  }

  clearinghouseState(user: Address): Promise<ClearinghouseState> {
    return this.info({ type: 'clearinghouseState', user }, (v) => isObj(v) && typeof v.withdrawable === 'string');
  }

  /** Perps balance (`withdrawable`) in micro-USD (6 decimals). */
  async withdrawable(user: Address): Promise<bigint> {
    const state = await this.clearinghouseState(user);
    try {
      return parseDecimalFloor(state.withdrawable, 6);
    } catch (err) {
      throw new ExchangeHttpError(`POST ${this.url}/info (clearinghouseState) answered a bad withdrawable: ${errText(err)}`, `${this.url}/info`);
    }
  }

  /** Spot balances (Hyperliquid's `spotClearinghouseState.balances`). */
  async spotBalances(user: Address, dex?: string): Promise<SpotBalance[]> {
    // `dex` (a named DEX) is the stand-in's extension; absent or 'spot' reads the spot balances.
    const r = await this.info<{ balances: SpotBalance[] }>(
      { type: 'spotClearinghouseState', user, ...(dex && dex !== 'spot' ? { dex } : {}) },
      (v) => isObj(v) && Array.isArray(v.balances),
    );
    return r.balances;
  }

  spotMeta(): Promise<SpotMeta> {
    return this.info({ type: 'spotMeta' }, (v) => isObj(v) && Array.isArray(v.tokens) && Array.isArray(v.universe));
  }

  /**
   * What a transfer from `source` to `user` would cost in activation fee (Hyperliquid's preTransferCheck), in
   * micro-USD rounded up: the fee of the first transfer to an account the exchange does not know, 0 otherwise.
   */
  async activationFee(user: Address, source: Address): Promise<bigint> {
    const r = await this.info<{ fee: string }>({ type: 'preTransferCheck', user, source }, (v) => isObj(v) && typeof v.fee === 'string');
    try {
      return parseDecimalCeil(r.fee, 6);
    } catch (err) {
      throw new ExchangeHttpError(`POST ${this.url}/info (preTransferCheck) answered a bad fee: ${errText(err)}`, `${this.url}/info`);
    }
  }

  /**
   * The account's sub-accounts (Hyperliquid's `subAccounts` read, which answers null for an account with none). An API
   * wallet of the account can move value to them (agentSendAsset), and the account's ledger shows that as its own `send`.
   */
  async subAccounts(user: Address): Promise<Address[]> {
    const r = await this.info<{ subAccountUser: string }[] | null>(
      { type: 'subAccounts', user },
      (v) =>
        v === null || (Array.isArray(v) && v.every((x) => isObj(x) && typeof x.subAccountUser === 'string' && isAddress(x.subAccountUser, { strict: false }))),
    );
    return (r ?? []).map((x) => getAddress(x.subAccountUser));
  }

  /**
   * Non-funding ledger updates (sends, spot transfers, ...) since `startTimeMs`. A millisecond holding a full page
   * (LEDGER_PAGE updates) cannot be read past them: its later updates are missing, and the millisecond is added to
   * `truncated` when given. Anyone can add updates to an account's ledger (a transfer to it), so a read that must prove an
   * update absent passes `truncated` and checks it stays empty.
   */
  async ledgerUpdates(user: Address, startTimeMs: number, endTimeMs?: number, truncated?: number[]): Promise<LedgerUpdate[]> {
    // A time range answers at most LEDGER_PAGE updates, the oldest first: the next page starts at the
    // last one's time (whose updates come again and are skipped by hash).
    const all: LedgerUpdate[] = [];
    const seen = new Set<string>();
    for (let start = startTimeMs; ; ) {
      const body: Record<string, unknown> = { type: 'userNonFundingLedgerUpdates', user, startTime: start };
      if (endTimeMs !== undefined) body.endTime = endTimeMs;
      const page = await this.info<LedgerUpdate[]>(body, (v) => Array.isArray(v));
      for (const u of page) {
        if (seen.has(u.hash)) continue;
        seen.add(u.hash);
        all.push(u);
      }
      if (page.length < LEDGER_PAGE) return all;
      const last = page[page.length - 1]!.time;
      // A full page within one millisecond cannot move on from it: the next starts after it, and what that millisecond
      // holds past the page is never read.
      if (last <= start) truncated?.push(start);
      start = last > start ? last : last + 1;
    }
  }

  /** Posts an already signed action (e.g. one a user signed); throws ExchangeActionError on `status: 'err'`. */
  async submit(body: SignedSendAsset): Promise<{ ok: true }> {
    const endpoint = `${this.url}/exchange`;
    const r = await this.post('/exchange', { ...body }, String(body.action?.type));
    if (isObj(r) && r.status === 'ok') return { ok: true };
    if (isObj(r) && r.status === 'err') {
      throw new ExchangeActionError(typeof r.response === 'string' ? r.response : JSON.stringify(r.response), endpoint);
    }
    throw new ExchangeHttpError(`POST ${endpoint} (${String(body.action?.type)}) answered an unexpected shape`, endpoint);
  }

  /** Builds, signs (EIP-712) and posts a sendAsset action. */
  async sendAsset(privateKey: Hex, params: SendAssetParameters, opts: { signatureChainId: number }): Promise<{ ok: true }> {
    const body = await signSendAsset(privateKey, params, opts);
    return this.submit(body);
  }
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
