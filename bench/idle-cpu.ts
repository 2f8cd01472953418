// The node's CPU with nothing to do: a devnet node (its EVM chains, the exchange stand-in) started,
// left to settle, then its process CPU (user + system) over a window with no deposits, quotes or
// requests, beside its ceiling (one core = 100%); the anvils' own CPU over the same window (what the
// node's polling costs the chains' RPC), read from /proc.
// Usage: [BENCH_WS=1] npx tsx bench/idle-cpu.ts [seconds=30] [blockTimeSeconds]   (no block time: instant mining)
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { startDevnet } from '../src/devnet/devnet.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { profileWindow } from './profile.ts';
import { scratchDir } from './scratchDir.ts';

const SECONDS = Number(process.argv[2] ?? 30);
const BLOCK_TIME = process.argv[3] === undefined ? undefined : Number(process.argv[3]);
const SETTLE_MS = 5_000;

// CPU seconds (user + system) a process has used, from /proc (Linux); undefined elsewhere.
function procCpuSeconds(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return undefined;
  }
}

const dataDir = scratchDir('relay-bench-idle-');
// BENCH_WS=1: the node reaches the EVM chains by websocket (new heads pushed, the indexers' polls a backstop).
const WS = !!process.env.BENCH_WS;
const devnet = await startDevnet({ dataDir, blockTime: BLOCK_TIME, websocket: WS });
const node = await new RelayNode(buildConfigWithKeys(devnet.nodeConfig({ port: 0, logLevel: 'silent' }), devnet.keys), { log: createLogger('silent') }).start();
try {
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const anvils = devnet.chains.map((c) => ({ id: c.id, pid: c.anvil.pid, cpu0: procCpuSeconds(c.anvil.pid) }));
  const stopProfile = await profileWindow('idle-cpu');
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const profiled = await stopProfile();
  const nodePct = ((cpu.user + cpu.system) / 1000 / wallMs) * 100;
  const anvilPct = anvils.map((a) => {
    const now = procCpuSeconds(a.pid);
    return { chainId: a.id, pct: a.cpu0 === undefined || now === undefined ? undefined : ((now - a.cpu0) * 1000 * 100) / wallMs };
  });
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: +(totalmem() / 2 ** 30).toFixed(1), node: process.version };
  console.log(
    `idle CPU over ${(wallMs / 1000).toFixed(0)} s (${BLOCK_TIME === undefined ? 'instant mining' : `${BLOCK_TIME} s blocks`}, ${devnet.chains.length} EVM chains by ${WS ? 'websocket' : 'HTTP'}${devnet.exchange ? ' + exchange' : ''}):`,
  );
  console.log(`  node process: ${nodePct.toFixed(1)}% of one core (ceiling: one core = 100%)`);
  for (const a of anvilPct) console.log(`  anvil ${a.chainId}: ${a.pct === undefined ? 'n/a' : `${a.pct.toFixed(1)}%`} of one core`);
  console.log(`  machine: ${machine.cpus} × ${machine.cpu}, ${machine.memGiB} GiB, node ${machine.node}`);
  if (profiled) console.log(`  CPU profile: ${profiled}`);
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/idle-cpu-${Date.now()}.json`;
  writeFileSync(
    file,
    JSON.stringify({ seconds: wallMs / 1000, blockTime: BLOCK_TIME ?? null, websocket: WS, nodeCpuPct: nodePct, anvilCpuPct: anvilPct, machine }, null, 2),
  );
  console.log(`  wrote ${file}`);
} finally {
  await node.stop();
  await devnet.stop();
}
