// The chaos harness with two nodes on one PostgreSQL ledger (`--ledger postgres --nodes 2`): the lease as
// the ledger holds it, the monkey's events (SIGKILL of the leader, at the fill fault points too; SIGKILL of
// the standby; the leader cut off from PostgreSQL by its TcpProxy for longer than the lease), the takeover
// each one caused, and the end condition on epochs (epochInvariants).
import pg from 'pg';
import type { OpenedLedger } from '../../src/ledger/index.ts';
import type { TcpProxy } from '../helpers/tcpProxy.ts';
import type { Rng } from './prng.ts';

export type HaEventKind = 'kill-leader' | 'kill-standby' | 'cut-leader';
export type FaultPoint = 'crash-after-fill-recorded' | 'crash-after-fill-broadcast';

/** One monkey event and what followed it. */
export interface HaEvent {
  kind: HaEventKind;
  // The leader's fill fault point, for a kill of the leader: the standby was restarted armed with it first,
  // so that it dies at its first fill after taking over.
  faultPoint?: FaultPoint;
  atMs: number;
  leader: string;
  epochBefore: number;
  // The node that held the lease next, its epoch, and how long after the event it took it (null: nobody did).
  newLeader: string | null;
  epochAfter: number | null;
  takeoverMs: number | null;
  // Cut-off: how long PostgreSQL was held from the leader; whether it then exited 75 (lease lost).
  cutMs?: number;
  exitedLeaseLost?: boolean;
  // Fault point: whether the armed node died there.
  diedAtFaultPoint?: boolean;
}

/** The one row of `leader_lease`, read directly (not through a node's proxy). */
export class LeaseReader {
  readonly #client: pg.Client;
  private constructor(url: string) {
    this.#client = new pg.Client({ connectionString: url });
  }
  static async open(url: string): Promise<LeaseReader> {
    const r = new LeaseReader(url);
    await r.#client.connect();
    return r;
  }
  async current(): Promise<{ holder: string | null; epoch: number; expiresAt: number }> {
    const { rows } = await this.#client.query('SELECT holder, epoch, expires_at FROM leader_lease WHERE id = 1');
    return { holder: rows[0].holder, epoch: Number(rows[0].epoch), expiresAt: Number(rows[0].expires_at) };
  }
  async close(): Promise<void> {
    await this.#client.end().catch(() => {});
  }
}

/** The percentile `p` (0..1) of `xs`, nearest rank. */
export function percentile(xs: number[], p: number): number | null {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
}

/**
 * When each epoch began, from the nodes' logs: `took over the leader lease (epoch a → b)`, logged (with the
 * node's wall clock, `time`) right after the takeover committed. Every write of the old epoch committed before it.
 */
export function epochStarts(logs: string[]): Map<number, number> {
  const starts = new Map<number, number>();
  for (const line of logs.join('').split('\n')) {
    if (!line.includes('took over the leader lease')) continue;
    try {
      const j = JSON.parse(line) as { epoch?: number; time?: number };
      if (typeof j.epoch === 'number' && typeof j.time === 'number') starts.set(j.epoch, j.time);
    } catch {
      // a line cut by a SIGKILL
    }
  }
  return starts;
}

/**
 * The epoch conditions on the ledger after a run with several nodes:
 *  - every payout row carries an epoch, one that a node took (it is in the takeover logs);
 *  - it was decided before the next epoch began (a leader that lost the lease recorded nothing more);
 *  - on the EVM chains, once a leader recorded a transaction of a payout at a nonce, every transaction of that
 *    payout recorded under a later epoch is at a nonce recorded under an earlier one: a later leader only
 *    rebroadcasts or replaces what was signed (the reconciliation by nonce), never signs the payout anew at
 *    another nonce. A payout decided but not yet signed when its leader died has no transaction of its epoch
 *    (and, a transaction being recorded before it is broadcast, none on the wire): a later leader signs it, once.
 * Transactions carry no epoch of their own: the epoch that recorded one is read from its `created_at` against
 * the epochs' starts (one host, one clock; a start is logged after the takeover committed, so a new leader's
 * first writes may count as the old epoch's, never the other way round). SVM transactions are signed anew after
 * their blockhash expired (the reconciliation by blockhash): the chain-read checks count their payments.
 */
