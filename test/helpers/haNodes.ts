// Active/standby node processes on one ledger (config.ha), for the tests that start two `relay-node
// start` processes: the config file of one node, the keys it reads from its environment, its role.
import { writeFileSync } from 'node:fs';
import type { Devnet } from '../../src/devnet/devnet.ts';
import type { NodeProcess } from './nodeProcess.ts';
import { api, until } from './stack.ts';

export interface HaConfigOptions {
  nodeId: string;
  /** The SQLite ledger's directory (also the node's dataDir). */
  dataDir: string;
  leaseMs: number;
  renewMs: number;
  /** The PostgreSQL ledger (absent: the SQLite file in dataDir). */
  ledger?: { url?: string; timeoutMs?: number };
  /** Replaces Optimism's (10) RPC URL, e.g. with a counting proxy in front of it. */
  destinationRpc?: string;
  /** Merged into the devnet's `events` section (webhook delivery timings). */
  events?: Record<string, unknown>;
}

/**
 * Writes the config file of one active/standby node at `path`: the devnet's chains, the solver and
 * allocator keys (and the SVM solver's, with an SVM chain) from the environment (haEnv), ha enabled under `nodeId`. Returns `path`.
 */
export function writeHaConfig(devnet: Devnet, path: string, o: HaConfigOptions): string {
  const base = devnet.nodeConfig({ port: 0, logLevel: 'info', dataDir: o.dataDir });
  writeFileSync(
    path,
    JSON.stringify({
      ...base,
      chains: (base.chains as { id: number }[]).map((c) => (c.id === 10 && o.destinationRpc ? { ...c, rpcUrl: o.destinationRpc } : c)),
      solverKey: { env: 'RELAY_SOLVER_KEY' },
      allocatorKey: { env: 'RELAY_ALLOCATOR_KEY' },
      // The SVM chain's payouts are signed by a key of their own (a devnet started with svm: true).
      ...(devnet.svm ? { svmSolverKey: { env: 'RELAY_SVM_SOLVER_KEY' } } : {}),
      ha: { enabled: true, leaseMs: o.leaseMs, renewMs: o.renewMs, nodeId: o.nodeId },
      ...(o.events ? { events: { ...(base.events as object), ...o.events } } : {}),
      ...(o.ledger?.url ? { ledger: o.ledger } : {}),
    }),
  );
  return path;
}

/** The environment a node started with writeHaConfig's file reads its keys from. */
export const haEnv = (devnet: Devnet) => keyEnv(devnet.keys);

/** The variables a devnet node's config names its keys by (the SVM solver's only with an SVM chain). */
export const keyEnv = (keys: { solver: string; allocator: string; svmSolver?: string }) => ({
  RELAY_SOLVER_KEY: keys.solver,
  RELAY_ALLOCATOR_KEY: keys.allocator,
  ...(keys.svmSolver ? { RELAY_SVM_SOLVER_KEY: keys.svmSolver } : {}),
});

/** A node's role as its /health answers it: 'leader' or 'standby'. */
export const nodeRole = async (n: NodeProcess) => (await api(n.url, '/health')).body.role as string;

/** Waits (60 s at most) until the node answers role `r`; on a timeout, the error carries the end of the node's stderr. */
export async function untilRole(n: NodeProcess, r: string, what: string): Promise<void> {
  try {
    await until(async () => ((await nodeRole(n)) === r ? true : undefined), what, 60_000);
  } catch (e) {
    const exit = n.child.exitCode ?? n.child.signalCode;
    // Its last warnings and errors (the node logs JSON lines to stdout; level 40 and up).
    const warnings = n
      .logTail()
      .split('\n')
      .filter((l) => /"level":[456]0/.test(l))
      .slice(-8)
      .join('\n');
    throw new Error(
      `${(e as Error).message}; the node ${exit === null ? 'runs' : `exited (${exit})`}, its stderr ends: ${n.stderr().slice(-3000) || '(empty)'}; its last warnings: ${warnings || '(none)'}`,
    );
  }
}
