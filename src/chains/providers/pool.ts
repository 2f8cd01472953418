import type { RpcProviderConfig } from '../../config/schema.ts';
import { isApiRead } from '../../lib/apiReads.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { failureOfAnswer, ProviderFailure, RpcProvider, type ProviderFailureKind, type RpcAnswer, type RpcCall } from './provider.ts';
import { RelayNodeError } from '../../lib/errors.ts';
import { ChainConfigMismatch } from '../configMismatch.ts';
import { collectQuorum, ProviderPoolError, QuorumDisagreementError } from './quorum.ts';

/** A JSON-RPC error answer (a revert, "nonce too low"...): the chain's answer, not a provider failure. */
export class RpcAnswerError extends RelayNodeError {
  override name = 'RpcAnswerError';
  constructor(
    readonly provider: string,
    readonly error: { code: number; message: string; data?: unknown },
  ) {
    super(error.message);
  }
}

export { ProviderPoolError, QuorumDisagreementError } from './quorum.ts';

export interface PoolOptions {
  chainId: number;
  providers: RpcProviderConfig[];
  /** Agreeing answers a decision read needs (default: 2 with two or more reading providers). */
  quorum?: number;
  timeoutMs?: number;
  /** How long a call waits for a usable provider (rate limits, lag) before it fails. */
  maxWaitMs?: number;
  /** Head probe interval: every provider's head is read this often. */
  probeMs?: number;
  /** How long every provider must report heads below the floor before it is lowered (default 2 probes, at least 2 s). */
  shorterAfterMs?: number;
  /** A provider this many blocks behind the agreed head is not used for reads (readiness names it). */
  maxLagBlocks?: number;
  /** A head a provider announced by itself (a websocket newHeads subscription): the chain moved, read it now. */
  onPushedHead?: (n: bigint) => void;
  metrics: Metrics;
  log: Logger;
}

const hex = (n: bigint) => `0x${n.toString(16)}`;
// Methods whose block parameter (at this index) is pinned to the agreed head when it says `latest`.
const TAGGED: Record<string, number> = { eth_call: 1, eth_getBalance: 1, eth_getTransactionCount: 1, eth_getCode: 1, eth_getStorageAt: 2 };
// Answers that may be "absent" only because the provider has not reached the block yet: the
// provider's head is read in the same batch and must be at the block the call needs.
const HEAD_CHECKED = new Set(['eth_getTransactionReceipt', 'eth_getTransactionByHash', 'eth_getLogs', 'eth_getBlockByNumber', 'eth_getBlockByHash']);
/**
 * Reads that decide money: answered by a quorum when the decision transport carries them. Blocks too: the indexer's
 * head (confirmations are counted from it) and its block hashes (reorgs), the transactions the app balance funding
 * scan credits, the one that used a nonce. Read from one provider, a hostile one credited an app balance with a
 * transfer it made up, and had the indexer rewind past its finality window (stopped for good) on hashes it made up.
 * Code: whether an OP-stack chain's L1 fee oracle is there (said absent once, the L1 data fee went unpriced for good).
 */
export const DECISION_METHODS = new Set([
  'eth_call',
  'eth_getTransactionCount',
  'eth_getTransactionReceipt',
  'eth_getLogs',
  'eth_getBalance',
  'eth_getBlockByNumber',
  'eth_getBlockByHash',
  'eth_getCode',
]);
const BLOCK_METHODS = new Set(['eth_getBlockByNumber', 'eth_getBlockByHash']);
const SEND_METHODS = new Set(['eth_sendRawTransaction']);
const NOT_SENT = Symbol('not sent');
// How far apart honest providers' gas estimates may be (basis points of the lowest): see ProviderPool.estimate.
const ESTIMATE_TOLERANCE_BPS = 1_000n;
/**
 * Fee estimates: each provider's own view of the market, so honest ones differ and no quorum agrees on them; one
 * provider's alone is whatever it wants the node to pay. Answered by the lower median of several providers' estimates.
 */
export const ESTIMATE_METHODS = new Set(['eth_maxPriorityFeePerGas', 'eth_gasPrice']);

