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
// "unpaid" or "no balance". A read answered with the provider's own failure (a JSON-RPC internal
// error, an unhealthy node) is asked again elsewhere the same way, never handed back as an answer.
//
// A lagging provider can otherwise make a landed payout look absent while another backend reports
// its blockhash expired, and the payout is signed again: a double payment.
import { Connection, type Commitment as Web3Commitment } from '@solana/web3.js';
import type { RpcProviderConfig, SvmChainConfig } from '../../config/schema.ts';
import type { Logger } from '../../log.ts';
import { isApiRead } from '../../lib/apiReads.ts';
import type { Metrics } from '../../metrics.ts';
import { failureOfAnswer, ProviderFailure, RpcProvider, type ProviderFailureKind, type RpcAnswer, type RpcCall } from '../providers/provider.ts';
import { collectQuorum, ProviderPoolError, QuorumDisagreementError, type QuorumAnswer } from '../providers/quorum.ts';

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
/**
 * Reads that decide money on an SVM chain, answered by a quorum of providers when more than one can
 * read: a deposit's existence (the vault's signatures, a deposit's transaction), "was this paid"
 * (a payout's signature status and transaction), the finalized height a payout's blockhash expiry
 * is judged by (the SVM counterpart of the EVM nonce: past it, a payout may be signed again), whether
 * a payout's blockhash is still valid (its recorded expiry is one provider's word), and a payout's
 * simulation (a failure there fails the payout for good: the order is refunded).
 */
export const SVM_DECISION_METHODS = new Set([
  'getSignatureStatuses',
  'getTransaction',
  'getSignaturesForAddress',
  'getEpochInfo',
  'simulateTransaction',
  'isBlockhashValid',
]);
// The commitment a config names (the RPC's own default: finalized).
function commitmentOf(cfg: unknown): Commitment {
  const c = (cfg as { commitment?: unknown } | undefined)?.commitment;
  if (c === 'processed' || c === 'recent') return 'processed';
  if (c === 'confirmed' || c === 'single' || c === 'singleGossip') return 'confirmed';
  return 'finalized';
}
const RATE_LIMITED = /rate.?limit|too many requests/i;
/** Solana's "node is unhealthy" (behind its cluster): the provider failed, not the read. */
const NODE_UNHEALTHY = -32005;
// Whether a read's JSON-RPC error answer is the provider failing (then asked elsewhere) rather
// than the chain's answer: the providers' shared classification (internal errors, "behind"
// messages), plus Solana's unhealthy node.
function readFailureOf(error: { code: number; message: string }): ProviderFailureKind | undefined {
  if (error.code === NODE_UNHEALTHY) return 'internal';
  return failureOfAnswer(error);
}

export interface SvmRpcPoolOptions {
  chain: Pick<SvmChainConfig, 'id' | 'rpcUrl' | 'rpc'> & { quorum?: number };
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
  /** Agreeing providers a decision read needs (SVM_DECISION_METHODS; default 2 with two or more reading providers). */
  readonly quorumSize: number;
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
    const readers = this.providers.filter((p) => p.role !== 'send').length;
    this.quorumSize = Math.min(opts.chain.quorum ?? (readers >= 2 ? 2 : 1), readers);
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

  /**
   * Answers one call: a read at or past the newest slot seen, or a send through a provider that
   * takes sends. A decision read (SVM_DECISION_METHODS) needs `quorumSize` providers agreeing; while
   * they disagree it throws QuorumDisagreementError (through web3.js as is): the caller does not act.
   */
  async request(call: RpcCall): Promise<RpcAnswer> {
    if (this.quorumSize > 1 && SVM_DECISION_METHODS.has(call.method)) return this.#quorum(call);
    if (call.method === 'getRecentPrioritizationFees' && this.#readers > 1) return this.#lowerMedianFees(call);
    return this.#route(call);
  }

  // Reading providers (not send-only).
  get #readers(): number {
    return this.providers.filter((p) => p.role !== 'send').length;
  }

