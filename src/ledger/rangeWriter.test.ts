// Issue #19: the node's SQLite ledger writes the ranges of final blocks an indexer read on a thread and connection of
// its own (so the node's thread reads the next range meanwhile). A range follows the cursor or is refused (one handed
// over behind a failed one never moves the cursor past it); a failed write writes nothing; closing waits for the
// writes asked for; a thread that cannot run leaves the writes to the node's thread.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { threadLog } from '../../test/helpers/threadLog.ts';
import { until } from '../../test/helpers/until.ts';
import { bindDeposits, type NewDeposit, unbindDeposits } from './deposits.ts';
import type { FinalRange } from './finalRange.ts';
import { Ledger } from './index.ts';
import { RangeWriter } from './rangeWriter.ts';

const CHAIN = 8453;
const hex = (n: number, bytes = 32) => `0x${n.toString(16).padStart(bytes * 2, '0')}` as `0x${string}`;

// Blocks [from, to], two deposits each, confirmed (as a backfill writes them).
function range(from: number, to: number): FinalRange {
  const deposits: (NewDeposit & { confirmed_at: number })[] = [];
  for (let n = from; n <= to; n++) {
    for (const i of [0, 1]) {
      deposits.push({
        id: `${CHAIN}:${hex(n)}:${i}`,
        chain_id: CHAIN,
        tx_hash: hex(n),
        log_index: i,
        block_number: n,
        block_hash: hex(10_000 + n),
        depositor: hex(5, 20),
        currency: hex(0, 20),
        amount: String(1_000 + n),
        order_ref: hex(50_000 + 2 * n + i),
        seen_at: 1_000,
        confirmed_at: 2_000,
      });
    }
  }
  return { chainId: CHAIN, source: 'depository', from, origin: 0, to, pruneBelow: 0, values: bindDeposits(deposits) };
}

