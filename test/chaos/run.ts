// The chaos harness: the node as its own process (`relay-node start --config`), reaching each chain
// through a fault-injecting proxy (EVM: proxy.ts; the SVM chain and the exchange: kindProxies.ts),
// under a seeded load of bridges between every chain kind, SIGKILLed at seeded moments and restarted
// on the same ledger; then reorgs; then the end conditions, read from the chains (invariants.ts,
// otherInvariants.ts) and relay-node audit over every chain.
//
//   npm run chaos -- --orders 200 --crashes 10 --faults 0.05 --seed 7
//
// Prints its figures and writes them to test/chaos/results/<timestamp>.json. `runChaos` is also what
// the short form inside `npm test` (chaos.test.ts) calls.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPublicClient, createWalletClient, http, zeroAddress, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import { startDevnet } from '../../src/devnet/devnet.ts';
import { checkInvariants, takeBaseline, waitForOutcomes, type InvariantReport } from './invariants.ts';
import { depositRequestId, nodeCall, runLoad, type LoadResult } from './load.ts';
import { Rng } from './prng.ts';
import { withPostgres } from '../../src/ledger/pgUrl.ts';
import { startPostgres, type PostgresHandle } from '../../src/devnet/postgres.ts';
import { Ledger } from '../../src/ledger/index.ts';
import { TcpProxy } from '../helpers/tcpProxy.ts';
import { keyEnv } from '../helpers/haNodes.ts';
import { LeaseReader, epochInvariants, epochStarts, haEvent, percentile, type FaultPoint, type HaEvent, type HaEventKind } from './ha.ts';
import { ChaosReplica, type ReplicaReport } from './replica.ts';
import { NodeProcess } from './nodeProcess.ts';
import { FAULT_KINDS, RpcProxy, startProxies, type FaultKind } from './proxy.ts';
import { EXCHANGE_FAULT_KINDS, ExchangeProxy, SVM_FAULT_KINDS, SvmProxy, type ExchangeFaultKind, type SvmFaultKind } from './kindProxies.ts';
import { freePort } from '../../src/devnet/freePort.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface ChaosOptions {
  orders: number;
  crashes: number;
  // Per-request probability of an RPC fault (split over the kinds below).
  faults: number;
  seed: number;
  // Orders started per second.
  rate?: number;
  // Test accounts placing orders (one order at a time each).
  accounts?: number;
  confirmations?: number;
  // Reorgs removing a deposit before its confirmations, and (needs the node's DEPOSIT_REORGED) after
  // the node acted on it.
  reorgsBefore?: number;
  reorgsAfter?: number;
  // At most this many timeouts per chain (each costs the node's RPC client its 10 s timeout).
  maxTimeouts?: number;
  // Fault kinds left out (e.g. --no-faults split).
  excludeFaults?: FaultKind[];
  // RPC providers per EVM chain (default 1). From 2: the fault-injecting proxy also rate-limits
  // (HTTP 429 past 60 calls/s), a second provider lags 3 blocks for good, a third lies about
  // `latest` (5 blocks ahead), further ones are honest; decision reads need a quorum of 2.
  providers?: number;
  // The chain kinds besides EVM under the harness (default both): the SVM chain and the exchange
  // (1337), each behind its own fault proxy (kindProxies.ts), with orders to and from them.
  kinds?: ('svm' | 'exchange')[];
  // Their fault rates, by default drawn from `faults` (SVM_FAULT_SHARE, EXCHANGE_FAULT_SHARE).
  svmFaults?: Partial<Record<SvmFaultKind, number>>;
  exchangeFaults?: Partial<Record<ExchangeFaultKind, number>>;
  // At most this many of an SVM fault kind (e.g. expireTx: each costs a payout a blockhash's lifetime).
  svmFaultLimits?: Partial<Record<SvmFaultKind, number>>;
  exchangeFaultLimits?: Partial<Record<ExchangeFaultKind, number>>;
  // Bound on waiting for every deposit to end, after the load.
  settleMs?: number;
  logLevel?: string;
  resultsDir?: string;
  keepDataDir?: boolean;
  // The ledger: the SQLite file in the data dir (default), or a PostgreSQL this harness starts (durable).
  ledger?: 'sqlite' | 'postgres';
  // Node processes on the ledger (default 1). From 2 (PostgreSQL only): active/standby (config ha), each
  // node on its own API port and behind its own TcpProxy to PostgreSQL; the monkey kills the leader (at the
  // fill fault points too), kills the standby, or cuts the leader off from PostgreSQL past its lease.
  nodes?: number;
  leaseMs?: number;
  renewMs?: number;
  // With several nodes: the events in this order (else drawn from the seed).
  haEvents?: HaEventKind[];
  say?: (line: string) => void;
}

// How a fault rate is split over the kinds (stale and lag apply to head and range reads only).
export const FAULT_WEIGHTS: Record<FaultKind, number> = {
  http500: 0.15,
  http502: 0.1,
  rpcError: 0.2,
  timeout: 0.03,
  drop: 0.15,
  lostResponse: 0.1,
  stale: 0.15,
  lag: 0.08,
  split: 0.04,
};

// SVM: per request (http500, rpcError, a lag episode starting) and per send (dropTx, expireTx), as
// multiples of the fault rate; the exchange: per POST /exchange (appliedLost, notApplied) or /info.
export const SVM_FAULT_SHARE: Record<SvmFaultKind, number> = { http500: 0.2, rpcError: 0.2, lag: 0.2, dropTx: 4, expireTx: 2 };
export const EXCHANGE_FAULT_SHARE: Record<ExchangeFaultKind, number> = { appliedLost: 3, notApplied: 3, infoError: 0.5 };
const scaled = <K extends string>(share: Record<K, number>, f: number, cap = 0.5) =>
  Object.fromEntries(Object.entries(share).map(([k, v]) => [k, Math.min(cap, (v as number) * f)])) as Record<K, number>;