export function epochInvariants(
  ledger: OpenedLedger,
  starts: Map<number, number>,
  evmIds: Set<number>,
  fail: (m: string) => void,
): { payouts: number; laterTxs: number } {
  const payouts = ledger.db.prepare('SELECT id, chain_id, epoch, decided_at FROM payouts').all() as {
    id: string;
    chain_id: number;
    epoch: number | null;
    decided_at: number;
  }[];
  const txs = ledger.db.prepare('SELECT hash, payout_id, chain_id, nonce, created_at FROM transactions').all() as {
    hash: string;
    payout_id: string;
    chain_id: number;
    nonce: number;
    created_at: number;
  }[];
  const ordered = [...starts.entries()].sort((a, b) => a[1] - b[1]);
  const epochAt = (t: number) => ordered.reduce((e, [epoch, start]) => (start <= t ? epoch : e), 0);
  const txsOf = new Map<string, typeof txs>();
  for (const t of txs) txsOf.set(t.payout_id, [...(txsOf.get(t.payout_id) ?? []), t]);
  let laterTxs = 0;
  for (const p of payouts) {
    if (p.epoch === null || p.epoch === undefined) {
      fail(`payout ${p.id} carries no epoch`);
      continue;
    }
    const epoch = Number(p.epoch);
    if (!starts.has(epoch)) fail(`payout ${p.id} carries epoch ${epoch}, which no node took`);
    const next = starts.get(epoch + 1);
    if (next !== undefined && Number(p.decided_at) >= next)
      fail(`payout ${p.id} of epoch ${epoch} was decided at ${p.decided_at}, after epoch ${epoch + 1} began (${next})`);
    if (!evmIds.has(Number(p.chain_id))) continue;
    const mine = [...(txsOf.get(p.id) ?? [])].sort((a, b) => Number(a.created_at) - Number(b.created_at));
    const byEpoch: { epoch: number; nonce: number }[] = [];
    for (const t of mine) {
      const e = epochAt(Number(t.created_at));
      if (e > epoch) laterTxs++;
      const earlier = new Set(byEpoch.filter((x) => x.epoch < e).map((x) => x.nonce));
      if (earlier.size && !earlier.has(Number(t.nonce)))
        fail(
          `payout ${p.id} (epoch ${epoch}): transaction ${t.hash} was recorded under epoch ${e} at nonce ${t.nonce}, not at a nonce an earlier leader signed it at (${[...earlier].join(', ')})`,
        );
      byEpoch.push({ epoch: e, nonce: Number(t.nonce) });
    }
  }
  return { payouts: payouts.length, laterTxs };
}

