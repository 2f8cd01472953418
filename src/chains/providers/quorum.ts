// The quorum of the reads that decide money, shared by the EVM pool (pool.ts) and the SVM pool
// (../svm/rpcPool.ts): `size` distinct providers must give the same answer, compared by a key the
// caller derives from what the decision uses. Each pool brings its own way of choosing a provider
// and of asking it (pinning, lag checks); what is here is the part that must not differ between
// chain kinds: who is asked, when to wait, what counts as a disagreement and what the node does
// about it (count it, log it by provider name, throw: the caller does not act).
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { RelayNodeError } from '../../lib/errors.ts';

/** No provider could answer in time; the message names the chain and each provider's last failure. */
export class ProviderPoolError extends RelayNodeError {
  override name = 'ProviderPoolError';
}

/** Providers answered a decision read differently: the node does not act on it. */
export class QuorumDisagreementError extends ProviderPoolError {
  override name = 'QuorumDisagreementError';
}

/** One provider's answer to a decision read, with the key it is compared by. */
export interface QuorumAnswer<P, A> {
  p: P;
  a: A;
  key: string;
}

/** How one pool runs a quorum read (see collectQuorum). */
export interface QuorumRead<P extends { name: string }, A> {
  chainId: number;
  method: string;
  /** Agreeing answers needed. */
  size: number;
  /** When to give up waiting for enough answers (then `exhausted()` is thrown). */
  deadline: number;
  /** The best provider not in `exclude`, or undefined when none is left (it may wait for a budget). */
  pick(exclude: ReadonlySet<P>): Promise<P | undefined>;
  /** One provider's answer, or undefined when it could not answer now (asked again after a pause). */
  ask(p: P): Promise<A | undefined>;
  /** What the decision uses of an answer: equal keys agree. */
  key(a: A): string;
  /**
   * Answers to set aside before comparing (a provider behind another one's evidence is behind, not
   * in disagreement): returns the answers kept; those dropped are asked of someone else.
   */
  setAside?(answers: QuorumAnswer<P, A>[]): QuorumAnswer<P, A>[];
  exhausted(): Error;
  metrics?: Metrics;
  log?: Logger;
}

/**
 * Collects `size` agreeing answers from distinct providers. Differing answers are counted
 * (`relay_rpc_quorum_disagreements_total{chain,method}`), logged at warn naming each provider by its
 * configured name (never its URL), and thrown as QuorumDisagreementError: the caller does not act
 * and asks again later. Providers that could not answer are asked again after a growing pause,
 * until the deadline.
 */
export async function collectQuorum<P extends { name: string }, A>(q: QuorumRead<P, A>): Promise<QuorumAnswer<P, A>[]> {
  const tried = new Set<P>();
  let answers: QuorumAnswer<P, A>[] = [];
  let pause = 25;
  while (answers.length < q.size) {
    const wanted = q.size - answers.length;
    const picked: P[] = [];
    for (let i = 0; i < wanted; i++) {
      const p = await q.pick(new Set([...tried, ...picked]));
      if (p) picked.push(p);
    }
    if (!picked.length) {
      if (Date.now() + pause > q.deadline) throw q.exhausted();
      await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(pause * 2, 1_000);
      // Ask again those that failed; keep the answers already had.
      for (const p of [...tried]) if (!answers.some((x) => x.p === p)) tried.delete(p);
      continue;
    }
    for (const p of picked) tried.add(p);
    const got = await Promise.all(
      picked.map(async (p) => {
        const a = await q.ask(p);
        return a === undefined ? undefined : { p, a, key: q.key(a) };
      }),
    );
    for (const g of got) if (g) answers.push(g);
    if (q.setAside) answers = q.setAside(answers);
    const keys = new Set(answers.map((x) => x.key));
    if (keys.size > 1) {
      q.metrics?.rpcQuorumDisagreements.inc({ chain: String(q.chainId), method: q.method });
      const who = answers.map((x) => `${x.p.name}=${x.key.length > 80 ? `${x.key.slice(0, 80)}...` : x.key}`);
      q.log?.warn({ chain: q.chainId, method: q.method, answers: who }, 'providers disagree on a decision read; not acting on it');
      throw new QuorumDisagreementError(`chain ${q.chainId}: providers disagree on ${q.method} (${answers.map((x) => x.p.name).join(', ')}); not acting on it`);
    }
  }
  return answers;
}
