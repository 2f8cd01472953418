import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  http,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { buildConfigWithKeys, type Faults } from '../../src/config/load.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import { startDevnet, type Devnet } from '../../src/devnet/devnet.ts';
import { startPostgres, type PostgresHandle } from '../../src/devnet/postgres.ts';
import { createLogger } from '../../src/log.ts';
import { RelayNode } from '../../src/node.ts';
import type { Currency } from '../../src/config/registry.ts';
import { StaticPriceSource, type PriceSource } from '../../src/quote/prices.ts';
import { until } from './until.ts';

/** A GET /requests/v2 retirement far enough away that tests using v2 do not depend on the date they run. */
export const V2_LIVE = { sunsetAt: '2100-01-01' };

export interface Stack {
  devnet: Devnet;
  node: RelayNode;
  url: string;
  dataDir: string;
  /** Config that gives another node (a replica) this stack's ledger: its PostgreSQL URL; none on SQLite (the data directory's file). */
  ledgerConfig: { ledger?: { url: string } };
  /** The PostgreSQL server of a stack started with `ledger: 'postgres'`. */
  postgres?: PostgresHandle;
  publicClient(chainId: number): PublicClient;
  wallet(account: number, chainId: number): WalletClient;
  // whileStopped: what happens between the stop and the start (e.g. the chain moves without the node).
  restartNode(faults?: Faults, whileStopped?: () => Promise<void>): Promise<RelayNode>;
  stop(): Promise<void>;
}

