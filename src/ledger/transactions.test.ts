// The ledger's transactions, the same on both implementations: tx is all or nothing, a nested tx that throws undoes
// its own writes only, read() joins an open tx and sees its writes, and a write outside tx is committed at once.
import { describe, expect, it } from 'vitest';
import { LEDGER_KINDS, testLedgers } from '../../test/helpers/ledgers.ts';

const ledgers = testLedgers();

describe.each(LEDGER_KINDS)('Ledger transactions (%s)', (kind) => {
  const names = (l: Awaited<ReturnType<typeof ledgers.open>>) => l.apiKeys.list().map((k) => k.name);

  it('commits all of a tx or nothing of it', async () => {
    const l = await ledgers.open(kind);
    expect(() =>
      l.tx(() => {
        l.apiKeys.create('lost-1');
        l.operations.switchOn('pause:all', 'test', 'inside a failed tx');
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(names(l)).toEqual([]);
    expect(l.operations.switches()).toEqual([]);
    l.tx(() => {
      l.apiKeys.create('kept-1');
      l.apiKeys.create('kept-2');
    });
    expect(names(l).sort()).toEqual(['kept-1', 'kept-2']);
  });

  it('undoes a nested tx that throws, and only it, the outer one going on', async () => {
    const l = await ledgers.open(kind);
    l.tx(() => {
      l.apiKeys.create('outer-before');
      expect(() =>
        l.tx(() => {
          l.apiKeys.create('inner');
          throw new Error('inner fails');
        }),
      ).toThrow('inner fails');
      // A statement the database refuses, inside a nested tx: on PostgreSQL the savepoint keeps the outer one usable.
      const admin = l.operations.createAdminKey('ops');
      expect(() =>
        l.tx(() => l.db.prepare('INSERT INTO admin_keys (id, name, key_hash, created_at) VALUES (?, ?, ?, ?)').run(admin.id, 'dup', 'h', 1)),
      ).toThrow();
      l.apiKeys.create('outer-after');
    });
    expect(names(l).sort()).toEqual(['outer-after', 'outer-before']);
    expect(l.operations.adminKeys().map((k) => k.name)).toEqual(['ops']);
  });

  it('reads its own writes inside tx, and read() there joins it', async () => {
    const l = await ledgers.open(kind);
    l.tx(() => {
      l.apiKeys.create('seen');
      expect(l.read(() => names(l))).toEqual(['seen']);
    });
    expect(l.read(() => names(l))).toEqual(['seen']);
    // Outside tx a write stands on its own.
    l.apiKeys.create('bare');
    expect(names(l).sort()).toEqual(['bare', 'seen']);
    l.ping();
  });
});
