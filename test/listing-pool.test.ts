import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { zeroAddress } from 'viem';
import { ListingPool } from '../src/api/listing/pool.ts';
import { Ledger } from '../src/ledger/index.ts';
import { createLogger } from '../src/log.ts';
import { heaviestListing, seedRequests } from './helpers/seedRequests.ts';
import { until } from './helpers/until.ts';

// The listing pool against a seeded SQLite ledger, without a node.
const BOUNDS = { maxGroups: 5, maxValuesPerField: 20, maxFilterValues: 100, maxFiltersLength: 4_096 };
let dir: string;
let path: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'relay-listing-pool-'));
  path = join(dir, 'ledger.sqlite');
  const ledger = Ledger.open(path);
  seedRequests(ledger.db, 20_000, { prefix: 'pool', start: Date.UTC(2025, 0, 1) });
  ledger.close();
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const job = (salt: number) => ({ query: Object.fromEntries(new URLSearchParams(heaviestListing(BOUNDS, salt))), authenticatedFor: 'k', v2: false });

describe('ListingPool', () => {
  it("answers a listing past its time with 503 at once, and starts its worker's replacement only once that worker exited", async () => {
    // A worker's terminate() does not stop SQLite's native call: the query runs on to its end. Replaced at once,
    // each timed-out listing left one more query running beside the pool's workers, and anyone could stack them up.
    const pool = new ListingPool(
      { ledger: { path }, chains: [], solver: zeroAddress, bounds: BOUNDS, nice: 0 },
      { workers: 1, timeoutMs: 1, log: createLogger('silent') },
    );
    try {
      let most = 0;
      let settled = false;
      const watch = (async () => {
        while (!settled) {
          most = Math.max(most, pool.threads);
          await new Promise((r) => setTimeout(r, 2));
        }
      })();
      const answers = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => pool.run(job(i))));
      settled = true;
      await watch;
      for (const a of answers) expect(a).toMatchObject({ status: 'rejected', reason: { status: 503, errorCode: 'LISTING_TIMEOUT' } });
      expect(most).toBe(1);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("counts a caller's timed-out listing until its worker has stopped running it", async () => {
    // Released with the 503, a caller's next heavy listing started while the last one's query still ran: one caller
    // kept every worker busy, one timeout after another.
    const pool = new ListingPool(
      { ledger: { path }, chains: [], solver: zeroAddress, bounds: BOUNDS, nice: 0 },
      { workers: 1, timeoutMs: 1, perCaller: 1, log: createLogger('silent') },
    );
    try {
      await expect(pool.run(job(0), 'greedy')).rejects.toMatchObject({ status: 503, errorCode: 'LISTING_TIMEOUT' });
      expect(pool.threads).toBe(1);
      await expect(pool.run(job(1), 'greedy')).rejects.toMatchObject({ status: 429, errorCode: 'RATE_LIMITED' });
      // Another caller is queued meanwhile; once the worker has exited, this one may list again.
      const other = pool.run(job(2), 'other').catch((e: { errorCode?: string }) => e.errorCode);
      const answer = () =>
        pool.run(job(3), 'greedy').then(
          () => 'ok',
          (e: { errorCode?: string }) => e.errorCode,
        );
      await until(async () => ((await answer()) !== 'RATE_LIMITED' ? true : undefined), 'the caller listing again');
      expect(await other).toBe('LISTING_TIMEOUT');
    } finally {
      await pool.close();
    }
  }, 60_000);
});
