// An API replica on PostgreSQL keeps Status records in memory between their changes (StatusCache), told of each
// change by the ledger's triggers through LISTEN/NOTIFY (migration 26, StatusListener). What must hold: a record kept
// is served without a read; every change the writer makes (the request row, a deposit seen or held, a payout's hash,
// a request pruned) is seen; a read that a change overtakes is not kept; nothing kept is served once the
// notifications may be missed (the listening connection lost), and keeping resumes when it is back.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testLedgers } from '../../../test/helpers/ledgers.ts';
import { until } from '../../../test/helpers/until.ts';
import { depositFor, fillPayout, hex, waitingOrder } from '../../../test/helpers/statusFixtures.ts';
import { PgAsyncReads } from './asyncReads.ts';
import { PostgresLedger } from './ledger.ts';
import { StatusCache } from './statusCache.ts';
import { LISTENER_NAME } from './statusListener.ts';
import { STATUS_NOTIFY_VERSION } from '../migrations.ts';
import type { StatusRecord } from '../statusRecord.ts';

const record = (status: string) => ({ status }) as StatusRecord;

// A promise settled from outside, for a read held in flight.
function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('StatusCache', () => {
  it('serves a record read while live without reading again, and reads each time while not live', async () => {
    const cache = new StatusCache();
    let loads = 0;
    const load = async () => (loads++, record('pending'));
    await cache.get('a', load);
    await cache.get('a', load);
    expect(loads).toBe(2);
    cache.live();
    await cache.get('a', load);
    expect(await cache.get('a', load)).toEqual(record('pending'));
    expect(loads).toBe(3);
    cache.invalidate('a');
    await cache.get('a', load);
    expect(loads).toBe(4);
    // An unknown id is not kept.
    await cache.get('b', async () => (loads++, undefined));
    await cache.get('b', async () => (loads++, undefined));
    expect(loads).toBe(6);
    expect(cache.size).toBe(1);
  });

  it('does not keep a read that a change of its request overtakes, and keeps one that a change of another overtakes', async () => {
    const cache = new StatusCache();
    cache.live();
    const held = deferred<StatusRecord>();
    const reading = cache.get('a', () => held.promise);
    const other = deferred<StatusRecord>();
    const readingOther = cache.get('b', () => other.promise);
    cache.invalidate('a');
    held.resolve(record('pending'));
    other.resolve(record('success'));
    expect(await reading).toEqual(record('pending'));
    await readingOther;
    expect(await cache.get('a', async () => record('success'))).toEqual(record('success'));
    expect(await cache.get('b', async () => record('failure'))).toEqual(record('success'));
  });

  it('drops what it keeps and keeps nothing in flight when the notifications stop, until they are live again', async () => {
    const cache = new StatusCache();
    cache.live();
    await cache.get('a', async () => record('pending'));
    const held = deferred<StatusRecord>();
    const reading = cache.get('b', () => held.promise);
    cache.stopped();
    expect(cache.size).toBe(0);
    held.resolve(record('pending'));
    await reading;
    expect(cache.size).toBe(0);
    await cache.get('a', async () => record('success'));
    expect(cache.size).toBe(0);
    // A read begun before the notifications stopped and came back is not kept either.
    cache.live();
    const before = deferred<StatusRecord>();
    const stale = cache.get('c', () => before.promise);
    cache.stopped();
    cache.live();
    before.resolve(record('pending'));
    await stale;
    expect(cache.size).toBe(0);
    await cache.get('c', async () => record('success'));
    expect(await cache.get('c', async () => record('failure'))).toEqual(record('success'));
  });

  it('serves a kept record no longer than its age bound', async () => {
    const cache = new StatusCache({ maxAgeMs: 50 });
    cache.live();
    await cache.get('a', async () => record('pending'));
    expect(await cache.get('a', async () => record('success'))).toEqual(record('pending'));
    await new Promise((r) => setTimeout(r, 60));
    expect(await cache.get('a', async () => record('success'))).toEqual(record('success'));
  });
});