  /**
   * Recent prioritization fees from up to three reading providers: the answer whose percentile
   * (recentFeePercentile, what the adapter prices at) is the lower median of theirs. One provider's
   * word priced every payout and quote: a hostile one answering the cap had each pay it. The lower
   * median: a liar among three moves nothing, of two it can only lower the price (a slower payout,
   * never an overpaid one). Kept whole, not merged per slot: the caller reads one provider's list.
   */
  async #lowerMedianFees(call: RpcCall): Promise<RpcAnswer> {
    const answers = await this.#several(call, Math.min(3, this.#readers));
    if (!answers) return this.#unanswered(call, false, 'processed', `fewer than ${Math.max(1, this.quorumSize)} providers answered`);
    // Error answers and malformed lists are not ranked (a malformed one would fail the caller's read); none else: the first as is.
    const ranked = answers
      .map((a) => ({ a, fees: feesOf(a) }))
      .filter((x): x is { a: RpcAnswer; fees: bigint[] } => x.fees !== undefined)
      .map(({ a, fees }) => ({ a, p: recentFeePercentile(fees) }))
      .sort((x, y) => (x.p < y.p ? -1 : x.p > y.p ? 1 : 0));
    if (!ranked.length) return answers[0]!;
    return ranked[Math.floor((ranked.length - 1) / 2)]!.a;
  }

  // One call's answers from `want` distinct providers, or as many as answered (at least `quorumSize`) once every
  // reading provider was asked; undefined when fewer answered by maxWaitMs. Those that could not answer are asked
  // again after a growing pause.
  async #several(call: RpcCall, want: number): Promise<RpcAnswer[] | undefined> {
    const deadline = Date.now() + this.#maxWaitMs;
    const answers = new Map<RpcProvider, RpcAnswer>();
    const failed = new Set<RpcProvider>();
    let pause = 25;
    for (;;) {
      const picked: RpcProvider[] = [];
      while (answers.size + picked.length < want) {
        const p = this.#pick(new Set([...answers.keys(), ...failed, ...picked]), false);
        if (!p) break;
        picked.push(p);
      }
      await Promise.all(
        picked.map(async (p) => {
          const got = await this.#attempt(p, call);
          if ('why' in got) failed.add(p);
          else answers.set(p, got.a);
        }),
      );
      if (answers.size >= want || (!picked.length && answers.size >= Math.max(1, this.quorumSize))) return [...answers.values()];
      if (!picked.length) {
        if (Date.now() + pause > deadline) return undefined;
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 500);
        failed.clear();
      }
    }
  }

  // The commitment a call reads at, and where its `minContextSlot` goes (undefined: it takes none).
  #shape(call: RpcCall): { send: boolean; at: number | undefined; commitment: Commitment } {
    const send = SEND.has(call.method);
    const at = PINNED[call.method];
    const cfg = at === undefined ? undefined : call.params[at];
    const commitment: Commitment = PROCESSED.has(call.method) ? 'processed' : at === undefined ? commitmentOf(call.params.at(-1)) : commitmentOf(cfg);
    return { send, at, commitment };
  }

  #unanswered(call: RpcCall, send: boolean, commitment: Commitment, why: string): RpcAnswer {
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

  // One call through the first provider that answers it at or past the newest slot seen.
  async #route(call: RpcCall): Promise<RpcAnswer> {
    const { send, commitment } = this.#shape(call);
    const deadline = Date.now() + this.#maxWaitMs;
    const tried = new Set<RpcProvider>();
    let pause = 25;
    let why = 'no provider answered';
    for (;;) {
      const p = this.#pick(tried, send);
      if (!p) {
        if (Date.now() + pause > deadline) return this.#unanswered(call, send, commitment, why);
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 500);
        tried.clear();
        continue;
      }
      tried.add(p);
      const got = await this.#attempt(p, call);
      if ('why' in got) {
        why = got.why;
        continue;
      }
      return got.a;
    }
  }

  /**
   * One attempt at one provider: its answer at or past the newest slot seen (a JSON-RPC error
   * answer included), or why it could not give one (a transport failure, a rate limit, behind).
   * `headSlot`: the provider's slot at the call's commitment, read in the same batch when asked for.
   */
  async #attempt(
    p: RpcProvider,
    call: RpcCall,
    opts: { headCheck?: boolean; see?: boolean } = {},
  ): Promise<{ a: RpcAnswer; headSlot?: number } | { why: string }> {
    const { send, at, commitment } = this.#shape(call);
    const see = opts.see ?? true;
    const need = send ? 0 : this.floor(commitment);
    const params = [...call.params];
    if (at !== undefined && need > 0) {
      while (params.length < at) params.push(null);
      params[at] = { ...((params[at] as object | null | undefined) ?? {}), minContextSlot: need };
    }
    const calls: RpcCall[] = [{ method: call.method, params }];
    if (opts.headCheck) calls.push({ method: 'getSlot', params: [{ commitment }] });
    let a: RpcAnswer;
    let h: RpcAnswer | undefined;
    if (!(await this.#budget(p, calls.length, send))) return { why: `${p.name}: over its request budget` };
    try {
      [a, h] = (await p.send(calls)) as [RpcAnswer, RpcAnswer | undefined];
    } catch (e) {
      if (!(e instanceof ProviderFailure)) throw e;
      return { why: `${p.name}: ${e.kind}` };
    }
    const headSlot = h && 'result' in h && typeof h.result === 'number' ? h.result : undefined;
    if (headSlot !== undefined) this.#sawAt(p, headSlot);
    if ('error' in a) {
      if (a.error.code === MIN_CONTEXT_SLOT_NOT_REACHED) {
        const at = (a.error.data as { contextSlot?: unknown } | undefined)?.contextSlot;
        if (typeof at === 'number') this.#sawAt(p, at);
        p.failed('behind');
        return { why: `${p.name}: behind slot ${need}` };
      }
      if (a.error.code === 429 || RATE_LIMITED.test(a.error.message)) return { why: `${p.name}: rate limited` };
      // The provider's own failure (an internal error, an unhealthy node), not the chain's answer:
      // asked elsewhere, and in the end "chain unavailable", never handed to the caller as an
      // answer (a failed balance read must not become "no balance", nor an API 500).
      const failure = send ? undefined : readFailureOf(a.error);
      if (failure) {
        // A rate limit is already backed off by the provider itself (RpcProvider).
        if (failure !== 'rate_limited') p.failed(failure);
        return { why: `${p.name}: ${failure} (${a.error.code})` };
      }
      return { a, headSlot };
    }
    const slot = (a.result as { context?: { slot?: unknown } } | null)?.context?.slot;
    if (typeof slot === 'number') {
      this.#sawAt(p, slot);
      if (slot < need) {
        p.failed('behind');
        return { why: `${p.name}: answered at slot ${slot}, behind ${need}` };
      }
      this.saw(commitment, slot);
    }
    if (see && call.method === 'getSlot' && typeof a.result === 'number') this.saw(commitment, a.result);
    if (see && call.method === 'getEpochInfo') {
      const s = (a.result as { absoluteSlot?: unknown } | null)?.absoluteSlot;
      if (typeof s === 'number') this.saw(commitment, s);
    }
    return { a, headSlot };
  }

  /**
   * A decision read answered by `quorumSize` providers agreeing on what the decision uses (see
   * decisionKey): never one provider's word alone. Answers that differ only because one provider
   * had not reached what another already holds are asked again, not counted as disagreement.
   */
  async #quorum(call: RpcCall): Promise<RpcAnswer> {
    const { commitment } = this.#shape(call);
    // What the decision compares is as of this slot: every answer is pinned at or past it.
    const need = this.floor(commitment);
    const deadline = Date.now() + this.#maxWaitMs;
    let why = 'no provider answered';
    type Got = { a: RpcAnswer; headSlot?: number };
    let answers: QuorumAnswer<RpcProvider, Got>[];
    try {
      answers = await collectQuorum<RpcProvider, Got>({
        chainId: this.chainId,
        method: call.method,
        size: this.quorumSize,
        deadline,
        pick: async (exclude) => this.#pick(exclude, false),
        ask: async (p) => {
          // A claimed slot moves the floor only once the quorum agrees on it (below).
          const got = await this.#attempt(p, call, { headCheck: call.method === 'getTransaction', see: call.method !== 'getEpochInfo' });
          if ('why' in got) {
            why = got.why;
            return undefined;
          }
          return got;
        },
        key: (g) => decisionKey(call.method, g.a, need),
        setAside: (all) =>
          all.filter((x) => {
            const behind = isBehind(
              call.method,
              x.a,
              all.map((y) => y.a),
            );
            if (behind) x.p.failed('behind');
            return !behind;
          }),
        exhausted: () => new ProviderPoolError(why),
        metrics: this.#metrics,
        log: this.#log,
      });
    } catch (e) {
      if (e instanceof QuorumDisagreementError || !(e instanceof ProviderPoolError)) throw e;
      return this.#unanswered(call, false, commitment, `no quorum of ${this.quorumSize}: ${why}`);
    }
    return mergeAnswers(
      call.method,
      answers.map((x) => x.a.a),
      (slot) => this.saw(commitment, slot),
    );
  }

  /**
   * Whether every reading provider's transaction-status index is complete through `slot`: each answers
   * `getBlock(slot)` (finalized) with a block, not Agave's BlockStatusNotAvailableYet (-32014, its
   * TransactionStatusService behind replay), BlockNotAvailable (-32004: not rooted there yet, or history
   * off), a pruned slot or a failure. Undefined when it is; else why not, providers named, never their URLs.
   *
   * Every reader, not one: a "no status" answer may come from any of them (a pool call goes to whichever
   * answers), and the proof must hold for the one whose answer is acted on. Ask it BEFORE the status read
   * it vouches for: an index only grows, so complete before it was complete at it.
   */
  async statusIndexComplete(slot: number): Promise<string | undefined> {
    return this.#everyReader((p) =>
      this.#proofCall(
        p,
        'getBlock',
        [slot, { commitment: 'finalized', encoding: 'json', transactionDetails: 'none', rewards: false, maxSupportedTransactionVersion: 0 }],
        (r) => (r !== null && typeof r === 'object' ? undefined : `getBlock(${slot}) answered no block`),
      ),
    );
  }

  /**
   * Whether every reading provider's ledger history (its own, or its long-term storage) reaches back to
   * `slot`: `getFirstAvailableBlock` at or below it. Undefined when it does; else why not (providers by
   * name). Ask it AFTER the status read it vouches for: history is pruned from below, so it reached
   * back at the read if it still does after.
   */
  async historyReaches(slot: number): Promise<string | undefined> {
    return this.#everyReader((p) =>
      this.#proofCall(p, 'getFirstAvailableBlock', [], (r) =>
        typeof r === 'number' && r <= slot ? undefined : `its first available block ${typeof r === 'number' ? r : '(none)'} is past slot ${slot}`,
      ),
    );
  }

  // Asks every reading provider; the first reason one gives no proof, or undefined.
  async #everyReader(ask: (p: RpcProvider) => Promise<string | undefined>): Promise<string | undefined> {
    const readers = this.providers.filter((p) => p.role !== 'send');
    const whys = await Promise.all(readers.map(ask));
    const why = whys.find((w) => w !== undefined);
    return why === undefined ? undefined : `provider ${readers[whys.indexOf(why)]!.name}: ${why}`;
  }

  // One call at one provider, judged by `judge` (undefined: proven). An error answer is named by its code only.
  async #proofCall(p: RpcProvider, method: string, params: unknown[], judge: (result: unknown) => string | undefined): Promise<string | undefined> {
    if (!(await this.#budget(p, 1, false))) return `${method} not sent: ${p.name} over its request budget`;
    let a: RpcAnswer;
    try {
      [a] = (await p.send([{ method, params }])) as [RpcAnswer];
    } catch (e) {
      if (!(e instanceof ProviderFailure)) throw e;
      return `${method} failed (${e.kind})`;
    }
    if ('error' in a) return `${method} answered error ${a.error.code}`;
    return judge(a.result);
  }

  // Waits until the provider's budget (maxRps, maxConcurrent, a rate limit's pause) takes `n` more calls, and spends
  // them; false past maxWaitMs. A read for the public API waits for half of it to be left to the node's own
  // (lib/apiReads.ts): a client asking for quotes as fast as it was answered otherwise spent it, and the provider's 429s
  // held the node's reads. Spent in the same tick as the check: taken after the caller's await, the calls one request
  // starts together (a quote's mint, rent and fee reads) all passed a check left room for one, the API's past its half.
  async #budget(p: RpcProvider, n: number, send: boolean): Promise<boolean> {
    const yielding = !send && isApiRead();
    const deadline = Date.now() + this.#maxWaitMs;
    for (;;) {
      const now = Date.now();
      const wait = p.waitFor(n, now, yielding);
      if (wait === 0) {
        p.take(n, now);
        return true;
      }
      if (now + wait > deadline) return false;
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  // The newest slot a provider answered at (its head, for lag and readiness).
  #sawAt(p: RpcProvider, slot: number): void {
    if (BigInt(slot) > p.head) p.head = BigInt(slot);
    this.#metrics?.rpcProviderHeadLag.set({ chain: String(this.chainId), provider: p.name }, Math.max(0, this.floor('processed') - Number(p.head)));
  }

  /** Readiness: whether enough providers can read (a quorum of them), and which ones hold the chain back and why. */
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
    // Decision reads need `quorumSize` providers in step: fewer, and the node can decide nothing.
    const ready = this.providers.filter((p, i) => p.role !== 'send' && providers[i]!.state === 'ok').length >= Math.max(1, this.quorumSize);
    const held = providers.filter((p) => p.state !== 'ok');
    return { ready, providers, ...(ready || !held.length ? {} : { heldBy: held.map((p) => `${p.name} (${p.state})`).join(', ') }) };
  }

  // The next provider for a call that has not tried it: sends skip read-only ones, reads skip
  // send-only ones; fallbacks only once the others have tried; rate-limited ones last.
  #pick(tried: ReadonlySet<RpcProvider>, send: boolean): RpcProvider | undefined {
    const fits = this.providers.filter((p) => !tried.has(p) && (send ? p.role !== 'read' : p.role !== 'send'));
    const primary = fits.filter((p) => p.role !== 'fallback');
    const pool = primary.length ? primary : fits;
    const ready = pool.filter((p) => !p.cooling());
    const list = ready.length ? ready : pool;
    return list.sort((a, b) => a.errorRate - b.errorRate || b.weight - a.weight || a.index - b.index)[0];
  }
}

