import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LEDGER_BIRTH } from '../ledger/scanMarks.ts';
import type { Hex } from 'viem';
import { Ledger } from '../ledger/index.ts';
import { bindDeposits, type ChainDeposit, unbindDeposits } from '../ledger/deposits.ts';
import type { DepositRow } from '../ledger/types.ts';
import { createLogger } from '../log.ts';
import { createMetrics } from '../metrics.ts';
import { IndexerDriver, type DriverConfig } from './driver.ts';
import type { ReorgDecider } from './events.ts';
import type { DepositSource, Inclusion, RangeRead, SourceBlock } from './source.ts';

const CHAIN = 10;

/**
 * A scripted chain: blocks by height (each fork spells its hashes differently), deposits by block, a
 * provider that refuses ranges wider than `cap`, and a record of every range read with the ledger's
 * cursor at that moment (to check it against what the ledger holds).
 */
class FakeChain implements DepositSource {
  readonly rangeMethod = 'fake_range';
  blocks: SourceBlock[] = [];
  #deposits = new Map<number, Omit<ChainDeposit, 'block_hash' | 'block_number'>[]>();
  cap = Number.MAX_SAFE_INTEGER;
  reads: { from: number; to: number; ok: boolean }[] = [];
  #fork = 'a';
  #tx = 0;
  onRead: (from: number, to: number) => void = () => {};

  constructor(blocks: number) {
    this.blocks.push({ number: 0, hash: '0xa-0', parentHash: '0x' });
    this.mine(blocks);
  }

  /** Adds `count` blocks; `deposits` gives how many deposits a new block holds (by height). */
  mine(count: number, deposits: (n: number) => number = () => 0): void {
    for (let i = 0; i < count; i++) {
      const parent = this.blocks.at(-1)!;
      const n = parent.number + 1;
      this.blocks.push({ number: n, hash: `0x${this.#fork}-${n}`, parentHash: parent.hash });
      this.#deposits.set(
        n,
        Array.from({ length: deposits(n) }, (_, j) => ({
          tx_hash: `0x${(++this.#tx).toString(16).padStart(64, '0')}` as Hex,
          log_index: j,
          depositor: '0x1111111111111111111111111111111111111111',
          currency: '0x0000000000000000000000000000000000000000',
          amount: String(1000 + this.#tx),
          order_ref: `0x${'ab'.repeat(32)}` as Hex,
        })),
      );
    }
  }

  /** Puts a deposit into block `n` (e.g. a transaction included again after a reorg, depositing otherwise). */
  put(n: number, d: Omit<ChainDeposit, 'block_hash' | 'block_number'>): void {
    this.#deposits.set(n, [...(this.#deposits.get(n) ?? []), d]);
  }

  /** Replaces every block above `ancestor` with `count` blocks of a new fork. */
  reorg(ancestor: number, count: number, fork: string, deposits?: (n: number) => number): void {
    this.#fork = fork;
    for (const b of this.blocks.splice(ancestor + 1)) this.#deposits.delete(b.number);
    this.mine(count, deposits);
  }

  async head(): Promise<SourceBlock> {
    return this.blocks.at(-1)!;
  }

  /** Set: a read of block `n` fails while it returns true (a provider failing). */
  failBlock: (n: number) => boolean = () => false;

  async block(n: number): Promise<SourceBlock> {
    if (this.failBlock(n)) throw new Error(`provider failed reading block ${n}`);
    const b = this.blocks[n];
    if (!b) throw new Error(`no block ${n}`);
    return b;
  }

  async deposits(from: number, to: number): Promise<RangeRead> {
    this.onRead(from, to);
    if (to - from + 1 > this.cap) {
      this.reads.push({ from, to, ok: false });
      throw new Error(`range too wide: at most ${this.cap} blocks`);
    }
    this.reads.push({ from, to, ok: true });
    const deposits: ChainDeposit[] = [];
    const blockHashes = new Map<number, string>();
    for (let n = from; n <= Math.min(to, this.blocks.length - 1); n++) {
      const b = this.blocks[n]!;
      for (const d of this.#deposits.get(n) ?? []) {
        deposits.push({ ...d, block_number: n, block_hash: b.hash as Hex });
        blockHashes.set(n, b.hash);
      }
    }
    return { deposits, entries: deposits.length, blockHashes };
  }

