// Sustained fills per second on the devnet (instant mining, one solver key), with the
// deposit → fill latency distribution and the node's CPU per fill, beside the ceiling: the same
// anvil's intake of pre-signed fill transactions from one key sent in JSON-RPC batches (measured in
// the same run, after the node stops). Nothing may be lost, nothing paid twice.
// Usage: npm run bench:throughput -- [fills]
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createPublicClient, encodeFunctionData, http, keccak256, parseEventLogs, toHex, zeroAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { OrderFillerAbi, RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet } from '../src/devnet/devnet.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';

const N = Number(process.argv[2] ?? 1000);
const SENDERS = 5;
const STALL_MS = Number(process.env.BENCH_STALL_MS ?? 30_000);
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-throughput-'));
const devnet = await startDevnet({ dataDir, testAccounts: SENDERS + 1 });
const node = await new RelayNode(buildConfigWithKeys(devnet.nodeConfig({ port: 0, logLevel: 'silent' }), devnet.keys), { log: createLogger('silent') }).start();
let nodeStopped: Promise<void> | undefined;
const stopNode = () => (nodeStopped ??= node.stop());
const origin = devnet.chains.find((c) => c.id === 8453)!;
const dest = devnet.chains.find((c) => c.id === 10)!;
const client = (c: typeof origin) => createPublicClient({ chain: devnetChain(c.id, c.rpcUrl), transport: http(c.rpcUrl), pollingInterval: 20 });
try {
  // Quotes first (not timed): the bench measures the fill pipeline, not quoting.
  const senders = devnet.accounts.slice(1, 1 + SENDERS);
  const orders: { id: Hex; sender: number }[] = [];
  for (let i = 0; i < N; i++) {
    const sender = i % SENDERS;
    const q = (await (
      await fetch(`${node.url}/quote`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          user: senders[sender]!.address,
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
  const accounts = senders.map((a) => privateKeyToAccount(a.privateKey));
  const nonces = await Promise.all(senders.map((a) => client(origin).getTransactionCount({ address: a.address })));
  const fees = await client(origin).estimateFeesPerGas();
  const raws: { id: Hex; raw: Hex }[] = [];
  for (const o of orders) {
    const acct = accounts[o.sender]!;
    raws.push({
      id: o.id,
      raw: await acct.signTransaction({
        chainId: 8453,
        type: 'eip1559',
        to: origin.contracts.depository,
        value: 10n ** 15n,
        nonce: nonces[o.sender]!++,
        gas: 60_000n,
        maxFeePerGas: fees.maxFeePerGas! * 4n,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas!,
        data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [acct.address, o.id] }),
      }),
    });
  }
  const sentAt = new Map<Hex, number>();
  const started = Date.now();
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < raws.length; i += 50) {
    const batch = raws.slice(i, i + 50);
    const now = Date.now();
    for (const b of batch) sentAt.set(b.id, now);
    const res = (await (
      await fetch(origin.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(batch.map((b, k) => ({ jsonrpc: '2.0', id: k, method: 'eth_sendRawTransaction', params: [b.raw] }))),
      })
    ).json()) as { error?: { message: string } }[];
    const failed = res.find((r) => r.error);
    if (failed) throw new Error(`a deposit was refused: ${failed.error!.message}`);
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
  const cpu = process.cpuUsage(cpu0);
  const filled = done();
  // The node runs in this process: its CPU (user + system) over the run, per fill. It covers the
  // whole path (indexing the deposit, deciding, pricing, signing, recording, broadcasting, receipts).
  const cpuMsPerFill = (cpu.user + cpu.system) / 1000 / Math.max(1, filled);
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

  // Nothing lost, nothing twice, checked on the destination chain itself.
  const logs = await client(dest).getLogs({ address: dest.contracts.filler, fromBlock: 0n, toBlock: 'latest' });
  const fills = parseEventLogs({ abi: OrderFillerAbi, logs, eventName: 'OrderFilled' });
  const perOrder = new Map<string, number>();
  for (const f of fills) perOrder.set(f.args.orderId, (perOrder.get(f.args.orderId) ?? 0) + 1);
  const twice = [...perOrder.values()].filter((n) => n > 1).length;
  const missing = orders.filter((o) => !perOrder.has(o.id)).length;

  // The ceiling, on the same anvil once the node has stopped: N fill transactions (one order each, as
  // the node sends a lone fill) pre-signed by the solver key and sent in JSON-RPC batches of 50, so
  // that neither signing nor round trips are counted: what the chain takes in from one key.
  await stopNode();
  const ceilingPerSecond = await fillIntake(dest, N);

  const fillsPerSecond = filled / wallSeconds;
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: +(totalmem() / 2 ** 30).toFixed(1), node: process.version };
  console.log(
    `throughput: ${filled}/${N} filled in ${wallSeconds.toFixed(2)} s = ${fillsPerSecond.toFixed(0)} fills/s (deposits sent in ${sentSeconds.toFixed(2)} s)`,
  );
  console.log(`  deposit → fill included: p50 ${pct(lat, 50)} ms  p90 ${pct(lat, 90)} ms  p99 ${pct(lat, 99)} ms  max ${lat.at(-1)} ms`);
  console.log(`  on chain: ${fills.length} OrderFilled events, ${twice} orders filled twice, ${missing} orders not filled`);
  console.log(
    `  ceiling (pre-signed fill transactions from one key, JSON-RPC batches of 50, same anvil): ${ceilingPerSecond.toFixed(0)} tx/s → the node reaches ${((100 * fillsPerSecond) / ceilingPerSecond).toFixed(0)}%`,
  );
  console.log(
    `  fill transactions: ${txs.n} for ${filled} fills (${(filled / Math.max(1, txs.n)).toFixed(1)} fills per transaction, ${Math.round((txs.gas ?? 0) / Math.max(1, filled)).toLocaleString()} gas per fill); node CPU ${cpuMsPerFill.toFixed(2)} ms per fill`,
  );
  console.log(`  machine: ${machine.cpus} × ${machine.cpu}, ${machine.memGiB} GiB, node ${machine.node}`);
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/throughput-${Date.now()}.json`;
  writeFileSync(
    file,
    JSON.stringify(
      {
        orders: N,
        filled,
        wallSeconds,
        fillsPerSecond,
        latencyMs: { p50: pct(lat, 50), p90: pct(lat, 90), p99: pct(lat, 99), max: lat.at(-1) },
        filledTwice: twice,
        missing,
        ceilingPerSecond,
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
  if (twice || missing) process.exitCode = 1;
} finally {
  await stopNode();
  await devnet.stop();
}

/** Pre-signs `count` fillNative transactions from the solver key and sends them in JSON-RPC batches
 * of 50; returns transactions per second, from the first send to the last one's receipt. */
async function fillIntake(chain: typeof dest, count: number): Promise<number> {
  const solver = privateKeyToAccount(devnet.keys.solver);
  const pc = client(chain);
  let nonce = await pc.getTransactionCount({ address: solver.address, blockTag: 'pending' });
  const fees = await pc.estimateFeesPerGas();
  const raws: Hex[] = [];
  for (let i = 0; i < count; i++) {
    raws.push(
      await solver.signTransaction({
        chainId: chain.id,
        type: 'eip1559',
        to: chain.contracts.filler,
        value: 1n,
        nonce: nonce++,
        gas: 100_000n,
        maxFeePerGas: fees.maxFeePerGas! * 4n,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas!,
        data: encodeFunctionData({
          abi: OrderFillerAbi,
          functionName: 'fillNative',
          args: [keccak256(toHex(`ceiling ${i}`)), '0x000000000000000000000000000000000000dEaD'],
        }),
      }),
    );
  }
  const t0 = performance.now();
  for (let i = 0; i < raws.length; i += 50) {
    const batch = raws.slice(i, i + 50);
    const res = (await (
      await fetch(chain.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(batch.map((raw, k) => ({ jsonrpc: '2.0', id: k, method: 'eth_sendRawTransaction', params: [raw] }))),
      })
    ).json()) as { error?: { message: string } }[];
    const failed = res.find((r) => r.error);
    if (failed) throw new Error(`a ceiling transaction was refused: ${failed.error!.message}`);
  }
  const receipt = await pc.waitForTransactionReceipt({ hash: keccak256(raws.at(-1)!), pollingInterval: 5 });
  if (receipt.status !== 'success') throw new Error('the last ceiling fill reverted');
  return count / ((performance.now() - t0) / 1000);
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
  const rpc = async (method: string, params: unknown[]) =>
    (
      (await (
        await fetch(origin.rpcUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
        })
      ).json()) as { result: unknown }
    ).result;
  const receipts = await Promise.all(
    missing.map(async (m) => {
      const r = (await rpc('eth_getTransactionReceipt', [keccak256(m.raw)])) as { status: string; blockNumber: string } | null;
      return { id: m.id, status: r?.status, block: r ? Number(r.blockNumber) : undefined };
    }),
  );
  const blocks = receipts.map((r) => r.block).filter((b): b is number => b !== undefined);
  const lo = blocks.length ? Math.min(...blocks) : 0;
  const hi = blocks.length ? Math.max(...blocks) : 0;
  const logs = blocks.length
    ? ((await rpc('eth_getLogs', [{ address: origin.contracts.depository, fromBlock: toHex(lo), toBlock: toHex(hi) }])) as unknown[])
    : [];
  // Deposits the chain never included: where anvil's pool holds them (per sender: the lowest nonce
  // waiting against the account's nonce; equal means nothing will ever mine them).
  const pool = (await rpc('txpool_inspect', [])) as Record<'pending' | 'queued', Record<string, Record<string, string>>>;
  const txpool = await Promise.all(
    (['pending', 'queued'] as const).flatMap((kind) =>
      Object.entries(pool[kind]).map(async ([sender, byNonce]) => {
        const nonces = Object.keys(byNonce).map(Number);
        return {
          kind,
          sender,
          count: nonces.length,
          lowest: Math.min(...nonces),
          accountNonce: Number(await rpc('eth_getTransactionCount', [sender, 'latest'])),
        };
      }),
    ),
  );
  const dump = {
    txpool,
    at: new Date().toISOString(),
    filled,
    missing: missing.length,
    heads: { origin: Number(await rpc('eth_blockNumber', [])), dest: Number(await client(dest).getBlockNumber()) },
    cursors: db.prepare('SELECT * FROM cursors').all(),
    chainBlocks: db.prepare('SELECT chain_id, COUNT(*) AS n, MIN(number) AS lo, MAX(number) AS hi FROM chain_blocks GROUP BY chain_id').all(),
    depositsByState: db
      .prepare('SELECT chain_id, state, COUNT(*) AS n, MIN(block_number) AS lo, MAX(block_number) AS hi FROM deposits GROUP BY chain_id, state')
      .all(),
    requestsByStatus: db.prepare('SELECT status, COUNT(*) AS n FROM requests GROUP BY status').all(),
    missingReceipts: { lo, hi, byStatus: receipts.reduce<Record<string, number>>((m, r) => ((m[String(r.status)] = (m[String(r.status)] ?? 0) + 1), m), {}) },
    missingDepositRows: missing
      .slice(0, 5)
      .map((m) => ({
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
