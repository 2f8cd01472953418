// The user's wait, as users feel it: from the deposit's broadcast to the moment the public SDK's own
// `execute` resolves with the fill (its status polling counted), on the devnet at 1-second blocks with
// the default confirmations; beside its floor, per order: the wait for the deposit's block, its
// confirmations, and the next destination block after that, which is the earliest a fill can land.
// The deposit counts as broadcast when the SDK first reports its hash (its wallet has sent it).
// Usage: npm run bench:user-wait -- [orders] [sdk polling interval ms]
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { convertViemChainToRelayChain, createClient, getClient } from '@relayprotocol/relay-sdk';
import { createPublicClient, createWalletClient, http, zeroAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet } from '../src/devnet/devnet.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { scratchDir } from './scratchDir.ts';

const N = Number(process.argv[2] ?? 20);
const POLL_MS = Number(process.argv[3] ?? 100);
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

const devnet = await startDevnet({ dataDir: scratchDir('relay-bench-user-wait-'), testAccounts: 2, blockTime: 1, exchange: false });
const node = await new RelayNode(buildConfigWithKeys(devnet.nodeConfig({ port: 0, logLevel: 'silent' }), devnet.keys), { log: createLogger('silent') }).start();
const origin = devnet.chains.find((c) => c.id === 8453)!;
const dest = devnet.chains.find((c) => c.id === 10)!;
const confirmations = (devnet.nodeConfig().chains as { id: number; confirmations?: number }[]).find((c) => c.id === 8453)?.confirmations ?? 1;

// When each block was first seen here (polled every 10 ms): the floor is read from these.
const arrivals = { [origin.id]: new Map<bigint, number>(), [dest.id]: new Map<bigint, number>() };
let watching = true;
const watchers = [origin, dest].map(async (c) => {
  const pc = createPublicClient({ chain: devnetChain(c.id, c.rpcUrl), transport: http(c.rpcUrl) });
  while (watching) {
    const n = await pc.getBlockNumber({ cacheTime: 0 });
    if (!arrivals[c.id]!.has(n)) arrivals[c.id]!.set(n, performance.now());
    await new Promise((r) => setTimeout(r, 10));
  }
});

