// The acting stages' ledger (fenced.ts): once another node took the lease, a fenced ledger writes
// nothing more (in a transaction or outside one) and says so with LeaseLostError; what it wrote while
// it led carries its epoch; the ledger itself (the API's) keeps writing.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ActingLedger, fencedLedger, READS } from './fenced.ts';
import { Ledger } from './index.ts';
import { LeaseLostError } from './leases.ts';
import { threadLog } from '../../test/helpers/threadLog.ts';
import { until } from '../../test/helpers/until.ts';
import type { NewPayout } from './payouts.ts';

const TTL = 10_000;
let n = 0;
const payout = (): NewPayout => ({
  id: `p${++n}`,
  kind: 'claim',
  request_id: null,
  deposit_id: null,
  chain_id: 10,
  recipient: '0x00000000000000000000000000000000000000bb',
  currency: '0x00000000000000000000000000000000000000c1',
  amount: '5',
  decided_at: 1,
});

describe('fenced ledger', () => {
  let dir: string;
  let a: ReturnType<typeof Ledger.open>;
  let b: ReturnType<typeof Ledger.open>;
  let acting: ActingLedger;
  let heard: LeaseLostError[];
  const count = () => (a.db.prepare('SELECT COUNT(*) AS n FROM payouts').get() as { n: number }).n;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'fence-'));
    a = Ledger.open(join(dir, 'ledger.sqlite'));
    b = Ledger.open(join(dir, 'ledger.sqlite'));
    heard = [];
    acting = fencedLedger(a, (e) => heard.push(e));
  });
  afterEach(() => {
    a.close();
    b.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes nothing before it leads; reads answer (a standby serves the API)', async () => {
    // The Status record by id reads, whether through the store or the ledger's own statusOf.
    const none = `0x${'ab'.repeat(32)}`;
    expect(acting.requests.status(none)).toBeUndefined();
    expect(await acting.statusOf(none)).toBeUndefined();
    a.payouts.insert(payout());
    expect(acting.payouts.get(`p${n}`)?.amount).toBe('5');
    expect(acting.payouts.unsent()).toBe(1);
    expect(() => acting.payouts.setState(`p${n}`, 'failed')).toThrow(LeaseLostError);
    expect(a.payouts.get(`p${n}`)?.state).toBe('queued');
    a.db.prepare('DELETE FROM payouts').run();
    heard.length = 0;
    expect(() => acting.payouts.insert(payout())).toThrow(LeaseLostError);
    expect(() => acting.tx(() => a.payouts.insert(payout()))).toThrow(LeaseLostError);
    expect(count()).toBe(0);
    expect(heard).toHaveLength(2);
  });

  it('records payouts with its epoch while it holds the lease', () => {
    const epoch = a.leases.acquire('node-a', 1_000, TTL)!;
    acting.arm({ holder: 'node-a', epoch });
    const p = payout();
    acting.payouts.insert(p);
    const q = payout();
    acting.tx(() => acting.payouts.insert(q));
    expect(a.payouts.get(p.id)?.epoch).toBe(epoch);
    expect(a.payouts.get(q.id)?.epoch).toBe(epoch);
    // Reads answer as the ledger's own.
    expect(acting.payouts.forRequest('0x00')).toEqual([]);
    // Not fenced, the ledger records none (a single node).
    const r = payout();
    a.payouts.insert(r);
    expect(a.payouts.get(r.id)?.epoch).toBeNull();
    expect(heard).toEqual([]);
  });

  it('once another holder took the lease: throws LeaseLostError and writes nothing, in a transaction or outside one', () => {
    const epoch = a.leases.acquire('node-a', 1_000, TTL)!;
    acting.arm({ holder: 'node-a', epoch });
    const first = payout();
    acting.payouts.insert(first);
    // node-b (another process, its own connection) takes over after the lease expired.
    expect(b.leases.acquire('node-b', 1_000 + TTL, TTL)).toBe(epoch + 1);
    const before = count();
    const p = payout();
    expect(() =>
      acting.tx(() => {
        acting.payouts.setState(first.id, 'failed');
        acting.payouts.insert(p);
      }),
    ).toThrow(LeaseLostError);
    expect(() => acting.payouts.insert(payout())).toThrow(LeaseLostError);
    expect(() => acting.payouts.setState(first.id, 'failed')).toThrow(LeaseLostError);
    expect(count()).toBe(before);
    expect(a.payouts.get(p.id)).toBeUndefined();
    expect(a.payouts.get(first.id)?.state).toBe('queued');
    expect(heard.length).toBe(3);
    expect(heard[0]!.fence).toEqual({ holder: 'node-a', epoch });
    // The API's writes (the ledger itself) are not fenced: a standby serves quotes.
    const api = payout();
    a.payouts.insert(api);
    expect(a.payouts.get(api.id)).toBeDefined();
  });

  it('disarmed (deadline passed): throws at once, even while the row still names it', () => {
    const epoch = a.leases.acquire('node-a', 1_000, TTL)!;
    acting.arm({ holder: 'node-a', epoch });
    acting.disarm('lease deadline passed');
    expect(acting.fence).toBeUndefined();
    expect(() => acting.payouts.insert(payout())).toThrow(/lease deadline passed/);
    expect(count()).toBe(0);
  });

  it("writes a range of final blocks only under its lease, in a transaction of the node's (never on the writer thread)", async () => {
    const threaded = Ledger.open(join(dir, 'ledger.sqlite'), { writerThread: threadLog() });
    try {
      await until(() => threaded.writesOffThread || undefined, 'the writer thread to start');
      const fenced = fencedLedger(threaded, (e) => heard.push(e));
      const range = (from: number, to: number) => ({ chainId: 10, source: 'depository', from, origin: 0, to, pruneBelow: 0, values: [] });
      const epoch = a.leases.acquire('node-a', 1_000, TTL)!;
      fenced.arm({ holder: 'node-a', epoch });
      expect(await fenced.writeFinalRange(range(1, 5))).toEqual({ fresh: 0, confirmed: 0 });
      expect(a.indexer.cursor(10, 'depository')).toBe(5);
      // node-b takes over: the next range is refused, and the cursor stays.
      b.leases.acquire('node-b', 1_000 + TTL, TTL);
      await expect(fenced.writeFinalRange(range(6, 9))).rejects.toThrow(LeaseLostError);
      expect(a.indexer.cursor(10, 'depository')).toBe(5);
      expect(heard).toHaveLength(1);
    } finally {
      await threaded.closed();
    }
  });

  it('runs unfenced only methods that never write: no method named in READS runs a write statement in any store', () => {
    const offenders: string[] = [];
    for (const f of readdirSync(import.meta.dirname).filter((x) => x.endsWith('.ts') && !x.endsWith('.test.ts'))) {
      let method: string | undefined;
      for (const line of readFileSync(join(import.meta.dirname, f), 'utf8').split('\n')) {
        const m = /^ {2}(?:async )?([a-zA-Z]\w*)\(/.exec(line) ?? /^ {2}get ([a-zA-Z]\w*)\(/.exec(line);
        if (m) method = m[1];
        else if (/^}/.test(line)) method = undefined;
        if (method && READS.has(method) && /\.run\(|transaction\(|\.exec\(/.test(line)) offenders.push(`${f}: ${method}: ${line.trim()}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
