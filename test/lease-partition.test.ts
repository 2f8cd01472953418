// A leader cut off from PostgreSQL while its main thread is blocked in a ledger call. The PostgreSQL client is
// synchronous (a worker thread, the caller waits): while a call hangs on a partition no timer of the node runs,
// the deadline timer included. The broadcast gate must close anyway: it reads the monotonic clock, so the first
// check after the call returns (with LedgerUnavailable) refuses. Real PostgreSQL, a real TCP proxy cutting the link.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';
import { LedgerUnavailable } from '../src/ledger/errors.ts';
import { LeaseLostError } from '../src/ledger/leases.ts';
import { PostgresLedger } from '../src/ledger/postgres/ledger.ts';
import type { Leadership } from '../src/lease/leadership.ts';
import { leaseNode } from './helpers/leaseNode.ts';
import { until } from './helpers/stack.ts';
import { type ProxyProcess, startProxyProcess } from './helpers/tcpProxyProcess.ts';

const LEASE_MS = 1_000;
const RENEW_MS = 250;
// Longer than the lease: the blocked call outlives the leader's deadline.
const CALL_TIMEOUT_MS = 2 * LEASE_MS;

let server: PostgresHandle;
let url: string;
// In a process of its own: this test's main thread blocks in the ledger's calls.
let proxy: ProxyProcess;
const opened: PostgresLedger[] = [];
const leaders: Leadership[] = [];

beforeAll(async () => {
  server = await startPostgres({ durable: false });
  url = await server.createDatabase();
  opened.push(PostgresLedger.open(url)); // migrated
  proxy = await startProxyProcess({ host: '127.0.0.1', port: Number(new URL(url).port) });
}, 60_000);
afterAll(async () => {
  for (const l of leaders) l.stop();
  for (const l of opened) l.close();
  await proxy?.stop();
  await server?.stop();
});

function node(nodeId: string, ledgerUrl: string) {
  const ledger = PostgresLedger.open(ledgerUrl, { timeoutMs: CALL_TIMEOUT_MS });
  opened.push(ledger);
  // As a node renews: from a thread of its own, on its own connection through the same (cut) link.
  const renewFrom = { path: '', url: ledgerUrl, timeoutMs: CALL_TIMEOUT_MS };
  const n = leaseNode(ledger, { nodeId, leaseMs: LEASE_MS, renewMs: RENEW_MS, renewFrom });
  leaders.push(n.leadership);
  return n;
}

describe('a leader partitioned from PostgreSQL', () => {
  it('blocked in a ledger call past its deadline, it refuses the next broadcast at once; the standby takes over; healed, it writes nothing', async () => {
    // Both connected first (an open blocks the thread longer than a lease under load).
    const a = node('a', proxy.via(url));
    const b = node('b', url);
    a.leadership.start();
    expect(a.leadership.role).toBe('leader');
    const epochA = a.leadership.epoch!;
    b.leadership.start();
    expect(b.leadership.role).toBe('standby');

    await proxy.cut();
    // The main thread waits on the ledger: no timer (renewal, deadline) runs meanwhile.
    const t0 = performance.now();
    expect(() => a.acting.payouts.get('p_none')).toThrow(LedgerUnavailable);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(LEASE_MS);
    expect(a.state.lost).toEqual([]);
    // The next broadcast, right after the call returned and before any timer: refused.
    expect(() => a.leadership.check()).toThrow(LeaseLostError);
    expect(a.state.lost).toHaveLength(1);
    expect(a.leadership.role).toBe('standby');

    // The standby takes the lease once it expired, with a higher epoch.
    await until(() => (b.leadership.role === 'leader' ? true : undefined), 'b to take over', 10_000);
    expect(b.leadership.epoch).toBe(epochA + 1);

    // Healed: the old leader's acting ledger writes nothing (disarmed; and the lease names b at a higher epoch).
    await proxy.heal();
    expect(() => a.acting.tx(() => a.ledger.leases.current())).toThrow(LeaseLostError);
    // Its connection answers again once the client's next attempt is due (it fails fast until then).
    const lease = await until(
      () => {
        try {
          return a.ledger.leases.current();
        } catch (e) {
          if (e instanceof LedgerUnavailable) return undefined;
          throw e;
        }
      },
      'the old leader to reach PostgreSQL again',
      15_000,
    );
    expect(lease).toMatchObject({ holder: 'b', epoch: epochA + 1 });
  }, 60_000);
});