interface Prepared {
  call: RpcCall;
  /** The provider must be at least at this block to answer. */
  need: bigint;
  headCheck: boolean;
  latest: 'number' | 'block' | undefined;
  send: boolean;
}

/**
 * The RPC providers of one chain. Routes each call to a healthy provider (latency, errors, head
 * lag, weight, request budget), fails over on transport failures and on a provider behind the call,
 * backs off a rate-limited provider (the call waits or goes elsewhere, it is never dropped), and
 * keeps reads from going back in time: `floor` is the newest block the node knows exists, reads at
 * `latest` are pinned to it, and an answer from a provider behind it is asked again elsewhere.
 * `quorum` answers decision reads only when enough providers agree.
 */
export class ProviderPool {
  readonly chainId: number;
  readonly providers: RpcProvider[];
  readonly quorumSize: number;
  /**
   * The newest block known to exist on this chain (agreed heads, or a block seen). It goes down
   * only when every provider has reported a lower head for `shorterAfterMs`.
   */
  floor = 0n;
  #shorterSince: number | undefined;
  readonly #shorterAfterMs: number;
  readonly #timeoutMs: number;
  readonly #maxWaitMs: number;
  readonly #probeMs: number;
  readonly #maxLag: number;
  readonly #metrics: Metrics;
  readonly #log: Logger;
  #probe: NodeJS.Timeout | undefined;
  #probing: Promise<void> | undefined;

