// The leader's renewals run on a thread of their own (src/lease/renewer.ts), with a connection of their own, so a
// leader whose main thread is kept busy in ledger calls (a new leader reconciling: the PostgreSQL client blocks the
// thread in every call, and the event loop does not turn for seconds) keeps its lease; a main thread that is neither
// turning its event loop nor waiting on the ledger is hung, and then the renewals stop and the lease expires. Real
// PostgreSQL, real SQLite files, real timers; both "nodes" live in this one process (one main thread), as in
// lease-partition.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../src/devnet/postgres.ts';
import { Ledger, type LedgerLocation, type OpenedLedger } from '../src/ledger/index.ts';
import { LeaseLostError } from '../src/ledger/leases.ts';
import type { Leadership } from '../src/lease/leadership.ts';
import { leaseNode } from './helpers/leaseNode.ts';
import { until } from './helpers/stack.ts';

const LEASE_MS = 1_500;
const RENEW_MS = 300;

let server: PostgresHandle;
let dir: string;
const opened: OpenedLedger[] = [];
const leaders: Leadership[] = [];

beforeAll(async () => {
  server = await startPostgres({ durable: false });
  dir = mkdtempSync(join(tmpdir(), 'lease-renewer-'));
}, 60_000);
afterEach(() => {
  for (const l of leaders.splice(0)) l.stop();
  for (const l of opened.splice(0)) l.close();
});
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

// One node on the ledger at `where`, renewing from a thread of its own.
function node(nodeId: string, where: LedgerLocation) {
  const ledger = Ledger.connect(where);
  opened.push(ledger);
  const n = leaseNode(ledger, { nodeId, leaseMs: LEASE_MS, renewMs: RENEW_MS, renewFrom: where });
  leaders.push(n.leadership);
  return n;
}

// The lease has been renewed at least once by the thread (its expiry moved past the one the acquisition wrote).
async function renewedOnce(n: ReturnType<typeof node>) {
  const first = n.ledger.leases.current().expires_at;
  await until(() => (n.ledger.leases.current().expires_at > first ? true : undefined), 'a first renewal', 10_000);
}

// Keeps this thread busy for `ms` without turning the event loop, `call` running back to back (or nothing at all).
function busy(ms: number, call: () => void = () => {}) {
  const t0 = performance.now();
  let calls = 0;
  while (performance.now() - t0 < ms) {
    call();
    calls++;
  }
  return calls;
}

describe('lease renewal off the event loop', () => {
  it('PostgreSQL: a leader whose main thread is busy in ledger calls for several leases keeps its lease and its epoch', async () => {
    const url = await server.createDatabase();
    const where = { path: '', url };
    const a = node('a', where);
    const b = node('b', where);
    a.leadership.start();
    b.leadership.start();
    expect(a.leadership.role).toBe('leader');
    const epoch = a.leadership.epoch!;
    await renewedOnce(a);

    // A reconciliation's worth of synchronous ledger calls: the event loop does not turn for three leases.
    const calls = busy(3 * LEASE_MS, () => a.acting.payouts.get('p_none'));
    expect(calls).toBeGreaterThan(10);

    // Right after, before any timer of this thread ran: the gate is open, the lease still a's, unexpired.
    expect(() => a.leadership.check()).not.toThrow();
    expect(a.state.lost).toEqual([]);
    const lease = a.ledger.leases.current();
    expect(lease).toMatchObject({ holder: 'a', epoch });
    expect(lease.expires_at).toBeGreaterThan(Date.now());
    // The standby cannot take it.
    expect(b.ledger.leases.acquire('b', Date.now(), LEASE_MS)).toBeUndefined();
    expect(b.state.led).toEqual([]);
    // And the leader writes under its epoch.
    expect(() => a.acting.tx(() => 1)).not.toThrow();
    expect(a.leadership.epoch).toBe(epoch);
  }, 60_000);

  for (const kind of ['postgres', 'sqlite'] as const) {
    it(`${kind}: a main thread hung outside any ledger call stops the renewals; the lease expires, the standby takes it, and the old leader refuses its next broadcast`, async () => {
      const where = kind === 'postgres' ? { path: '', url: await server.createDatabase() } : { path: join(dir, 'hung.sqlite') };
      const a = node('a', where);
      const b = node('b', where);
      a.leadership.start();
      b.leadership.start();
      const epoch = a.leadership.epoch!;
      await renewedOnce(a);

      // Stuck (a loop, a deadlock in native code): no timer, no ledger call, for longer than the lease and the
      // half lease after which the renewer calls the thread hung.
      busy(2 * LEASE_MS + 3 * RENEW_MS);
      expect(() => a.leadership.check()).toThrow(LeaseLostError);
      expect(a.state.lost).toHaveLength(1);
      // The renewals stopped: the lease expired in the ledger while a was stuck.
      expect(a.ledger.leases.current().expires_at).toBeLessThanOrEqual(Date.now());
      await until(() => (b.leadership.role === 'leader' ? true : undefined), 'b to take over', 10_000);
      expect(b.leadership.epoch).toBe(epoch + 1);
      expect(() => a.acting.tx(() => 1)).toThrow(LeaseLostError);
    }, 60_000);
  }

  it('sqlite: a renewal the thread finds refused (another holder) ends the leadership on the main thread', async () => {
    const where = { path: join(dir, 'refused.sqlite') };
    const a = node('a', where);
    a.leadership.start();
    const epoch = a.leadership.epoch!;
    // Another node took it (its clock far ahead: the expiry it saw had passed).
    const other = Ledger.open(where.path);
    opened.push(other);
    expect(other.leases.acquire('c', Date.now() + 2 * LEASE_MS, LEASE_MS)).toBe(epoch + 1);
    await until(() => (a.state.lost.length > 0 ? true : undefined), 'a to hear of the refusal', 10_000);
    expect(a.state.lost[0]!.message).toMatch(/refused/);
    expect(() => a.leadership.check()).toThrow(LeaseLostError);
    expect(a.leadership.role).toBe('standby');
  }, 30_000);
});

describe('lease expiry on the database clock', () => {
  it('PostgreSQL: a node whose clock runs ahead cannot take a running lease early, one whose clock lags neither shortens nor stretches its own', async () => {
    const url = await server.createDatabase();
    const a = Ledger.connect({ path: '', url });
    const b = Ledger.connect({ path: '', url });
    opened.push(a, b);
    const TTL = 60_000;
    const HOUR = 3_600_000;
    const epoch = a.leases.acquire('a', Date.now(), TTL)!;
    // By b's clock, an hour ahead, a's lease expired long ago; by the database's it runs for a minute.
    expect(b.leases.acquire('b', Date.now() + HOUR, TTL)).toBeUndefined();
    // a's clock an hour behind: the renewal still runs to the database's now + ttl (the database is on this host).
    const before = Date.now();
    expect(a.leases.renew('a', epoch, Date.now() - HOUR, TTL)).toBe(true);
    expect(a.leases.current().expires_at).toBeGreaterThanOrEqual(before + TTL);
    // A lease renewed for 1 ms expires by the database's clock: b takes it, its own clock an hour behind.
    expect(a.leases.renew('a', epoch, Date.now() + HOUR, 1)).toBe(true);
    const next = await until(() => b.leases.acquire('b', Date.now() - HOUR, TTL), 'b to take the expired lease', 5_000);
    expect(next).toBe(epoch + 1);
    expect(b.leases.current()).toMatchObject({ holder: 'b', epoch: epoch + 1 });
  }, 30_000);
});