// A getRecentPrioritizationFees answer's fees, or undefined for an error or a malformed list.
function feesOf(a: RpcAnswer): bigint[] | undefined {
  if (!('result' in a) || !Array.isArray(a.result)) return undefined;
  const fees = (a.result as { prioritizationFee?: unknown }[]).map((f) => f?.prioritizationFee);
  return fees.every((f) => Number.isSafeInteger(f) && (f as number) >= 0) ? fees.map((f) => BigInt(f as number)) : undefined;
}

/**
 * The percentile of recent prioritization fees (micro-lamports per compute unit) a transaction is priced at: the
 * 75th, so that it lands in a busy slot too. The pool's lower median of providers' answers is taken by it, so the
 * adapter's price is that median.
 */
export function recentFeePercentile(fees: readonly bigint[]): bigint {
  const sorted = [...fees].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (!sorted.length) return 0n;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.75))]!;
}

/** A web3.js Connection whose every call goes through the pool (the URL is never used directly). */
export function svmConnection(pool: SvmRpcPool, commitment: Web3Commitment): Connection {
  // web3.js retries HTTP 429 itself; the pool already moves rate-limited calls elsewhere.
  return new Connection(`http://svm-chain-${pool.chainId}.invalid`, { commitment, fetch: pool.fetch as never, disableRetryOnRateLimit: true });
}