describe('the ledger writer thread', () => {
  let ledger: ReturnType<typeof Ledger.open> | undefined;
  afterEach(async () => ledger?.closed());
  const file = () => join(mkdtempSync(join(tmpdir(), 'relay-range-writer-')), 'ledger.sqlite');
  const started = async (path = file()) => {
    const l = (ledger = Ledger.open(path, { writerThread: threadLog() }));
    await until(() => l.writesOffThread || undefined, 'the writer thread to start');
    return l;
  };
  // Rows written by this connection since it opened (SQLite counts each connection's own).
  const ownChanges = (l: ReturnType<typeof Ledger.open>) => l.db.prepare('SELECT total_changes()').pluck().get() as number;

  it("writes a range of final blocks on a connection of its own, readable at once on the node's", async () => {
    const l = await started();
    const before = ownChanges(l);
    expect(await l.writeFinalRange(range(1, 50))).toEqual({ fresh: 100, confirmed: 100 });
    expect(ownChanges(l)).toBe(before);
    expect(l.indexer.cursor(CHAIN, 'depository')).toBe(50);
    expect(l.deposits.get(`${CHAIN}:${hex(50)}:1`)).toMatchObject({ state: 'confirmed', confirmed_at: 2_000, block_number: 50, amount: '1050' });
    expect(l.deposits.nextConfirmed(1_000)).toHaveLength(100);
    // Read again (the same blocks, a cursor put back): nothing new.
    l.indexer.setCursor(CHAIN, 'depository', 0);
    expect(await l.writeFinalRange(range(1, 50))).toEqual({ fresh: 0, confirmed: 0 });
  });

  it("refuses a range that does not follow the cursor, on the thread as on the node's", async () => {
    const l = await started();
    await l.writeFinalRange(range(1, 10));
    // Handed over behind a range that failed: blocks 11..20 were never written, so 21.. must not move the cursor.
    await expect(l.writeFinalRange(range(21, 30))).rejects.toThrow(/cursor is at block 10, not 20/);
    const inline = Ledger.open(':memory:');
    await expect(inline.writeFinalRange(range(5, 9))).rejects.toThrow(/cursor is at block 0, not 4/);
    inline.close();
    expect(l.indexer.cursor(CHAIN, 'depository')).toBe(10);
    expect(l.db.prepare('SELECT count(*) FROM deposits WHERE block_number > 10').pluck().get()).toBe(0);
  });

  it('writes nothing of a range whose write fails, the cursor included', async () => {
    const l = await started();
    const bad = range(1, 10);
    const rows = unbindDeposits(bad.values);
    (rows[7] as { amount: string | null }).amount = null; // NOT NULL: the insert fails half-way
    bad.values = bindDeposits(rows);
    await expect(l.writeFinalRange(bad)).rejects.toThrow(/NOT NULL/);
    expect(l.indexer.cursor(CHAIN, 'depository')).toBeUndefined();
    expect(l.db.prepare('SELECT count(*) FROM deposits').pluck().get()).toBe(0);
    // The thread writes on.
    expect(await l.writeFinalRange(range(1, 10))).toEqual({ fresh: 20, confirmed: 20 });
  });

  it('closes once the writes asked for are committed', async () => {
    const path = file();
    const l = await started(path);
    const writes = [l.writeFinalRange(range(1, 500)), l.writeFinalRange(range(501, 1_000))];
    await l.closed();
    ledger = undefined;
    expect(await Promise.all(writes)).toEqual([
      { fresh: 1_000, confirmed: 1_000 },
      { fresh: 1_000, confirmed: 1_000 },
    ]);
    const again = Ledger.open(path);
    expect(again.indexer.cursor(CHAIN, 'depository')).toBe(1_000);
    expect(again.db.prepare('SELECT count(*) FROM deposits').pluck().get()).toBe(2_000);
    again.close();
  });

  it("closes the threads' connections in a process with nothing else to do: the database file alone is left", () => {
    const path = file();
    // A script of its own: in a process that nothing else keeps alive, waiting on the threads to close keeps it alive.
    const script = `import { Ledger } from ${JSON.stringify(new URL('./index.ts', import.meta.url).pathname)};
      const log = { warn() {}, error(_, msg) { console.error(msg); } };
      const l = Ledger.open(${JSON.stringify(path)}, { checkpointThread: log, writerThread: log });
      while (!l.writesOffThread) await new Promise((r) => setTimeout(r, 5));
      await l.writeFinalRange(${JSON.stringify(range(1, 20))});
      await l.closed();
      console.log('closed');`;
    // A file (not --eval: the threads would inherit its --input-type, which a worker refuses).
    const scriptFile = join(dirname(path), 'close.mjs');
    writeFileSync(scriptFile, script);
    const run = spawnSync(process.execPath, ['--import', 'tsx', scriptFile], { encoding: 'utf8', timeout: 30_000 });
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('closed');
    expect(run.status).toBe(0);
    expect(existsSync(`${path}-wal`)).toBe(false);
    const again = Ledger.open(path);
    expect(again.indexer.cursor(CHAIN, 'depository')).toBe(20);
    again.close();
  });

  it("a thread that cannot open the ledger says so, and the writes stay on the node's thread", async () => {
    const log = threadLog();
    // A ledger under a regular file: the thread cannot open it, and fails at once.
    const notADir = file();
    writeFileSync(notADir, '');
    const writer = new RangeWriter(join(notADir, 'ledger.sqlite'), log, { autocheckpoint: 1_000 });
    await until(() => log.lines.find((x) => x.level === 'error'), 'the thread to report its failure');
    expect(log.lines[0]!.msg).toMatch(/writer thread stopped: ranges are written on the node thread/);
    expect(writer.running).toBe(false);
    await expect(writer.write(range(1, 2))).rejects.toThrow(/not running/);
    await writer.stop();
  });

  it('loads the two stores it writes through and SQLite, nothing more: not the whole ledger, viem, nor the PostgreSQL client', () => {
    // The node starts the thread beside its first requests: what it loads is CPU they wait for (the whole ledger
    // and viem were about 0.4 s of it, the first fills' p99 at 50-100 ms against 25-35 ms without the thread).
    const packages = new Set<string>();
    const files = new Set<string>();
    const walk = (file: string) => {
      if (files.has(file)) return;
      files.add(file);
      // Value imports and re-exports (type-only ones are erased before anything loads).
      for (const m of readFileSync(file, 'utf8').matchAll(/^(?:import|export) (?!type )[^;]*?from '([^']+)'/gm)) {
        if (m[1]!.startsWith('.')) walk(join(dirname(file), m[1]!));
        else if (!m[1]!.startsWith('node:')) packages.add(m[1]!);
      }
    };
    walk(join(import.meta.dirname, 'rangeWriterThread.ts'));
    expect([...packages]).toEqual(['better-sqlite3']);
    expect([...files].map((f) => basename(f)).sort()).toEqual([
      'db.ts',
      'deposits.ts',
      'dialect.ts',
      'finalRange.ts',
      'indexerState.ts',
      'migrations.ts',
      'rangeWriterThread.ts',
    ]);
  });
});
