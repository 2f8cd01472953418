import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../../devnet/postgres.ts';
import { LedgerQueryError, LedgerUnavailable } from '../errors.ts';
import { PgDb, translate, WRITER_LOCK_KEY } from './pgDb.ts';

describe('translate: better-sqlite3 placeholders to PostgreSQL', () => {
  it('numbers ? in order and each @name/:name/$name once, leaving literals, identifiers and comments alone', () => {
    const t = translate(`SELECT '?', "a?b", x FROM t -- what?
      WHERE a = ? AND b = @b AND c = :c AND d = $d AND e = @b AND f = ? /* @not */ AND g::text = 'it''s @x'`);
    expect(t.text).toContain(`SELECT '?', "a?b", x FROM t -- what?`);
    expect(t.text).toContain("WHERE a = $1 AND b = $2 AND c = $3 AND d = $4 AND e = $2 AND f = $5 /* @not */ AND g::text = 'it''s @x'");
    expect(t.sources).toEqual([{ pos: 0 }, { name: 'b' }, { name: 'c' }, { name: 'd' }, { pos: 1 }]);
    expect(t.write).toBe(false);
  });

  it('tells writes (and RETURNING) from reads', () => {
    expect(translate('INSERT INTO t VALUES (?)').write).toBe(true);
    expect(translate("UPDATE t SET x = 'SELECT' WHERE id = ? RETURNING id").returning).toBe(true);
    expect(translate("SELECT 'RETURNING' AS x").returning).toBe(false);
    expect(translate('WITH a AS (SELECT 1) SELECT * FROM a').write).toBe(false);
    expect(translate('WITH a AS (DELETE FROM t RETURNING id) SELECT * FROM a').write).toBe(true);
    expect(translate('  (SELECT 1)').write).toBe(false);
  });
});