// ------------------------------------------------------------------------------------------ decision reads

type Status = { slot?: unknown; err?: unknown; confirmationStatus?: unknown } | null;
const statusesOf = (a: RpcAnswer): Status[] => ('result' in a ? ((a.result as { value?: Status[] } | null)?.value ?? []) : []);
const contextOf = (a: RpcAnswer): number => ('result' in a ? Number((a.result as { context?: { slot?: unknown } } | null)?.context?.slot ?? 0) : 0);
const rankOf = (st: Status): number => {
  const c = st?.confirmationStatus;
  return c === 'finalized' ? 2 : c === 'confirmed' ? 1 : 0;
};
const tokenBalances = (list: unknown) =>
  ((list as { accountIndex?: unknown; mint?: unknown; owner?: unknown; uiTokenAmount?: { amount?: unknown } }[] | null | undefined) ?? []).map((b) => [
    b.accountIndex,
    b.mint,
    b.owner,
    b.uiTokenAmount?.amount,
  ]);

/**
 * What a decision uses of an answer, as a string: equal strings agree. Left out is what honest
 * providers legitimately differ on: the context slot, confirmation counts and levels (they move
 * between two reads), block times, memos and log text; a signature list is compared up to the slot
 * the read was pinned at (entries past it may be new to one provider only).
 */