export interface ChaosResult {
  ok: boolean;
  options: Omit<ChaosOptions, 'say'>;
  durationMs: number;
  orders: number;
  deposits: number;
  failedOrders: LoadResult['failedOrders'];
  crashes: { sigkill: number; faultPoint: number; unexpectedExits: number; restarts: number; startFailures: string[] };
  faults: Record<FaultKind, number> & { total: number; rpcRequests: number };
  svmFaults?: Record<SvmFaultKind, number> & { requests: number; swallowedSends: number; laggedAnswers: number };
  exchangeFaults?: Record<ExchangeFaultKind, number> & { requests: number };
  reorgs: {
    before: { txHash: Hex; seenUnconfirmed: boolean; status: string }[];
    after: { txHash: Hex; mode: 'paid' | 'queued' | 'reincluded'; status: string; failReason: string | null; secondPayout: string | null }[];
    extraNotEnded: Hex[];
  };
  invariants: InvariantReport;
  secretsInLog: string[];
  // With several nodes: each monkey event, the takeovers (p50/max ms), the epoch conditions.
  ha?: {
    events: HaEvent[];
    takeovers: number;
    takeoverP50Ms: number | null;
    takeoverMaxMs: number | null;
    leaseLostExits: number;
    // Takeovers no monkey event caused (a leader that missed its own renewals: a stalled event loop); the
    // takeover after a node armed at a fill fault point died there, or was killed when no fill came, counts as caused.
    unprovokedTakeovers: number;
    epochs: number;
    payoutsChecked: number;
    laterEpochTxs: number;
  };
  // PostgreSQL: `relay-node audit --config` run as its own process over the same ledger.
  cliAudit?: { code: number | null; output: string };
  // PostgreSQL with several nodes: an API replica's kept Status records against the ledger's after the load (replica.ts).
  replica?: ReplicaReport;
  loadMs: number;
  settleMs: number;
  machine: { cpus: number; model: string; memGb: number; node: string };
  dataDir: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(fn: () => Promise<T | undefined>, what: string, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}

// Mines a block on each chain every `ms` (deposits need blocks on top to reach their confirmations);
// a chain can be paused while a reorg is staged on it.
class Ticker {
  #timer: NodeJS.Timeout | undefined;
  paused = new Set<number>();
  constructor(
    private chains: { id: number; rpcUrl: string }[],
    private ms: number,
  ) {}
  start() {
    this.#timer = setInterval(() => {
      for (const c of this.chains) {
        if (this.paused.has(c.id)) continue;
        void fetch(c.rpcUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'evm_mine', params: [] }),
        }).catch(() => {});
      }
    }, this.ms);
  }
  stop() {
    clearInterval(this.#timer);
  }
}

function machine() {
  return { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown', memGb: Math.round(totalmem() / 2 ** 30), node: process.version };
}

const nodeName = (i: number) => `node-${String.fromCharCode(97 + i)}`;

type NodeKeys = { solver: Hex; allocator: Hex; svmSolver?: string };

// The node's environment: its keys, from the variables its config names.
const nodeEnv = (keys: NodeKeys): NodeJS.ProcessEnv => ({ ...process.env, ...keyEnv(keys) });

/** `relay-node audit --config` as its own process: its exit code (0: no difference) and output. */
async function runCliAudit(configPath: string, keys: NodeKeys): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [join(ROOT, 'bin/relay-node.js'), 'audit', '--config', configPath], {
    cwd: ROOT,
    env: nodeEnv(keys),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, output };
}

