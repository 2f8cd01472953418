// Issue #19: the node's SQLite ledger is checkpointed on a thread of its own. Its connection runs none below a
// backstop (SQLite would run one inside a commit that takes the log past 1,000 pages, on the node's thread); the
// thread copies what was committed into the database file; the backstop keeps the log bounded when writes never
// pause; a thread that cannot run gives the checkpoints back; the ledger closes with everything readable again.
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { threadLog } from '../../test/helpers/threadLog.ts';
import { until } from '../../test/helpers/until.ts';
import { WalCheckpointer } from './checkpointer.ts';
import { Ledger } from './index.ts';

const autocheckpoint = (l: ReturnType<typeof Ledger.open>) => l.db.pragma('wal_autocheckpoint', { simple: true }) as number;

// 200 cursor rows of 1 KiB names: a few hundred pages of log, under SQLite's own threshold (1,000 pages).
function write(l: ReturnType<typeof Ledger.open>, from = 0) {
  l.tx(() => {
    for (let i = from; i < from + 200; i++) l.indexer.setCursor(1, `${i}`.padEnd(1024, '.'), i);
  });
}

describe('the ledger checkpoint thread', () => {
  let ledger: ReturnType<typeof Ledger.open> | undefined;
  afterEach(() => ledger?.close());
  const file = () => join(mkdtempSync(join(tmpdir(), 'relay-checkpoint-')), 'ledger.sqlite');

  it('copies what was committed into the database file while the node connection runs none', async () => {
    const path = file();
    const l = (ledger = Ledger.open(path, { checkpointThread: threadLog() }));
    // Only a backstop: past 10,000 pages the node's commit checkpoints (a log the thread cannot keep short).
    expect(autocheckpoint(l)).toBe(10_000);
    expect(l.checkpointsOffThread).toBe(true);
    const before = statSync(path).size;
    write(l);
    // The log holds the rows; only the thread copies them to the file (the node connection would not, under 1,000 pages).
    await until(() => statSync(path).size > before + 200 * 1024 || undefined, 'the database file to take the committed pages');
    expect(l.indexer.cursor(1, `${199}`.padEnd(1024, '.'))).toBe(199);
  });

  it('keeps the log bounded under writes without a pause, which a checkpoint from another connection never wholly copies', () => {
    const path = file();
    const l = (ledger = Ledger.open(path, { checkpointThread: threadLog() }));
    const pageSize = l.db.pragma('page_size', { simple: true }) as number;
    // About 19,000 pages of log, written back to back: the thread's checkpoints copy what was committed when they
    // began, never all of it, so only the backstop (10,000 pages, on the node's connection) restarts the log.
    for (let t = 0; t < 60; t++) write(l, t * 200);
    // The log file keeps its high-water mark. A backstop checkpoint that meets one of the thread's under way cannot
    // restart the log, and the next commit's tries again: up to 12,750 pages were seen under load (the bound was 12,000,
    // and failed one run in three on a busy machine). Unbounded, the log would hold all 19,000.
    expect(statSync(`${path}-wal`).size).toBeLessThan(15_000 * (pageSize + 24));
  });

  it('without the thread, SQLite checkpoints on the node connection (and a ledger under its threshold stays in the log)', () => {
    const path = file();
    const l = (ledger = Ledger.open(path));
    expect(autocheckpoint(l)).toBe(1000);
    expect(l.checkpointsOffThread).toBe(false);
    const before = statSync(path).size;
    write(l);
    expect(statSync(path).size).toBe(before);
  });

  it('gives the checkpoints back to the node connection when the thread cannot run', async () => {
    const l = (ledger = Ledger.open(file()));
    const log = threadLog();
    // A file the thread cannot open: it fails at once.
    const c = new WalCheckpointer(l.db, join(tmpdir(), 'relay-checkpoint-none', 'missing.sqlite'), log);
    expect(autocheckpoint(l)).toBe(10_000);
    await until(() => !c.running || undefined, 'the thread to fail');
    expect(autocheckpoint(l)).toBe(1000);
    expect(log.lines.map((x) => x.msg)).toEqual(['the ledger checkpoint thread stopped: checkpoints are back on the node thread']);
  });

  it('closes with every commit readable again', async () => {
    const path = file();
    const l = Ledger.open(path, { checkpointThread: threadLog() });
    write(l);
    write(l, 200);
    l.close();
    const again = (ledger = Ledger.open(path));
    expect(again.indexer.cursor(1, `${399}`.padEnd(1024, '.'))).toBe(399);
    expect((again.db.prepare('SELECT count(*) AS n FROM cursors WHERE chain_id = 1').get() as { n: number }).n).toBe(400);
  });
});