export function decisionKey(method: string, a: RpcAnswer, pinnedSlot: number): string {
  if ('error' in a) return `error:${a.error.code}`;
  const r = a.result as {
    slot?: unknown;
    transaction?: unknown;
    meta?: {
      err?: unknown;
      fee?: unknown;
      preBalances?: unknown;
      postBalances?: unknown;
      preTokenBalances?: unknown;
      postTokenBalances?: unknown;
      loadedAddresses?: unknown;
    } | null;
  } | null;
  switch (method) {
    case 'getSignatureStatuses':
      // Per signature: absent, or landed at a slot, succeeded or failed (how).
      return statusesOf(a)
        .map((st) => (st ? `${st.slot}:${st.err ? JSON.stringify(st.err) : 'ok'}` : '-'))
        .join(',');
    case 'getTransaction': {
      if (!r) return 'absent';
      const meta = r.meta ?? {};
      // Where it landed, whether it failed, and everything a deposit is parsed from.
      return JSON.stringify([
        r.slot,
        meta.err ?? null,
        meta.fee,
        meta.preBalances,
        meta.postBalances,
        tokenBalances(meta.preTokenBalances),
        tokenBalances(meta.postTokenBalances),
        meta.loadedAddresses ?? null,
        r.transaction,
      ]);
    }
    case 'getSignaturesForAddress':
      return ((r ?? []) as unknown as { signature: string; slot: number; err?: unknown }[])
        .filter((x) => pinnedSlot <= 0 || x.slot <= pinnedSlot)
        .map((x) => `${x.signature}@${x.slot}${x.err ? '!' : ''}`)
        .join(',');
    case 'simulateTransaction': {
      // Whether it would succeed, and how it would fail; compute units may differ by slot (the most is taken).
      const err = (r as { value?: { err?: unknown } } | null)?.value?.err;
      return err ? JSON.stringify(err) : 'ok';
    }
    case 'isBlockhashValid':
      // Whether a payout's blockhash can still land it (its expiry is otherwise the word of the provider that gave it).
      return JSON.stringify((r as { value?: unknown } | null)?.value ?? null);
    case 'getEpochInfo':
      // Heights move between two reads: the lowest answered is taken (mergeAnswers), never compared.
      return 'epoch';
    default:
      return JSON.stringify(r ?? null);
  }
}

