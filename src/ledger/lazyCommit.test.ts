// Issue #19: a lazy commit (bookkeeping the node can read again from the chain) does not wait for the
// disk, and nothing else is committed lazily: the connection is back at synchronous=FULL after it,
// a nested lazy call joins its outer (durable) transaction, and a failed lazy transaction writes nothing.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from './index.ts';

const FULL = 2;
const NORMAL = 1;

describe('lazy commits', () => {
  let ledger: ReturnType<typeof Ledger.open> | undefined;
  afterEach(() => ledger?.close());
  const open = () => (ledger = Ledger.open(join(mkdtempSync(join(tmpdir(), 'relay-lazy-')), 'ledger.sqlite')));
  const sync = (l: NonNullable<typeof ledger>) => l.db.pragma('synchronous', { simple: true }) as number;

  it('commits without waiting for the disk, then durable again', () => {
    const l = open();
    expect(sync(l)).toBe(FULL);
    let inside = -1;
    l.tx(
      () => {
        inside = sync(l);
        l.indexer.setCursor(1, 'lazy-test', 7);
      },
      { lazy: true },
    );
    expect(inside).toBe(NORMAL);
    expect(sync(l)).toBe(FULL);
    expect(l.indexer.cursor(1, 'lazy-test')).toBe(7);
  });

  it('joins an outer durable transaction, and a failed one writes nothing', () => {
    const l = open();
    l.tx(() => {
      l.tx(() => l.indexer.setCursor(1, 'lazy-test', 8), { lazy: true });
      expect(sync(l)).toBe(FULL);
    });
    expect(() =>
      l.tx(
        () => {
          l.indexer.setCursor(1, 'lazy-test', 9);
          throw new Error('no');
        },
        { lazy: true },
      ),
    ).toThrow('no');
    expect(sync(l)).toBe(FULL);
    expect(l.indexer.cursor(1, 'lazy-test')).toBe(8);
  });
});