describe('PgDb: better-sqlite3 over PostgreSQL', () => {
  let server: PostgresHandle;
  let url: string;
  let db: PgDb;
  let other: pg.Client;
  beforeAll(async () => {
    server = await startPostgres({ durable: false });
    url = await server.createDatabase();
    db = new PgDb(url, { timeoutMs: 5_000 });
    db.exec(`CREATE TABLE t (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k TEXT UNIQUE NOT NULL, n BIGINT, amount TEXT);
      CREATE TABLE log (x TEXT)`);
    other = new pg.Client({ connectionString: url });
    await other.connect();
  }, 60_000);
  afterAll(async () => {
    db?.close();
    await other?.end();
    await server?.stop();
  });

  it('binds as better-sqlite3 does and returns its types: numbers, bigints under safeIntegers, null, pluck, raw', () => {
    const ins = db.prepare('INSERT INTO t (k, n, amount) VALUES (@k, @n, @amount) RETURNING id');
    const a = ins.run({ k: 'a', n: 5, amount: '12' });
    expect(a).toEqual({ changes: 1, lastInsertRowid: 1 });
    expect(db.prepare('INSERT INTO t (k, n, amount) VALUES (?, ?, ?)').run(['b', 2n ** 60n], null)).toEqual({ changes: 1, lastInsertRowid: 0 });
    expect(db.prepare('SELECT k, n, amount FROM t WHERE k = ?').get('a')).toEqual({ k: 'a', n: 5, amount: '12' });
    expect(db.prepare('SELECT n FROM t WHERE k = ?').safeIntegers(true).pluck().get('b')).toBe(2n ** 60n);
    expect(db.prepare('SELECT k FROM t ORDER BY id').pluck().all()).toEqual(['a', 'b']);
    expect(db.prepare('SELECT k, n FROM t WHERE k = ?').raw().all('a')).toEqual([['a', 5]]);
    expect(db.prepare('SELECT k FROM t WHERE k = ?').get('zz')).toBeUndefined();
    // Sums of integer columns are numeric in PostgreSQL: numbers, or exact bigints under safeIntegers, as SQLite's SUM.
    expect(db.prepare('SELECT SUM(n) AS s, COUNT(*) AS c, 1 > 0 AS yes FROM t').get()).toEqual({ s: 2 ** 60 + 5, c: 2, yes: 1 });
    expect(db.prepare('SELECT SUM(n) AS s FROM t').safeIntegers().get()).toEqual({ s: 2n ** 60n + 5n });
    expect([...db.prepare('SELECT k FROM t ORDER BY id').pluck().iterate()]).toEqual(['a', 'b']);
    expect(() => db.prepare('SELECT * FROM t WHERE k = @k').get({})).toThrow(/Missing named parameter "k"/);
    expect(() => db.prepare('SELECT * FROM t WHERE k = ?').get()).toThrow(/Too few/);
    expect(() => db.prepare('SELECT * FROM t WHERE k = ?').get('a', 'b')).toThrow(/Too many/);
    expect(db.prepare('UPDATE t SET n = n + 1 WHERE k IN (?, ?)').run('a', 'b').changes).toBe(2);
  });

  it('rolls a transaction back on throw; a nested one back to its savepoint, the outer going on', () => {
    const log = db.prepare('INSERT INTO log (x) VALUES (?)');
    const xs = () => db.prepare('SELECT x FROM log ORDER BY x').pluck().all();
    expect(() =>
      db.transaction(() => {
        log.run('lost');
        throw new Error('boom');
      })(),
    ).toThrow('boom');
    expect(xs()).toEqual([]);
    db.transaction(() => {
      log.run('outer');
      expect(() =>
        db.transaction(() => {
          log.run('inner');
          // A failing statement inside: PostgreSQL aborts up to the savepoint only.
          log.run(null as unknown as string);
          db.prepare('INSERT INTO t (k) VALUES (?)').run('a');
        })(),
      ).toThrow(/duplicate key/);
      db.transaction(() => log.run('inner2')).immediate();
    }).immediate();
    expect(xs()).toEqual(['inner2', 'outer']);
    expect(db.inTransaction).toBe(false);
  });

  it('refuses to report a commit when a statement failed and the caller went on', () => {
    const log = db.prepare('INSERT INTO log (x) VALUES (?)');
    expect(() =>
      db.transaction(() => {
        log.run('swallowed');
        try {
          db.prepare('INSERT INTO t (k) VALUES (?)').run('a');
        } catch {
          // going on as if nothing happened
        }
      })(),
    ).toThrow(/rolled back/);
    expect(db.prepare("SELECT COUNT(*) AS n FROM log WHERE x = 'swallowed'").pluck().get()).toBe(0);
  });

  it("takes the writer's lock in transactions and in a bare write: one writer at a time across connections", async () => {
    // Another connection holds the writer's lock (as another node's transaction would).
    await other.query('BEGIN');
    await other.query(`SELECT pg_advisory_xact_lock(${WRITER_LOCK_KEY})`);
    // Each attempt on a connection of its own: a timed-out connection refuses calls for a moment after.
    const opened: PgDb[] = [];
    const fresh = () => {
      const d = new PgDb(url, { timeoutMs: 800 });
      opened.push(d);
      return d;
    };
    try {
      // Reads are not held back.
      expect(fresh().prepare('SELECT COUNT(*) AS n FROM t').pluck().get()).toBe(2);
      expect(() => fresh().prepare('INSERT INTO log (x) VALUES (?)').run('bare')).toThrow(/did not answer within 800 ms/);
      const d = fresh();
      expect(() => d.transaction(() => d.prepare('INSERT INTO log (x) VALUES (?)').run('tx'))()).toThrow(/did not answer within 800 ms/);
      await other.query('COMMIT');
      fresh().prepare('INSERT INTO log (x) VALUES (?)').run('after');
      expect((await other.query("SELECT x FROM log WHERE x IN ('bare', 'tx', 'after')")).rows).toEqual([{ x: 'after' }]);
    } finally {
      await other.query('ROLLBACK').catch(() => {});
      for (const d of opened) d.close();
    }
  });

  it("ends a transaction left open by a stalled holder (a paused process, a cut link) after the holder's timeout: the writer's lock comes free", () => {
    // The holder's transaction is open and idle, as a node's is when it is stopped (SIGSTOP) between two
    // statements: it holds the writer's lock, so every other writer (a standby's lease takeover included) waits.
    const holder = new PgDb(url, { timeoutMs: 1_000 });
    const opened: PgDb[] = [holder];
    const fresh = () => {
      const d = new PgDb(url, { timeoutMs: 800 });
      opened.push(d);
      return d;
    };
    try {
      holder.client.batch([{ sql: 'BEGIN' }, { sql: `SELECT pg_advisory_xact_lock(${WRITER_LOCK_KEY})` }, { sql: "INSERT INTO log (x) VALUES ('held')" }]);
      // Another writer gets through once the server ended the holder's idle transaction (a bounded wait).
      const end = Date.now() + 15_000;
      let written = false;
      while (!written) {
        try {
          fresh().prepare('INSERT INTO log (x) VALUES (?)').run('freed');
          written = true;
        } catch (e) {
          if (Date.now() > end) throw e;
        }
      }
      // The holder's transaction was rolled back: its COMMIT fails (not run on a new connection), its write is not there.
      expect(() => holder.client.batch([{ sql: 'COMMIT' }])).toThrow(/unreachable/);
      expect(db.prepare("SELECT x FROM log WHERE x IN ('held', 'freed')").pluck().all()).toEqual(['freed']);
    } finally {
      for (const d of opened) d.close();
    }
  });

  it('a transaction whose connection the server ended between two statements fails whole: its rest never runs on a new connection', () => {
    const holder = new PgDb(url, { timeoutMs: 500 });
    const log = holder.prepare('INSERT INTO log (x) VALUES (?)');
    try {
      expect(() =>
        holder.transaction(() => {
          log.run('first half');
          // A read: the transaction (and its first half, which waited to travel with it) is now open on the server.
          holder.prepare('SELECT COUNT(*) AS n FROM log').get();
          // The main thread stalls between two statements (a pause, a long GC) past the holder's bound: the
          // server ends the idle transaction and its session meanwhile.
          const until = Date.now() + 1_500;
          while (Date.now() < until) {
            // stalled
          }
          log.run('second half');
        })(),
      ).toThrow(/unreachable/);
      expect(db.prepare("SELECT x FROM log WHERE x IN ('first half', 'second half')").pluck().all()).toEqual([]);
    } finally {
      holder.close();
    }
  });

  it('reads one snapshot in snapshot(fn): a commit in between is not seen', async () => {
    const count = db.prepare('SELECT COUNT(*) AS n FROM log').pluck();
    const before = count.get() as number;
    const seen = db.snapshot(() => {
      const first = count.get();
      // A commit by another connection, made while the snapshot is open (a synchronous wait on a child process
      // would do too; the worker-backed client lets us run it from here).
      const writer = new PgDb(url);
      writer.prepare('INSERT INTO log (x) VALUES (?)').run('concurrent');
      writer.close();
      return [first, count.get()];
    });
    expect(seen).toEqual([before, before]);
    expect(count.get()).toBe(before + 1);
    expect(() => db.snapshot(() => db.prepare('INSERT INTO log (x) VALUES (?)').run('no'))).toThrow(/read-only transaction/);
  });

  it('opened read-only (an API replica), it cannot write even on the primary: PostgreSQL refuses', () => {
    const ro = new PgDb(url, { readonly: true });
    try {
      expect(ro.prepare('SELECT COUNT(*) AS n FROM log').pluck().get()).toBeTypeOf('number');
      expect(() => ro.prepare('INSERT INTO log (x) VALUES (?)').run('ro')).toThrow(/read-only transaction/);
      expect(() => ro.transaction(() => ro.prepare('INSERT INTO log (x) VALUES (?)').run('ro'))()).toThrow(/read-only transaction/);
    } finally {
      ro.close();
    }
    expect(db.prepare("SELECT COUNT(*) AS n FROM log WHERE x = 'ro'").pluck().get()).toBe(0);
  });

  it('sends BEGIN, the lock and a bare write in one round trip, a transaction of writes with its COMMIT, and nothing for an empty transaction', () => {
    const log = db.prepare('INSERT INTO log (x) VALUES (?)');
    const trips = (fn: () => void) => {
      const before = db.client.roundTrips;
      fn();
      return db.client.roundTrips - before;
    };
    expect(trips(() => db.transaction(() => {})())).toBe(0);
    expect(trips(() => log.run('one trip'))).toBe(1);
    expect(
      trips(() =>
        db.transaction(() => {
          log.run('two');
          log.run('statements');
        })(),
      ),
    ).toBe(1);
    expect(db.prepare("SELECT COUNT(*) FROM log WHERE x IN ('one trip', 'two', 'statements')").pluck().get()).toBe(3);
  });

  it("serializes a check-then-write: the lock travels with a transaction's first statement, a read, so a second waits there", () => {
    db.exec('CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)');
    db.prepare('INSERT INTO counter VALUES (1, 0)').run();
    // Each connection's check-then-write: read the count, write it plus one.
    const bump = (d: PgDb) =>
      d.transaction(() => {
        const n = d.prepare('SELECT n FROM counter WHERE id = 1').pluck().get() as number;
        d.prepare('UPDATE counter SET n = ? WHERE id = 1').run(n + 1);
        return n;
      })();
    const second = new PgDb(url, { timeoutMs: 1_000 });
    let secondFirst: unknown;
    try {
      const sawFirst = db.transaction(() => {
        const n = db.prepare('SELECT n FROM counter WHERE id = 1').pluck().get() as number;
        // While this transaction is open, having only read, another connection's check-then-write must wait at its
        // first statement, the read: were the lock taken after the first read, it would read 0, write 1 and commit,
        // and this transaction would then write 1 over it (an update lost).
        try {
          bump(second);
        } catch (e) {
          secondFirst = e;
        }
        db.prepare('UPDATE counter SET n = ? WHERE id = 1').run(n + 1);
        return n;
      })();
      expect(sawFirst).toBe(0);
      expect(secondFirst).toBeInstanceOf(LedgerUnavailable);
      // Once the first committed, the second's check-then-write sees its write (on a new connection: the waiting
      // one was dropped and its server session rolls back when it notices).
      const third = new PgDb(url, { timeoutMs: 5_000 });
      try {
        expect(bump(third)).toBe(1);
      } finally {
        third.close();
      }
      expect(db.prepare('SELECT n FROM counter WHERE id = 1').pluck().get()).toBe(2);
    } finally {
      second.close();
    }
  });

  it('rolls back a transaction whose first statement (sent with BEGIN and the lock) fails, and the connection goes on', async () => {
    const log = db.prepare('INSERT INTO log (x) VALUES (?)');
    db.prepare('INSERT INTO t (k) VALUES (?)').run('first-statement');
    const trips = db.client.roundTrips;
    let err: unknown;
    try {
      db.transaction(() => {
        db.prepare('INSERT INTO t (k) VALUES (?)').run('first-statement'); // a duplicate key, in the same round trip as BEGIN and the lock
        log.run('never');
      })();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LedgerQueryError);
    expect((err as LedgerQueryError).message).toMatch(/duplicate key/);
    // The failed first batch, then its ROLLBACK.
    expect(db.client.roundTrips - trips).toBe(2);
    // Rolled back, the lock released: another connection takes it at once.
    await other.query('BEGIN');
    expect((await other.query(`SELECT pg_try_advisory_xact_lock(${WRITER_LOCK_KEY}) AS ok`)).rows).toEqual([{ ok: true }]);
    await other.query('ROLLBACK');
    // The connection is usable: not left in an aborted transaction.
    db.transaction(() => log.run('after the failed first statement'))();
    expect(db.prepare("SELECT COUNT(*) FROM log WHERE x IN ('never', 'after the failed first statement')").pluck().get()).toBe(1);
    expect(db.inTransaction).toBe(false);
  });

  it('answers a read repeated in a transaction with nothing written since without a round trip, and reads again after a write or a rollback to a savepoint', () => {
    db.exec('CREATE TABLE cache_t (id INT PRIMARY KEY, v TEXT NOT NULL)');
    db.prepare("INSERT INTO cache_t VALUES (1, 'a')").run();
    const read = db.prepare('SELECT v FROM cache_t WHERE id = ?').pluck();
    const write = db.prepare('UPDATE cache_t SET v = ? WHERE id = 1');
    const trips = (fn: () => void) => {
      const before = db.client.roundTrips;
      fn();
      return db.client.roundTrips - before;
    };
    const cached = db.cachedReads;
    expect(
      trips(() =>
        db.transaction(() => {
          expect(read.get(1)).toBe('a');
          expect(read.get(1)).toBe('a'); // cached
          expect(read.get(2)).toBeUndefined(); // other values: another read
          write.run('b');
          expect(read.get(1)).toBe('b'); // read again after the write
          expect(read.get(1)).toBe('b'); // cached
          expect(() =>
            db.transaction(() => {
              write.run('c');
              expect(read.get(1)).toBe('c');
              throw new Error('undo the savepoint');
            })(),
          ).toThrow('undo the savepoint');
          expect(read.get(1)).toBe('b'); // read again: the savepoint's write was undone
        })(),
      ),
    ).toBe(6); // the writes travel with the reads after them (see the deferred writes' test)
    expect(db.cachedReads - cached).toBe(2);
    // Outside a transaction nothing is kept: each read is its own.
    expect(trips(() => [read.get(1), read.get(1)])).toBe(2);
    // A snapshot's repeated read is answered too (and its end is posted, not waited for).
    expect(trips(() => db.snapshot(() => [read.get(1), read.get(1)]))).toBe(1);
  });

  it("sends a write whose outcome nobody reads with the transaction's next statement; one that fails there fails the transaction, or only its savepoint", () => {
    db.exec('CREATE TABLE defer_t (k TEXT PRIMARY KEY, n INT NOT NULL)');
    const put = db.prepare('INSERT INTO defer_t (k, n) VALUES (?, ?)');
    const bump = db.prepare('UPDATE defer_t SET n = n + 1 WHERE k = ?');
    const n = db.prepare('SELECT n FROM defer_t WHERE k = ?').pluck();
    const trips = db.client.roundTrips;
    const deferred = db.deferredWrites;
    db.transaction(() => {
      put.run('a', 1);
      bump.run('a');
      // Sent together with this read, in order: it sees both.
      expect(n.get('a')).toBe(2);
      // Its outcome read: sent at once, with the right count.
      expect(bump.run('a').changes).toBe(1);
      expect(bump.run('none').changes).toBe(0);
      put.run('b', 1);
    })();
    // BEGIN + lock + two writes + the read; the first looked-at write; the second; the last write with COMMIT.
    expect(db.client.roundTrips - trips).toBe(4);
    expect(db.deferredWrites - deferred).toBe(5);
    expect(db.prepare('SELECT k, n FROM defer_t ORDER BY k').all()).toEqual([
      { k: 'a', n: 3 },
      { k: 'b', n: 1 },
    ]);

    // A deferred write that fails (a duplicate key) fails its transaction at COMMIT: nothing of it is written.
    expect(() =>
      db.transaction(() => {
        put.run('c', 1);
        put.run('a', 9);
      })(),
    ).toThrow(/rolled back: a statement in it failed: duplicate key/);
    expect(n.get('c')).toBeUndefined();

    // In a nested transaction it fails inside it, at its end: only the savepoint is undone, the outer commits.
    let inner: unknown;
    db.transaction(() => {
      put.run('d', 1);
      try {
        db.transaction(() => {
          put.run('e', 1);
          put.run('a', 9);
        })();
      } catch (e) {
        inner = e;
      }
      bump.run('d');
    })();
    expect((inner as Error).message).toMatch(/duplicate key/);
    expect(db.prepare('SELECT k, n FROM defer_t ORDER BY k').raw().all()).toEqual([
      ['a', 3],
      ['b', 1],
      ['d', 2],
    ]);
    expect(db.inTransaction).toBe(false);
  });

  it('ends a snapshot without waiting for its COMMIT: one read costs one round trip, the next call runs after it, and a snapshot whose read failed still throws', () => {
    const count = db.prepare('SELECT COUNT(*) AS n FROM log').pluck();
    const trips = db.client.roundTrips;
    const posted = db.client.posted;
    const n = db.snapshot(() => count.get()) as number;
    expect(db.client.roundTrips - trips).toBe(1);
    expect(db.client.posted - posted).toBe(1);
    // The next call runs after that COMMIT: this write is not inside the read-only snapshot, and it commits.
    db.transaction(() => db.prepare('INSERT INTO log (x) VALUES (?)').run('after a snapshot'))();
    expect(db.snapshot(() => count.get())).toBe(n + 1);
    // A read that failed, the caller going on: the snapshot throws, as a COMMIT turned ROLLBACK does.
    expect(() =>
      db.snapshot(() => {
        try {
          db.prepare('SELECT * FROM no_such_table').all();
        } catch {
          // going on as if nothing happened
        }
        return 'partial';
      }),
    ).toThrow(/rolled back/);
    // The connection goes on, out of the aborted snapshot.
    expect(count.get()).toBe(n + 1);
    db.transaction(() => db.prepare('INSERT INTO log (x) VALUES (?)').run('after a failed snapshot'))();
    expect(db.snapshot(() => count.get())).toBe(n + 2);
  });
});