/** What the HA monkey drives: the nodes (by index), their proxies to PostgreSQL, and a supervisor lock. */
export interface HaNode {
  nodeId: string;
  alive(): boolean;
  kill(signal?: NodeJS.Signals): Promise<void>;
  start(fault?: FaultPoint): Promise<void>;
  exited: Promise<NodeJS.Signals | number | null>;
  role(): Promise<string | undefined>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits (bounded) until the lease is held, unexpired, by a live node answering `leader`; that node's index. */
export async function currentLeader(nodes: HaNode[], lease: LeaseReader, ms: number): Promise<{ index: number; epoch: number }> {
  const end = Date.now() + ms;
  for (;;) {
    const l = await lease.current().catch(() => undefined);
    const i = l ? nodes.findIndex((n) => n.nodeId === l.holder) : -1;
    if (l && i >= 0 && l.expiresAt > Date.now() && nodes[i]!.alive() && (await nodes[i]!.role()) === 'leader') return { index: i, epoch: l.epoch };
    if (Date.now() > end) throw new Error(`no leader within ${ms} ms`);
    await sleep(50);
  }
}

/** Polls the lease until its epoch is past `epoch`: who took it, and when (null after `ms`). */
export async function waitTakeover(lease: LeaseReader, epoch: number, ms: number): Promise<{ holder: string | null; epoch: number; at: number } | null> {
  const end = Date.now() + ms;
  for (;;) {
    const l = await lease.current().catch(() => undefined);
    if (l && l.epoch > epoch) return { holder: l.holder, epoch: l.epoch, at: Date.now() };
    if (Date.now() > end) return null;
    await sleep(20);
  }
}

/**
 * One monkey event on two nodes. The caller's supervisor restarts every node that is dead and not in `busy`.
 */
export async function haEvent(
  kind: HaEventKind,
  o: {
    nodes: HaNode[];
    proxies: TcpProxy[];
    lease: LeaseReader;
    rng: Rng;
    leaseMs: number;
    busy: Set<number>;
    t0: number;
    // True when every node is up and none is being (re)started by the supervisor.
    idle: () => boolean;
  },
): Promise<HaEvent> {
  for (const end = Date.now() + 240_000; !o.idle() && Date.now() < end; ) await sleep(50);
  const { index: li, epoch } = await currentLeader(o.nodes, o.lease, 120_000);
  const leader = o.nodes[li]!;
  const si = 1 - li;
  const standby = o.nodes[si]!;
  const ev: HaEvent = { kind, atMs: 0, leader: leader.nodeId, epochBefore: epoch, newLeader: null, epochAfter: null, takeoverMs: null };
  const took = (start: number, t: Awaited<ReturnType<typeof waitTakeover>>) => {
    if (!t) return;
    ev.newLeader = t.holder;
    ev.epochAfter = t.epoch;
    ev.takeoverMs = t.at - start;
  };
  if (kind === 'kill-standby') {
    ev.atMs = Date.now() - o.t0;
    await standby.kill('SIGKILL');
    return ev;
  }
  if (kind === 'kill-leader') {
    // A third at the exact fault points of the fill pipeline: the standby, armed with one, takes over and
    // dies at its first fill (between recording it and broadcasting it, or right after); the other node,
    // restarted, takes over from it and reconciles.
    // (Also after the load: fills of the orders still settling, or none, and then it is killed after 20 s.)
    const point = o.rng.chance(1 / 3) ? o.rng.pick(['crash-after-fill-recorded', 'crash-after-fill-broadcast'] as const) : undefined;
    if (point) {
      o.busy.add(si);
      try {
        await standby.kill('SIGKILL');
        await standby.start(point);
      } catch {
        o.busy.delete(si);
      }
      if (standby.alive()) ev.faultPoint = point;
    }
    await sleep(o.rng.int(0, 300));
    o.busy.add(li);
    const start = Date.now();
    ev.atMs = start - o.t0;
    await leader.kill('SIGKILL');
    // The killed leader is held down until the takeover, so that the standby takes it.
    took(start, await waitTakeover(o.lease, epoch, 60_000));
    o.busy.delete(li);
    if (ev.faultPoint) {
      const died = await Promise.race([standby.exited.then(() => true), sleep(20_000).then(() => false)]);
      ev.diedAtFaultPoint = died;
      if (!died) await standby.kill('SIGKILL');
      o.busy.delete(si);
    }
    return ev;
  }
  // cut-leader: PostgreSQL is held from the leader (a partition: nothing closed) for longer than its lease.
  const cutMs = o.leaseMs + o.rng.int(500, 2 * o.leaseMs);
  ev.cutMs = cutMs;
  o.busy.add(li);
  const start = Date.now();
  ev.atMs = start - o.t0;
  o.proxies[li]!.cut();
  try {
    took(start, await waitTakeover(o.lease, epoch, Math.max(cutMs, 60_000)));
    const left = start + cutMs - Date.now();
    if (left > 0) await sleep(left);
  } finally {
    o.proxies[li]!.heal();
  }
  // It lost the lease: it must stop acting and exit 75 (bounded: else it is killed, and that is recorded).
  const code = await Promise.race([leader.exited, sleep(30_000).then(() => 'alive' as const)]);
  ev.exitedLeaseLost = code === 75;
  if (code === 'alive') await leader.kill('SIGKILL');
  o.busy.delete(li);
  return ev;
}