/** The ledger's tables that tell what happened to the money (a failed run's evidence), as JSON in `dir`. */
async function dumpLedger(url: string, dir: string): Promise<void> {
  await withPostgres(url, async (client) => {
    for (const table of ['leader_lease', 'payouts', 'transactions', 'requests', 'deposits']) {
      const { rows } = await client.query(`SELECT * FROM ${table}`);
      writeFileSync(join(dir, `ledger-${table}.json`), JSON.stringify(rows, null, 1));
    }
  });
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosResult> {
  const sayRaw = opts.say ?? ((l: string) => process.stdout.write(`${l}\n`));
  const say = (l: string) => sayRaw(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${l}`);
  const started = Date.now();
  const rng = new Rng(opts.seed);
  const ledgerKind = opts.ledger ?? 'sqlite';
  const nodeCount = opts.nodes ?? 1;
  if (!Number.isInteger(nodeCount) || nodeCount < 1 || nodeCount > 2) throw new Error(`--nodes ${opts.nodes}: 1 or 2`);
  if (nodeCount > 1 && ledgerKind !== 'postgres')
    throw new Error(`--nodes ${nodeCount} needs --ledger postgres: several nodes share one ledger only on PostgreSQL (a SQLite ledger has one writer)`);
  const leaseMs = opts.leaseMs ?? 3_000;
  const renewMs = opts.renewMs ?? 750;
  const accounts = opts.accounts ?? 6;
  const confirmations = opts.confirmations ?? 2;
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-node-chaos-'));
  // One extra account for the reorg deposits, so their rewinds never touch a load account's nonce.
  const reorgAccount = accounts + 1;
  const kinds = opts.kinds ?? ['svm', 'exchange'];
  // A 100 ms SVM slot: a blockhash expires in 15 s (an expired payout is signed again after that).
  const devnetOptions = {
    dataDir,
    confirmations,
    testAccounts: accounts + 3,
    exchange: kinds.includes('exchange'),
    svm: kinds.includes('svm'),
    svmSlotIntervalMs: 100,
  };
  const devnet = await startDevnet(devnetOptions);
  const clients = new Map<number, PublicClient>();
  const client = (id: number) => {
    let c = clients.get(id);
    if (!c) {
      const ch = devnet.chains.find((x) => x.id === id)!;
      c = createPublicClient({ chain: devnetChain(id, ch.rpcUrl), transport: http(ch.rpcUrl), pollingInterval: 50 }) as PublicClient;
      clients.set(id, c);
    }
    return c;
  };
  const rates = Object.fromEntries(FAULT_KINDS.map((k) => [k, opts.excludeFaults?.includes(k) ? 0 : opts.faults * FAULT_WEIGHTS[k]])) as Record<
    FaultKind,
    number
  >;
  const proxies = await startProxies(devnet.chains, rng.fork('proxies'), {
    rates,
    limits: opts.maxTimeouts === undefined ? {} : { timeout: opts.maxTimeouts },
    lagBlocks: 3,
    lagMs: 1_500,
    holdMs: 10_500,
    ...((opts.providers ?? 1) > 1 ? { maxRps: 60 } : {}),
  });
  // The other providers of each chain (--providers), in front of the same anvil.
  const extras = new Map<number, RpcProxy[]>();
  for (const c of devnet.chains) {
    const list: RpcProxy[] = [];
    for (let i = 1; i < (opts.providers ?? 1); i++) {
      const behaviour = i === 1 ? { rates: { lag: 1 }, lagBlocks: 3, lagMs: 1e12 } : i === 2 ? { leadBlocks: 5 } : {};
      const p = new RpcProxy({ target: c.rpcUrl, rng: rng.fork(`provider:${c.id}:${i}`), label: `${c.id}/${i}`, ...behaviour });
      await p.start();
      list.push(p);
    }
    extras.set(c.id, list);
  }
  // The SVM chain's RPC and the exchange's API, each behind its own fault proxy.
  const svmProxy = devnet.svm
    ? new SvmProxy({
        target: devnet.svm.rpcUrl,
        rng: rng.fork('svm-proxy'),
        rates: opts.svmFaults ?? scaled(SVM_FAULT_SHARE, opts.faults),
        limits: opts.svmFaultLimits,
        lagSlots: 5,
        lagMs: 1_500,
      })
    : undefined;
  const exchangeProxy = devnet.exchange
    ? new ExchangeProxy({
        target: devnet.exchange.url,
        rng: rng.fork('exchange-proxy'),
        rates: opts.exchangeFaults ?? scaled(EXCHANGE_FAULT_SHARE, opts.faults),
        limits: opts.exchangeFaultLimits,
      })
    : undefined;
  await svmProxy?.start();
  await exchangeProxy?.start();
  const providerNames = ['faulty', 'lagging', 'liar'];
  const rpcOf = (id: number) =>
    (opts.providers ?? 1) > 1
      ? { rpc: [proxies.get(id)!, ...(extras.get(id) ?? [])].map((p, i) => ({ url: p.url, name: providerNames[i] ?? `honest${i}` })), quorum: 2 }
      : { rpcUrl: proxies.get(id)!.url };
  // Holding a method back holds it on every provider of the chain.
  const blockOn = (id: number, methods: string[]) => {
    proxies.get(id)!.block(methods);
    for (const p of extras.get(id) ?? []) p.block(methods);
  };
  const ticker = new Ticker(devnet.chains, 250);
  let node: NodeProcess | undefined;
  const nodes: NodeProcess[] = [];
  // PostgreSQL (--ledger postgres): the server, the ledger's database (a secret URL, in the config files
  // under the data dir only), one TcpProxy per node between it and the server, the lease read directly.
  let postgres: PostgresHandle | undefined;
  let ledgerUrl: string | undefined;
  const pgProxies: TcpProxy[] = [];
  let lease: LeaseReader | undefined;
  let replica: ChaosReplica | undefined;
  let supervisor: NodeJS.Timeout | undefined;
  // A run that fails (or throws) keeps its data dir (node logs, the SQLite ledger; on PostgreSQL the ledger's tables dumped in it).
  let keepForFailure = true;
  // The load and the status polls go to a node that is up, taking turns; nodeCall tries again (the
  // other one) on a connection error or a 5xx.
  let turn = 0;
  const entryUrl = () => {
    const up = nodes.filter((n) => n.alive());
    const list = up.length ? up : nodes;
    return list[turn++ % list.length]!.url;
  };
  try {
    if (ledgerKind === 'postgres') {
      postgres = await startPostgres();
      ledgerUrl = await postgres.createDatabase();
      for (let i = 0; i < nodeCount; i++) pgProxies.push(await TcpProxy.start({ host: '127.0.0.1', port: postgres.port }));
    }
    const base = devnet.nodeConfig({ port: 0, logLevel: opts.logLevel ?? 'info' });
    const configOf = (i: number) => ({
      ...base,
      ...(ledgerUrl ? { ledger: { url: pgProxies[i]!.via(ledgerUrl) } } : {}),
      ...(nodeCount > 1 ? { ha: { enabled: true, leaseMs, renewMs, nodeId: nodeName(i) } } : {}),
      chains: (base.chains as { id: number; kind: string }[]).map((c) =>
        c.kind === 'svm'
          ? { ...c, rpcUrl: svmProxy!.url }
          : c.kind === 'exchange'
            ? { ...c, exchangeUrl: exchangeProxy!.url }
            : { ...c, rpcUrl: undefined, ...rpcOf(c.id) },
      ),
      solverKey: { env: 'RELAY_SOLVER_KEY' },
      allocatorKey: { env: 'RELAY_ALLOCATOR_KEY' },
      ...(devnet.svm ? { svmSolverKey: { env: 'RELAY_SVM_SOLVER_KEY' } } : {}),
    });
    const baseline = await takeBaseline(devnet, client);
    for (let i = 0; i < nodeCount; i++) {
      const configPath = join(dataDir, nodeCount > 1 ? `config-${nodeName(i)}.json` : 'config.json');
      writeFileSync(configPath, JSON.stringify(configOf(i)));
      const port = await freePort();
      const command = {
        args: (fault?: FaultPoint) => [
          join(ROOT, 'bin/relay-node.js'),
          'start',
          '--config',
          configPath,
          '--port',
          String(port),
          ...(fault ? ['--fault', fault] : []),
        ],
        env: nodeEnv(devnet.keys),
        cwd: ROOT,
      };
      nodes.push(new NodeProcess(command, port, join(dataDir, nodeCount > 1 ? `${nodeName(i)}.log` : 'node.log'), nodeName(i)));
    }
    node = nodes[0]!;
    ticker.start();
    // The first node takes the lease (it is alone); then the second starts as its standby.
    for (const n of nodes) await n.start();
    if (ledgerUrl) lease = await LeaseReader.open(ledgerUrl);
    if (ledgerUrl && nodeCount > 1) {
      replica = await ChaosReplica.start({
        root: ROOT,
        dataDir,
        config: configOf(0),
        ledgerUrl,
        env: nodeEnv(devnet.keys),
        write: (path, json) => writeFileSync(path, JSON.stringify(json)),
      });
      replica.poll();
    }
    say(
      `chaos: seed ${opts.seed}, ${opts.orders} orders, ${opts.crashes} crashes, fault rate ${opts.faults}, chains evm${kinds.map((k) => `+${k}`).join('')}, ledger ${ledgerKind}${nodeCount > 1 ? `, ${nodeCount} nodes (lease ${leaseMs} ms, renew ${renewMs} ms)` : ''}; data in ${dataDir}`,
    );

    // ---- load, with the crash monkey alongside
    const rate = opts.rate ?? 4;
    const loadStarted = Date.now();
    const expectedMs = (opts.orders / rate) * 1000;
    const monkeyRng = rng.fork('crashes');
    const crashAt = Array.from({ length: opts.haEvents?.length ?? opts.crashes }, () => Math.round(expectedMs * (0.05 + 0.9 * monkeyRng.next()))).sort(
      (a, b) => a - b,
    );
    const crashes = { sigkill: 0, faultPoint: 0, unexpectedExits: 0, restarts: 0, startFailures: [] as string[] };
    let loadDone = false;
    const load = runLoad({
      devnet,
      nodeUrl: entryUrl,
      rng: rng.fork('load'),
      orders: opts.orders,
      rate,
      accounts,
      kinds,
      retryMs: 240_000,
    }).finally(() => (loadDone = true));
    // Two nodes: the HA monkey, and a supervisor that starts again (after a short seeded delay) every node
    // that exited, killed or having lost its lease, unless the monkey holds it down (busy).
    const haEvents: HaEvent[] = [];
    const busy = new Set<number>();
    if (nodeCount > 1) {
      const supRng = rng.fork('supervisor');
      supervisor = setInterval(() => {
        nodes.forEach((n, i) => {
          if (n.alive() || n.restarting || busy.has(i)) return;
          n.restarting = true;
          void sleep(supRng.int(100, 1_000))
            .then(() => n.start())
            .then(
              () => crashes.restarts++,
              (e) => n.startFailures.push(String((e as Error).message).slice(0, 400)),
            )
            .finally(() => (n.restarting = false));
        });
      }, 100);
    }
    const haMonkey = async () => {
      const kinds: HaEventKind[] = ['kill-leader', 'kill-leader', 'kill-leader', 'kill-standby', 'kill-standby', 'cut-leader', 'cut-leader', 'cut-leader'];
      for (const [i, at] of crashAt.entries()) {
        const wait = loadStarted + at - Date.now();
        if (wait > 0) await sleep(wait);
        const kind = opts.haEvents?.[i] ?? monkeyRng.pick(kinds);
        const ev = await haEvent(kind, {
          nodes,
          proxies: pgProxies,
          lease: lease!,
          rng: monkeyRng,
          leaseMs,
          busy,
          t0: loadStarted,
          idle: () => nodes.every((n) => n.alive() && !n.restarting) && busy.size === 0,
        });
        haEvents.push(ev);
        if (kind !== 'cut-leader') crashes.sigkill++;
        if (ev.diedAtFaultPoint) crashes.faultPoint++;
        say(
          `chaos: ${kind}${ev.faultPoint ? ` (standby armed at ${ev.faultPoint}${ev.diedAtFaultPoint ? ', died there' : ', no fill came'})` : ''}${ev.cutMs ? ` for ${ev.cutMs} ms` : ''}: ${ev.leader} led epoch ${ev.epochBefore}; ${ev.newLeader ? `${ev.newLeader} took epoch ${ev.epochAfter} after ${ev.takeoverMs} ms` : 'no takeover'}${ev.exitedLeaseLost === undefined ? '' : ev.exitedLeaseLost ? '; the cut-off leader exited 75' : '; THE CUT-OFF LEADER DID NOT EXIT 75'}`,
        );
      }
    };
    const monkey =
      nodeCount > 1
        ? haMonkey()
        : (async () => {
            for (const at of crashAt) {
              const wait = loadStarted + at - Date.now();
              if (wait > 0) await sleep(wait);
              // A third of the crashes are at the exact fault points of the fill pipeline; the rest anywhere.
              const point = monkeyRng.chance(1 / 3) ? monkeyRng.pick(['crash-after-fill-recorded', 'crash-after-fill-broadcast'] as const) : undefined;
              await sleep(monkeyRng.int(0, 300));
              await node!.kill('SIGKILL');
              crashes.sigkill++;
              await sleep(monkeyRng.int(0, 500));
              if (point && !loadDone) {
                await node!.start(point);
                crashes.restarts++;
                // It dies by itself at its next fill; if no fill comes, we kill it.
                const died = await Promise.race([node!.exited.then(() => true), sleep(20_000).then(() => false)]);
                if (died) crashes.faultPoint++;
                else await node!.kill('SIGKILL');
              }
              await node!.start();
              crashes.restarts++;
            }
          })();
    // Its failure is the run's, after the load (never an unhandled rejection that skips the cleanup).
    monkey.catch(() => {});
    // The node may also die on its own (that is a finding, and it is restarted).
    const watchdog = setInterval(() => {
      if (nodeCount === 1 && node && !node.alive() && node.child && node.child.signalCode === null && node.child.exitCode !== null && !restarting) {
        restarting = true;
        void node
          .start()
          .catch(() => {})
          .finally(() => (restarting = false));
      }
    }, 500);
    let restarting = false;
    const loadResult = await load;
    await monkey;
    const loadMs = Date.now() - loadStarted;
    say(`chaos: load done in ${loadMs} ms: ${loadResult.deposits.length} deposits, ${loadResult.failedOrders.length} orders failed to place`);

    // ---- settle: every deposit ends (faults stay on)
    const settleStarted = Date.now();
    let outcomes = await waitForOutcomes(entryUrl, loadResult.deposits, opts.settleMs ?? 120_000);
    const settleMs = Date.now() - settleStarted;
    say(`chaos: settled in ${settleMs} ms`);

    // ---- reorgs, on a quiet chain (no load in flight)
    const reorgs: ChaosResult['reorgs'] = { before: [], after: [], extraNotEnded: [] };
    const vanished: { chainId: number; txHash: Hex; orderRef: Hex }[] = [];
    const reorgRng = rng.fork('reorgs');
    // Deposits the reorg phase makes besides its own (they must end too).
    const outcomesExtra: Hex[] = [];
    const rpc = (chainId: number, method: string, params: unknown[] = []) =>
      client(chainId).request({ method: method as any, params: params as any }) as Promise<any>;
    const quoteFor = async (origin: number) => {
      const dest = origin === 8453 ? 10 : 8453;
      const q = await nodeCall(
        entryUrl,
        '/quote',
        {
          user: devnet.accounts[reorgAccount]!.address,
          originChainId: origin,
          destinationChainId: dest,
          originCurrency: zeroAddress,
          destinationCurrency: zeroAddress,
          amount: String(BigInt(reorgRng.int(10, 50)) * 10n ** 15n),
          tradeType: 'EXACT_INPUT',
        },
        30_000,
      );
      if (q.status !== 200) throw new Error(`reorg quote: ${q.status} ${JSON.stringify(q.body)}`);
      return q.body;
    };
    const signed = new Map<Hex, Hex>();
    const deposit = async (origin: number, q: any): Promise<Hex> => {
      const ch = devnet.chains.find((x) => x.id === origin)!;
      const w = createWalletClient({
        account: privateKeyToAccount(devnet.accounts[reorgAccount]!.privateKey),
        chain: devnetChain(origin, ch.rpcUrl),
        transport: http(ch.rpcUrl),
      });
      const item = q.steps[0].items[0].data;
      const prepared = await w.prepareTransactionRequest({ account: w.account!, chain: w.chain, to: item.to, data: item.data, value: BigInt(item.value) });
      const raw = await w.signTransaction(prepared as any);
      const hash = await w.sendRawTransaction({ serializedTransaction: raw });
      signed.set(hash, raw);
      await client(origin).waitForTransactionReceipt({ hash });
      return hash;
    };
    const status = async (requestId: Hex) => (await nodeCall(entryUrl, `/intents/status/v3?requestId=${requestId}`, undefined, 30_000)).body;
    for (let i = 0; i < (opts.reorgsBefore ?? 0); i++) {
      const origin = reorgRng.pick([8453, 10]);
      const q = await quoteFor(origin);
      const requestId = q.steps[0].requestId as Hex;
      ticker.paused.add(origin);
      try {
        const snapshot = await rpc(origin, 'evm_snapshot');
        const hash = await deposit(origin, q);
        // The node sees it, unconfirmed (the chain is paused one block short of its confirmations).
        const seen = await until(
          async () => ((await status(requestId)).inTxHashes?.includes(hash) ? true : undefined),
          'the deposit to be indexed',
          15_000,
        ).catch(() => false);
        await rpc(origin, 'evm_revert', [snapshot]);
        await rpc(origin, 'anvil_mine', ['0x4']);
        vanished.push({ chainId: origin, txHash: hash, orderRef: requestId });
        ticker.paused.delete(origin);
        // The node drops it, and goes on past its old confirmation depth without filling it.
        await until(async () => ((await status(requestId)).inTxHashes?.length === 0 ? true : undefined), 'the reorged deposit to be dropped', 30_000);
        const head = await client(origin).getBlockNumber();
        await until(async () => ((await client(origin).getBlockNumber()) >= head + BigInt(confirmations + 2) ? true : undefined), 'more blocks', 30_000);
        await sleep(300);
        const s = await status(requestId);
        reorgs.before.push({ txHash: hash, seenUnconfirmed: seen, status: s.status });
        say(`chaos: reorg before confirmations on ${origin}: deposit ${hash} seen=${seen}, request now ${s.status}`);
      } finally {
        ticker.paused.delete(origin);
      }
    }
    // After the node acted, in turn: once the fill is paid (it cannot be taken back: the request
    // records DEPOSIT_REORGED); while the fill is still queued (the destination refuses gas estimates,
    // so it cannot be signed: the fill must be cancelled, never paid); and once paid, with the same
    // deposit transaction included again on the new chain at another log index (the same deposit:
    // neither DEPOSIT_REORGED nor a second payout).
    const modes = ['paid', 'queued', 'reincluded'] as const;
    for (let i = 0; i < (opts.reorgsAfter ?? 0); i++) {
      const origin = reorgRng.pick([8453, 10]);
      const dest = origin === 8453 ? 10 : 8453;
      const mode = modes[i % modes.length]!;
      const q = await quoteFor(origin);
      const requestId = q.steps[0].requestId as Hex;
      if (mode === 'queued') blockOn(dest, ['eth_estimateGas']);
      try {
        const snapshot = await rpc(origin, 'evm_snapshot');
        const hash = await deposit(origin, q);
        const want = mode === 'queued' ? 'pending' : 'success';
        await until(async () => ((await status(requestId)).status === want ? true : undefined), `the request to be ${want}`, 60_000);
        ticker.paused.add(origin);
        let again: { logIndex: number } | undefined;
        try {
          await rpc(origin, 'evm_revert', [snapshot]);
          await rpc(origin, 'anvil_mine', ['0x2']);
          if (mode === 'reincluded') {
            // One block: someone else's deposit first, then the same signed deposit again.
            await rpc(origin, 'evm_setAutomine', [false]);
            const other = await quoteFor(origin);
            const ch = devnet.chains.find((x) => x.id === origin)!;
            const w = createWalletClient({
              account: privateKeyToAccount(devnet.accounts[reorgAccount + 1]!.privateKey),
              chain: devnetChain(origin, ch.rpcUrl),
              transport: http(ch.rpcUrl),
            });
            const item = other.steps[0].items[0].data;
            // A higher tip orders it first in the block, so the deposit comes back at another log index.
            await w.sendTransaction({
              account: w.account!,
              chain: w.chain,
              to: item.to,
              data: item.data,
              value: BigInt(item.value),
              gas: 200_000n,
              maxPriorityFeePerGas: 10n ** 10n,
              maxFeePerGas: 10n ** 11n,
            });
            await rpc(origin, 'eth_sendRawTransaction', [signed.get(hash)]);
            await rpc(origin, 'evm_mine');
            await rpc(origin, 'evm_setAutomine', [true]);
            const r = await client(origin).getTransactionReceipt({ hash });
            again = { logIndex: r.logs.find((l) => l.address.toLowerCase() === ch.contracts.depository.toLowerCase())!.logIndex };
            outcomesExtra.push(other.steps[0].requestId as Hex);
          }
          await rpc(origin, 'anvil_mine', ['0x6']);
        } finally {
          ticker.paused.delete(origin);
        }
        if (mode === 'reincluded') {
          // The node rewinds and re-reads; then the deposit must still be the one it paid.
          await until(async () => ((await status(requestId)).inTxHashes?.includes(hash) ? true : undefined), 'the deposit to be found again', 30_000).catch(
            () => {},
          );
          await sleep(3_000);
          const derived = depositRequestId(origin, hash, again!.logIndex);
          const dup = await nodeCall(entryUrl, `/intents/status/v3?requestId=${derived}`, undefined, 30_000);
          const after = await status(requestId);
          reorgs.after.push({
            txHash: hash,
            mode,
            status: after.status,
            failReason: after.failReason,
            secondPayout: dup.status === 200 ? `${dup.body.status} ${dup.body.failReason}` : null,
          });
          say(
            `chaos: reorg after the node acted (${mode}, log index now ${again!.logIndex}) on ${origin}: request ${after.status} ${after.failReason}, second request ${dup.status === 200 ? dup.body.status : 'none'}`,
          );
          continue;
        }
        const s = await until(
          async () => {
            const r = await status(requestId);
            return r.failReason === 'DEPOSIT_REORGED' ? r : undefined;
          },
          'DEPOSIT_REORGED to be recorded',
          30_000,
        ).catch(async () => status(requestId));
        if (mode === 'queued') {
          vanished.push({ chainId: origin, txHash: hash, orderRef: requestId });
          blockOn(dest, []);
          // The submitter retries what is queued; give it the time to (wrongly) pay.
          await sleep(3_000);
        }
        const after = await status(requestId);
        reorgs.after.push({ txHash: hash, mode, status: after.status, failReason: s.failReason, secondPayout: null });
        say(`chaos: reorg after the node acted (${mode}) on ${origin}: deposit ${hash}, request ${after.status} ${s.failReason}`);
      } finally {
        blockOn(dest, []);
        await rpc(origin, 'evm_setAutomine', [true]).catch(() => {});
      }
    }

    for (const id of outcomesExtra) {
      const ended = await until(
        async () => (['success', 'refund'].includes((await status(id)).status) ? true : undefined),
        `request ${id} to end`,
        30_000,
      ).catch(() => false);
      if (!ended) reorgs.extraNotEnded.push(id);
    }

    // A last look at the outcomes (the reorg phase ran with the node up), then stop everything.
    outcomes = await waitForOutcomes(entryUrl, loadResult.deposits, 10_000).then((o) => (o.size >= outcomes.size ? o : outcomes));
    clearInterval(watchdog);
    clearInterval(supervisor);
    for (const p of proxies.values()) p.setEnabled(false);
    svmProxy?.setEnabled(false);
    exchangeProxy?.setEnabled(false);
    // Let in-flight payouts land before the node stops: nothing queued or sent at the end.
    await sleep(500);
    // The standby first (stopped, it cannot take over from the leader draining), then the leader.
    const held = lease ? (await lease.current().catch(() => undefined))?.holder : undefined;
    for (const n of [...nodes].sort((a, b) => Number(a.nodeId === held) - Number(b.nodeId === held))) await n.kill('SIGTERM');
    ticker.stop();
    const replicaReport = await replica?.compare();

    const invariants = await checkInvariants({
      devnet,
      client,
      base: baseline,
      deposits: loadResult.deposits,
      outcomes,
      ledgerPath: join(dataDir, 'ledger.sqlite'),
      ledgerUrl,
      vanished,
    });
    // Several nodes: the epochs (ha.ts epochInvariants), from the nodes' logs of the takeovers.
    let ha: ChaosResult['ha'];
    if (nodeCount > 1) {
      const starts = epochStarts(nodes.flatMap((n) => n.output));
      const ledger = Ledger.connect({ path: '', url: ledgerUrl }, { readonly: true });
      try {
        const e = epochInvariants(ledger, starts, new Set(devnet.chains.map((c) => c.id)), (m) => {
          if (invariants.failures.length < 200) invariants.failures.push(m);
          invariants.ok = false;
        });
        const takeovers = haEvents.filter((x) => x.takeoverMs !== null).map((x) => x.takeoverMs!);
        ha = {
          events: haEvents,
          takeovers: takeovers.length,
          takeoverP50Ms: percentile(takeovers, 0.5),
          takeoverMaxMs: takeovers.length ? Math.max(...takeovers) : null,
          leaseLostExits: nodes.reduce((a, n) => a + n.leaseLostExits, 0),
          // (a node armed at a fill fault point that took over is followed by one more takeover: it died there, or
          // no fill came within 20 s and the monkey killed it)
          unprovokedTakeovers: Math.max(0, starts.size - 1 - takeovers.length - haEvents.filter((x) => x.faultPoint !== undefined).length),
          epochs: starts.size,
          payoutsChecked: e.payouts,
          laterEpochTxs: e.laterTxs,
        };
      } finally {
        ledger.close();
      }
      // A kill of the leader or a cut-off that no standby took over from is a failure of the run.
      for (const x of haEvents)
        if (x.kind !== 'kill-standby' && x.newLeader === null) invariants.failures.push(`${x.kind} at ${x.atMs} ms: no node took the lease over`);
      for (const x of haEvents)
        if (x.kind === 'cut-leader' && !x.exitedLeaseLost) invariants.failures.push(`cut-leader at ${x.atMs} ms: the cut-off leader did not exit 75`);
      invariants.ok = invariants.failures.length === 0;
    }
    if (replicaReport?.differed.length) {
      invariants.failures.push(
        `the API replica's Status records of ${replicaReport.differed.length} requests differ from the ledger's: ${replicaReport.differed.slice(0, 5).join(', ')}`,
      );
      invariants.ok = false;
    }
    // PostgreSQL: relay-node audit, the CLI, over the same ledger (the chains read directly).
    let cliAudit: ChaosResult['cliAudit'];
    if (ledgerUrl) {
      const auditConfig = join(dataDir, 'config-audit.json');
      writeFileSync(
        auditConfig,
        JSON.stringify({
          ...devnet.nodeConfig({ port: 0, logLevel: 'warn' }),
          ledger: { url: ledgerUrl },
          solverKey: { env: 'RELAY_SOLVER_KEY' },
          allocatorKey: { env: 'RELAY_ALLOCATOR_KEY' },
          ...(devnet.svm ? { svmSolverKey: { env: 'RELAY_SVM_SOLVER_KEY' } } : {}),
        }),
      );
      cliAudit = await runCliAudit(auditConfig, devnet.keys);
      if (cliAudit.code !== 0) {
        invariants.failures.push(`relay-node audit exited ${cliAudit.code}: ${cliAudit.output.slice(-1500)}`);
        invariants.ok = false;
      }
    }
    const allOutput = nodes.flatMap((n) => n.output).join('');
    const log = allOutput.toLowerCase();
    const secrets = [devnet.keys.solver, devnet.keys.allocator].flatMap((k) => [k.toLowerCase(), k.slice(2).toLowerCase()]);
    // The ledger URL carries PostgreSQL's password.
    if (ledgerUrl) secrets.push(new URL(ledgerUrl).password.toLowerCase());
    const secretsInLog = secrets.filter((k) => log.includes(k));
    if (devnet.keys.svmSolver && allOutput.includes(devnet.keys.svmSolver)) secretsInLog.push(devnet.keys.svmSolver);
    const faultCounts = { ...Object.fromEntries(FAULT_KINDS.map((k) => [k, [...proxies.values()].reduce((a, p) => a + p.counts[k], 0)])) } as Record<
      FaultKind,
      number
    >;
    if ((opts.providers ?? 1) > 1) {
      const all = [...proxies.values(), ...[...extras.values()].flat()];
      say(
        `chaos: ${opts.providers} providers per EVM chain: ${all.reduce((a, p) => a + p.rateLimited, 0)} answers HTTP 429, ${all.reduce((a, p) => a + p.liedHeads, 0)} heads claimed ahead, lagging 3 blocks throughout`,
      );
    }
    crashes.unexpectedExits = nodes.reduce((a, n) => a + n.unexpectedExits, 0);
    crashes.startFailures = nodes.flatMap((n) => n.startFailures);
    const result: ChaosResult = {
      ok:
        invariants.ok &&
        secretsInLog.length === 0 &&
        reorgs.before.every((r) => r.status === 'waiting') &&
        reorgs.after.every(reorgAfterOk) &&
        reorgs.extraNotEnded.length === 0,
      options: { ...opts, say: undefined } as Omit<ChaosOptions, 'say'>,
      durationMs: Date.now() - started,
      orders: opts.orders,
      deposits: loadResult.deposits.length,
      failedOrders: loadResult.failedOrders,
      crashes,
      faults: {
        ...faultCounts,
        total: [...proxies.values()].reduce((a, p) => a + p.total, 0),
        rpcRequests: [...proxies.values()].reduce((a, p) => a + p.requests, 0),
      },
      ...(svmProxy
        ? { svmFaults: { ...svmProxy.counts, requests: svmProxy.requests, swallowedSends: svmProxy.swallowedSends, laggedAnswers: svmProxy.laggedAnswers } }
        : {}),
      ...(exchangeProxy ? { exchangeFaults: { ...exchangeProxy.counts, requests: exchangeProxy.requests } } : {}),
      reorgs,
      invariants,
      secretsInLog: secretsInLog.map((k) => `${k.slice(0, 6)}…`),
      ...(ha ? { ha } : {}),
      ...(cliAudit ? { cliAudit } : {}),
      ...(replicaReport ? { replica: replicaReport } : {}),
      loadMs,
      settleMs,
      machine: machine(),
      dataDir,
    };
    // A node that exited by itself, or a takeover no event caused (a leader that lost its lease by itself), is a
    // finding even when the end conditions hold: the nodes' logs are kept to read.
    keepForFailure = !result.ok || crashes.unexpectedExits > 0 || (ha?.unprovokedTakeovers ?? 0) > 0;
    for (const n of nodes) for (const tail of n.unexpectedExitTails) say(`chaos: ${n.nodeId} exited by itself: ${tail}`);
    if (opts.resultsDir !== '') {
      const dir = opts.resultsDir ?? join(ROOT, 'test/chaos/results');
      mkdirSync(dir, { recursive: true });
      const file = join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
      writeFileSync(file, `${JSON.stringify(result, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 2)}\n`);
      say(`chaos: results written to ${file}`);
    }
    return result;
  } finally {
    ticker.stop();
    clearInterval(supervisor);
    for (const n of nodes) {
      await n.kill('SIGKILL').catch(() => {});
      n.close();
    }
    await lease?.close();
    await replica?.stop();
    await Promise.all(pgProxies.map((p) => p.stop()));
    // A failed run on PostgreSQL: its ledger's tables are kept in the data dir (the server's own data goes).
    if (postgres && ledgerUrl && keepForFailure) await dumpLedger(ledgerUrl, dataDir).catch(() => {});
    await postgres?.stop();
    await Promise.all([...proxies.values(), ...[...extras.values()].flat()].map((p: RpcProxy) => p.stop()));
    await Promise.all([svmProxy?.stop(), exchangeProxy?.stop()]);
    await devnet.stop();
    if (!opts.keepDataDir && !keepForFailure) rmSync(dataDir, { recursive: true, force: true });
    else if (keepForFailure) say(`chaos: data kept in ${dataDir}`);
  }
}

// What each reorg after the node acted must end as.
export function reorgAfterOk(r: ChaosResult['reorgs']['after'][number]): boolean {
  if (r.mode === 'paid') return r.status === 'success' && r.failReason === 'DEPOSIT_REORGED';
  if (r.mode === 'queued') return r.status === 'failure' && r.failReason === 'DEPOSIT_REORGED';
  return r.status === 'success' && r.failReason === null && r.secondPayout === null;
}

export function printResult(r: ChaosResult, say: (l: string) => void = (l) => process.stdout.write(`${l}\n`)): void {
  const f = r.invariants.figures;
  say('');
  say(
    `chaos ${r.ok ? 'PASSED' : 'FAILED'} in ${(r.durationMs / 1000).toFixed(1)} s (load ${(r.loadMs / 1000).toFixed(1)} s, settle ${(r.settleMs / 1000).toFixed(1)} s)`,
  );
  say(`  orders      ${r.orders} planned, ${r.deposits} deposits confirmed on chain, ${r.failedOrders.length} not placed`);
  say(`  outcomes    ${f.success} success, ${f.refund} refund, ${f.notTerminal} not terminal; ${f.unexpectedRefunds.length} fillable orders refunded`);
  say(
    `  on chain    ${f.fillsOnChain} fills, ${f.refundsOnChain} refunds, ${f.doubleFills} double fills, ${f.filledAndRefunded} filled and refunded, ${f.solverTxs} solver txs`,
  );
  say(
    `  crashes     ${r.crashes.sigkill} SIGKILL at random moments, ${r.crashes.faultPoint} at fill fault points, ${r.crashes.unexpectedExits} unexpected exits, ${r.crashes.restarts} restarts, ${r.crashes.startFailures.length} exits while starting (an RPC fault at startup)`,
  );
  say(`  rpc faults  ${r.faults.total} of ${r.faults.rpcRequests} requests: ${FAULT_KINDS.map((k) => `${k} ${r.faults[k]}`).join(', ')}`);
  if (r.svmFaults)
    say(
      `  svm faults  ${SVM_FAULT_KINDS.map((k) => `${k} ${r.svmFaults![k]}`).join(', ')} of ${r.svmFaults.requests} requests; ${r.svmFaults.swallowedSends} sends swallowed, ${r.svmFaults.laggedAnswers} lagging answers`,
    );
  if (r.exchangeFaults)
    say(`  exch faults ${EXCHANGE_FAULT_KINDS.map((k) => `${k} ${r.exchangeFaults![k]}`).join(', ')} of ${r.exchangeFaults.requests} requests`);
  say(
    `  routes      ${Object.entries(f.routes)
      .map(([k, v]) => `${k} ${v.deposits} (${v.success} success, ${v.refund} refund)`)
      .join(', ')}`,
  );
  if (f.svm) say(`  svm chain   ${f.svm.fills} fills, ${f.svm.refunds} refunds, ${f.svm.solverTxs} solver txs`);
  if (f.exchange) say(`  exchange    ${f.exchange.fills} fills, ${f.exchange.refunds} refunds, ${f.exchange.solverSends} solver sends`);
  say(
    `  reorgs      ${r.reorgs.before.length} before confirmations (${r.reorgs.before.filter((x) => x.status === 'waiting').length} never filled), ${r.reorgs.after.length} after the node acted (${r.reorgs.after.map((x) => `${x.mode} -> ${x.status} ${x.failReason ?? ''}${x.secondPayout ? ` SECOND PAYOUT ${x.secondPayout}` : ''}${reorgAfterOk(x) ? '' : ' WRONG'}`).join(', ')})`,
  );
  say(`  failReasons ${JSON.stringify(f.failReasons)}`);
  say(`  payouts     ${JSON.stringify(f.payouts)}`);
  if (r.ha) {
    say(
      `  nodes       ${r.ha.events.length} events (${(['kill-leader', 'kill-standby', 'cut-leader'] as const).map((k) => `${k} ${r.ha!.events.filter((e) => e.kind === k).length}`).join(', ')}; ${r.ha.events.filter((e) => e.diedAtFaultPoint).length} at fill fault points), ${r.ha.takeovers} takeovers: p50 ${r.ha.takeoverP50Ms} ms, max ${r.ha.takeoverMaxMs} ms; ${r.ha.leaseLostExits} exits 75 (lease lost), ${r.ha.unprovokedTakeovers} takeovers no event caused; ${r.ha.epochs} epochs, ${r.ha.payoutsChecked} payouts each with its epoch, ${r.ha.laterEpochTxs} transactions recorded by a later leader (reconciliation)`,
    );
  }
  if (r.replica)
    say(
      `  replica     ${r.replica.reads} status reads of an API replica during the load; after it, ${r.replica.compared} requests' records compared with the ledger's, ${r.replica.differed.length} differed`,
    );
  if (r.cliAudit) say(`  cli audit   relay-node audit --config (PostgreSQL ledger) exited ${r.cliAudit.code}`);
  say(`  secrets     ${r.secretsInLog.length ? `FOUND in the log: ${r.secretsInLog.join(', ')}` : 'none in the log'}`);
  say(`  machine     ${r.machine.cpus} x ${r.machine.model}, ${r.machine.memGb} GB, node ${r.machine.node}`);
  for (const l of f.audit) say(`  audit       ${l}`);
  for (const m of r.invariants.failures) say(`  FAIL ${m}`);
}

function arg(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  if (i >= 0) return argv[i + 1];
  const eq = argv.find((a) => a.startsWith(`--${name}=`));
  return eq?.slice(name.length + 3);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const a = process.argv.slice(2);
  const num = (name: string, dflt: number) => (arg(a, name) === undefined ? dflt : Number(arg(a, name)));
  const opts: ChaosOptions = {
    orders: num('orders', 100),
    crashes: num('crashes', 5),
    faults: num('faults', 0.03),
    seed: num('seed', 1),
    rate: num('rate', 4),
    accounts: num('accounts', 6),
    confirmations: num('confirmations', 2),
    reorgsBefore: num('reorgs-before', 2),
    reorgsAfter: num('reorgs-after', 1),
    settleMs: num('settle-ms', 180_000),
    logLevel: arg(a, 'log-level') ?? 'info',
    keepDataDir: a.includes('--keep'),
    ledger: (arg(a, 'ledger') ?? 'sqlite') as 'sqlite' | 'postgres',
    nodes: num('nodes', 1),
  };
  if (opts.ledger !== 'sqlite' && opts.ledger !== 'postgres') {
    process.stderr.write(`chaos: --ledger ${opts.ledger}: sqlite or postgres\n`);
    process.exit(2);
  }
  if (opts.nodes! > 1 && opts.ledger !== 'postgres') {
    process.stderr.write(`chaos: --nodes ${opts.nodes} needs --ledger postgres (several nodes share one ledger only on PostgreSQL)\n`);
    process.exit(2);
  }
  if (arg(a, 'lease-ms') !== undefined) opts.leaseMs = num('lease-ms', 3_000);
  if (arg(a, 'renew-ms') !== undefined) opts.renewMs = num('renew-ms', 750);
  if (arg(a, 'providers') !== undefined) opts.providers = num('providers', 1);
  // --kinds evm: the EVM chains only; --kinds svm or exchange: one of them besides.
  if (arg(a, 'kinds') !== undefined)
    opts.kinds = arg(a, 'kinds')!
      .split(',')
      .filter((k) => k === 'svm' || k === 'exchange') as ('svm' | 'exchange')[];
  if (arg(a, 'max-timeouts') !== undefined) opts.maxTimeouts = num('max-timeouts', 0);
  if (arg(a, 'no-faults') !== undefined) opts.excludeFaults = arg(a, 'no-faults')!.split(',') as FaultKind[];
  runChaos(opts).then(
    (r) => {
      printResult(r);
      process.exit(r.ok ? 0 : 1);
    },
    (e) => {
      process.stderr.write(`chaos: ${(e as Error).stack ?? e}\n`);
      process.exit(2);
    },
  );
}
