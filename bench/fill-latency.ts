// N deposits on the devnet (instant mining), and the node's own share of the time: from the moment
// its indexer has the deposit confirmed in the ledger to the moment the fill is broadcast.
// Usage: npm run bench:fill-latency -- [N] [concurrency] [--paced]
//   default   each user deposits again as soon as its last deposit is indexed: the node's event loop is
//             kept full, and the fills that arrive while the sending slots are busy leave in batches;
//   --paced   each user waits for its fill's broadcast before its next deposit, as a user does: at most
//             CONCURRENCY fills in flight, each one the lone fill the goal names unless two users'
//             deposits meet.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { createWalletClient, encodeFunctionData, http, zeroAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet } from '../src/devnet/devnet.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { benchMarks } from '../src/lib/benchMarks.ts';
import { profileWindow } from './profile.ts';
import { scratchDir } from './scratchDir.ts';

const args = process.argv.slice(2).filter((a) => a !== '--paced');
const PACED = process.argv.includes('--paced');
const N = Number(args[0] ?? 200);
const CONCURRENCY = Number(args[1] ?? 1);

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const dataDir = scratchDir('relay-bench-');
const devnet = await startDevnet({ dataDir, testAccounts: 5 });
const node = await new RelayNode(buildConfigWithKeys(devnet.nodeConfig({ port: 0 }), devnet.keys), { log: createLogger('silent') }).start();
try {
  const origin = devnet.chains.find((c) => c.id === 8453)!;
  const wallets = devnet.accounts
    .slice(1, 1 + CONCURRENCY)
    .map((a) => createWalletClient({ account: privateKeyToAccount(a.privateKey), chain: devnetChain(8453, origin.rpcUrl), transport: http(origin.rpcUrl) }));
  const ids: Hex[] = [];
  const trace = process.env.BENCH_TRACE ? traceCalls(node) : undefined;
  const stopProfile = await profileWindow('fill-latency');
  const started = Date.now();
  const cpu0 = process.cpuUsage();
  let next = 0;
  const db = node.ledger.db;
  const broadcastOf = db.prepare(
    `SELECT 1 FROM payouts p JOIN transactions t ON t.payout_id = p.id WHERE p.request_id = ? AND p.kind = 'fill' AND t.broadcast_at IS NOT NULL LIMIT 1`,
  );
  await Promise.all(
    wallets.map(async (wallet) => {
      while (next < N) {
        next++;
        const q = await fetch(`${node.url}/quote`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            user: wallet.account.address,
            originChainId: 8453,
            destinationChainId: 10,
            originCurrency: zeroAddress,
            destinationCurrency: zeroAddress,
            amount: '1000000000000000',
            tradeType: 'EXACT_INPUT',
          }),
        }).then((r) => r.json() as Promise<any>);
        const id = q.steps[0].requestId as Hex;
        ids.push(id);
        const hash = await wallet.sendTransaction({
          to: origin.contracts.depository,
          value: 10n ** 15n,
          data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [wallet.account.address, id] }),
        });
        await fetch(`${node.url}/transactions/index`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ txHash: hash, chainId: 8453 }),
        });
        if (PACED) {
          const until = Date.now() + 30_000;
          while (!broadcastOf.get(id) && Date.now() < until) await new Promise((r) => setTimeout(r, 1));
        }
      }
    }),
  );
  const deadline = Date.now() + 120_000;
  const done = () => (db.prepare(`SELECT COUNT(*) AS n FROM requests WHERE status = 'success'`).get() as { n: number }).n;
  while (done() < N && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const wall = Date.now() - started;
  const cpu = process.cpuUsage(cpu0);
  const profiled = await stopProfile();
  if (profiled) console.log(`  CPU profile: ${profiled} (npx tsx bench/profile-summary.ts ${profiled})`);
  const rows = db
    .prepare(
      `SELECT p.request_id, d.seen_at, d.confirmed_at, p.decided_at, t.hash, t.created_at, t.broadcast_at FROM payouts p JOIN deposits d ON d.id = p.deposit_id
       JOIN transactions t ON t.payout_id = p.id WHERE p.kind = 'fill' AND t.broadcast_at IS NOT NULL`,
    )
    .all() as { request_id: string; seen_at: number; confirmed_at: number; decided_at: number; hash: string; created_at: number; broadcast_at: number }[];
  // Fills whose transaction carried no other order.
  const perTx = new Map<string, number>();
  for (const r of rows) perTx.set(r.hash, (perTx.get(r.hash) ?? 0) + 1);
  const alone = rows.filter((r) => perTx.get(r.hash) === 1).length;
  const share = rows.map((r) => r.broadcast_at - r.confirmed_at).sort((a, b) => a - b);
  // Where the share goes, from the ledger's own timestamps (ms): confirmed → decided (the solver's
  // wake, snapshot and decision), decided → signed (the submitter's wake, gas estimate, fees, nonce,
  // signature), signed → broadcast (the durable commit of the signed transaction, then the send).
  const stage = (f: (r: (typeof rows)[number]) => number) => {
    const v = rows.map(f).sort((a, b) => a - b);
    return { p50: pct(v, 50), p99: pct(v, 99) };
  };
  const stages = {
    decide: stage((r) => r.decided_at - r.confirmed_at),
    sign: stage((r) => r.created_at - r.decided_at),
    send: stage((r) => r.broadcast_at - r.created_at),
  };
  const result = {
    bench: 'fill-latency',
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: Math.round(totalmem() / 2 ** 30), node: process.version },
    deposits: N,
    concurrency: CONCURRENCY,
    paced: PACED,
    alone,
    filled: done(),
    wallMs: wall,
    nodeShareMs: { p50: pct(share, 50), p90: pct(share, 90), p99: pct(share, 99), max: share.at(-1) },
    stagesMs: stages,
  };
  console.log(
    `fill latency, node's share (deposit confirmed in ledger → fill broadcast), ${N} deposits, ${CONCURRENCY} at a time${PACED ? ', each user waiting for its fill' : ''}`,
  );
  console.log(
    `  filled ${result.filled}/${N} in ${(wall / 1000).toFixed(1)} s; this process (node and bench client) used ${((100 * (cpu.user + cpu.system)) / 1000 / wall).toFixed(0)}% of one core`,
  );
  console.log(`  ${alone} of ${rows.length} fills went alone (the rest in batches)`);
  {
    const of = (lone: boolean) =>
      rows
        .filter((r) => (perTx.get(r.hash) === 1) === lone)
        .map((r) => r.broadcast_at - r.confirmed_at)
        .sort((a, b) => a - b);
    const [a, b] = [of(true), of(false)];
    if (a.length && b.length) console.log(`  alone p50 ${pct(a, 50)} p99 ${pct(a, 99)} ms; batched p50 ${pct(b, 50)} p99 ${pct(b, 99)} ms`);
  }
  console.log(`  p50 ${result.nodeShareMs.p50} ms   p90 ${result.nodeShareMs.p90} ms   p99 ${result.nodeShareMs.p99} ms   max ${result.nodeShareMs.max} ms`);
  console.log(
    `  stages p50/p99: decide ${stages.decide.p50}/${stages.decide.p99} ms, sign ${stages.sign.p50}/${stages.sign.p99} ms, send ${stages.send.p50}/${stages.send.p99} ms`,
  );
  if (trace) for (const line of trace()) console.log(`  ${line}`);
  if (process.env.BENCH_MARKS === '1') for (const line of markLines(rows)) console.log(`  ${line}`);
  console.log(`  machine: ${result.machine.cpus} × ${result.machine.cpu}, ${result.machine.memGiB} GiB, node ${result.machine.node}`);
  mkdirSync('bench/results', { recursive: true });
  const out = join('bench/results', `fill-latency-${Date.now()}.json`);
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`  written to ${out}`);
} finally {
  await node.stop();
  await devnet.stop();
}

