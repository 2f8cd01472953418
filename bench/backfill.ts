// Backfill: N deposits (100,000 by default) already on an anvil chain, a fresh ledger, and the time
// the node's EVM indexer takes to read them all into the ledger (written, with their blocks), beside
// its ceiling: the provider's raw eth_getLogs for the same range, in the same run (three rounds of each: medians of
// the node and of the ledger's write alone, the fastest raw read).
// Usage: npm run bench:backfill -- [deposits] [per transaction]
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { createPublicClient, createWalletClient, http, toHex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { BatchDepositorAbi, BatchDepositorBytecode } from '../contracts-abi/index.ts';
import { EvmDepositSource } from '../src/chains/evm/depositSource.ts';
import { IndexerDriver } from '../src/indexer/driver.ts';
import type { EvmChainConfig } from '../src/config/schema.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet } from '../src/devnet/devnet.ts';
import { bindDeposits, type NewDeposit } from '../src/ledger/deposits.ts';
import { Ledger } from '../src/ledger/index.ts';
import { createLogger } from '../src/log.ts';
import { createMetrics } from '../src/metrics.ts';
import { profileWindow } from './profile.ts';
import { scratchDir } from './scratchDir.ts';

const N = Number(process.argv[2] ?? 100_000);
const PER_TX = Number(process.argv[3] ?? 500);
const FINALITY_DEPTH = 64;
const CHAIN_ID = 8453;
// Rows per transaction in the ledger's own write below: the widest range the indexer writes here
// (its ranges stop growing past 5,000 logs, at 16 blocks of 500).
const WRITE_CHUNK = 8_000;
const ROUNDS = 3;

const devnet = await startDevnet({ dataDir: scratchDir('relay-bench-backfill-devnet-'), testAccounts: 1 });
try {
  const origin = devnet.chains.find((c) => c.id === CHAIN_ID)!;
  const contracts = origin.contracts;
  const anvil = { rpcUrl: origin.rpcUrl };
  const account = privateKeyToAccount(devnet.accounts[0]!.privateKey);
  const chain = devnetChain(CHAIN_ID, anvil.rpcUrl);
  const client = createPublicClient({ chain, transport: http(anvil.rpcUrl), pollingInterval: 20 }) as PublicClient;
  const wallet = createWalletClient({ chain, transport: http(anvil.rpcUrl), account });
  const deployHash = await wallet.deployContract({ abi: BatchDepositorAbi, bytecode: BatchDepositorBytecode });
  const batcher = (await client.waitForTransactionReceipt({ hash: deployHash })).contractAddress!;

  // Build the chain: deposits of 1 wei each, PER_TX per transaction.
  const t0 = Date.now();
  let nonce = await client.getTransactionCount({ address: account.address });
  const hashes: `0x${string}`[] = [];
  for (let made = 0; made < N; made += PER_TX) {
    const count = BigInt(Math.min(PER_TX, N - made));
    hashes.push(
      await wallet.writeContract({
        address: batcher,
        abi: BatchDepositorAbi,
        functionName: 'depositMany',
        args: [contracts.depository, count, 1n, toHex(made, { size: 32 })],
        value: count,
        nonce: nonce++,
        gas: 25_000_000n,
      }),
    );
  }
  const last = await client.waitForTransactionReceipt({ hash: hashes.at(-1)! });
  if (last.status !== 'success') throw new Error('a batch of deposits reverted');
  // A backfill reads history: the deposits are buried under a finality depth of blocks (64, as
  // configured below), as on a node catching up, so the indexer may read ahead of its writes.
  await fetch(anvil.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_mine', params: [toHex(FINALITY_DEPTH)] }),
  });
  // The last deposit's block, at least: anvil can answer eth_blockNumber with the block before the
  // one a receipt it just gave names (the raw read below then missed that block's 500 deposits).
  const head = [await client.getBlockNumber(), last.blockNumber + BigInt(FINALITY_DEPTH)].reduce((a, b) => (a > b ? a : b));
  console.log(
    `chain: ${N.toLocaleString()} deposits in ${hashes.length} transactions up to block ${head}, built in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );

  const log = createLogger('silent');
  const dir = scratchDir('relay-bench-backfill-');
  const config: EvmChainConfig = {
    id: CHAIN_ID,
    name: 'bench',
    kind: 'evm',
    rpcUrl: anvil.rpcUrl,
    depository: contracts.depository,
    filler: contracts.filler,
    startBlock: Number(contracts.deployBlock),
    confirmations: 1,
    finalityDepth: FINALITY_DEPTH,
    pollIntervalMs: 50,
    maxLogRange: Number(process.env.MAX_LOG_RANGE ?? 2_000),
    replaceAfterBlocks: 3,
    gasMarginBps: 2_000,
    l1DataFee: 'auto',
    l1DataFeeMarginBps: 10_000,
    appBalanceDeposits: false,
    maxCallGas: 1_000_000,
    depositEnabled: true,
    private: false,
    nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
    currencies: [],
  };

  // The node: a fresh ledger, opened as the node opens it (its WAL checkpointed, and its ranges of final blocks
  // written, on threads of their own: the writer's start is waited for, as a node's has long started when it has
  // connected to its chains), and the node's indexer, alone. Returns its time and the rows it wrote.
  async function backfill(round: number): Promise<{ seconds: number; written: (NewDeposit & { confirmed_at: number })[] }> {
    const ledger = Ledger.open(join(dir, `ledger-${round}.sqlite`), { checkpointThread: log, writerThread: log });
    for (const until = Date.now() + 10_000; !ledger.writesOffThread; await new Promise((r) => setTimeout(r, 10))) {
      if (Date.now() > until) throw new Error('the ledger writer thread did not start');
    }
    const indexer = new IndexerDriver({
      config: {
        chainId: CHAIN_ID,
        cursor: 'depository',
        startBlock: config.startBlock,
        confirmations: config.confirmations,
        finalityDepth: config.finalityDepth,
        maxRange: config.maxLogRange,
        pollIntervalMs: config.pollIntervalMs,
      },
      source: new EvmDepositSource(config, client),
      ledger,
      events: { onConfirmed() {}, onHead() {} },
      reorgs: { reorgDecided: () => false, onDepositReorged() {} },
      metrics: createMetrics(),
      log,
    });
    // BENCH_PROFILE=1: a CPU profile of the first round's indexer window only.
    const stopProfile = round === 0 ? await profileWindow('backfill') : async () => undefined;
    const started = performance.now();
    indexer.start();
    await indexer.waitFor(head);
    const seconds = (performance.now() - started) / 1000;
    await indexer.stop();
    const profile = await stopProfile();
    if (profile) console.log(`profile: ${profile}`);
    const written = ledger.db
      .prepare(`SELECT id, chain_id, tx_hash, log_index, block_number, block_hash, depositor, currency, amount, order_ref, seen_at, confirmed_at
        FROM deposits ORDER BY block_number, log_index`)
      .all() as (NewDeposit & { confirmed_at: number })[];
    // Closed with its threads, so that nothing of this round competes with what is measured next.
    await ledger.closed();
    if (written.length !== N) throw new Error(`indexed ${written.length} deposits, expected ${N}`);
    return { seconds, written };
  }

  // The ledger's own bound: the same rows written into a fresh ledger as the node's writer thread writes a range of
  // final blocks (bound already, one lazy transaction per WRITE_CHUNK rows, counted), with nothing read or parsed
  // meanwhile. The node's thread reads while its writer thread writes, so its rate cannot pass this one.
  async function writeAlone(round: number, rows: (NewDeposit & { confirmed_at: number })[]): Promise<number> {
    const floorLedger = Ledger.open(join(dir, `floor-${round}.sqlite`), { checkpointThread: log });
    const chunks = Array.from({ length: Math.ceil(rows.length / WRITE_CHUNK) }, (_, i) =>
      bindDeposits(rows, i * WRITE_CHUNK, Math.min(WRITE_CHUNK, rows.length - i * WRITE_CHUNK)),
    );
    const started = performance.now();
    for (const values of chunks) floorLedger.tx(() => floorLedger.deposits.recordCount(CHAIN_ID, values), { lazy: true });
    const seconds = (performance.now() - started) / 1000;
    await floorLedger.closed();
    return seconds;
  }

  // The ceiling, on the same anvil: the raw eth_getLogs of the same range in the same windows
  // (chain.maxLogRange blocks), sent one after another as the indexer does and parsed, nothing else.
  async function rawRead(): Promise<number> {
    const started = performance.now();
    let logs = 0;
    for (let from = config.startBlock; from <= Number(head); from += config.maxLogRange) {
      const to = Math.min(Number(head), from + config.maxLogRange - 1);
      const res = await fetch(anvil.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'eth_getLogs',
          params: [{ address: config.depository, fromBlock: toHex(from), toBlock: toHex(to) }],
        }),
      });
      logs += ((await res.json()) as { result: unknown[] }).result.length;
    }
    // The depository's other events (set up by the deploy) come along, as they do for the indexer.
    if (logs < N) throw new Error(`raw eth_getLogs returned ${logs} logs, expected at least ${N}`);
    return (performance.now() - started) / 1000;
  }

  // ROUNDS rounds of the three, one after another (this machine's speed wanders from one second to the next, and
  // the disk's writeback of a round's ledgers slows what follows): the node's time and the write alone are the
  // medians of their rounds; the ceiling is the fastest raw read, what the provider showed it can do.
  const runs: { raw: number; node: number; alone: number }[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const raw = await rawRead();
    const { seconds: node, written } = await backfill(round);
    const alone = await writeAlone(round, written);
    runs.push({ raw, node, alone });
    console.log(`round ${round + 1}: node ${node.toFixed(2)} s, raw eth_getLogs ${raw.toFixed(2)} s, the ledger's write alone ${alone.toFixed(2)} s`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const seconds = median(runs.map((r) => r.node));
  const rawSeconds = Math.min(...runs.map((r) => r.raw));
  const floorSeconds = median(runs.map((r) => r.alone));
  const rate = Math.round(N / seconds);
  const rawRate = Math.round(N / rawSeconds);
  const floorRate = Math.round(N / floorSeconds);
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: +(totalmem() / 2 ** 30).toFixed(1), node: process.version };
  console.log(`backfill (median of ${ROUNDS}): ${N.toLocaleString()} deposits indexed in ${seconds.toFixed(2)} s = ${rate.toLocaleString()} deposits/s`);
  console.log(
    `ceiling: raw eth_getLogs of the same range (${config.maxLogRange}-block windows, the fastest of ${ROUNDS}): ${rawSeconds.toFixed(2)} s = ${rawRate.toLocaleString()} logs/s → the node reaches ${((100 * rate) / rawRate).toFixed(0)}%`,
  );
  console.log(
    `the ledger's write alone (the same rows, ${WRITE_CHUNK.toLocaleString()} per transaction): ${floorSeconds.toFixed(2)} s = ${floorRate.toLocaleString()} deposits/s, ${((100 * floorRate) / rawRate).toFixed(0)}% of the raw eth_getLogs rate → the node reaches ${((100 * rate) / floorRate).toFixed(0)}% of it`,
  );
  console.log(`machine: ${machine.cpus} × ${machine.cpu}, ${machine.memGiB} GiB, node ${machine.node}`);
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/backfill-${Date.now()}.json`;
  writeFileSync(
    file,
    JSON.stringify(
      {
        deposits: N,
        perTransaction: PER_TX,
        blocks: Number(head),
        seconds,
        depositsPerSecond: rate,
        rawGetLogsSeconds: rawSeconds,
        rawGetLogsPerSecond: rawRate,
        ceilingRatio: rate / rawRate,
        ledgerWriteSeconds: floorSeconds,
        ledgerWritePerSecond: floorRate,
        rounds: runs,
        machine,
      },
      null,
      2,
    ),
  );
  console.log(`wrote ${file}`);
} finally {
  await devnet.stop();
}
