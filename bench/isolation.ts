// Reads isolated from the solver: a node on the devnet over a ledger of ROWS synthetic requests
// (1,000,000 by default). First without load (the ceiling), then while LISTINGS clients each run the
// heaviest listing the cost bound allows, back to back: /health latency (polled every 20 ms) and the
// node's share of deposit → fill (deposit confirmed in the ledger → fill broadcast) for DEPOSITS
// deposits, p50/p99, side by side. Target: both p99 under 50 ms under load.
// Usage: [BENCH_SEED_CACHE=dir] [BENCH_STAGES=1] npx tsx bench/isolation.ts [rows] [listing clients] [deposits]
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { createWalletClient, encodeFunctionData, http, zeroAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet } from '../src/devnet/devnet.ts';
import { createLogger } from '../src/log.ts';
import { ledgerPath, RelayNode } from '../src/node.ts';
import { heaviestListing, seedRequests } from '../test/helpers/seedRequests.ts';
import { scratchDir } from './scratchDir.ts';

const ROWS = Number(process.argv[2] ?? 1_000_000);
const LISTINGS = Number(process.argv[3] ?? 10);
const DEPOSITS = Number(process.argv[4] ?? 60);

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, p50: pct(s, 50), p99: pct(s, 99), max: s.at(-1) ?? NaN };
};

