// The leader lease (leases.ts) between two nodes, each with its own connection to one ledger file:
// one of two racing holders takes it, it passes on only once expired, the epoch only rises, and a
// holder that lost it can neither renew nor release it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger } from './index.ts';

const TTL = 10_000;

describe('leader lease', () => {
  let dir: string;
  let a: Ledger;
  let b: Ledger;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'lease-'));
    // Two connections, as two node processes on one ledger have.
    a = Ledger.open(join(dir, 'ledger.sqlite'));
    b = Ledger.open(join(dir, 'ledger.sqlite'));
  });
  afterEach(() => {
    a.close();
    b.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is free at first, with epoch 0', () => {
    expect(a.leases.current()).toEqual({ holder: null, epoch: 0, expires_at: 0 });
  });

  it('goes to one of two racing holders; the other gets nothing', () => {
    const now = 1_000_000;
    const ea = a.leases.acquire('node-a', now, TTL);
    const eb = b.leases.acquire('node-b', now, TTL);
    expect(ea).toBe(1);
    expect(eb).toBeUndefined();
    expect(b.leases.current()).toEqual({ holder: 'node-a', epoch: 1, expires_at: now + TTL });
    // Its holder does not take it again while it runs (it renews).
    expect(a.leases.acquire('node-a', now + 1, TTL)).toBeUndefined();
  });

  it('passes on only once expired, with a higher epoch; the loser can neither renew nor release it', () => {
    const now = 1_000_000;
    const ea = a.leases.acquire('node-a', now, TTL)!;
    expect(b.leases.acquire('node-b', now + TTL - 1, TTL)).toBeUndefined();
    expect(a.leases.renew('node-a', ea, now + TTL - 1, TTL)).toBe(true);
    // Renewed: still not free at the first expiry.
    expect(b.leases.acquire('node-b', now + TTL, TTL)).toBeUndefined();
    const at = now + TTL - 1 + TTL;
    const eb = b.leases.acquire('node-b', at, TTL)!;
    expect(eb).toBe(ea + 1);
    expect(a.leases.renew('node-a', ea, at, TTL)).toBe(false);
    expect(a.leases.release('node-a', ea)).toBe(false);
    expect(a.leases.holds({ holder: 'node-a', epoch: ea })).toBe(false);
    expect(a.leases.holds({ holder: 'node-b', epoch: eb })).toBe(true);
    expect(a.leases.current()).toEqual({ holder: 'node-b', epoch: eb, expires_at: at + TTL });
    // The same holder name under an old epoch is not the holder either.
    expect(b.leases.renew('node-b', ea, at, TTL)).toBe(false);
  });

  it('raises the epoch strictly at every takeover, released or expired', () => {
    const epochs: number[] = [];
    let now = 1_000_000;
    for (let i = 0; i < 6; i++) {
      const [l, holder] = i % 2 ? [b, 'node-b'] : [a, 'node-a'];
      const e = l.leases.acquire(holder, now, TTL)!;
      expect(e).toBeDefined();
      epochs.push(e);
      // Some stop cleanly (released at once); the rest let it expire.
      if (i % 3 === 0) expect(l.leases.release(holder, e)).toBe(true);
      else now += TTL;
    }
    for (let i = 1; i < epochs.length; i++) expect(epochs[i]).toBeGreaterThan(epochs[i - 1]!);
    expect(new Set(epochs).size).toBe(epochs.length);
  });

  it('a released lease is free at once', () => {
    const e = a.leases.acquire('node-a', 5, TTL)!;
    expect(a.leases.release('node-a', e)).toBe(true);
    expect(b.leases.acquire('node-b', 6, TTL)).toBe(e + 1);
  });
});
