// Leadership (leadership.ts) of two nodes on one ledger file, on fake timers: the first takes the
// lease and acts, the second waits; the leader's gate closes at its monotonic deadline even when its
// timers did not run (a paused process), its ledger is fenced first, and the standby takes over once
// the lease expired, with a higher epoch.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { fencedLedger } from '../ledger/fenced.ts';
import { Ledger } from '../ledger/index.ts';
import { LeaseLostError } from '../ledger/leases.ts';
import { createLogger } from '../log.ts';
import { createMetrics } from '../metrics.ts';
import { Leadership } from './leadership.ts';

const LEASE = 4_000;
const RENEW = 1_000;

describe('leadership', () => {
  let dir: string;
  const opened: Ledger[] = [];
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
    dir = mkdtempSync(join(tmpdir(), 'leadership-'));
  });
  afterEach(() => {
    vi.useRealTimers();
    for (const l of opened.splice(0)) l.close();
    rmSync(dir, { recursive: true, force: true });
  });

  // One node: its own connection, acting ledger, clocks (a paused process's monotonic clock jumps ahead of its timers).
  function node(nodeId: string) {
    const ledger = Ledger.open(join(dir, 'ledger.sqlite'));
    opened.push(ledger);
    const state = { paused: 0, led: [] as number[], lost: [] as LeaseLostError[] };
    const metrics = createMetrics();
    let leadership: Leadership | undefined;
    const acting = fencedLedger(ledger, (e) => leadership?.lost(e));
    leadership = new Leadership({
      ledger,
      acting,
      nodeId,
      leaseMs: LEASE,
      renewMs: RENEW,
      log: createLogger('silent'),
      metrics,
      onLead: async (epoch) => {
        state.led.push(epoch);
      },
      onLost: (e) => state.lost.push(e),
      now: () => Date.now() + state.paused,
      monotonic: () => Date.now() + state.paused,
    });
    return { ledger, acting, leadership, state, metrics };
  }

  it('one leads and renews, the other waits; a standby broadcasts nothing', async () => {
    const a = node('a');
    const b = node('b');
    a.leadership.start();
    b.leadership.start();
    expect(a.leadership.role).toBe('leader');
    expect(b.leadership.role).toBe('standby');
    expect(a.state.led).toEqual([1]);
    expect((await a.metrics.registry.getSingleMetric('relay_leader')!.get()).values[0]!.value).toBe(1);
    await vi.advanceTimersByTimeAsync(LEASE * 5);
    // Renewed all along: still the leader, its gate open; the standby never got it.
    expect(a.leadership.role).toBe('leader');
    expect(() => a.leadership.check()).not.toThrow();
    expect(b.state.led).toEqual([]);
    expect(() => b.leadership.check()).toThrow(LeaseLostError);
    // A standby's LeaseLostError (an API call that would act) ends nothing.
    expect(() => b.acting.tx(() => 1)).toThrow(LeaseLostError);
    expect(b.state.lost).toEqual([]);
    a.leadership.stop();
    b.leadership.stop();
  });

  it("an acquisition that waited (a stalled holder's lock) is renewed at once: the new leader acts for a whole lease from then", () => {
    const a = node('a');
    // The acquire waits 3 s of the 4 s lease (on PostgreSQL: for a stopped holder's transaction to end, which frees
    // the writer's lock). Measured from before it was sent, the deadline (lease − a quarter) would pass at once.
    const acquire = a.ledger.leases.acquire.bind(a.ledger.leases);
    vi.spyOn(a.ledger.leases, 'acquire').mockImplementation((...args) => {
      const epoch = acquire(...args);
      a.state.paused += 3_000;
      return epoch;
    });
    a.leadership.start();
    expect(a.leadership.role).toBe('leader');
    // Just before the deadline measured from the renewal right after the acquisition.
    a.state.paused += LEASE - LEASE / 4 - 10;
    expect(() => a.leadership.check()).not.toThrow();
    expect(a.state.lost).toEqual([]);
    a.leadership.stop();
  });

  it('a paused leader resuming past its deadline is fenced and reports the loss before anything else; the standby takes over', async () => {
    const a = node('a');
    const b = node('b');
    a.leadership.start();
    b.leadership.start();
    // SIGSTOP: a's clocks run on, its timers do not. Past its deadline (lease − a quarter) but before the
    // lease expires in the ledger, its gate already refuses.
    a.state.paused = LEASE - LEASE / 4 + 1;
    expect(() => a.leadership.check()).toThrow(/deadline/);
    expect(a.state.lost).toHaveLength(1);
    expect(a.acting.fence).toBeUndefined();
    expect(() => a.acting.tx(() => 1)).toThrow(LeaseLostError);
    expect(a.leadership.role).toBe('standby');
    // The lease expires in the ledger: b takes it at its next try, epoch 2.
    await vi.advanceTimersByTimeAsync(LEASE + RENEW);
    expect(b.state.led).toEqual([2]);
    expect(b.ledger.leases.current()).toMatchObject({ holder: 'b', epoch: 2 });
    expect(a.state.lost).toHaveLength(1);
    b.leadership.stop();
  });

  it('a leader whose renewal finds the lease taken stops at once', async () => {
    const a = node('a');
    a.leadership.start();
    // Another node took it (its clock far ahead: the expiry it saw had passed).
    const other = Ledger.open(join(dir, 'ledger.sqlite'));
    opened.push(other);
    expect(other.leases.acquire('c', Date.now() + LEASE, LEASE)).toBe(2);
    await vi.advanceTimersByTimeAsync(RENEW);
    expect(a.state.lost).toHaveLength(1);
    expect(a.state.lost[0]!.message).toMatch(/refused/);
    expect(() => a.leadership.check()).toThrow(LeaseLostError);
  });

  it('a clean stop frees the lease for the standby at once', async () => {
    const a = node('a');
    const b = node('b');
    a.leadership.start();
    b.leadership.start();
    a.leadership.stop();
    await vi.advanceTimersByTimeAsync(RENEW);
    expect(b.state.led).toEqual([2]);
    b.leadership.stop();
  });
});
