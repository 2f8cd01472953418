// Sustained fills per second on the devnet (instant mining, one solver key), with the
// deposit → fill latency distribution and the node's CPU per fill, beside the ceiling: the same
// anvil's intake of pre-signed fill transactions from one key sent in JSON-RPC batches (measured in
// the same run, after the node stops). Nothing may be lost, nothing paid twice.
// Each deposit comes from its own key (as many users, each paying once): a chain of nonces from a
// few keys sent while anvil mines can be stranded in anvil's pool and never included (see
// src/devnet/rawTransactions.ts), which left 33 to 103 orders unfilled in about one run in six.
// Usage: npm run bench:throughput -- [fills] [--ledger sqlite|postgres] [--block-ms MS]
// --block-ms MS: the chains make a block every MS ms instead of one per transaction, as a real chain does. The deposits
// wait in the origin chain's pool when the window opens, and its blocks take them as fast as their gas limit allows
// (about 1,250 deposits a block): a backlog arriving faster than one key can fill, which the node works through. Without
// it, every deposit is a block of its own (anvil's instant mining), and the node's work per block (the indexer's reads,
// the funding scan) is paid once per deposit: 1,000 blocks a second, where a fast real chain makes 4 to 10.
// The last line printed is the run's figures as one JSON object (bench/ledgers.ts reads it).
// --ledger postgres: the node's ledger in a PostgreSQL this bench starts (durable: fsync on, as SQLite's
// synchronous = FULL), reached through the synchronous bridge (src/ledger/postgres).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { createPublicClient, encodeFunctionData, http, keccak256, parseEventLogs, toHex, zeroAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { mineEvery } from './blockMiner.ts';
import { profileWindow } from './profile.ts';
import { awaitIncluded, rpc, sendRawBatches, type RawTx } from '../src/devnet/rawTransactions.ts';
import { OrderFillerAbi, RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet } from '../src/devnet/devnet.ts';
import { startPostgres } from '../src/devnet/postgres.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { takeLedgerFlag } from './ledgerFlag.ts';
import { sqlStats } from './sqlStats.ts';
import { scratchDir } from './scratchDir.ts';

// BENCH_SQL=1: the SQLite statements of the fill window, per fill (bench/sqlStats.ts); wrapped before the node opens its ledger.
const sql = sqlStats();
const args = process.argv.slice(2);
const LEDGER = takeLedgerFlag(args);
const blockMsAt = args.indexOf('--block-ms');
const BLOCK_MS = blockMsAt >= 0 ? Number(args.splice(blockMsAt, 2)[1]) : undefined;
if (BLOCK_MS !== undefined && !(BLOCK_MS >= 50)) throw new Error('--block-ms: at least 50 (ms)');
const N = Number(args[0] ?? 1000);
// Fills pay these few existing accounts in turn, as when the depositors were these five keys, so that
// gas per fill stays comparable with earlier runs (a first payment to an empty account costs 25,000 gas more).
const RECIPIENTS = 5;
const STALL_MS = Number(process.env.BENCH_STALL_MS ?? 30_000);
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