const dataDir = scratchDir('relay-bench-isolation-');
const devnet = await startDevnet({ dataDir, testAccounts: 3 });
const config = buildConfigWithKeys(devnet.nodeConfig({ port: 0 }), devnet.keys);
// BENCH_SEED_CACHE=DIR keeps the seeded ledger (synthetic rows, independent of the chains) for the
// next run with as many rows: seeding 1,000,000 takes minutes.
const cached = process.env.BENCH_SEED_CACHE ? join(process.env.BENCH_SEED_CACHE, `isolation-${ROWS}.sqlite`) : undefined;
if (cached && existsSync(cached)) copyFileSync(cached, ledgerPath(config));
const node = new RelayNode(config, { log: createLogger('silent') });
try {
  const t0 = Date.now();
  if (cached && existsSync(cached)) {
    console.log(`ledger: ${ROWS.toLocaleString()} requests from ${cached}`);
  } else {
    node.ledger.db.pragma('synchronous = OFF');
    seedRequests(node.ledger.db, ROWS, { prefix: 'bench' });
    node.ledger.db.pragma('synchronous = FULL');
    node.ledger.db.exec('ANALYZE');
    console.log(`ledger: ${ROWS.toLocaleString()} requests seeded in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    if (cached) {
      mkdirSync(process.env.BENCH_SEED_CACHE!, { recursive: true });
      node.ledger.db.exec(`VACUUM INTO '${cached.replaceAll("'", "''")}'`);
    }
  }
  await node.start();
  const { key } = node.ledger.apiKeys.create('bench');
  const origin = devnet.chains.find((c) => c.id === 8453)!;
  const wallet = createWalletClient({
    account: privateKeyToAccount(devnet.accounts[1]!.privateKey),
    chain: devnetChain(8453, origin.rpcUrl),
    transport: http(origin.rpcUrl),
  });
  const post = (path: string, body: unknown) =>
    fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify(body) }).then(
      (r) => r.json() as Promise<any>,
    );
  const filled = (id: string) =>
    (node.ledger.db.prepare(`SELECT status FROM requests WHERE id = ?`).get(id) as { status: string } | undefined)?.status === 'success';

  // One deposit at a time, each waited for to its fill: the node's share of each.
  async function deposits(n: number): Promise<number[]> {
    const ids: Hex[] = [];
    for (let i = 0; i < n; i++) {
      const q = await post('/quote', {
        user: wallet.account.address,
        originChainId: 8453,
        destinationChainId: 10,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '1000000000000000',
        tradeType: 'EXACT_INPUT',
      });
      const id = q.steps[0].requestId as Hex;
      ids.push(id);
      const hash = await wallet.sendTransaction({
        to: origin.contracts.depository,
        value: 10n ** 15n,
        data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [wallet.account.address, id] }),
      });
      await post('/transactions/index', { txHash: hash, chainId: 8453 });
      const end = Date.now() + 60_000;
      while (!filled(id) && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
    }
    const rows = node.ledger.db
      .prepare(`SELECT p.request_id, d.confirmed_at, p.decided_at, t.created_at, t.broadcast_at FROM payouts p JOIN deposits d ON d.id = p.deposit_id JOIN transactions t ON t.payout_id = p.id
        WHERE p.kind = 'fill' AND t.broadcast_at IS NOT NULL AND p.request_id IN (${ids.map(() => '?').join(',')})`)
      .all(...ids) as { confirmed_at: number; decided_at: number; created_at: number; broadcast_at: number }[];
    if (process.env.BENCH_STAGES)
      for (const r of rows)
        console.log(`  stages: decide ${r.decided_at - r.confirmed_at} ms, sign ${r.created_at - r.decided_at} ms, send ${r.broadcast_at - r.created_at} ms`);
    return rows.map((r) => r.broadcast_at - r.confirmed_at);
  }

  // /health every 20 ms while `during` runs.
  async function withHealth<T>(during: () => Promise<T>): Promise<{ health: number[]; result: T }> {
    const health: number[] = [];
    let running = true;
    const poller = (async () => {
      while (running) {
        const t = performance.now();
        await fetch(`${node.url}/health`).then((r) => r.arrayBuffer());
        health.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const result = await during();
    running = false;
    await poller;
    return { health, result };
  }

  await deposits(3); // warm-up: connections, caches
  const ceiling = await withHealth(() => deposits(DEPOSITS));

  const bounds = config.api.listing;
  const listingMs: number[] = [];
  const statuses = new Map<number, number>();
  let loading = true;
  const clients = Array.from({ length: LISTINGS }, async (_, c) => {
    for (let i = 0; loading; i++) {
      const t = performance.now();
      const r = await fetch(`${node.url}/requests/v3?${heaviestListing(bounds, c * 1000 + i)}`, { headers: { 'x-api-key': key } });
      await r.arrayBuffer();
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      listingMs.push(performance.now() - t);
    }
  });
  // The listings are running (the workers have started) before measuring.
  while (listingMs.length < LISTINGS && statuses.size === 0) await new Promise((r) => setTimeout(r, 50));
  const loaded = await withHealth(() => deposits(DEPOSITS));
  loading = false;
  await Promise.all(clients);

  const result = {
    bench: 'isolation',
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: Math.round(totalmem() / 2 ** 30), node: process.version },
    rows: ROWS,
    listingClients: LISTINGS,
    listingWorkers: bounds.workers,
    bounds: {
      maxGroups: bounds.maxGroups,
      maxValuesPerField: bounds.maxValuesPerField,
      maxFilterValues: bounds.maxFilterValues,
      maxFiltersLength: bounds.maxFiltersLength,
    },
    ceiling: { healthMs: stats(ceiling.health), fillShareMs: stats(ceiling.result) },
    underLoad: {
      healthMs: stats(loaded.health),
      fillShareMs: stats(loaded.result),
      listingMs: stats(listingMs),
      listingStatuses: Object.fromEntries(statuses),
    },
  };
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');
  console.log(`isolation: ${ROWS.toLocaleString()} requests, ${LISTINGS} clients running the heaviest allowed listing, ${DEPOSITS} deposits`);
  console.log(`                          /health p50   p99      deposit→fill p50   p99`);
  console.log(
    `  without load (ceiling)  ${f(result.ceiling.healthMs.p50).padStart(8)} ${f(result.ceiling.healthMs.p99).padStart(6)}   ${f(result.ceiling.fillShareMs.p50).padStart(14)} ${f(result.ceiling.fillShareMs.p99).padStart(6)}`,
  );
  console.log(
    `  under listing load      ${f(result.underLoad.healthMs.p50).padStart(8)} ${f(result.underLoad.healthMs.p99).padStart(6)}   ${f(result.underLoad.fillShareMs.p50).padStart(14)} ${f(result.underLoad.fillShareMs.p99).padStart(6)}`,
  );
  console.log(
    `  listings: ${listingMs.length} answered (${JSON.stringify(result.underLoad.listingStatuses)}), p50 ${f(result.underLoad.listingMs.p50)} ms, p99 ${f(result.underLoad.listingMs.p99)} ms`,
  );
  console.log(`  machine: ${result.machine.cpus} × ${result.machine.cpu}, ${result.machine.memGiB} GiB, node ${result.machine.node}`);
  mkdirSync('bench/results', { recursive: true });
  const out = join('bench/results', `isolation-${Date.now()}.json`);
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`  written to ${out}`);
} finally {
  await node.stop();
  await devnet.stop();
}
