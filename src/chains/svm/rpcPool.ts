// The JSON-RPC providers of one SVM chain, behind @solana/web3.js's Connection (as its `fetch`).
//
// Reads that cannot go back in time: the pool keeps, per commitment, the newest slot the node has
// seen on the chain (from `getSlot`, `getEpochInfo` and every answer's `context.slot`). A read that
// accepts `minContextSlot` is sent with it set to that slot, so a provider behind it refuses
// (-32016, "Minimum context slot has not been reached") instead of answering from the past; and an
// answer whose `context.slot` is below the slot asked for (`getSignatureStatuses` takes no
// `minContextSlot`, some providers ignore it) is set aside the same way. Either is asked again of
// another provider, or of the same one after a short, growing pause, until `maxWaitMs`; then the
// call fails with -32016, so the caller retries later and never takes the answer as "absent",
// "unpaid" or "no balance".
//
// A lagging provider can otherwise make a landed payout look absent while another backend reports
// its blockhash expired, and the payout is signed again: a double payment.
import { Connection, type Commitment as Web3Commitment } from '@solana/web3.js';
import type { RpcProviderConfig, SvmChainConfig } from '../../config/schema.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { ProviderFailure, RpcProvider, type RpcAnswer, type RpcCall } from '../providers/provider.ts';

/** The Solana RPC error for a read whose provider has not reached the `minContextSlot` asked for. */
export const MIN_CONTEXT_SLOT_NOT_REACHED = -32016;
/**
 * How the pool's own "could not read the chain" answers begin. web3.js rethrows some RPC errors as a
 * plain `Error` whose message embeds the answer's (`failed to get balance of account …: SolanaJSONRPCError: …`),
 * dropping class and code: the message is all that reaches the API, which answers 503 on it.
 */
export const SVM_UNAVAILABLE_PREFIX = 'svm chain unavailable:';

type Commitment = 'processed' | 'confirmed' | 'finalized';
const RANK: Record<Commitment, number> = { processed: 0, confirmed: 1, finalized: 2 };

// Methods that take `minContextSlot`, and the index of their config object in the params.
const PINNED: Record<string, number> = {
  getAccountInfo: 1,
  getBalance: 1,
  getBlockHeight: 0,
  getEpochInfo: 0,
  getLatestBlockhash: 0,
  getMultipleAccounts: 1,
  getProgramAccounts: 1,
  getSignaturesForAddress: 1,
  getSlot: 0,
  getTokenAccountsByOwner: 2,
  isBlockhashValid: 1,
  simulateTransaction: 1,
};
// Methods whose answer is as of the newest (processed) slot whatever commitment they name.
const PROCESSED = new Set(['getSignatureStatuses']);
const SEND = new Set(['sendTransaction']);
// The commitment a config names (the RPC's own default: finalized).
function commitmentOf(cfg: unknown): Commitment {
  const c = (cfg as { commitment?: unknown } | undefined)?.commitment;
  if (c === 'processed' || c === 'recent') return 'processed';
  if (c === 'confirmed' || c === 'single' || c === 'singleGossip') return 'confirmed';
  return 'finalized';
}
const RATE_LIMITED = /rate.?limit|too many requests/i;

export interface SvmRpcPoolOptions {
  chain: Pick<SvmChainConfig, 'id' | 'rpcUrl' | 'rpc'>;
  metrics?: Metrics;
  log?: Logger;
  timeoutMs?: number;
  /** How long a read waits for a provider at the slot it needs before it fails (-32016). */
  maxWaitMs?: number;
  /** A provider this many slots behind the newest seen (about a minute at 400 ms) is named as holding the chain back. */
  maxLagSlots?: number;
}

/** Routes an SVM chain's JSON-RPC calls over its providers, each read pinned to the newest slot seen. */
export class SvmRpcPool {
  readonly chainId: number;
  readonly providers: RpcProvider[];
  // The newest slot seen at each commitment (processed, confirmed, finalized).
  readonly #floor = [0, 0, 0];
  readonly #maxWaitMs: number;
  readonly #maxLagSlots: number;
  readonly #log: Logger | undefined;
  readonly #metrics: Metrics | undefined;