try {
  createClient({
    baseApiUrl: node.url,
    source: 'relay-node-bench',
    chains: devnet.chains.map((c) => convertViemChainToRelayChain(devnetChain(c.id, c.rpcUrl))),
    pollingInterval: POLL_MS,
    maxPollingAttemptsBeforeTimeout: 600,
  });
  const account = privateKeyToAccount(devnet.accounts[1]!.privateKey);
  const waits: number[] = [];
  const floors: number[] = [];
  const originClient = createPublicClient({ chain: devnetChain(origin.id, origin.rpcUrl), transport: http(origin.rpcUrl) });
  const destClient = createPublicClient({ chain: devnetChain(dest.id, dest.rpcUrl), transport: http(dest.rpcUrl) });
  for (let i = 0; i < N; i++) {
    // Two real chains are not in step: the devnet's anvils, started together, mine within a few ms of
    // each other, so a fill could never make the destination block that follows the deposit's. Each
    // order sets the destination's block timer at its own phase behind the origin's, spread evenly
    // over the block time: the floor below is then read from the blocks as they were.
    const lastOrigin = Math.max(...arrivals[origin.id]!.values());
    while (Math.max(...arrivals[origin.id]!.values()) === lastOrigin) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, Math.floor(((i + 0.5) / N) * 1000)));
    await destClient.request({ method: 'evm_setIntervalMining' as any, params: [1] as any });
    let broadcastAt = 0;
    let depositHash: Hex | undefined;
    const wallet = createWalletClient({ account, chain: devnetChain(origin.id, origin.rpcUrl), transport: http(origin.rpcUrl) });
    const quote = await getClient().actions.getQuote(
      { chainId: origin.id, toChainId: dest.id, currency: zeroAddress, toCurrency: zeroAddress, amount: '10000000000000000', tradeType: 'EXACT_INPUT', wallet },
      true,
    );
    // The deposit counts as broadcast when the SDK first reports its hash (the wallet has sent it).
    await getClient().actions.execute({
      quote,
      wallet,
      onProgress: ({ steps }) => {
        if (depositHash) return;
        const tx = steps
          ?.flatMap((st) => st.items ?? [])
          .flatMap((it) => it.txHashes ?? [])
          .find((t) => t.chainId === origin.id);
        if (tx) [depositHash, broadcastAt] = [tx.txHash as Hex, performance.now()];
      },
    });
    const doneAt = performance.now();
    const receipt = await originClient.getTransactionReceipt({ hash: depositHash! });
    const confirmedSeen = arrivals[origin.id]!.get(receipt.blockNumber + BigInt(confirmations - 1));
    const nextDest = [...arrivals[dest.id]!.values()].filter((t) => confirmedSeen !== undefined && t > confirmedSeen).sort((a, b) => a - b)[0];
    if (nextDest === undefined) throw new Error('no destination block seen after the deposit was confirmed');
    if (process.env.BENCH_STAGES) {
      // Each step of this order, in ms after its broadcast (the ledger's times are wall-clock ms).
      const at = (wall: number | null | undefined) => (wall == null ? '-' : (wall - performance.timeOrigin - broadcastAt).toFixed(0));
      const rel = (t: number | undefined) => (t === undefined ? '-' : (t - broadcastAt).toFixed(0));
      const id = (quote.steps[0]!.requestId ?? '') as string;
      const dep = node.ledger.deposits.forRequest(id)[0];
      const pay = node.ledger.payouts.forRequest(id).find((p) => p.kind === 'fill');
      const tx = pay ? node.ledger.payouts.txsOf(pay.id)[0] : undefined;
      const fillBlock = tx?.block_number != null ? arrivals[dest.id]!.get(BigInt(tx.block_number)) : undefined;
      console.log(
        `  order ${i}: deposit block seen ${rel(arrivals[origin.id]!.get(receipt.blockNumber))}, indexed ${at(dep?.seen_at)}, confirmed ${at(dep?.confirmed_at)}, decided ${at(pay?.decided_at)}, fill sent ${at(tx?.broadcast_at)}, fill block seen ${rel(fillBlock)}, paid ${at(pay?.updated_at)}, SDK done ${rel(doneAt)}; floor ${rel(nextDest)}`,
      );
    }
    waits.push(doneAt - broadcastAt);
    floors.push(nextDest - broadcastAt);
  }
  const w = [...waits].sort((a, b) => a - b);
  const f = [...floors].sort((a, b) => a - b);
  const gaps = waits.map((x, i) => x - floors[i]!).sort((a, b) => a - b);
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: +(totalmem() / 2 ** 30).toFixed(1), node: process.version };
  console.log(`user wait (deposit broadcast → SDK execute resolved), ${N} orders, 1 s blocks, ${confirmations} confirmation(s), SDK polling ${POLL_MS} ms:`);
  console.log(`  wait:  p50 ${pct(w, 50).toFixed(0)} ms  p99 ${pct(w, 99).toFixed(0)} ms`);
  console.log(`  floor: p50 ${pct(f, 50).toFixed(0)} ms  p99 ${pct(f, 99).toFixed(0)} ms  (deposit block + confirmations + next destination block)`);
  console.log(`  above the floor, per order: p50 ${pct(gaps, 50).toFixed(0)} ms  p99 ${pct(gaps, 99).toFixed(0)} ms`);
  console.log(`  machine: ${machine.cpus} × ${machine.cpu}, ${machine.memGiB} GiB, node ${machine.node}`);
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/user-wait-${Date.now()}.json`;
  writeFileSync(
    file,
    JSON.stringify(
      {
        orders: N,
        confirmations,
        pollingMs: POLL_MS,
        waitMs: { p50: pct(w, 50), p99: pct(w, 99) },
        floorMs: { p50: pct(f, 50), p99: pct(f, 99) },
        aboveFloorMs: { p50: pct(gaps, 50), p99: pct(gaps, 99) },
        machine,
      },
      null,
      2,
    ),
  );
  console.log(`  wrote ${file}`);
} finally {
  watching = false;
  await Promise.all(watchers);
  await node.stop();
  await devnet.stop();
}