  constructor(opts: PoolOptions) {
    this.chainId = opts.chainId;
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#maxWaitMs = opts.maxWaitMs ?? 30_000;
    this.#probeMs = opts.probeMs ?? 1_000;
    this.#shorterAfterMs = opts.shorterAfterMs ?? Math.max(2_000, 2 * this.#probeMs);
    this.#maxLag = opts.maxLagBlocks ?? 2;
    this.#metrics = opts.metrics;
    this.#log = opts.log;
    const chain = String(opts.chainId);
    this.providers = opts.providers.map(
      (spec, i) =>
        new RpcProvider(spec, i, this.#timeoutMs, {
          exchange: (ms, calls) => {
            const provider = spec.name ?? `p${i}`;
            this.#metrics.rpcProviderRequests.inc({ chain, provider }, calls);
            this.#metrics.rpcProviderLatency.observe({ chain, provider }, ms / 1000);
          },
          failure: (kind) => this.#metrics.rpcProviderErrors.inc({ chain, provider: spec.name ?? `p${i}`, kind }),
          // A websocket provider's newHeads: a claimed head, as from the probe.
          head: (n) => {
            this.#sawHead(this.providers[i]!, n, false);
            opts.onPushedHead?.(n);
          },
        }),
    );
    const readers = this.providers.filter((p) => p.role !== 'send').length;
    this.quorumSize = Math.min(opts.quorum ?? (readers >= 2 ? 2 : 1), readers);
  }

  /** Whether a reading provider announces new heads by itself (its websocket is subscribed to newHeads): polling for them is only a backstop. */
  followsHeads(): boolean {
    return this.providers.some((p) => p.role !== 'send' && p.followsHeads());
  }

  /** Starts the head probe (every provider's head, for lag scoring and readiness). */
  start(): void {
    if (this.#probe || this.providers.length < 2) return;
    const tick = () => {
      this.#probing = this.probeHeads().finally(() => {
        this.#probing = undefined;
        if (this.#probe) this.#probe = setTimeout(tick, this.#probeMs);
      });
    };
    this.#probe = setTimeout(tick, 0);
  }

  /** Stops the head probe and closes the providers' websocket connections. */
  async stop(): Promise<void> {
    clearTimeout(this.#probe);
    this.#probe = undefined;
    await this.#probing;
    // Websocket providers hold a connection open: closed so that the node exits.
    for (const p of this.providers) p.close();
  }

  /** Reads every provider's head once (failures are scored, not thrown); a provider subscribed to its new heads is not polled. */
  async probeHeads(): Promise<void> {
    await Promise.all(this.providers.filter((p) => !p.cooling() && !p.followsHeads()).map((p) => this.#readHead(p)));
  }

  /**
   * Asks every provider for its chain id and throws ChainConfigMismatch naming (by its name, never its URL) each that serves
   * another chain: its blocks would be indexed as this chain's deposits, and its answers would decide this chain's
   * payouts. A provider that does not answer now is not judged (it may be down at start).
   */
  async verifyChainId(): Promise<void> {
    const wrong: string[] = [];
    await Promise.all(
      this.providers.map(async (p) => {
        try {
          p.take(1);
          const [a] = await p.send([{ method: 'eth_chainId', params: [] }]);
          if (a && 'result' in a && typeof a.result === 'string' && BigInt(a.result) !== BigInt(this.chainId))
            wrong.push(`${p.name} serves chain ${BigInt(a.result)}`);
        } catch {
          // scored by the provider
        }
      }),
    );
    if (wrong.length) throw new ChainConfigMismatch(`chain ${this.chainId}: ${wrong.join('; ')}: check its rpcUrl (or providers)`);
  }

  /** Answers one call through the best provider, failing over as needed. Throws RpcAnswerError for a JSON-RPC error answer. */
  async request(call: RpcCall): Promise<unknown> {
    if (ESTIMATE_METHODS.has(call.method) && this.quorumSize > 1) return this.#lowerMedian(call);
    if (SEND_METHODS.has(call.method)) {
      const sent = await this.#sendToAll(call);
      if (sent !== NOT_SENT) return sent;
    }
    let prep = this.#prepare(call);
    let preparedAt = this.floor;
    const deadline = Date.now() + this.#maxWaitMs;
    const tried = new Set<RpcProvider>();
    let pause = 25;
    for (;;) {
      // The floor went down meanwhile (a shorter chain): the call is pinned again, to a block that exists; one naming a
      // block above the shorter chain's head fails now (see #gone).
      if (this.floor < preparedAt) {
        prep = this.#prepare(call);
        preparedAt = this.floor;
        if (prep.need > this.floor) throw this.#gone(call.method, prep.need);
      }
      const p = await this.#pick(prep, tried, deadline);
      if (!p) {
        // Everyone failed this call once: start over after a pause (a lagging provider catches up).
        if (Date.now() + pause > deadline) throw this.#exhausted(call.method);
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 1_000);
        tried.clear();
        continue;
      }
      tried.add(p);
      try {
        return this.#unwrap(p, call, await this.#once(p, prep));
      } catch (e) {
        if (!(e instanceof ProviderFailure)) throw e;
        // Behind a call whose answer carried no head: read the provider's head, so that a chain that got shorter is
        // seen (and the floor lowered, see #sawHead) even when no other call reads heads (one provider: no probe).
        if (e.kind === 'behind' && !prep.headCheck && !prep.latest) await this.#readHead(p);
      }
    }
  }

  // A signed transaction, given to every provider that broadcasts (the fallbacks only when no other one does): the same
  // bytes, so a provider that has it already says so, and one that drops it (answering "sent") does not keep it off the
  // chain. Given to one, a hostile provider favoured by weight swallowed every payout, and its replacements, for as long
  // as it was configured. A provider's own answer counts when any accepted it; else the first refusal is thrown (the
  // caller reconciles refusals: the chain's nonce and receipts are decision reads). NOT_SENT when none could be asked.
  async #sendToAll(call: RpcCall): Promise<unknown> {
    const senders = this.providers.filter((p) => p.role !== 'read' && !p.cooling());
    const primary = senders.filter((p) => p.role !== 'fallback');
    const to = primary.length ? primary : senders;
    if (to.length < 2) return NOT_SENT;
    const answers = await Promise.all(
      to.map(async (p) => {
        try {
          p.take(1);
          const [a] = await p.send([call]);
          if (!a || ('error' in a && failureOfAnswer(a.error))) return undefined;
          return { p, a };
        } catch {
          return undefined; // scored by the provider
        }
      }),
    );
    const got = answers.filter((x) => x !== undefined);
    const ok = got.find((x) => 'result' in x.a);
    if (ok) return (ok.a as { result: unknown }).result;
    if (got.length) return this.#unwrap(got[0]!.p, call, got[0]!.a);
    return NOT_SENT;
  }

  // A fee estimate (ESTIMATE_METHODS) asked of up to three reading providers (never fewer than the quorum): the lower
  // median of their answers. One provider's alone was the fee every transaction was signed at: a hostile one naming a
  // tip of 500 gwei had it paid to the block's builder on each fill, refund and sweep (no cap applies when the operator
  // sets none). Of two, the lower is taken: a lie high costs money on every transaction, a lie low only delays
  // inclusion (the replacement of a stuck transaction bumps its fees); of three, the middle one, whatever one says.
  async #lowerMedian(call: RpcCall): Promise<unknown> {
    const readers = this.providers.filter((p) => p.role !== 'send').length;
    const answers = await this.#several(call, Math.max(this.quorumSize, Math.min(3, readers)));
    const values: bigint[] = [];
    for (const { p, a } of answers) {
      if ('error' in a) throw new RpcAnswerError(p.name, a.error);
      const n = toBig(a.result);
      if (n === undefined) throw new ProviderPoolError(`chain ${this.chainId}: ${call.method} answered by ${p.name} is not a quantity`);
      values.push(n);
    }
    values.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return hex(values[Math.floor((values.length - 1) / 2)]!);
  }

  /**
   * A payout's gas estimate (eth_estimateGas), by a quorum of providers that agree within ESTIMATE_TOLERANCE_BPS: the
   * highest of their estimates (never one too low to run), or the revert they all answer. One provider's alone decided
   * the payout: a hostile one answering 10 million gas had every fill refused (QUOTED_GAS_LIMIT_EXCEEDED) and refunded,
   * one answering a revert had it refunded as EXECUTION_REVERTED, one answering too little had it sent to run out of gas
   * (the gas burned, the order refunded). Honest clients' estimates differ a little (their searches stop at different
   * precisions); beyond that, or a revert against an estimate, the providers disagree: QuorumDisagreementError, the
   * payout waits (it is not judged) and is prepared again later.
   */
  async estimate(call: RpcCall): Promise<unknown> {
    if (this.quorumSize <= 1) return this.request(call);
    const answers = await this.#several(call, this.quorumSize);
    const errors = answers.filter((x) => 'error' in x.a);
    if (errors.length === answers.length) return this.#unwrap(errors[0]!.p, call, errors[0]!.a);
    const values = answers.map((x) => ('error' in x.a ? undefined : toBig(x.a.result)));
    const known = values.filter((v): v is bigint => v !== undefined);
    const lo = known.reduce((m, v) => (v < m ? v : m), known[0] ?? 0n);
    const hi = known.reduce((m, v) => (v > m ? v : m), 0n);
    if (known.length < answers.length || hi * 10_000n > lo * (10_000n + ESTIMATE_TOLERANCE_BPS)) {
      const who = answers.map((x, i) => `${x.p.name}=${'error' in x.a ? `error:${x.a.error.code}` : String(values[i] ?? 'invalid')}`);
      this.#metrics.rpcQuorumDisagreements.inc({ chain: String(this.chainId), method: call.method });
      this.#log.warn({ chain: this.chainId, method: call.method, answers: who }, 'providers disagree on a decision read; not acting on it');
      throw new QuorumDisagreementError(
        `chain ${this.chainId}: providers disagree on ${call.method} (${answers.map((x) => x.p.name).join(', ')}); not acting on it`,
      );
    }
    return hex(hi);
  }

  // The answers of `want` distinct reading providers to one call (at least the quorum's worth, or it throws when the
  // wait is over): those that fail are asked again after a pause, as a quorum read does.
  async #several(call: RpcCall, want: number): Promise<{ p: RpcProvider; a: RpcAnswer }[]> {
    const prep = this.#prepare(call);
    const deadline = Date.now() + this.#maxWaitMs;
    const answers = new Map<RpcProvider, RpcAnswer>();
    const failed = new Set<RpcProvider>();
    let pause = 25;
    for (;;) {
      const picked: RpcProvider[] = [];
      while (answers.size + picked.length < want) {
        const p = await this.#pick(prep, new Set([...answers.keys(), ...failed, ...picked]), deadline, true);
        if (!p) break;
        picked.push(p);
      }
      await Promise.all(
        picked.map(async (p) => {
          try {
            answers.set(p, await this.#once(p, prep));
          } catch (e) {
            if (!(e instanceof ProviderFailure)) throw e;
            failed.add(p);
          }
        }),
      );
      if (answers.size >= want || (!picked.length && answers.size >= this.quorumSize)) break;
      if (!picked.length) {
        // Every provider asked: those that failed are asked again after a pause, until the deadline.
        if (Date.now() + pause > deadline) throw this.#exhausted(call.method, true);
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 1_000);
        failed.clear();
      }
    }
    return [...answers].map(([p, a]) => ({ p, a }));
  }

  // A provider's head, read on its own; a failure is scored by the provider, not thrown.
  async #readHead(p: RpcProvider): Promise<void> {
    try {
      p.take(1);
      const [h] = await p.send([{ method: 'eth_blockNumber', params: [] }]);
      if (h && 'result' in h && typeof h.result === 'string') this.#sawHead(p, BigInt(h.result), false);
    } catch {
      // scored by the provider
    }
  }

  /**
   * Answers a decision read: `quorumSize` providers must give the same answer (at the same pinned
   * block). Differing answers throw QuorumDisagreementError (counted and logged): the caller does
   * not act and asks again later.
   */
  async quorum(call: RpcCall): Promise<unknown> {
    if (this.quorumSize <= 1) return this.request(call);
    if (call.method === 'eth_getBlockByNumber' && !isBlockNumber(call.params?.[0])) {
      // The latest block is the one at the head the providers agree on (read now): a block one provider calls its
      // latest is its claim (the number confirmations are counted from), and honest providers a block apart would
      // answer `latest` differently.
      await this.probeHeads();
      if (this.floor > 0n) call = { method: call.method, params: [hex(this.floor), ...(call.params ?? []).slice(1)] };
    }
    const prep = this.#prepare(call);
    const preparedAt = this.floor;
    const deadline = Date.now() + this.#maxWaitMs;
    const answers = await collectQuorum<RpcProvider, { a: RpcAnswer; head: bigint }>({
      chainId: this.chainId,
      method: call.method,
      size: this.quorumSize,
      deadline,
      // The floor went down meanwhile below the block the call needs (a shorter chain): it fails now (see #gone). Not
      // pinned again, as request() does: answers already had were read at the old pin.
      pick: (exclude) =>
        this.floor < preparedAt && prep.need > this.floor ? Promise.reject(this.#gone(call.method, prep.need)) : this.#pick(prep, exclude, deadline, true),
      ask: async (p) => {
        try {
          return { a: await this.#once(p, prep), head: p.head };
        } catch (e) {
          if (e instanceof ProviderFailure) return undefined;
          throw e;
        }
      },
      key: (x) => answerKey(x.a, call.method),
      // A provider that has not yet seen what another one already holds (a receipt, a block) is
      // behind, not in disagreement: its answer is set aside and someone else is asked.
      setAside: (all) => {
        const seenAt = all.map((x) => blockOf(x.a.a)).reduce<bigint>((m, b) => (b !== undefined && b > m ? b : m), 0n);
        return all.filter((x) => {
          const behind = isAbsent(x.a.a) && seenAt > 0n && x.a.head < seenAt;
          if (behind) x.p.failed('behind');
          return !behind;
        });
      },
      exhausted: () => this.#exhausted(call.method, true),
      metrics: this.#metrics,
      log: this.#log,
    });
    return this.#unwrap(answers[0]!.p, call, answers[0]!.a.a);
  }

  #unwrap(p: RpcProvider, call: RpcCall, a: RpcAnswer): unknown {
    if ('error' in a) throw new RpcAnswerError(p.name, a.error);
    if (call.method === 'eth_blockNumber' && typeof a.result === 'string' && this.providers.length > 1) {
      // A bare number is a claim, not evidence: answer the agreed head (never below what this provider said it has... unless it lied ahead).
      const n = BigInt(a.result);
      return hex(n < this.floor ? n : this.floor);
    }
    return a.result;
  }

  #exhausted(method: string, quorum = false): ProviderPoolError {
    const why = this.providers.map((p) => `${p.name}: ${this.#state(p) ?? p.lastFailure ?? 'no answer'}`).join('; ');
    return new ProviderPoolError(
      `chain ${this.chainId}: ${quorum ? `no quorum of ${this.quorumSize} for` : 'no provider answered'} ${method} in ${this.#maxWaitMs} ms (${why})`,
    );
  }

  // A call that needs a block above the head of a chain that got shorter while it waited (the floor went down: the
  // providers' agreed head stayed below it for shorterAfterMs, see #sawHead): that block went with the branch the chain
  // left. Waiting for a block of that height to come back held the caller until the new branch grew past it, or for the
  // whole maxWaitMs: an indexer pass reading the old branch's blocks saw the shorter chain (and rewound, and reported the
  // deposits it took) only then (chaos seed 471: 15 s). Failing now, the caller reads the chain again from its new head.
  // A call that merely runs ahead of a lagging provider is not failed: the floor does not go down for one provider behind.
  #gone(method: string, need: bigint): ProviderPoolError {
    return new ProviderPoolError(`chain ${this.chainId}: ${method} needs block ${need}, above the head of the shorter chain (${this.floor})`);
  }

  #prepare(call: RpcCall): Prepared {
    const params = [...(call.params ?? [])];
    let need = 0n;
    const tagAt = TAGGED[call.method];
    if (tagAt !== undefined) {
      const tag = params[tagAt];
      if ((tag === undefined || tag === 'latest') && this.floor > 0n) {
        while (params.length < tagAt) params.push(undefined);
        params[tagAt] = hex(this.floor);
        need = this.floor;
      } else if (typeof tag === 'string' && tag.startsWith('0x')) need = BigInt(tag);
      else if (tag === 'pending') need = this.floor;
    }
    if (call.method === 'eth_getLogs') {
      const f = { ...((params[0] ?? {}) as Record<string, unknown>) };
      if (!f.blockHash) {
        if ((f.toBlock === undefined || f.toBlock === 'latest') && this.floor > 0n) f.toBlock = hex(this.floor);
        need = typeof f.toBlock === 'string' && f.toBlock.startsWith('0x') ? BigInt(f.toBlock) : this.floor;
      }
      params[0] = f;
    }
    if (call.method === 'eth_getBlockByNumber') {
      const tag = params[0];
      need = typeof tag === 'string' && tag.startsWith('0x') ? BigInt(tag) : tag === 'latest' ? this.floor : 0n;
    }
    if (call.method === 'eth_getTransactionReceipt' || call.method === 'eth_getTransactionByHash' || call.method === 'eth_getBlockByHash') need = this.floor;
    const latest = call.method === 'eth_blockNumber' ? 'number' : call.method === 'eth_getBlockByNumber' && params[0] === 'latest' ? 'block' : undefined;
    return {
      call: { method: call.method, params },
      need,
      headCheck: HEAD_CHECKED.has(call.method) && !latest && this.providers.length > 1,
      latest,
      send: SEND_METHODS.has(call.method),
    };
  }

  // One attempt at one provider: a ProviderFailure when it could not answer (or was behind).
  async #once(p: RpcProvider, prep: Prepared): Promise<RpcAnswer> {
    const calls = prep.headCheck ? [prep.call, { method: 'eth_blockNumber', params: [] }] : [prep.call];
    const [a, h] = await p.send(calls);
    if (h && 'result' in h && typeof h.result === 'string') {
      this.#sawHead(p, BigInt(h.result), false);
      if (BigInt(h.result) < prep.need) throw this.#fail(p, 'behind', `at ${BigInt(h.result)}, the call needs ${prep.need}`);
    }
    if ('error' in a!) {
      const kind = failureOfAnswer(a.error);
      if (kind) {
        if (kind === 'rate_limited') throw new ProviderFailure(p.name, kind, `${a.error.code}`); // backoff already applied by the provider
        throw this.#fail(p, kind, `${a.error.code}`);
      }
      return a;
    }
    if (prep.latest) {
      const n = prep.latest === 'number' ? toBig(a!.result) : toBig((a!.result as { number?: unknown } | null)?.number);
      if (n === undefined) throw this.#fail(p, 'internal', 'no head in the answer');
      this.#sawHead(p, n, prep.latest === 'block');
      // Behind what the node has already seen: someone else is asked.
      if (n < this.floor) throw this.#fail(p, 'behind', `head ${n} behind ${this.floor}`);
    } else if (prep.call.method === 'eth_getBlockByNumber' && a!.result === null && prep.need > 0n) {
      // No block at a height it has (its head, read with it, at or above it: checked above) is no answer either: asked
      // elsewhere. Returned, it failed the caller (an indexer pass, a rewind's every step) as often as that provider
      // was picked, the provider picked again. ('behind', not scored as an error: an honest provider whose head grew
      // between the batch's two reads answers so too.)
      throw this.#fail(p, 'behind', `no block ${prep.need}`);
    }
    return a!;
  }

  #fail(p: RpcProvider, kind: Exclude<ProviderFailureKind, 'rate_limited'>, detail: string): ProviderFailure {
    p.failed(kind);
    return new ProviderFailure(p.name, kind, detail);
  }

  // A provider's head. A block it returned is evidence the block exists (the floor moves to it);
  // a bare number is its claim: the floor moves to the newest head `quorumSize` providers claim.
  #sawHead(p: RpcProvider, n: bigint, evidence: boolean): void {
    p.head = n;
    let floor = this.floor;
    if (evidence && n > floor) floor = n;
    const heads = this.providers
      .map((x) => x.head)
      .filter((x) => x > 0n)
      .sort((a, b) => (a > b ? -1 : a < b ? 1 : 0));
    const k = Math.max(1, this.quorumSize);
    const agreed = heads.length >= k ? heads[k - 1]! : undefined;
    if (agreed !== undefined && agreed > floor) floor = agreed;
    // The providers' agreed head below the floor for a while: the chain itself got shorter (a reorg
    // to a shorter branch, a devnet's revert), not one provider lagging (then a quorum is still at the
    // floor). Agreed, as for raising it: one provider claiming a head far ahead must not hold the floor
    // up. Keeping the floor would leave every read waiting for a block that may never come back; the
    // indexers' own reorg checks handle what the shorter chain dropped.
    const highest = agreed;
    if (highest !== undefined && highest < floor) {
      const now = Date.now();
      this.#shorterSince ??= now;
      if (now - this.#shorterSince >= this.#shorterAfterMs) {
        this.#log.warn(
          { chain: this.chainId, floor: floor.toString(), head: highest.toString() },
          'the chain is shorter than the newest block seen: lowering the floor',
        );
        floor = highest;
        this.#shorterSince = undefined;
      }
    } else {
      this.#shorterSince = undefined;
    }
    this.floor = floor;
    const chain = String(this.chainId);
    for (const x of this.providers) if (x.head > 0n) this.#metrics.rpcProviderHeadLag.set({ chain, provider: x.name }, Number(this.floor - x.head));
  }

  // Why a provider is not usable for reads now (undefined: it is).
  #state(p: RpcProvider, now = Date.now()): string | undefined {
    if (p.cooling(now)) return 'rate limited';
    if (p.errorRate > 0.5) return `failing (${p.lastFailure ?? 'errors'})`;
    if (p.head > 0n && this.floor - p.head > BigInt(this.#maxLag)) return `behind by ${this.floor - p.head} blocks`;
    return undefined;
  }

  // The best provider for this call that has not tried it yet, waiting for a budget or a rate
  // limit to clear when every candidate is held; undefined when all have tried.
  async #pick(prep: Prepared, tried: ReadonlySet<RpcProvider>, deadline: number, quorum = false): Promise<RpcProvider | undefined> {
    for (;;) {
      const now = Date.now();
      const fits = this.providers.filter((p) => !tried.has(p) && (prep.send ? p.role !== 'read' : p.role !== 'send'));
      if (!fits.length) return undefined;
      // Fallbacks only when no other provider is there; lagging ones last.
      const primary = fits.filter((p) => p.role !== 'fallback');
      const pool = primary.length && !(quorum && primary.length < this.quorumSize) ? primary : fits;
      // A read for the public API leaves half of each budget to the node's own reads (lib/apiReads.ts).
      const yielding = !prep.send && isApiRead();
      // The calls #once sends: the budget they take is taken here, as the provider is picked.
      const calls = prep.headCheck ? 2 : 1;
      const ready = pool.filter((p) => p.waitFor(calls, now, yielding) === 0);
      if (ready.length) {
        const inSync = ready.filter((p) => !(p.head > 0n && p.head < prep.need) && this.#state(p, now) === undefined);
        const picked = weightedPick(inSync.length ? inSync : ready);
        picked.take(calls, now);
        return picked;
      }
      const wait = Math.min(...pool.map((p) => p.waitFor(calls, now, yielding)));
      if (now + wait > deadline) return undefined;
      await new Promise((r) => setTimeout(r, Math.max(1, wait)));
    }
  }

  /** Readiness: whether enough providers are usable, and which ones hold the chain back and why. */
  health(): { ready: boolean; providers: { name: string; state: string; headLag: number }[]; heldBy?: string } {
    const now = Date.now();
    const providers = this.providers.map((p) => ({ name: p.name, state: this.#state(p, now) ?? 'ok', headLag: p.head > 0n ? Number(this.floor - p.head) : 0 }));
    const usable = this.providers.filter((p) => p.role !== 'send' && this.#state(p, now) === undefined).length;
    const ready = usable >= Math.max(1, this.quorumSize);
    const held = providers.filter((p) => p.state !== 'ok');
    return { ready, providers, ...(ready || !held.length ? {} : { heldBy: held.map((p) => `${p.name} (${p.state})`).join(', ') }) };
  }
}

// Lower is better: latency inflated by errors, divided by weight.
function weightedPick(ps: RpcProvider[]): RpcProvider {
  const score = (p: RpcProvider) => p.weight / (Math.max(1, p.latencyMs) * (1 + 10 * p.errorRate));
  const best = Math.max(...ps.map(score));
  const near = ps.filter((p) => score(p) * 4 >= best);
  const total = near.reduce((a, p) => a + p.weight, 0);
  let r = Math.random() * total;
  for (const p of near) {
    r -= p.weight;
    if (r < 0) return p;
  }
  return near[near.length - 1]!;
}

function toBig(v: unknown): bigint | undefined {
  return typeof v === 'string' && v.startsWith('0x') ? BigInt(v) : undefined;
}

function answerKey(a: RpcAnswer, method: string): string {
  if ('error' in a) return `error:${a.error.code}`;
  if (BLOCK_METHODS.has(method) && a.result) return JSON.stringify(blockKey(a.result as Record<string, unknown>));
  return JSON.stringify(a.result ?? null);
}

const isBlockNumber = (tag: unknown) => typeof tag === 'string' && tag.startsWith('0x');

// What the node's decisions read of a block, compared between providers: clients of different makes format the rest
// differently (fields one has and another has not), which would fail every block read between them.
function blockKey(b: Record<string, unknown>): unknown {
  const txs = Array.isArray(b.transactions) ? b.transactions : [];
  return {
    number: b.number,
    hash: b.hash,
    parentHash: b.parentHash,
    timestamp: b.timestamp,
    baseFeePerGas: b.baseFeePerGas,
    gasLimit: b.gasLimit,
    transactions: txs.map((x) => {
      if (typeof x !== 'object' || x === null) return x;
      const tx = x as Record<string, unknown>;
      return { hash: tx.hash, from: tx.from, to: tx.to ?? null, value: tx.value, input: tx.input, nonce: tx.nonce };
    }),
  };
}

function isAbsent(a: RpcAnswer): boolean {
  return 'result' in a && (a.result === null || (Array.isArray(a.result) && a.result.length === 0));
}

// The block an answer proves exists (a receipt's or a block's number, a log's block).
function blockOf(a: RpcAnswer): bigint | undefined {
  if (!('result' in a) || !a.result) return undefined;
  const r = a.result as { blockNumber?: unknown; number?: unknown } | { blockNumber?: unknown }[];
  if (Array.isArray(r))
    return r.reduce<bigint | undefined>((m, l) => {
      const b = toBig(l.blockNumber);
      return b !== undefined && (m === undefined || b > m) ? b : m;
    }, undefined);
  return toBig(r.blockNumber) ?? toBig(r.number);
}