/**
 * Whether an answer is from a provider that had not reached what another answer already holds (a
 * status or transaction at a slot past the one it answered at): behind, not in disagreement.
 */
function isBehind(method: string, x: { a: RpcAnswer; headSlot?: number }, all: { a: RpcAnswer; headSlot?: number }[]): boolean {
  if (method === 'getSignatureStatuses') {
    const at = contextOf(x.a);
    const mine = statusesOf(x.a);
    return all.some((y) => statusesOf(y.a).some((st, i) => st !== null && mine[i] === null && Number(st.slot) > at));
  }
  if (method === 'getTransaction' && 'result' in x.a && x.a.result === null) {
    const head = x.headSlot ?? -1;
    return all.some((y) => 'result' in y.a && y.a.result !== null && Number((y.a.result as { slot?: unknown }).slot) > head);
  }
  return false;
}

/**
 * The answer of an agreeing quorum: the most careful of them where they legitimately differ (the
 * lowest finalized height, each signature at its lowest confirmation level, the simulation that
 * used the most compute), else the first.
 * `saw` records the slot the quorum vouches for (a slot one provider claims alone moves nothing).
 */
function mergeAnswers(method: string, answers: RpcAnswer[], saw: (slot: number) => void): RpcAnswer {
  const first = answers[0]!;
  if ('error' in first) return first;
  if (method === 'getEpochInfo') {
    const infos = answers.map((a) => ('result' in a ? (a.result as { blockHeight?: number; absoluteSlot?: number }) : {}));
    const low = infos.reduce((m, x) => (Number(x.blockHeight ?? 0) < Number(m.blockHeight ?? 0) ? x : m));
    const slot = Math.min(...infos.map((x) => Number(x.absoluteSlot ?? 0)));
    if (slot > 0) saw(slot);
    return { result: low };
  }
  if (method === 'simulateTransaction') {
    const units = (a: RpcAnswer) => Number(('result' in a ? (a.result as { value?: { unitsConsumed?: unknown } }).value?.unitsConsumed : 0) ?? 0);
    return answers.reduce((m, a) => (units(a) > units(m) ? a : m));
  }
  if (method === 'getSignatureStatuses') {
    const all = answers.map(statusesOf);
    const value = all[0]!.map((_, i) => all.map((l) => l[i] ?? null).reduce((m, st) => (st !== null && (m === null || rankOf(st) < rankOf(m)) ? st : m), null));
    // As of the newest slot among them (the floor already holds it: the answer never looks older).
    const context = { ...(first.result as { context?: object }).context, slot: Math.max(...answers.map(contextOf)) };
    return { result: { ...(first.result as object), context, value } };
  }
  return first;
}