export async function startStack(
  opts: {
    blockTime?: number;
    confirmations?: number;
    logLines?: string[];
    prices?: PriceSource;
    svm?: boolean;
    config?: Record<string, unknown>;
    // Changes a test makes to each chain's config (e.g. publicRpcUrl).
    chain?: (c: Record<string, unknown> & { id: number }) => Record<string, unknown>;
    // Rewrites the node's config file before the node reads it (e.g. a currency a test deploys).
    configure?: (config: any) => any;
    // Changes the node's chain configs (e.g. several RPC providers in front of a devnet chain).
    chains?: (devnet: Devnet, chains: unknown[]) => Promise<unknown[]>;
    // The node's ledger: the SQLite file in dataDir, or a PostgreSQL this stack starts (ledger.url). Default:
    // RELAY_TEST_LEDGER, else sqlite — so any node test runs on PostgreSQL with RELAY_TEST_LEDGER=postgres.
    ledger?: 'sqlite' | 'postgres';
  } = {},
): Promise<Stack> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-node-test-'));
  const postgres = (opts.ledger ?? process.env.RELAY_TEST_LEDGER) === 'postgres' ? await startPostgres({ durable: false }) : undefined;
  const ledgerUrl = postgres && (await postgres.createDatabase());
  const devnet = await startDevnet({ dataDir, blockTime: opts.blockTime, confirmations: opts.confirmations, svm: opts.svm }).catch(async (e) => {
    await postgres?.stop();
    throw e;
  });
  // GET /requests/v2 is retired at its sunset (2026-11-24 by default): the tests that use it as a live
  // route must not depend on today's date, so their stack retires it far later. The retirement itself
  // is tested on a clock of its own (test/requests.test.ts).
  const base = { ...devnet.nodeConfig({ port: 0, logLevel: 'warn' }), requestsV2: V2_LIVE };
  const chains = opts.chains ? await opts.chains(devnet, base.chains as unknown[]) : base.chains;
  const makeNode = async (faults: Faults = {}) => {
    // opts.config: top-level config sections a test sets (e.g. `events`), over the devnet's.
    // Sections merge one level deep: a test's `events` keeps the devnet's allowPrivateTargets.
    const merged: Record<string, unknown> = { ...base, chains: opts.chain ? (chains as (Record<string, unknown> & { id: number })[]).map(opts.chain) : chains };
    for (const [k, v] of Object.entries(opts.config ?? {})) {
      const b = (base as Record<string, unknown>)[k];
      merged[k] = v && b && typeof v === 'object' && typeof b === 'object' && !Array.isArray(v) ? { ...(b as object), ...(v as object) } : v;
    }
    if (ledgerUrl) merged.ledger = { ...((merged.ledger as object | undefined) ?? {}), url: ledgerUrl };
    const config = buildConfigWithKeys(opts.configure ? opts.configure(merged) : merged, devnet.keys, faults);
    // With logLines, the node logs everything (debug) into it, for tests that read the log.
    const log = opts.logLines
      ? createLogger('debug', { write: (line: string) => void opts.logLines!.push(line) })
      : createLogger(process.env.RELAY_TEST_LOG ?? 'silent');
    return new RelayNode(config, { log, prices: opts.prices }).start();
  };
  let node = await makeNode();
  const clients = new Map<number, PublicClient>();
  const stack: Stack = {
    devnet,
    get node() {
      return node;
    },
    get url() {
      return node.url;
    },
    dataDir,
    ledgerConfig: ledgerUrl ? { ledger: { url: ledgerUrl } } : {},
    postgres,
    publicClient(chainId) {
      let c = clients.get(chainId);
      if (!c) {
        const ch = devnet.chains.find((x) => x.id === chainId)!;
        c = createPublicClient({ chain: devnetChain(chainId, ch.rpcUrl), transport: http(ch.rpcUrl), pollingInterval: 50 }) as PublicClient;
        clients.set(chainId, c);
      }
      return c;
    },
    wallet(account, chainId) {
      const ch = devnet.chains.find((x) => x.id === chainId)!;
      return createWalletClient({
        account: privateKeyToAccount(devnet.accounts[account]!.privateKey),
        chain: devnetChain(chainId, ch.rpcUrl),
        transport: http(ch.rpcUrl),
      });
    },
    async restartNode(faults, whileStopped) {
      await node.stop();
      await whileStopped?.();
      node = await makeNode(faults);
      return node;
    },
    async stop() {
      await node.stop().catch(() => {});
      await devnet.stop();
      await postgres?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return stack;
}

export { until };

/** A usePermit quote of 7 USDC from `user` (any address) on 8453 to USDC on 10; `extra` adds or overrides body fields. */
export function permitQuote(stack: Stack, user: string, extra: Record<string, unknown> = {}, apiKey?: string) {
  const usdc = (id: number) => stack.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
  return api(stack.url, '/quote/v2', {
    apiKey,
    body: {
      user,
      originChainId: 8453,
      destinationChainId: 10,
      originCurrency: usdc(8453),
      destinationCurrency: usdc(10),
      amount: '7000000',
      tradeType: 'EXACT_INPUT',
      usePermit: true,
      ...extra,
    },
  });
}

/** startStack's `chains` option giving chain `chainId` the confirmationsByValue table `rows`. */
export function byValueOn(chainId: number, rows: { minUsd: string; confirmations: number | 'finalized' }[]) {
  return async (_d: Devnet, chains: unknown[]) => (chains as { id: number }[]).map((c) => (c.id === chainId ? { ...c, confirmationsByValue: rows } : c));
}

export async function api<T = any>(
  url: string,
  path: string,
  init?: { method?: string; body?: unknown; raw?: string; apiKey?: string; headers?: Record<string, string> },
): Promise<{ status: number; body: T; headers: Headers }> {
  const res = await fetch(url + path, {
    method: init?.method ?? (init?.body !== undefined || init?.raw !== undefined ? 'POST' : 'GET'),
    headers: {
      ...(init?.body !== undefined || init?.raw !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(init?.apiKey ? { 'x-api-key': init.apiKey } : {}),
      ...init?.headers,
    },
    body: init?.raw ?? (init?.body !== undefined ? JSON.stringify(init.body) : undefined),
  });
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body, headers: res.headers };
}

// Sends each transaction step of a quote from the wallet, as a client following the steps does.
/**
 * The body of a native-currency bridge quote (EXACT_INPUT, the native currency on both chains) from `user` to
 * `recipient`; `extra` adds fields (protocolVersion, a referrer...).
 */
export function nativeBridge(user: string, recipient: string, from: number, to: number, amount: string, extra: Record<string, unknown> = {}) {
  return {
    user,
    recipient,
    originChainId: from,
    destinationChainId: to,
    originCurrency: zeroAddress,
    destinationCurrency: zeroAddress,
    amount,
    tradeType: 'EXACT_INPUT',
    ...extra,
  };
}

/**
 * The body of a quote for 0.01 ETH on chain 10 bought with USDC on 8453 (EXACT_OUTPUT, slippage 50 bps: priced and
 * filled as a swap) for `user`: paid to `recipient`, or, with `callTarget`, spent by a destination call to it.
 */
export function usdcForEth(stack: Stack, user: string, to: { recipient?: string; callTarget?: string }) {
  return {
    user,
    ...(to.recipient ? { recipient: to.recipient } : {}),
    originChainId: 8453,
    destinationChainId: 10,
    originCurrency: stack.devnet.chains.find((c) => c.id === 8453)!.contracts.stablecoin,
    destinationCurrency: zeroAddress,
    amount: '10000000000000000',
    tradeType: 'EXACT_OUTPUT',
    slippageTolerance: 50,
    ...(to.callTarget ? { txs: [{ to: to.callTarget, value: '10000000000000000', data: '0x' }] } : {}),
  };
}

/** Sends `amount` of `currency` (native: the zero address) from devnet account `from` to `to` on `chainId` (a deposit address, say); waits for its receipt. */
export async function payAddress(stack: Stack, from: number, chainId: number, to: Address, currency: Address, amount: bigint): Promise<Hex> {
  const w = stack.wallet(from, chainId);
  const hash =
    currency === zeroAddress
      ? await w.sendTransaction({ account: w.account!, chain: w.chain, to, value: amount })
      : await w.sendTransaction({
          account: w.account!,
          chain: w.chain,
          to: currency,
          data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] }),
        });
  await stack.publicClient(chainId).waitForTransactionReceipt({ hash });
  return hash;
}