  constructor(opts: SvmRpcPoolOptions) {
    this.chainId = opts.chain.id;
    this.#maxWaitMs = opts.maxWaitMs ?? 5_000;
    this.#maxLagSlots = opts.maxLagSlots ?? 150;
    this.#log = opts.log;
    this.#metrics = opts.metrics;
    const chain = String(opts.chain.id);
    const specs: RpcProviderConfig[] = opts.chain.rpc?.length
      ? opts.chain.rpc
      : [{ url: opts.chain.rpcUrl, weight: 1, maxRps: 0, maxConcurrent: 32, role: 'any' }];
    const m = opts.metrics;
    this.providers = specs.map(
      (spec, i) =>
        new RpcProvider(spec, i, opts.timeoutMs ?? 10_000, {
          exchange: (ms, calls) => {
            const provider = spec.name ?? `p${i}`;
            m?.rpcProviderRequests.inc({ chain, provider }, calls);
            m?.rpcProviderLatency.observe({ chain, provider }, ms / 1000);
          },
          failure: (kind) => m?.rpcProviderErrors.inc({ chain, provider: spec.name ?? `p${i}`, kind }),
        }),
    );
  }

  /** The newest slot the node has seen at this commitment (0: none yet). */
  floor(commitment: Commitment = 'confirmed'): number {
    return this.#floor[RANK[commitment]]!;
  }

