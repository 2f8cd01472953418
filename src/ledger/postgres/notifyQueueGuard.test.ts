// A status listener that stops reading holds PostgreSQL's notification queue back (every status change notifies,
// migration 26), and a full queue fails every write that notifies. The leading node's guard reads the queue's use
// and, past its bound, ends the status listeners' connections, which frees the queue; a replica's listener listens
// again. Here the stuck listener is a session that LISTENs and then sits in an open transaction (PostgreSQL delivers
// nothing to it until the transaction ends), under the listeners' application_name.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testLedgers } from '../../../test/helpers/ledgers.ts';
import { until } from '../../../test/helpers/until.ts';
import { hex, waitingOrder } from '../../../test/helpers/statusFixtures.ts';
import { PgAsyncReads } from './asyncReads.ts';
import { PostgresLedger } from './ledger.ts';
import { NotifyQueueGuard } from './notifyQueueGuard.ts';
import { LISTENER_NAME, STATUS_CHANNEL } from './statusListener.ts';

describe("the guard of PostgreSQL's notification queue", () => {
  const ledgers = testLedgers();
  let writer: PostgresLedger;
  let url: string;
  let stuck: pg.Client;
  let stuckGone: Promise<unknown>;

  beforeAll(async () => {
    url = await ledgers.url();
    writer = PostgresLedger.open(url);
    stuck = new pg.Client({ connectionString: url, application_name: LISTENER_NAME });
    stuckGone = new Promise((resolve) => stuck.on('error', resolve));
    await stuck.connect();
    await stuck.query(`LISTEN ${STATUS_CHANNEL}`);
    await stuck.query('BEGIN');
  });
  afterAll(async () => {
    await stuck.end().catch(() => {});
    writer.close();
  });

  it('reports the queue held back by a listener that stopped reading, ends the listeners past its bound, and the queue empties', async () => {
    const id = hex(0x7001);
    writer.tx(() => writer.requests.insert(waitingOrder(id, 1_000)));
    // A replica whose listener is healthy: it listens again after the guard ends it.
    const replica = new PgAsyncReads(url, { cache: {} });
    try {
      await replica.status(id);
      const listeners = () =>
        writer.read(() => writer.db.prepare('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ?').get(LISTENER_NAME) as { n: number })
          .n;
      await until(() => (listeners() === 2 ? true : undefined), 'the replica listening', 10_000);
      // Changes, each its own transaction: each notifies, and the stuck listener reads none of them.
      for (let i = 0; i < 300; i++) writer.tx(() => writer.requests.setStatus(id, i % 2 ? 'pending' : 'waiting', {}, 2_000 + i));
      const usages: number[] = [];
      const ended: number[] = [];
      const guard = (endAbove: number) =>
        new NotifyQueueGuard(writer, {
          onUsage: (u) => usages.push(u),
          onEnded: (n) => ended.push(n),
          onError: (e) => {
            throw e;
          },
          endAbove,
        });
      // Below its bound: reported, nothing ended.
      expect(guard(0.5).check()).toMatchObject({ ended: 0 });
      expect(usages[0]).toBeGreaterThan(0);
      expect(ended).toEqual([]);
      // Past it: both listeners' connections ended; the stuck one is gone, the replica's listens again.
      expect(guard(0).check()).toMatchObject({ ended: 2 });
      expect(ended).toEqual([2]);
      await stuckGone;
      await until(() => (listeners() === 1 ? true : undefined), 'the replica listening again', 10_000);
      // The queue empties once the next notification moves its tail past what nobody holds any more.
      await until(
        () => {
          writer.tx(() => writer.requests.setStatus(id, 'pending', {}, 9_000));
          return writer.notifyQueueUsage() === 0 ? true : undefined;
        },
        'the queue emptied',
        10_000,
      );
    } finally {
      await replica.close();
    }
  });
});