const dataDir = scratchDir('relay-bench-throughput-');
const postgres = LEDGER === 'postgres' ? await startPostgres({ durable: process.env.BENCH_PG_FSYNC !== 'off' }) : undefined;
const ledgerConfig = postgres ? { ledger: { url: await postgres.createDatabase() } } : {};
const devnet = await startDevnet({ dataDir, testAccounts: RECIPIENTS + 1, ...(BLOCK_MS ? { blockTime: BLOCK_MS / 1000 } : {}) });
const node = await new RelayNode(buildConfigWithKeys({ ...devnet.nodeConfig({ port: 0, logLevel: 'silent' }), ...ledgerConfig }, devnet.keys), {
  log: createLogger('silent'),
}).start();
let nodeStopped: Promise<void> | undefined;
const stopNode = () => (nodeStopped ??= node.stop());
const origin = devnet.chains.find((c) => c.id === 8453)!;
const dest = devnet.chains.find((c) => c.id === 10)!;
const client = (c: typeof origin) => createPublicClient({ chain: devnetChain(c.id, c.rpcUrl), transport: http(c.rpcUrl), pollingInterval: 20 });
try {
  // One depositor per order, funded on the origin chain (anvil_setBalance, in one JSON-RPC batch).
  const depositors = Array.from({ length: N }, (_, i) => privateKeyToAccount(keccak256(toHex(`relay-node bench depositor ${i}`))));
  await fetch(origin.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(depositors.map((d, k) => ({ jsonrpc: '2.0', id: k, method: 'anvil_setBalance', params: [d.address, toHex(10n ** 18n)] }))),
  });
  // Quotes first (not timed): the bench measures the fill pipeline, not quoting.
  const orders: { id: Hex; sender: number }[] = [];
  for (let i = 0; i < N; i++) {
    const sender = i;
    const q = (await (
      await fetch(`${node.url}/quote`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          user: depositors[sender]!.address,
          recipient: devnet.accounts[1 + (i % RECIPIENTS)]!.address,
          originChainId: 8453,
          destinationChainId: 10,
          originCurrency: zeroAddress,
          destinationCurrency: zeroAddress,
          amount: '1000000000000000',
          tradeType: 'EXACT_INPUT',
        }),
      })
    ).json()) as { steps: { requestId: Hex }[] };
    orders.push({ id: q.steps[0]!.requestId, sender });
  }

  // Deposits signed beforehand and sent in JSON-RPC batches, so that the chain takes them faster
  // than the node can fill them: the bench measures the node, not the senders.
  const fees = await client(origin).estimateFeesPerGas();
  const raws: { id: Hex; raw: Hex }[] = [];
  for (const o of orders) {
    const acct = depositors[o.sender]!;
    raws.push({
      id: o.id,
      raw: await acct.signTransaction({
        chainId: 8453,
        type: 'eip1559',
        to: origin.contracts.depository,
        value: 10n ** 15n,
        nonce: 0,
        gas: 60_000n,
        maxFeePerGas: fees.maxFeePerGas! * 4n,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas!,
        data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [acct.address, o.id] }),
      }),
    });
  }
  const sentAt = new Map<Hex, number>();
  // --block-ms: every deposit in the origin chain's pool before the window, none mined until it opens.
  if (BLOCK_MS) {
    await rpc(origin.rpcUrl, 'evm_setIntervalMining', [0]);
    await sendRawBatches(
      origin.rpcUrl,
      raws.map((r) => r.raw),
    );
  }
  const stopProfile = await profileWindow('throughput');
  const started = Date.now();
  const cpu0 = process.cpuUsage();
  const disk0 = diskWrites();
  sql.snapshot();
  // Round trips of the fill window only (quoting before it is not the fill path).
  const roundTrips0 = 'client' in node.ledger.db ? (node.ledger.db as { client: { roundTrips: number } }).client.roundTrips : 0;
  const deferredWrites0 = 'deferredWrites' in node.ledger.db ? (node.ledger.db.deferredWrites as number) : 0;
  const cachedReads0 = 'cachedReads' in node.ledger.db ? (node.ledger.db.cachedReads as number) : 0;
  const trips0 = 'trips' in node.ledger.db ? { ...(node.ledger.db.trips as Record<string, number>) } : undefined;
  const miner = BLOCK_MS ? mineEvery(origin.rpcUrl, BLOCK_MS) : undefined;
  if (miner) for (const b of raws) sentAt.set(b.id, started);
  else
    for (let i = 0; i < raws.length; i += 50) {
      const batch = raws.slice(i, i + 50);
      const now = Date.now();
      for (const b of batch) sentAt.set(b.id, now);
      await sendRawBatches(
        origin.rpcUrl,
        batch.map((b) => b.raw),
      );
    }
  const sentSeconds = (Date.now() - started) / 1000;
  const db = node.ledger.db;
  const done = () => (db.prepare(`SELECT COUNT(*) AS n FROM requests WHERE status = 'success'`).get() as { n: number }).n;
  const deadline = Date.now() + 300_000;
  // No progress for STALL_MS: dump what tells an indexer stall from a sender's or a filler's (once).
  let last = -1;
  let lastMoved = Date.now();
  let dumped = false;
  while (done() < N && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    const n = done();
    if (n !== last) {
      last = n;
      lastMoved = Date.now();
    } else if (!dumped && Date.now() - lastMoved > STALL_MS) {
      dumped = true;
      await dumpStall(raws, n);
      if (process.env.BENCH_STALL_EXIT) break;
    }
  }
  const wallSeconds = (Date.now() - started) / 1000;
  const originBlocks = await miner?.stop();
  const cpu = process.cpuUsage(cpu0);
  const profiled = await stopProfile();
  if (profiled) console.log(`  CPU profile of the fill window: ${profiled} (npx tsx bench/profile-summary.ts ${profiled})`);
  const filled = done();
  // The node runs in this process: its CPU (user + system) over the run, per fill. It covers the
  // whole path (indexing the deposit, deciding, pricing, signing, recording, broadcasting, receipts).
  const cpuMsPerFill = (cpu.user + cpu.system) / 1000 / Math.max(1, filled);
  // Bytes this process (the node's ledger, mostly) had written to the disk over the window, per fill.
  const diskKbPerFill = disk0 === undefined ? undefined : ((diskWrites() ?? disk0) - disk0) / 1024 / Math.max(1, filled);
  sql.report(Math.max(1, filled));
  // PostgreSQL: round trips to the database per fill (each a batch of statements through the bridge).
  const roundTrips = 'client' in db ? (db as { client: { roundTrips: number } }).client.roundTrips - roundTrips0 : undefined;
  const deferredWrites = 'deferredWrites' in db ? (db.deferredWrites as number) - deferredWrites0 : undefined;
  const cachedReads = 'cachedReads' in db ? (db.cachedReads as number) - cachedReads0 : undefined;
  const trips = 'trips' in db ? Object.fromEntries(Object.entries(db.trips as Record<string, number>).map(([k, n]) => [k, n - (trips0?.[k] ?? 0)])) : undefined;
  const txs = db
    .prepare(
      `SELECT COUNT(*) AS n, SUM(gas) AS gas FROM (SELECT DISTINCT t.hash, CAST(t.gas_used AS INTEGER) AS gas FROM transactions t JOIN payouts p ON p.id = t.payout_id WHERE p.kind = 'fill' AND t.state = 'included')`,
    )
    .get() as { n: number; gas: number | null };

  // Latency: deposit sent → fill recorded as included on chain.
  const paidAt = db.prepare(`SELECT request_id, updated_at FROM payouts WHERE kind = 'fill' AND state = 'success'`).all() as {
    request_id: Hex;
    updated_at: number;
  }[];
  const lat = paidAt.map((p) => p.updated_at - sentAt.get(p.request_id)!).sort((a, b) => a - b);
  // When fills were included, from the window's start: the first, and the pace of the middle 80% (past the pipeline's
  // filling at the start and its draining at the end).
  const paidTimes = paidAt.map((p) => p.updated_at - started).sort((a, b) => a - b);
  const middle = paidTimes.length >= 10 ? (0.8 * paidTimes.length) / ((pct(paidTimes, 90) - pct(paidTimes, 10)) / 1000) : undefined;
  const depositBlocks = (db.prepare('SELECT COUNT(DISTINCT block_number) AS n FROM deposits WHERE chain_id = ?').get(origin.id) as { n: number }).n;

  // Nothing lost, nothing twice, checked on the destination chain itself.
  const logs = await client(dest).getLogs({ address: dest.contracts.filler, fromBlock: 0n, toBlock: 'latest' });
  const fills = parseEventLogs({ abi: OrderFillerAbi, logs, eventName: 'OrderFilled' });
  const perOrder = new Map<string, number>();
  for (const f of fills) perOrder.set(f.args.orderId, (perOrder.get(f.args.orderId) ?? 0) + 1);
  const twice = [...perOrder.values()].filter((n) => n > 1).length;
  const missing = orders.filter((o) => !perOrder.has(o.id)).length;
  // An order left unfilled whose deposit the chain never included is the bench's (or anvil's) failure, not the node's.
  const unfilled = raws.filter((r) => !perOrder.has(r.id));
  const notIncluded = (
    await Promise.all(unfilled.map(async (r) => ((await rpc(origin.rpcUrl, 'eth_getTransactionReceipt', [keccak256(r.raw)])) === null ? 1 : 0)))
  ).reduce<number>((a, b) => a + b, 0);

  // The ceiling, on the same anvil once the node has stopped: N fill transactions (one order each, as
  // the node sends a lone fill) pre-signed by the solver key and sent in JSON-RPC batches of 50, so
  // that neither signing nor round trips are counted: what the chain takes in from one key.
  await stopNode();
  const ceiling = await fillIntake(dest, N);
  const ceilingPerSecond = ceiling.perSecond;

  const fillsPerSecond = filled / wallSeconds;
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: +(totalmem() / 2 ** 30).toFixed(1), node: process.version };
  console.log(
    `throughput (${LEDGER} ledger${BLOCK_MS ? `, a block every ${BLOCK_MS} ms` : ', a block per transaction'}): ${filled}/${N} filled in ${wallSeconds.toFixed(2)} s = ${fillsPerSecond.toFixed(0)} fills/s (${BLOCK_MS ? `the deposits waiting in the pool, mined in ${depositBlocks} blocks of ${originBlocks} made` : `deposits sent in ${sentSeconds.toFixed(2)} s`})`,
  );
  console.log(
    `  ${BLOCK_MS ? 'window open' : 'deposit sent'} → fill included: p50 ${pct(lat, 50)} ms  p90 ${pct(lat, 90)} ms  p99 ${pct(lat, 99)} ms  max ${lat.at(-1)} ms; first fill at ${paidTimes[0]} ms${middle ? `, the middle 80% at ${middle.toFixed(0)} fills/s` : ''}`,
  );
  console.log(
    `  on chain: ${fills.length} OrderFilled events, ${twice} orders filled twice, ${missing} orders not filled${missing ? ` (${notIncluded} of their deposits never included by the chain)` : ''}`,
  );
  console.log(
    `  ceiling (pre-signed fill transactions from one key, JSON-RPC batches of 50, same anvil): ${ceilingPerSecond.toFixed(0)} tx/s → the node reaches ${((100 * fillsPerSecond) / ceilingPerSecond).toFixed(0)}%${ceiling.reSent ? ` (anvil stranded ${ceiling.reSent} of them in its pool; sent again, so the ceiling is understated)` : ''}`,
  );
  console.log(
    `  fill transactions: ${txs.n} for ${filled} fills (${(filled / Math.max(1, txs.n)).toFixed(1)} fills per transaction, ${Math.round((txs.gas ?? 0) / Math.max(1, filled)).toLocaleString()} gas per fill); node CPU ${cpuMsPerFill.toFixed(2)} ms per fill`,
  );
  if (diskKbPerFill !== undefined && LEDGER !== 'postgres') console.log(`  written to disk by the node's process: ${diskKbPerFill.toFixed(1)} KB per fill`);
  if (roundTrips !== undefined) console.log(`  ledger round trips: ${(roundTrips / Math.max(1, filled)).toFixed(1)} per fill`);
  if (trips)
    console.log(
      `  ledger round trips per fill by what they carried: ${Object.entries(trips)
        .map(([k, n]) => `${k} ${(n / Math.max(1, filled)).toFixed(2)}`)
        .join(', ')}`,
    );
  if (cachedReads !== undefined)
    console.log(`  ledger reads answered from the transaction's own earlier read: ${(cachedReads / Math.max(1, filled)).toFixed(2)} per fill`);
  if (deferredWrites !== undefined)
    console.log(`  ledger writes sent with a later statement or COMMIT: ${(deferredWrites / Math.max(1, filled)).toFixed(2)} per fill`);
  console.log(`  machine: ${machine.cpus} × ${machine.cpu}, ${machine.memGiB} GiB, node ${machine.node}`);
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/throughput-${Date.now()}.json`;
  writeFileSync(
    file,
    JSON.stringify(
      {
        orders: N,
        ledger: LEDGER,
        blockMs: BLOCK_MS ?? null,
        filled,
        wallSeconds,
        fillsPerSecond,
        middle80FillsPerSecond: middle,
        latencyMs: { p50: pct(lat, 50), p90: pct(lat, 90), p99: pct(lat, 99), max: lat.at(-1) },
        filledTwice: twice,
        missing,
        depositsNotIncluded: notIncluded,
        ceilingPerSecond,
        ceilingReSent: ceiling.reSent,
        ceilingRatio: fillsPerSecond / ceilingPerSecond,
        fillTransactions: txs.n,
        cpuMsPerFill,
        machine,
      },
      null,
      2,
    ),
  );
  console.log(`  wrote ${file}`);
  // The figures as the last line, one JSON object, for bench/ledgers.ts.
  console.log(
    JSON.stringify({
      bench: 'throughput',
      ledger: LEDGER,
      blockMs: BLOCK_MS ?? null,
      orders: N,
      filled,
      fillsPerSecond,
      latencyMs: { p50: pct(lat, 50), p99: pct(lat, 99) },
      filledTwice: twice,
      missing,
      ceilingPerSecond,
      cpuMsPerFill,
      diskKbPerFill,
      roundTripsPerFill: roundTrips === undefined ? undefined : roundTrips / Math.max(1, filled),
    }),
  );
  if (twice || missing) process.exitCode = 1;
} finally {
  await stopNode();
  await devnet.stop();
  await postgres?.stop();
}

/** Pre-signs `count` fillNative transactions from the solver key and sends them in JSON-RPC batches
 * of 50; returns transactions per second, from the first send to the last one's receipt (and how many
 * anvil stranded and had to be sent again: src/devnet/rawTransactions.ts). */
async function fillIntake(chain: typeof dest, count: number): Promise<{ perSecond: number; reSent: number }> {
  const solver = privateKeyToAccount(devnet.keys.solver);
  const pc = client(chain);
  const first = await pc.getTransactionCount({ address: solver.address, blockTag: 'pending' });
  const fees = await pc.estimateFeesPerGas();
  const txs: RawTx[] = [];
  for (let i = 0; i < count; i++) {
    txs.push({
      sender: solver.address,
      nonce: first + i,
      raw: await solver.signTransaction({
        chainId: chain.id,
        type: 'eip1559',
        to: chain.contracts.filler,
        value: 1n,
        nonce: first + i,
        gas: 100_000n,
        maxFeePerGas: fees.maxFeePerGas! * 4n,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas!,
        data: encodeFunctionData({
          abi: OrderFillerAbi,
          functionName: 'fillNative',
          args: [keccak256(toHex(`ceiling ${i}`)), '0x000000000000000000000000000000000000dEaD'],
        }),
      }),
    });
  }
  const t0 = performance.now();
  await sendRawBatches(
    chain.rpcUrl,
    txs.map((t) => t.raw),
  );
  const { at, reSent } = await awaitIncluded(chain.rpcUrl, txs, { timeoutMs: 120_000 });
  const receipt = await pc.getTransactionReceipt({ hash: keccak256(txs.at(-1)!.raw) });
  if (receipt.status !== 'success') throw new Error('the last ceiling fill reverted');
  return { perSecond: count / ((at - t0) / 1000), reSent };
}

/** What a stall looks like from outside the node: the indexer cursors and stored blocks, the chain's
 * head, the missing orders' requests and deposit rows, their deposit receipts, and the depository's
 * logs over their blocks straight from anvil. Written to bench/results and summarised on stderr. */
async function dumpStall(raws: { id: Hex; raw: Hex }[], filled: number): Promise<void> {
  const db = node.ledger.db;
  const missing = raws.filter((r) => {
    const row = db.prepare('SELECT status FROM requests WHERE id = ?').get(r.id) as { status: string } | undefined;
    return row?.status !== 'success';
  });
  const onOrigin = <T = unknown>(method: string, params: unknown[]) => rpc<T>(origin.rpcUrl, method, params);
  const receipts = await Promise.all(
    missing.map(async (m) => {
      const r = await onOrigin<{ status: string; blockNumber: string } | null>('eth_getTransactionReceipt', [keccak256(m.raw)]);
      return { id: m.id, status: r?.status, block: r ? Number(r.blockNumber) : undefined };
    }),
  );
  const blocks = receipts.map((r) => r.block).filter((b): b is number => b !== undefined);
  const lo = blocks.length ? Math.min(...blocks) : 0;
  const hi = blocks.length ? Math.max(...blocks) : 0;
  const logs = blocks.length
    ? ((await onOrigin('eth_getLogs', [{ address: origin.contracts.depository, fromBlock: toHex(lo), toBlock: toHex(hi) }])) as unknown[])
    : [];
  // Deposits the chain never included: where anvil's pool holds them (per sender: the lowest nonce
  // waiting against the account's nonce; equal means nothing will ever mine them).
  const pool = (await onOrigin('txpool_inspect', [])) as Record<'pending' | 'queued', Record<string, Record<string, string>>>;
  const txpool = await Promise.all(
    (['pending', 'queued'] as const).flatMap((kind) =>
      Object.entries(pool[kind]).map(async ([sender, byNonce]) => {
        const nonces = Object.keys(byNonce).map(Number);
        return {
          kind,
          sender,
          count: nonces.length,
          lowest: Math.min(...nonces),
          accountNonce: Number(await onOrigin('eth_getTransactionCount', [sender, 'latest'])),
        };
      }),
    ),
  );
  const dump = {
    txpool,
    at: new Date().toISOString(),
    filled,
    missing: missing.length,
    heads: { origin: Number(await onOrigin('eth_blockNumber', [])), dest: Number(await client(dest).getBlockNumber()) },
    cursors: db.prepare('SELECT * FROM cursors').all(),
    chainBlocks: db.prepare('SELECT chain_id, COUNT(*) AS n, MIN(number) AS lo, MAX(number) AS hi FROM chain_blocks GROUP BY chain_id').all(),
    depositsByState: db
      .prepare('SELECT chain_id, state, COUNT(*) AS n, MIN(block_number) AS lo, MAX(block_number) AS hi FROM deposits GROUP BY chain_id, state')
      .all(),
    requestsByStatus: db.prepare('SELECT status, COUNT(*) AS n FROM requests GROUP BY status').all(),
    missingReceipts: { lo, hi, byStatus: receipts.reduce<Record<string, number>>((m, r) => ((m[String(r.status)] = (m[String(r.status)] ?? 0) + 1), m), {}) },
    missingDepositRows: missing.slice(0, 5).map((m) => ({
      id: m.id,
      request: db.prepare('SELECT status FROM requests WHERE id = ?').get(m.id),
      deposits: db.prepare('SELECT * FROM deposits WHERE order_ref = ?').all(m.id),
    })),
    missingBlocks: [...new Set(blocks)].sort((a, b) => a - b),
    anvilLogsOverMissingBlocks: logs.length,
    indexerMetrics: (await node.metrics.registry.metrics())
      .split('\n')
      .filter((l) =>
        /^relay_(chain_head_block|indexer_lag_blocks|rpc_errors_total|deposits_indexed_total|reorgs_total|payout_queue_depth|solver_decisions_total|payouts_waiting)/.test(
          l,
        ),
      ),
  };
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/throughput-stall-${Date.now()}.json`;
  writeFileSync(file, JSON.stringify(dump, null, 2));
  console.error(`STALL: no fill for ${STALL_MS / 1000} s at ${filled}/${N}; ${missing.length} missing (deposit blocks ${lo}..${hi}); dump in ${file}`);
  // What the node does meanwhile: 5 s of CPU profile (open it in Chrome's DevTools).
  if (process.env.BENCH_STALL_PROFILE) {
    const { Session } = await import('node:inspector/promises');
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    await new Promise((r) => setTimeout(r, 5_000));
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(file.replace('.json', '.cpuprofile'), JSON.stringify(profile));
    session.disconnect();
  }
  console.error(
    JSON.stringify({
      txpool,
      heads: dump.heads,
      cursors: dump.cursors,
      chainBlocks: dump.chainBlocks,
      depositsByState: dump.depositsByState,
      receipts: dump.missingReceipts,
    }),
  );
}

/** This process's bytes written to storage so far (Linux /proc/self/io write_bytes), or undefined where there is none. */
function diskWrites(): number | undefined {
  try {
    const m = /^write_bytes: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}