/**
 * BENCH_TRACE=1: how long the node's own waits take (its destination chain's RPC calls, by method, and
 * its ledger commits), timed by wrapping them in this process: where a fill's time goes between the
 * ledger's millisecond timestamps. Returns the summary lines.
 */
function traceCalls(node: RelayNode): () => string[] {
  const times = new Map<string, number[]>();
  const note = (k: string, ms: number) => times.set(k, [...(times.get(k) ?? []), ms]);
  const timed = <F extends (...a: any[]) => any>(k: string | ((...a: Parameters<F>) => string), f: F): F =>
    ((...a: Parameters<F>) => {
      const t = performance.now();
      const r = f(...a);
      const done = () => note(typeof k === 'string' ? k : k(...a), performance.now() - t);
      if (r instanceof Promise) return r.finally(done);
      done();
      return r;
    }) as F;
  const ledger = node.ledger as { tx: <T>(fn: () => T, o?: { lazy?: boolean }) => T };
  const tx = ledger.tx.bind(ledger);
  // Only the outermost transaction commits.
  let depth = 0;
  ledger.tx = <T>(fn: () => T, o?: { lazy?: boolean }): T => {
    if (depth++ > 0)
      try {
        return tx(fn, o);
      } finally {
        depth--;
      }
    const t = performance.now();
    try {
      return tx(fn, o);
    } finally {
      depth--;
      note('ledger commit (any stage)', performance.now() - t);
      if (process.env.BENCH_TRACE === 'commits') {
        const at = (new Error().stack ?? '')
          .split('\n')
          .slice(2, 5)
          .map((l) =>
            l
              .trim()
              .replace(/^at /, '')
              .replace(/\(.*\/src\//, '('),
          )
          .join(' < ');
        note(`commit${o?.lazy ? ' lazy' : ''} ${at}`, performance.now() - t);
      }
    }
  };
  const dest = node.adapters.get(10) as unknown as { decisionClient: Record<string, any> };
  const c = dest.decisionClient;
  for (const m of ['estimateGas', 'sendRawTransaction', 'getTransactionReceipt', 'getBlock', 'getTransactionCount']) c[m] = timed(`dest ${m}`, c[m]);
  c.request = timed((...a: any[]) => `dest request ${(a[0] as { method: string }).method}`, c.request);
  return () =>
    [...times]
      .sort((a, b) => b[1].reduce((x, y) => x + y, 0) - a[1].reduce((x, y) => x + y, 0))
      .map(([k, v]) => {
        const sorted = [...v].sort((a, b) => a - b);
        return `${k}: ${v.length}×, p50 ${pct(sorted, 50).toFixed(1)} ms, p99 ${pct(sorted, 99).toFixed(1)} ms`;
      });
}

/**
 * BENCH_MARKS=1: the steps between the moments src/lib/benchMarks.ts noted for each fill (confirmed in the
 * ledger, the solver's and the submitter's steps, broadcast in the ledger), p50 and p99 of each step as it
 * followed the one before, in the order they were first seen.
 */
function markLines(rows: { request_id: string; confirmed_at: number; broadcast_at: number; hash: string }[]): string[] {
  const steps = new Map<string, number[]>();
  const all = benchMarks();
  for (const r of rows) {
    const m = [['ledger:confirmed', r.confirmed_at] as [string, number], ...(all.get(r.request_id) ?? [])];
    m.push(['ledger:broadcast_at', r.broadcast_at]);
    for (let i = 1; i < m.length; i++) {
      const k = `${m[i - 1]![0]} -> ${m[i]![0]}`;
      steps.set(k, [...(steps.get(k) ?? []), m[i]![1] - m[i - 1]![1]]);
    }
  }
  return [...steps].map(([k, v]) => {
    const s = [...v].sort((a, b) => a - b);
    return `${k}: ${v.length}x, p50 ${pct(s, 50).toFixed(2)} ms, p99 ${pct(s, 99).toFixed(2)} ms, sum ${v.reduce((a, b) => a + b, 0).toFixed(0)} ms`;
  });
}