  /** Set: inclusions are answered from that fork (a provider on another fork than the one read), after a tick. */
  inclusionFork: string | undefined;
  inclusions = 0;

  async inclusion(txHash: string): Promise<Inclusion | undefined> {
    this.inclusions++;
    if (this.inclusionFork) await new Promise((r) => setTimeout(r, 1));
    for (const [n, ds] of this.#deposits) {
      if (ds.some((d) => d.tx_hash === txHash))
        return { success: true, blockNumber: n, blockHash: this.inclusionFork ? `0x${this.inclusionFork}-${n}` : this.blocks[n]!.hash };
    }
    return undefined;
  }
}

class Decider implements ReorgDecider {
  reported: { d: DepositRow; inTransaction: boolean }[] = [];
  constructor(private ledger: ReturnType<typeof Ledger.open>) {}
  reorgDecided(d: DepositRow): boolean {
    return this.reported.some((r) => r.d.id === d.id);
  }
  onDepositReorged(d: DepositRow): void {
    this.reported.push({ d, inTransaction: this.ledger.db.inTransaction });
  }
}

const running: { driver: IndexerDriver; ledger: Ledger }[] = [];
afterEach(async () => {
  for (const r of running.splice(0)) {
    await r.driver.stop();
    r.ledger.close();
  }
});

function setup(chain: FakeChain, config: Partial<DriverConfig> = {}, ledger = Ledger.open(':memory:')) {
  const decider = new Decider(ledger);
  let confirmedEvents = 0;
  const driver = new IndexerDriver({
    config: { chainId: CHAIN, cursor: 'depository', startBlock: 1, confirmations: 1, finalityDepth: 16, maxRange: 1000, pollIntervalMs: 5, ...config },
    source: chain,
    ledger,
    events: { onHead() {}, onConfirmed: () => void confirmedEvents++ },
    reorgs: decider,
    metrics: createMetrics(),
    log: createLogger('silent'),
  });
  running.push({ driver, ledger });
  const deposits = () => ledger.db.prepare('SELECT * FROM deposits WHERE chain_id = ? ORDER BY block_number, log_index').all(CHAIN) as DepositRow[];
  return { ledger, driver, decider, deposits, confirmedEvents: () => confirmedEvents };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 2));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

// A chain of 10 blocks with one deposit at block 8, read and confirmed (2 confirmations), which the solver then acts on.
async function actedOn() {
  const chain = new FakeChain(0);
  chain.mine(10, (n) => (n === 8 ? 1 : 0));
  const stack = setup(chain, { confirmations: 2 });
  stack.driver.start();
  await until(() => stack.deposits()[0]?.state === 'confirmed', 'the deposit confirmed');
  stack.ledger.db.prepare(`UPDATE deposits SET state = 'handled' WHERE id = ?`).run(stack.deposits()[0]!.id);
  return { chain, ...stack };
}