/**
 * POST /quote/v2 for a deposit address on the devnet: 10 USDC from 8453 to USDC on 10, account 1 the user,
 * 2 the recipient, 3 refundTo; `extra` overrides any field.
 */
export function depositAddressQuote(stack: Stack, extra: Record<string, unknown> = {}, apiKey?: string) {
  const usdc = (id: number) => stack.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
  const account = (i: number) => stack.devnet.accounts[i]!.address;
  return api(stack.url, '/quote/v2', {
    apiKey,
    body: {
      user: account(1),
      recipient: account(2),
      refundTo: account(3),
      originChainId: 8453,
      destinationChainId: 10,
      originCurrency: usdc(8453),
      destinationCurrency: usdc(10),
      amount: '10000000',
      tradeType: 'EXACT_INPUT',
      useDepositAddress: true,
      ...extra,
    },
  });
}

export async function executeSteps(stack: Stack, quote: any, account: number): Promise<Hex[]> {
  const hashes: Hex[] = [];
  for (const step of quote.steps) {
    for (const item of step.items) {
      const d = item.data;
      const wallet = stack.wallet(account, d.chainId);
      const hash = await wallet.sendTransaction({ account: wallet.account!, chain: wallet.chain, to: d.to, data: d.data, value: BigInt(d.value) });
      await stack.publicClient(d.chainId).waitForTransactionReceipt({ hash });
      hashes.push(hash);
    }
  }
  return hashes;
}

/**
 * Holds chain `chainId`'s submitter: it is handed no queued payout until the returned release, so a payout
 * recorded meanwhile stays in flight (queued, not sent). A chain pause would refuse what records it.
 */
export function holdSubmitter(stack: Stack, chainId: number): () => void {
  const payouts = stack.node.ledger.payouts;
  const queued = payouts.queued.bind(payouts);
  payouts.queued = (chain: number, limit?: number) => (chain === chainId ? [] : queued(chain, limit));
  return () => {
    payouts.queued = queued;
    stack.node.adapters.get(chainId)!.payoutsQueued();
  };
}

export async function waitForStatus(url: string, requestId: string, statuses: string[], timeoutMs = 30_000) {
  return until(
    async () => {
      const r = await api(url, `/intents/status/v3?requestId=${requestId}`);
      return statuses.includes(r.body.status) ? r.body : undefined;
    },
    `request ${requestId} to reach ${statuses.join('|')}`,
    timeoutMs,
  );
}

// The config's prices, except those a test sets: prices that move between a quote and its fill.
export class MovablePrices implements PriceSource {
  #static = new StaticPriceSource();
  readonly overrides = new Map<string, string>();
  set(symbol: string, usd: string) {
    this.overrides.set(symbol, usd);
  }
  async usdPrice(c: Currency): Promise<string> {
    return this.overrides.get(c.symbol) ?? this.#static.usdPrice(c);
  }
}

/** A read-only API replica over `stack`'s ledger, with `api` settings of its own (the devnet's rate limits not kept). */
export function apiReplica(stack: Stack, api: Record<string, unknown>): Promise<RelayNode> {
  const raw = { ...stack.devnet.nodeConfig({ port: 0, dataDir: stack.dataDir, logLevel: 'silent' }), requestsV2: V2_LIVE, ...stack.ledgerConfig };
  const config = buildConfigWithKeys({ ...raw, api: { host: '127.0.0.1', port: 0, ...api } }, stack.devnet.keys);
  return new RelayNode(config, { readOnly: true, log: createLogger('silent') }).start();
}