describe('a replica on PostgreSQL keeps Status records between their changes', () => {
  const ledgers = testLedgers();
  let url: string;
  let writer: PostgresLedger;
  let replica: PgAsyncReads;
  // A session of its own that writes without firing triggers: a change nobody is told of, to show what is kept.
  let quiet: pg.Client;
  let n = 0;

  beforeAll(async () => {
    url = await ledgers.url();
    writer = PostgresLedger.open(url);
    // Records are kept an hour: nothing here is refreshed by age.
    replica = new PgAsyncReads(url, { cache: { maxAgeMs: 3_600_000 } });
    quiet = new pg.Client({ connectionString: url });
    await quiet.connect();
    await quiet.query('SET session_replication_role = replica');
  });
  afterAll(async () => {
    await quiet.end();
    await replica.close();
    writer.close();
  });

  const newRequest = () => {
    const id = hex(0x5000 + ++n);
    writer.tx(() => writer.requests.insert(waitingOrder(id, 1_000, { expiresAt: 1 })));
    return id;
  };
  const deposit = (tx: number, orderRef: `0x${string}`) => depositFor(tx, 0, 10, orderRef);
  // The replica's record shows `shown` and is kept: a change written without a notification is not seen. Polled:
  // a change is seen once its notification arrives, and nothing is kept before the listener listens.
  let quietChanges = 0;
  const keptBy = async (read: (id: string) => Promise<StatusRecord | undefined>, id: string, shown: Partial<StatusRecord> = {}, boundMs?: number) => {
    const seen = (s: StatusRecord | undefined) =>
      s !== undefined && Object.entries(shown).every(([k, v]) => JSON.stringify(s[k as keyof StatusRecord]) === JSON.stringify(v));
    await until(
      async () => {
        const before = await read(id);
        if (!seen(before)) return undefined;
        await quiet.query('UPDATE requests SET details = $2 WHERE id = $1', [id, `written without a notification ${++quietChanges}`]);
        return JSON.stringify(await read(id)) === JSON.stringify(before) ? true : undefined;
      },
      `${id} showing ${JSON.stringify(shown)}, kept`,
      boundMs ?? 10_000,
    );
  };
  const expectKept = (id: string, shown: Partial<StatusRecord>) => keptBy((x) => replica.status(x), id, shown);

  it("sees each change the writer makes: the request's status, a deposit seen, reorged and held, a payout's hash, a prune", async () => {
    const id = newRequest();
    await expectKept(id, { status: 'waiting', inTxHashes: [] });
    // A deposit seen for the waiting order.
    writer.tx(() => writer.deposits.insert(deposit(1, id)));
    await expectKept(id, { inTxHashes: [hex(1)] });
    // Another, in a later block, then reorged out (a deposit's update: no change of the request row).
    writer.tx(() => writer.deposits.insert(depositFor(2, 0, 20, id)));
    await expectKept(id, { inTxHashes: [hex(1), hex(2)] });
    writer.tx(() => writer.deposits.reorgAbove(8453, 15));
    await expectKept(id, { inTxHashes: [hex(1)] });
    // Confirmed, held for the request, and the request pending.
    writer.tx(() => {
      writer.deposits.confirmUpTo(8453, 10, 3_000);
      writer.deposits.markHandled(`8453:${hex(1)}:0`, id);
    });
    writer.tx(() => writer.requests.setStatus(id, 'pending', {}, 4_000));
    await expectKept(id, { status: 'pending', updatedAt: 4_000 });
    // A payout decided, then signed.
    writer.tx(() => writer.payouts.insert(fillPayout('p1', id, `8453:${hex(1)}:0`, 5_000)));
    writer.tx(() => writer.payouts.setState('p1', 'sent', { txHash: hex(0xf1) }));
    await expectKept(id, { txHashes: [hex(0xf1)] });

    // A quote nobody used, pruned: its record is gone from the replica too.
    const unused = newRequest();
    await expectKept(unused, { status: 'waiting' });
    expect(writer.tx(() => writer.requests.pruneUnusedQuotes(10))).toBeGreaterThan(0);
    await until(async () => ((await replica.status(unused)) === undefined ? true : undefined), 'the pruned request gone', 10_000);
  });

  it('keeps nothing once the listening connection is lost, nor on a ledger without the triggers, and keeps again once it listens', async () => {
    const id = newRequest();
    await expectKept(id, { status: 'waiting' });
    // A change nobody is told of; then the listener's connection is ended by the server, and the ledger looks as if
    // its writer had not made the triggers yet (so the listener, back at once, does not keep records).
    await quiet.query(`UPDATE requests SET status = 'pending' WHERE id = $1`, [id]);
    expect(await replica.status(id)).toMatchObject({ status: 'waiting' });
    await quiet.query('DELETE FROM schema_migrations WHERE version = $1', [STATUS_NOTIFY_VERSION]);
    const ended = await quiet.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [LISTENER_NAME]);
    expect(ended.rowCount).toBe(1);
    await until(async () => ((await replica.status(id))?.status === 'pending' ? true : undefined), 'the change read once the notifications stopped', 10_000);
    // Nothing kept while the triggers are missing: a change nobody is told of is read at once.
    for (const details of ['one', 'two']) {
      await quiet.query('UPDATE requests SET details = $2 WHERE id = $1', [id, details]);
      expect(await replica.status(id)).toMatchObject({ details });
    }
    // The triggers back: the listener, trying again, keeps records again.
    await quiet.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'status notifications', 0)", [STATUS_NOTIFY_VERSION]);
    // (It tries again within 250 ms, doubling: the fourth try is within 3.75 s of the loss.)
    await keptBy((x) => replica.status(x), id, { status: 'pending' }, 30_000);
  });

  it('is what a read-only ledger (relay-node api) serves', async () => {
    const id = newRequest();
    const api = PostgresLedger.open(url, { readonly: true });
    try {
      await keptBy((x) => api.statusOf(x), id, { status: 'waiting' });
      writer.tx(() => writer.requests.setStatus(id, 'failure', { failReason: 'UNKNOWN' }, 9_000));
      await until(async () => ((await api.statusOf(id))?.status === 'failure' ? true : undefined), 'the change seen', 10_000);
      // The writer reads its own writes: it keeps nothing.
      await quiet.query(`UPDATE requests SET updated_at = 9999 WHERE id = $1`, [id]);
      expect((await writer.statusOf(id))?.updatedAt).toBe(9_999);
    } finally {
      api.close();
    }
  });

  it('keeps nothing on a read-only ledger told to (ledger.statusCacheMaxAgeMs 0), and opens no listener', async () => {
    const id = newRequest();
    const api = PostgresLedger.open(url, { readonly: true, statusCacheMaxAgeMs: 0 });
    try {
      for (const details of ['first', 'second', 'third']) {
        await quiet.query('UPDATE requests SET details = $2 WHERE id = $1', [id, details]);
        expect((await api.statusOf(id))?.details).toBe(details);
      }
      // The replica of this file's other tests listens; this ledger adds none (the one closed above goes soon).
      await until(
        async () => ((await quiet.query('SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [LISTENER_NAME])).rowCount === 1 ? true : undefined),
        'one listener',
        10_000,
      );
    } finally {
      api.close();
    }
  });
});