describe('IndexerDriver', () => {
  it('widens its range while answers are small, and narrows it on a provider that refuses a wide range', async () => {
    const chain = new FakeChain(600);
    const { driver, deposits } = setup(chain);
    driver.start();
    await driver.waitFor(600);
    // 8, 16, 32, 64, 128, 256 blocks: each read is twice the last, up to what is left.
    expect(chain.reads.slice(0, 6).map((r) => r.to - r.from + 1)).toEqual([8, 16, 32, 64, 128, 256]);
    expect(deposits()).toHaveLength(0);

    const capped = new FakeChain(300);
    capped.reorg(0, 300, 'b', (n) => (n % 7 === 0 ? 2 : 0));
    capped.cap = 10;
    const s = setup(capped);
    s.driver.start();
    await s.driver.waitFor(300);
    const failed = capped.reads.filter((r) => !r.ok);
    expect(failed.length).toBeGreaterThan(0);
    // Every refused read is followed by a narrower one, and every answered read was within the cap.
    for (let i = 0; i < capped.reads.length - 1; i++) {
      const r = capped.reads[i]!;
      if (!r.ok) expect(capped.reads[i + 1]!.to - capped.reads[i + 1]!.from).toBeLessThan(r.to - r.from);
    }
    expect(capped.reads.filter((r) => r.ok).every((r) => r.to - r.from + 1 <= 10)).toBe(true);
    // Nothing lost or doubled across the refusals.
    expect(s.deposits()).toHaveLength(2 * Math.floor(300 / 7));
    expect(new Set(s.deposits().map((d) => d.id)).size).toBe(s.deposits().length);
  });

  it('confirms deposits once they have their confirmations, and keeps only the unfinalized blocks', async () => {
    const chain = new FakeChain(0);
    chain.mine(10, (n) => (n === 5 ? 1 : 0));
    const { driver, deposits, confirmedEvents, ledger } = setup(chain, { confirmations: 8, finalityDepth: 4 });
    driver.start();
    await driver.waitFor(10);
    await until(() => deposits()[0]?.state === 'unconfirmed', 'the deposit written');
    expect(confirmedEvents()).toBe(0);
    chain.mine(2);
    driver.wake();
    // Block 5 with its 8 confirmations is final at head 12 (5, 6, ... 12).
    await until(() => deposits()[0]?.state === 'confirmed', 'the deposit confirmed');
    expect(confirmedEvents()).toBe(1);
    const rows = ledger.db.prepare('SELECT number FROM chain_blocks WHERE chain_id = ? ORDER BY number').all(CHAIN) as { number: number }[];
    const blocks = rows.map((b) => b.number);
    // Only the blocks a reorg may still replace are kept: head 12, depth 4 → 8 .. 12.
    expect(blocks).toEqual([8, 9, 10, 11, 12]);
  });

  it('detects a reorg, rewinds to the common ancestor, drops the unacted deposits of the old fork and reads the new one', async () => {
    const chain = new FakeChain(0);
    chain.mine(20, (n) => (n >= 15 ? 1 : 0));
    const { driver, deposits, ledger } = setup(chain, { confirmations: 30 });
    driver.start();
    await driver.waitFor(20);
    const old = deposits();
    expect(old).toHaveLength(6);
    // Blocks 16.. replaced by a longer fork whose deposits sit elsewhere.
    chain.reorg(15, 8, 'b', (n) => (n === 18 ? 1 : 0));
    driver.wake();
    await driver.waitFor(23);
    await until(() => ledger.indexer.tip(CHAIN)?.hash === '0xb-23', 'the new fork read');
    const now = deposits();
    expect(now.filter((d) => d.state === 'reorged').map((d) => d.block_number)).toEqual([16, 17, 18, 19, 20]);
    expect(now.filter((d) => d.state === 'unconfirmed').map((d) => [d.block_number, d.block_hash])).toEqual([
      [15, '0xa-15'],
      [18, '0xb-18'],
    ]);
    // The stored block list is the new fork's, linked by parent hash.
    expect(ledger.indexer.block(CHAIN, 16)?.hash).toBe('0xb-16');
    expect(ledger.indexer.block(CHAIN, 16)?.parent_hash).toBe('0xa-15');
  });

  it('reports a deposit acted on that the new chain does not hold to the solver, inside the range transaction, once', async () => {
    const { chain, driver, deposits, decider } = await actedOn();
    chain.reorg(7, 6, 'b');
    driver.wake();
    await until(() => decider.reported.length === 1, 'the reorged deposit reported');
    expect(decider.reported[0]!.d.id).toBe(deposits()[0]!.id);
    expect(decider.reported[0]!.inTransaction).toBe(true);
    chain.mine(3);
    driver.wake();
    await driver.waitFor(16);
    expect(decider.reported).toHaveLength(1);
  });

  it('reports a deposit acted on whose transaction the new chain included again depositing otherwise, and goes on reading', async () => {
    // A deposit through a contract whose deposit depends on the block (or a swap's output) can come back from a
    // reorg as the same transaction with another amount. Taken for "the chain moves under us", it held the
    // cursor at the reorg for good (every deposit after it on the chain waited) and was never reported.
    const { chain, driver, deposits, decider } = await actedOn();
    const acted = deposits()[0]!;
    chain.reorg(7, 6, 'b');
    chain.put(9, {
      tx_hash: acted.tx_hash as Hex,
      log_index: 0,
      depositor: acted.depositor,
      currency: acted.currency,
      amount: '1',
      order_ref: acted.order_ref as Hex,
    });
    // Answered from another fork than the one read, the inclusion proves nothing: the pass is tried again.
    chain.inclusionFork = 'c';
    driver.wake();
    await until(() => chain.inclusions >= 3, 'the inclusion asked for again');
    expect(decider.reported).toEqual([]);
    chain.inclusionFork = undefined;
    await until(() => decider.reported.length === 1, 'the deposit reported');
    expect(decider.reported[0]!.d.id).toBe(acted.id);
    chain.mine(3);
    driver.wake();
    await driver.waitFor(16);
    expect(decider.reported).toHaveLength(1);
  });

  it('reads the next range while writing the last, final blocks only: a reorg meanwhile never has an old fork written', async () => {
    const chain = new FakeChain(0);
    chain.mine(100, (n) => (n % 3 === 0 ? 1 : 0));
    const s = setup(chain, { confirmations: 5, finalityDepth: 50 });
    // While the first range (1..8) is written, the next one (9..24, final blocks) has been asked
    // for already; the chain then replaces blocks 61.. (unfinalized) with a fork whose deposits sit
    // elsewhere. Every deposit written must be of a block of the chain as it was when written.
    let readAhead = false;
    const stale: number[] = [];
    const insertBound = s.ledger.deposits.insertBound.bind(s.ledger.deposits);
    s.ledger.deposits.insertBound = (values) => {
      const ds = unbindDeposits(values);
      if (!readAhead && ds.some((d) => d.block_number <= 8)) {
        readAhead = chain.reads.some((r) => r.from === 9);
        chain.reorg(60, 50, 'b', (n) => (n % 5 === 0 ? 1 : 0));
      }
      for (const d of ds) if (chain.blocks[d.block_number]?.hash !== d.block_hash) stale.push(d.block_number);
      return insertBound(values);
    };
    s.driver.start();
    await s.driver.waitFor(110);
    await until(() => s.ledger.indexer.tip(CHAIN)?.hash === '0xb-110', 'the new fork read');
    expect(readAhead).toBe(true);
    expect(chain.reads.some((r) => r.from === 9 && r.to <= 50)).toBe(true);
    expect(stale).toEqual([]);
    const live = s.deposits().filter((d) => d.state !== 'reorged');
    const expected = [
      ...Array.from({ length: 60 }, (_, i) => i + 1).filter((n) => n % 3 === 0),
      ...Array.from({ length: 50 }, (_, i) => i + 61).filter((n) => n % 5 === 0),
    ];
    expect(live.map((d) => d.block_number)).toEqual(expected);
    for (const d of live) expect(d.block_hash).toBe(chain.blocks[d.block_number]!.hash);
    // The unfinalized window (the last 50 blocks) is stored as the chain has it.
    for (let n = 61; n <= 110; n++) expect(s.ledger.indexer.block(CHAIN, n)?.hash).toBe(chain.blocks[n]!.hash);
    expect(new Set(s.deposits().map((d) => d.id)).size).toBe(s.deposits().length);
  });

  it('never moves its cursor past what was committed, even when a commit fails', async () => {
    const chain = new FakeChain(0);
    chain.mine(200, (n) => (n % 3 === 0 ? 1 : 0));
    const s = setup(chain, { confirmations: 1000 });
    // At every read, every deposit of a block at or below the cursor is in the ledger.
    const violations: string[] = [];
    chain.onRead = () => {
      const cursor = s.driver.indexed();
      for (let n = 1; n <= cursor; n++) {
        if (n % 3 === 0 && !s.ledger.db.prepare('SELECT 1 FROM deposits WHERE block_number = ?').get(n)) violations.push(`block ${n} below cursor ${cursor}`);
      }
    };
    // The ledger write of one range fails once: nothing of it may stay, the cursor included.
    let failOnce = true;
    const insertBound = s.ledger.deposits.insertBound.bind(s.ledger.deposits);
    s.ledger.deposits.insertBound = (values) => {
      const ds = unbindDeposits(values);
      if (failOnce && ds.some((d) => d.block_number > 60)) {
        failOnce = false;
        insertBound(bindDeposits(ds.filter((d) => d.block_number <= 60))); // part of the range is written, then the disk fills
        throw new Error('disk full');
      }
      return insertBound(values);
    };
    s.driver.start();
    await s.driver.waitFor(200);
    expect(failOnce).toBe(false);
    expect(violations).toEqual([]);
    expect(s.deposits()).toHaveLength(Math.floor(200 / 3));
    expect(s.driver.indexed()).toBe(200);
  });

  it('commits ranges of final blocks lazily (no disk flush), and every range touching the unfinalized window durably', async () => {
    const chain = new FakeChain(0);
    chain.mine(200, (n) => (n % 3 === 0 ? 1 : 0));
    const s = setup(chain, { confirmations: 1, finalityDepth: 16 });
    // Each commit that moved the cursor: where to, and whether it was lazy.
    const commits: { cursor: number; lazy: boolean }[] = [];
    const tx = s.ledger.tx.bind(s.ledger);
    s.ledger.tx = ((fn: () => unknown, opts?: { lazy?: boolean }) => {
      const before = s.driver.indexed();
      const r = tx(fn, opts);
      if (s.driver.indexed() !== before) commits.push({ cursor: s.driver.indexed(), lazy: opts?.lazy === true });
      return r;
    }) as typeof s.ledger.tx;
    s.driver.start();
    await s.driver.waitFor(200);
    // A backfill's final ranges (up to 200 - 16) are bookkeeping the chain gives back: lazy.
    expect(commits.filter((c) => c.lazy).length).toBeGreaterThan(0);
    for (const c of commits) expect({ ...c, lazy: c.cursor <= 200 - 16 }).toEqual(c);
    expect(s.deposits()).toHaveLength(Math.floor(200 / 3));
    expect(s.deposits().every((d) => d.state === 'confirmed')).toBe(true);
  });

  it('commits a range of the unfinalized window that holds no deposit lazily, and one that holds a deposit durably', async () => {
    const chain = new FakeChain(0);
    chain.mine(20);
    const s = setup(chain, { confirmations: 1, finalityDepth: 16 });
    // Each commit that moved the cursor inside the unfinalized window: whether it wrote a deposit, and whether it was lazy.
    const commits: { deposits: boolean; lazy: boolean }[] = [];
    const tx = s.ledger.tx.bind(s.ledger);
    s.ledger.tx = ((fn: () => unknown, opts?: { lazy?: boolean }) => {
      const [cursor, deposits] = [s.driver.indexed(), s.deposits().length];
      const r = tx(fn, opts);
      if (s.driver.indexed() !== cursor) commits.push({ deposits: s.deposits().length !== deposits, lazy: opts?.lazy === true });
      return r;
    }) as typeof s.ledger.tx;
    s.driver.start();
    await s.driver.waitFor(20);
    // New blocks at the head, one at a time: empty ones (a destination chain's, one per fill), then one with a deposit.
    for (let i = 0; i < 3; i++) {
      chain.mine(1);
      await s.driver.waitFor(chain.blocks.at(-1)!.number);
    }
    chain.mine(1, () => 1);
    await s.driver.waitFor(chain.blocks.at(-1)!.number);
    await until(() => s.deposits().length === 1, 'the deposit recorded');
    const live = commits.slice(-4);
    expect(live).toEqual([
      { deposits: false, lazy: true },
      { deposits: false, lazy: true },
      { deposits: false, lazy: true },
      { deposits: true, lazy: false },
    ]);
    expect(s.deposits()[0]!.state).toBe('confirmed');
  });

  it("hands ranges of final blocks to the ledger's writer thread ahead of their commits, and never passes one that failed", async () => {
    const chain = new FakeChain(0);
    chain.mine(400, (n) => (n % 3 === 0 ? 1 : 0));
    const ledger = Ledger.open(join(mkdtempSync(join(tmpdir(), 'relay-driver-')), 'ledger.sqlite'), { writerThread: createLogger('silent') });
    await until(() => ledger.writesOffThread, 'the writer thread to start');
    const s = setup(chain, { confirmations: 1, finalityDepth: 16, maxRange: 20 }, ledger);
    // Block 201's deposit cannot be written (its amount is missing) until it is mended.
    let poisoned = true;
    const read = chain.deposits.bind(chain);
    chain.deposits = async (from, to) => {
      const r = await read(from, to);
      if (poisoned) for (const d of r.deposits) if (d.block_number === 201) (d as { amount: string | null }).amount = null;
      return r;
    };
    let inFlight = 0;
    let maxInFlight = 0;
    const refused: string[] = [];
    const write = ledger.writeFinalRange.bind(ledger);
    ledger.writeFinalRange = async (r) => {
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      try {
        return await write(r);
      } catch (e) {
        refused.push((e as Error).message);
        throw e;
      } finally {
        inFlight--;
      }
    };
    const before = ledger.db.prepare('SELECT total_changes()').pluck().get() as number;
    s.driver.start();
    // The range holding block 201 fails, the one handed over behind it is refused, and the driver reads again from its cursor.
    await until(
      () => refused.some((m) => /cursor is at block \d+, not/.test(m)) && refused.filter((m) => /NOT NULL/.test(m)).length >= 2,
      'a failed range, then another attempt',
    );
    const cursor = s.driver.indexed();
    expect(cursor).toBeLessThan(201);
    expect(s.deposits().map((d) => d.block_number)).toEqual(Array.from({ length: Math.floor(cursor / 3) }, (_, i) => 3 * (i + 1)));
    poisoned = false;
    await s.driver.waitFor(400);
    expect(s.deposits().map((d) => d.block_number)).toEqual(Array.from({ length: 133 }, (_, i) => 3 * (i + 1)));
    expect(s.deposits().every((d) => d.state === 'confirmed')).toBe(true);
    expect(s.confirmedEvents()).toBeGreaterThan(0);
    // Two ranges in the ledger's hands at once; written on the thread's connection (the node's wrote the last,
    // unfinalized blocks only: under a hundred rows).
    expect(maxInFlight).toBe(2);
    expect((ledger.db.prepare('SELECT total_changes()').pluck().get() as number) - before).toBeLessThan(100);
  });

  it('a final source: unbounded reads, the cursor held below what is not served yet, deposits confirmed as they are written', async () => {
    const chain = new FakeChain(0);
    chain.mine(40, (n) => (n % 10 === 0 ? 1 : 0));
    // Block 25's entry is not served yet: the source says it read completely up to 24.
    let servedUpTo: number | undefined = 24;
    const read = chain.deposits.bind(chain);
    chain.deposits = async (from, to) => {
      const r = await read(from, to);
      const upTo = servedUpTo;
      return upTo === undefined ? r : { ...r, deposits: r.deposits.filter((d) => d.block_number <= upTo), upTo };
    };
    const s = setup(chain, { finalityDepth: 0, maxRange: Infinity, confirmations: 1, final: true });
    s.driver.start();
    await until(() => s.driver.indexed() === 24, 'the cursor at 24');
    expect(chain.reads[0]).toEqual({ from: 1, to: 40, ok: true });
    expect(s.deposits().map((d) => [d.block_number, d.state])).toEqual([
      [10, 'confirmed'],
      [20, 'confirmed'],
    ]);
    await s.driver.nextPass();
    expect(s.driver.indexed()).toBe(24);
    servedUpTo = undefined;
    await s.driver.waitFor(40);
    expect(s.deposits().map((d) => [d.block_number, d.state])).toEqual([
      [10, 'confirmed'],
      [20, 'confirmed'],
      [30, 'confirmed'],
      [40, 'confirmed'],
    ]);
    // No unfinalized blocks are kept for a final source.
    expect(s.ledger.indexer.tip(CHAIN)).toBeUndefined();
    expect(s.confirmedEvents()).toBeGreaterThanOrEqual(2);
  });

  it('records a deposit read outside its passes once, confirmed, without moving the cursor, after the first pass noted the ledger birth', async () => {
    const chain = new FakeChain(5);
    const s = setup(chain, { finalityDepth: 0, maxRange: Infinity, final: true });
    const hash = `0x${'ee'.repeat(32)}` as Hex;
    const ref = `0x${'ab'.repeat(32)}` as Hex;
    const d = { tx_hash: hash, log_index: 0, block_number: 9, block_hash: hash, depositor: '0x1', currency: '0x0', amount: '5', order_ref: ref };
    // Asked before the driver runs (the API listens before the chains start): it waits for the first pass.
    const first = s.driver.recordConfirmed([d]);
    expect(s.deposits()).toEqual([]);
    s.driver.start();
    expect(await first).toBe(1);
    expect(s.ledger.funding.scanMark(CHAIN, LEDGER_BIRTH)?.block_number).toBe(5);
    const indexed = s.driver.indexed();
    expect(await s.driver.recordConfirmed([d])).toBe(0);
    expect(s.deposits().map((x) => x.state)).toEqual(['confirmed']);
    expect(s.confirmedEvents()).toBeGreaterThanOrEqual(1);
    expect(s.driver.indexed()).toBe(indexed);
    expect(indexed).toBeLessThan(9);
  });

  it('refuses a deposit read outside its passes when it stops before its first pass', async () => {
    const s = setup(new FakeChain(5), { finalityDepth: 0, maxRange: Infinity, final: true });
    const hash = `0x${'ef'.repeat(32)}` as Hex;
    const d = { tx_hash: hash, log_index: 0, block_number: 3, block_hash: hash, depositor: '0x1', currency: '0x0', amount: '5', order_ref: hash };
    const asked = s.driver.recordConfirmed([d]);
    await s.driver.stop();
    await expect(asked).rejects.toThrow('stopped before its first pass');
    expect(s.deposits()).toEqual([]);
  });

  // A block read that failed during a rewind was taken for a block the chain replaced: the rewind walked on, past the
  // common ancestor, and a provider failing throughout it walked it to the finality window, where the indexer stopped
  // for good (ReorgTooDeepError) on a reorg of two blocks. A failed read now ends the pass; the next one rewinds again.
  it('a provider failing during a rewind neither stops the indexer nor rewinds it past the common ancestor', async () => {
    const chain = new FakeChain(30);
    const { driver, ledger } = setup(chain, { finalityDepth: 8 });
    driver.start();
    await driver.waitFor(30);
    const readsBefore = chain.reads.length;
    chain.reorg(28, 3, 'b');
    // The tip's block (30) reads; those below it fail ten times, more than the finality window's eight blocks.
    let failures = 10;
    chain.failBlock = (n) => n < 30 && failures-- > 0;
    driver.wake();
    await until(() => ledger.indexer.tip(CHAIN)?.hash === '0xb-31', 'the new fork read');
    expect(driver.fatal).toBeUndefined();
    expect(failures).toBeLessThan(0);
    // Re-read from the common ancestor (28), never below it.
    const after = chain.reads.slice(readsBefore).filter((r) => r.ok);
    expect(after.length).toBeGreaterThan(0);
    expect(Math.min(...after.map((r) => r.from))).toBe(29);
    expect(ledger.indexer.block(CHAIN, 29)?.hash).toBe('0xb-29');
  });

  it('stops for good on a reorg deeper than its finality window', async () => {
    const chain = new FakeChain(30);
    const { driver } = setup(chain, { finalityDepth: 4 });
    driver.start();
    await driver.waitFor(30);
    chain.reorg(10, 25, 'b');
    driver.wake();
    await until(() => driver.fatal !== undefined, 'the indexer stopped');
    expect(driver.fatal?.name).toBe('ReorgTooDeepError');
  });
});