  /** Records a slot seen at a commitment (it is then at least that at every lower commitment too). */
  saw(commitment: Commitment, slot: number): void {
    for (let r = 0; r <= RANK[commitment]; r++) if (slot > this.#floor[r]!) this.#floor[r] = slot;
  }

  /** A `fetch` for @solana/web3.js's Connection: every call of the body goes through `request`. */
  readonly fetch = async (_url: unknown, init?: { body?: unknown }): Promise<Response> => {
    const body = JSON.parse(String(init?.body ?? 'null')) as
      | { id?: unknown; method: string; params?: unknown[] }
      | { id?: unknown; method: string; params?: unknown[] }[];
    const one = async (c: { id?: unknown; method: string; params?: unknown[] }) => ({
      jsonrpc: '2.0',
      id: c.id,
      ...(await this.request({ method: c.method, params: c.params ?? [] })),
    });
    const out = Array.isArray(body) ? await Promise.all(body.map(one)) : await one(body);
    return new Response(JSON.stringify(out), { status: 200, headers: { 'content-type': 'application/json' } });
  };

  /** Answers one call: a read at or past the newest slot seen, or a send through a provider that takes sends. */
  async request(call: RpcCall): Promise<RpcAnswer> {
    const send = SEND.has(call.method);
    const at = PINNED[call.method];
    const cfg = at === undefined ? undefined : call.params[at];
    const commitment: Commitment = PROCESSED.has(call.method) ? 'processed' : at === undefined ? commitmentOf(call.params.at(-1)) : commitmentOf(cfg);
    const deadline = Date.now() + this.#maxWaitMs;
    const tried = new Set<RpcProvider>();
    let pause = 25;
    let why = 'no provider answered';
    for (;;) {
      const p = this.#pick(tried, send);
      if (!p) {
        if (Date.now() + pause > deadline) {
          if (send) return { error: { code: -32603, message: `${SVM_UNAVAILABLE_PREFIX} chain ${this.chainId}: no provider took the transaction (${why})` } };
          this.#log?.warn(
            { chain: this.chainId, method: call.method, floor: this.floor(commitment), why },
            'svm read not answered at the newest slot seen; the caller retries',
          );
          return {
            error: {
              code: MIN_CONTEXT_SLOT_NOT_REACHED,
              message: `${SVM_UNAVAILABLE_PREFIX} chain ${this.chainId}: ${call.method} not answered at slot ${this.floor(commitment)} or later (${why})`,
            },
          };
        }
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 500);
        tried.clear();
        continue;
      }
      tried.add(p);
      const need = send ? 0 : this.floor(commitment);
      const params = [...call.params];
      if (at !== undefined && need > 0) {
        while (params.length < at) params.push(null);
        params[at] = { ...((params[at] as object | null | undefined) ?? {}), minContextSlot: need };
      }
      let a: RpcAnswer;
      try {
        [a] = (await p.send([{ method: call.method, params }])) as [RpcAnswer];
      } catch (e) {
        if (!(e instanceof ProviderFailure)) throw e;
        why = `${p.name}: ${e.kind}`;
        continue;
      }
      if ('error' in a) {
        if (a.error.code === MIN_CONTEXT_SLOT_NOT_REACHED) {
          const at = (a.error.data as { contextSlot?: unknown } | undefined)?.contextSlot;
          if (typeof at === 'number') this.#sawAt(p, at);
          p.failed('behind');
          why = `${p.name}: behind slot ${need}`;
          continue;
        }
        if (a.error.code === 429 || RATE_LIMITED.test(a.error.message)) {
          why = `${p.name}: rate limited`;
          continue;
        }
        return a;
      }
      const slot = (a.result as { context?: { slot?: unknown } } | null)?.context?.slot;
      if (typeof slot === 'number') {
        this.#sawAt(p, slot);
        if (slot < need) {
          p.failed('behind');
          why = `${p.name}: answered at slot ${slot}, behind ${need}`;
          continue;
        }
        this.saw(commitment, slot);
      }
      if (call.method === 'getSlot' && typeof a.result === 'number') this.saw(commitment, a.result);
      if (call.method === 'getEpochInfo') {
        const s = (a.result as { absoluteSlot?: unknown } | null)?.absoluteSlot;
        if (typeof s === 'number') this.saw(commitment, s);
      }
      return a;
    }
  }

  // The newest slot a provider answered at (its head, for lag and readiness).
  #sawAt(p: RpcProvider, slot: number): void {
    if (BigInt(slot) > p.head) p.head = BigInt(slot);
    this.#metrics?.rpcProviderHeadLag.set({ chain: String(this.chainId), provider: p.name }, Math.max(0, this.floor('processed') - Number(p.head)));
  }

  /** Readiness: whether a provider can read, and which ones hold the chain back and why. */
  health(): { ready: boolean; providers: { name: string; state: string; headLag: number }[]; heldBy?: string } {
    const now = Date.now();
    const top = this.floor('processed');
    const lagOf = (p: RpcProvider) => (p.head > 0n ? Math.max(0, top - Number(p.head)) : 0);
    const stateOf = (p: RpcProvider) =>
      p.cooling(now)
        ? 'rate limited'
        : p.errorRate > 0.5
          ? `failing (${p.lastFailure ?? 'errors'})`
          : lagOf(p) > this.#maxLagSlots
            ? `behind by ${lagOf(p)} slots`
            : 'ok';
    const providers = this.providers.map((p) => ({ name: p.name, state: stateOf(p), headLag: lagOf(p) }));
    const ready = this.providers.some((p, i) => p.role !== 'send' && providers[i]!.state === 'ok');
    const held = providers.filter((p) => p.state !== 'ok');
    return { ready, providers, ...(ready || !held.length ? {} : { heldBy: held.map((p) => `${p.name} (${p.state})`).join(', ') }) };
  }

  // The next provider for a call that has not tried it: sends skip read-only ones, reads skip
  // send-only ones; fallbacks only once the others have tried; rate-limited ones last.
  #pick(tried: Set<RpcProvider>, send: boolean): RpcProvider | undefined {
    const fits = this.providers.filter((p) => !tried.has(p) && (send ? p.role !== 'read' : p.role !== 'send'));
    const primary = fits.filter((p) => p.role !== 'fallback');
    const pool = primary.length ? primary : fits;
    const ready = pool.filter((p) => !p.cooling());
    const list = ready.length ? ready : pool;
    return list.sort((a, b) => a.errorRate - b.errorRate || b.weight - a.weight || a.index - b.index)[0];
  }
}

/** A web3.js Connection whose every call goes through the pool (the URL is never used directly). */
export function svmConnection(pool: SvmRpcPool, commitment: Web3Commitment): Connection {
  // web3.js retries HTTP 429 itself; the pool already moves rate-limited calls elsewhere.
  return new Connection(`http://svm-chain-${pool.chainId}.invalid`, { commitment, fetch: pool.fetch as never, disableRetryOnRateLimit: true });
}
