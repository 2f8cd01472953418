import { afterEach, describe, expect, it, vi } from 'vitest';
import type { PayoutRow } from '../ledger/types.ts';
import { createLogger } from '../log.ts';
import { createMetrics } from '../metrics.ts';
import { PayoutPipeline, type PayoutPipelineOptions, type PipelineLedger } from './pipeline.ts';
import type { BroadcastResult, PayoutSender, PrepareResult, SubmitResult, TxStatus } from './port.ts';

const CHAIN = 7;

function payout(id: string, kind: PayoutRow['kind'] = 'fill'): PayoutRow {
  return {
    id,
    kind,
    request_id: null,
    deposit_id: null,
    chain_id: CHAIN,
    recipient: 'r',
    currency: 'c',
    amount: '1',
    state: 'queued',
    tx_hash: null,
    fail_reason: null,
    decided_at: 0,
    updated_at: 0,
    native_topup: null,
    calls: null,
    max_gas: null,
    authorization: null,
  };
}

/** The payouts table in memory, with the one write the pipeline makes itself (failing) and the sender's (sent). */
function memoryLedger(rows: PayoutRow[]) {
  const payouts = new Map(rows.map((r) => [r.id, { ...r }]));
  const reads = { queued: 0, rows: 0 };
  const ledger = {
    tx: <T>(fn: () => T): T => fn(),
    payouts: {
      queued: (chain: number, limit = 50) => {
        reads.queued++;
        const rows = [...payouts.values()].filter((p) => p.chain_id === chain && p.state === 'queued').slice(0, limit);
        reads.rows += rows.length;
        return rows;
      },
      queuedCount: (chain: number) => [...payouts.values()].filter((p) => p.chain_id === chain && p.state === 'queued').length,
      get: (id: string) => payouts.get(id),
      getMany: (ids: string[]) => ids.flatMap((id) => payouts.get(id) ?? []),
      setState: (id: string, state: PayoutRow['state'], extra: { failReason?: PayoutRow['fail_reason']; txHash?: string } = {}) => {
        const p = payouts.get(id)!;
        payouts.set(id, { ...p, state, fail_reason: extra.failReason ?? p.fail_reason, tx_hash: (extra.txHash as PayoutRow['tx_hash']) ?? p.tx_hash });
      },
      openTxs: () => [],
    },
  };
  return { ledger: ledger as unknown as PipelineLedger, payouts, reads };
}

/** A sender whose prepare answers come from a script (one per call, the last repeated), and that records what it was asked. */
function scriptedSender(ledger: ReturnType<typeof memoryLedger>, script: (id: string, call: number) => PrepareResult<string> | Promise<PrepareResult<string>>) {
  const calls = { prepare: new Map<string, number>(), submitted: [] as string[], broadcast: [] as string[], confirm: 0, order: [] as string[] };
  const sender: PayoutSender<string, string> = {
    chainId: CHAIN,
    address: 'solver',
    label: 'test',
    async prepare(p) {
      const n = (calls.prepare.get(p.id) ?? 0) + 1;
      calls.prepare.set(p.id, n);
      calls.order.push(`prepare:${p.id}`);
      return script(p.id, n);
    },
    async submit(p, prepared): Promise<SubmitResult<string>> {
      calls.submitted.push(prepared);
      ledger.ledger.payouts.setState(p.id, 'sent', { txHash: `tx-${p.id}` });
      return { kind: 'recorded', txHash: `tx-${p.id}`, signed: p.id };
    },
    async broadcast(signed): Promise<BroadcastResult> {
      calls.broadcast.push(signed);
      return { kind: 'sent' };
    },
    async confirm(): Promise<TxStatus[]> {
      calls.confirm++;
      calls.order.push('confirm');
      return [];
    },
  };
  return { sender, calls };
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

/** `sender` with batches of 10 and one slot, each batch held until `g` opens, then recorded as sent; `batches` lists them. */
function heldBatches(mem: ReturnType<typeof memoryLedger>, sender: PayoutSender<string, string>, batchable: (row: PayoutRow) => boolean) {
  const g = gate();
  const batches: string[][] = [];
  const batching: PayoutSender<string, string> = {
    ...sender,
    batch: {
      maxPayouts: 10,
      slots: 1,
      batchable,
      check: () => {},
      async submitBatch(rows) {
        await g.opened;
        batches.push(rows.map((r) => r.id));
        for (const r of rows) mem.ledger.payouts.setState(r.id, 'sent', { txHash: `batch-${batches.length}` });
        return { kind: 'recorded', txHash: `batch-${batches.length}`, signed: `batch-${batches.length}` };
      },
    },
  };
  return { batching, batches, g };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 1));
  if (!cond()) throw new Error(`timed out waiting for: ${what}`);
}

const pipelines: PayoutPipeline<string, string>[] = [];
afterEach(async () => {
  await Promise.all(pipelines.splice(0).map((p) => p.stop()));
  vi.restoreAllMocks();
});

function pipeline(mem: ReturnType<typeof memoryLedger>, sender: PayoutSender<string, string>, o: Partial<PayoutPipelineOptions> = {}) {
  const failed: { id: string; reason: string }[] = [];
  const metrics = createMetrics();
  const p = new PayoutPipeline(sender, {
    ledger: mem.ledger,
    hooks: { onFailed: (row, reason) => void failed.push({ id: row.id, reason }) },
    metrics,
    log: createLogger('silent'),
    faults: {},
    intervalMs: 60_000,
    concurrency: 4,
    queuedBatch: 100,
    ...o,
  });
  pipelines.push(p);
  return { p, failed, metrics };
}

describe('PayoutPipeline', () => {
  it('postpones a payout whose prepare asks to retry, for its backoff, then sends it once', async () => {
    const mem = memoryLedger([payout('a')]);
    const retryOnce = (_id: string, n: number): PrepareResult<string> =>
      n === 1 ? { kind: 'retry', cause: new Error('provider down'), why: 'rpc' } : { kind: 'ready', prepared: 'a!' };
    const { sender, calls } = scriptedSender(mem, retryOnce);
    // A backoff far longer than the test: wakes during it must not retry.
    const held = pipeline(mem, sender, { backoff: { baseMs: 600_000, maxMs: 600_000 }, random: () => 1 });
    await held.p.start();
    await until(() => calls.prepare.get('a') === 1, 'first prepare');
    for (let i = 0; i < 5; i++) {
      held.p.wake();
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(calls.prepare.get('a')).toBe(1);
    expect(mem.payouts.get('a')!.state).toBe('queued');
    expect(await held.metrics.rpcErrors.get()).toMatchObject({ values: [{ labels: { chain: String(CHAIN), method: 'prepare' }, value: 1 }] });
    await held.p.stop();

    // With a backoff that elapses, the retry goes through by itself (its timer wakes the send loop).
    const mem2 = memoryLedger([payout('a')]);
    const again = scriptedSender(mem2, retryOnce);
    const quick = pipeline(mem2, again.sender, { backoff: { baseMs: 5, maxMs: 5 } });
    await quick.p.start();
    await until(() => again.calls.broadcast.length === 1, 'retried and sent');
    expect(again.calls.prepare.get('a')).toBe(2);
    expect(again.calls.submitted).toEqual(['a!']);
    expect(mem2.payouts.get('a')!.state).toBe('sent');
  });

  it('reads past payouts waiting on their backoff: as many as its batch never hide one decided after them', async () => {
    // Five payouts that wait (a relay held at its own fee cap, say) with a batch of three, then a fill.
    const waiting = ['w1', 'w2', 'w3', 'w4', 'w5'];
    const mem = memoryLedger([...waiting.map((id) => payout(id, 'relay')), payout('fill')]);
    const { sender, calls } = scriptedSender(mem, (id) =>
      id === 'fill' ? { kind: 'ready', prepared: 'fill!' } : { kind: 'retry', cause: new Error('over its cap'), why: 'fee-cap' },
    );
    const { p } = pipeline(mem, sender, { queuedBatch: 3, backoff: { baseMs: 600_000, maxMs: 600_000 }, random: () => 1 });
    await p.start();
    await until(() => calls.prepare.size >= 3, 'the three oldest tried');
    p.wake();
    // Before: each read took the three oldest, all waiting, and the fill was never read.
    await until(() => calls.broadcast.includes('fill'), 'the fill sent');
    expect(mem.payouts.get('fill')!.state).toBe('sent');
    expect(waiting.every((id) => mem.payouts.get(id)!.state === 'queued')).toBe(true);
  });

  it('counts every postpone reason in relay_payout_postponed_total and warns once per payout and reason', async () => {
    const mem = memoryLedger([payout('a'), payout('b'), payout('c'), payout('d')]);
    const why = { a: 'rpc', b: 'no-funds', c: 'unconfirmed', d: 'fee-cap' } as const;
    // Each payout postponed three times for its reason, then sent.
    const { sender, calls } = scriptedSender(
      mem,
      (id, n): PrepareResult<string> =>
        n <= 3 ? { kind: 'retry', cause: new Error(`not now: ${id}`), why: why[id as keyof typeof why] } : { kind: 'ready', prepared: id },
    );
    const lines: { level: string; msg: string; payout?: string }[] = [];
    const log = createLogger('debug', {
      write: (line: string) => {
        const o = JSON.parse(line) as { level: number; msg: string; payout?: string };
        lines.push({ level: o.level >= 40 ? 'warn' : 'debug', msg: o.msg, payout: o.payout });
      },
    });
    const { p, metrics } = pipeline(mem, sender, { backoff: { baseMs: 1, maxMs: 1 }, log });
    await p.start();
    await until(() => calls.submitted.length === 4, 'all four sent after their postponements');
    const { values } = await metrics.payoutPostponed.get();
    const count = (reason: string) => values.find((v) => v.labels.reason === reason && v.labels.chain === String(CHAIN))?.value;
    expect([count('rpc'), count('no-funds'), count('unconfirmed'), count('fee-cap')]).toEqual([3, 3, 3, 3]);
    for (const id of ['a', 'b', 'c', 'd']) {
      const postponed = lines.filter((l) => l.payout === id && / payout (postponed|waits)/.test(l.msg));
      expect(postponed.map((l) => l.level)).toEqual(['warn', 'debug', 'debug']);
    }
  });

  it('a backoff timer that fires before the clock reaches the retry time wakes the send loop again (it used to wait for the interval)', async () => {
    // Failed before the fix: the one timer of the backoff fired, the pump saw the retry not yet due
    // (timers and Date.now() round differently) and nothing woke it again before the 60 s interval.
    let clock = 1_000_000;
    vi.spyOn(Date, 'now').mockImplementation(() => clock);
    const mem = memoryLedger([payout('a')]);
    const retryOnce = (_id: string, n: number): PrepareResult<string> =>
      n === 1 ? { kind: 'retry', cause: new Error('provider down'), why: 'rpc' } : { kind: 'ready', prepared: 'a!' };
    const { sender, calls } = scriptedSender(mem, retryOnce);
    const { p } = pipeline(mem, sender, { backoff: { baseMs: 5, maxMs: 5 }, random: () => 1 });
    await p.start();
    await until(() => calls.prepare.get('a') === 1, 'first prepare');
    // The backoff ends at clock + 5; the timer fires while the clock still reads 1 ms before it.
    clock += 4;
    const reads = mem.reads.queued;
    await until(() => mem.reads.queued > reads, 'the backoff timer woke the send loop');
    expect(calls.prepare.get('a')).toBe(1);
    clock += 10;
    await until(() => calls.broadcast.length === 1, 'retried once due');
    expect(calls.prepare.get('a')).toBe(2);
  });

  it('fails an unpayable payout once, with its reason, and never submits it', async () => {
    const mem = memoryLedger([payout('u'), payout('ok')]);
    const { sender, calls } = scriptedSender(mem, (id) =>
      id === 'u' ? { kind: 'unpayable', reason: 'TRANSACTION_SUBMISSION_FAILED', detail: 'recipient is not an address' } : { kind: 'ready', prepared: id },
    );
    const { p, failed } = pipeline(mem, sender);
    await p.start();
    await until(() => calls.broadcast.length === 1 && failed.length === 1, 'one failed, one sent');
    for (let i = 0; i < 5; i++) {
      p.wake();
      await p.confirmNow();
    }
    expect(failed).toEqual([{ id: 'u', reason: 'TRANSACTION_SUBMISSION_FAILED' }]);
    expect(mem.payouts.get('u')).toMatchObject({ state: 'failed', fail_reason: 'TRANSACTION_SUBMISSION_FAILED' });
    expect(calls.submitted).toEqual(['ok']);
    expect(calls.prepare.get('u')).toBe(1);
  });

  it("fails an unpayable payout only if its stillHolds is true of the row read in the failing transaction (a relay's deadline)", async () => {
    const mem = memoryLedger([payout('held', 'relay'), payout('gone', 'relay')]);
    const seen: string[] = [];
    const { sender, calls } = scriptedSender(mem, (id) => ({
      kind: 'unpayable',
      reason: 'TTL_EXPIRED',
      detail: 'not signed within its wait',
      // 'held': the decision still holds when the transaction reads the row; 'gone': no longer (say, signed meanwhile).
      stillHolds: (cur) => {
        seen.push(cur.id);
        return id === 'held';
      },
    }));
    const { p, failed } = pipeline(mem, sender);
    await p.start();
    await until(() => seen.length === 2, 'both checked in their failing transaction');
    expect(failed).toEqual([{ id: 'held', reason: 'TTL_EXPIRED' }]);
    expect(mem.payouts.get('held')).toMatchObject({ state: 'failed', fail_reason: 'TTL_EXPIRED' });
    // Left as it was: queued, its hook never called, nothing submitted.
    expect(mem.payouts.get('gone')).toMatchObject({ state: 'queued', fail_reason: null });
    expect(calls.submitted).toEqual([]);
  });

  it('batches: a lone payout leaves at once on its own; those arriving while the slot is busy leave together, at most maxPayouts a transaction, and a split batch sends each part', async () => {
    const mem = memoryLedger([payout('a')]);
    const g = gate();
    const { sender, calls } = scriptedSender(mem, async (id) => {
      if (id === 'a') await g.opened;
      return { kind: 'ready', prepared: id };
    });
    const batches: string[][] = [];
    const batching: PayoutSender<string, string> = {
      ...sender,
      batch: {
        maxPayouts: 3,
        slots: 1,
        batchable: () => true,
        check: () => {},
        async submitBatch(rows) {
          const ids = rows.map((r) => r.id);
          // The first batch is too heavy for one transaction: the sender asks for it in two parts.
          if (batches.length === 0 && ids.length === 3) {
            batches.push(['split', ...ids]);
            return { kind: 'split', parts: [rows.slice(0, 2), rows.slice(2)] };
          }
          batches.push(ids);
          for (const r of rows) mem.ledger.payouts.setState(r.id, 'sent', { txHash: `batch-${batches.length}` });
          return { kind: 'recorded', txHash: `batch-${batches.length}`, signed: `batch-${batches.length}` };
        },
      },
    };
    const { p } = pipeline(mem, batching);
    await p.start();
    // Alone, it is not held for company: its own prepare starts at once, and holds the only slot.
    await until(() => calls.prepare.get('a') === 1, 'the lone payout under way');
    for (const id of ['b', 'c', 'd', 'e', 'f', 'g', 'h']) mem.payouts.set(id, payout(id));
    p.wake();
    await until(() => mem.reads.queued >= 2, 'the new payouts read');
    expect(batches).toEqual([]);
    g.open();
    await until(() => ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].every((id) => mem.payouts.get(id)!.state === 'sent'), 'all sent');
    // b, c, d asked for a split: b and c went together, d on its own; then e, f, g together; h on its own.
    expect(batches).toEqual([
      ['split', 'b', 'c', 'd'],
      ['b', 'c'],
      ['e', 'f', 'g'],
    ]);
    expect(calls.submitted.sort()).toEqual(['a', 'd', 'h']);
  });

  it('a backlog of batchable payouts is not read again on every pass while it waits for a slot (issue #19)', async () => {
    // 2,000 fills decided at once (a burst of deposits), batches of 10, one slot held by the first batch. Every
    // payout in flight was read again on every pass (the read reached past them): 20 wakes read 21,000 rows.
    const ids = Array.from({ length: 2000 }, (_, i) => `p${String(i).padStart(4, '0')}`);
    const mem = memoryLedger(ids.map((id) => payout(id)));
    const { sender } = scriptedSender(mem, () => ({ kind: 'ready', prepared: 'x' }));
    const { batching, batches, g } = heldBatches(mem, sender, () => true);
    const { p } = pipeline(mem, batching);
    await p.start();
    await until(() => mem.reads.queued >= 1, 'the first read');
    for (let i = 0; i < 20; i++) {
      p.wake();
      await new Promise((r) => setTimeout(r, 1));
    }
    // The first pass read one batch of rows (queuedBatch: 100); enough wait for the slot, so nothing more is read.
    expect(mem.reads.rows).toBeLessThanOrEqual(200);
    g.open();
    await until(() => ids.every((id) => mem.payouts.get(id)!.state === 'sent'), 'the backlog sent');
    // Each payout once, in order, at most maxPayouts a transaction.
    expect(batches.flat()).toEqual(ids);
    expect(Math.max(...batches.map((b) => b.length))).toBe(10);
  });

  it('a payout that goes alone, decided after a backlog of batchable ones, is not held until that backlog has left', async () => {
    // 300 fills waiting for the one slot (held by the first batch), then a refund: it rides in no batch and needs no
    // slot. With the waiting list full the send pass read nothing, and the refund waited for 290 fills to leave first.
    const ids = Array.from({ length: 300 }, (_, i) => `p${String(i).padStart(3, '0')}`);
    const mem = memoryLedger([...ids.map((id) => payout(id)), payout('r', 'refund')]);
    const { sender, calls } = scriptedSender(mem, (id) => ({ kind: 'ready', prepared: id }));
    const { batching, batches, g } = heldBatches(mem, sender, (row) => row.kind === 'fill');
    const { p } = pipeline(mem, batching);
    await p.start();
    await until(() => mem.reads.queued >= 1, 'the first read');
    // Wakes as a busy node has them (heads, decisions), for up to 2 s, the first batch still unsent.
    const wakes = setInterval(() => p.wake(), 5);
    try {
      await until(() => calls.submitted.includes('r'), 'the refund sent while the fills wait for the slot');
      expect(batches).toEqual([]);
      // Not the whole backlog read again on every wake (hundreds of them): a read through it at most once a second.
      expect(mem.reads.rows).toBeLessThanOrEqual(100 + 3 * 301);
    } finally {
      clearInterval(wakes);
      // The batch let go (also when the test failed, so that stop() ends).
      g.open();
    }
    await until(() => ids.every((id) => mem.payouts.get(id)!.state === 'sent'), 'the backlog sent');
    expect(batches.flat()).toEqual(ids);
    expect(calls.submitted).toEqual(['r']);
  });

  it('never processes a payout in flight a second time, however often it is woken', async () => {
    const mem = memoryLedger([payout('f')]);
    const g = gate();
    const { sender, calls } = scriptedSender(mem, async () => {
      await g.opened;
      return { kind: 'ready', prepared: 'f' };
    });
    const { p } = pipeline(mem, sender);
    await p.start();
    await until(() => calls.prepare.get('f') === 1, 'in flight');
    for (let i = 0; i < 10; i++) {
      p.wake();
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(calls.prepare.get('f')).toBe(1);
    g.open();
    await until(() => calls.broadcast.length === 1, 'sent');
    p.wake();
    await p.confirmNow();
    expect(calls.prepare.get('f')).toBe(1);
    expect(calls.submitted).toEqual(['f']);
  });

  it('stop waits for the payout being handled, and nothing starts afterwards', async () => {
    const mem = memoryLedger([payout('s'), payout('t')]);
    const g = gate();
    const { sender, calls } = scriptedSender(mem, async () => {
      await g.opened;
      return { kind: 'ready', prepared: 'x' };
    });
    const { p } = pipeline(mem, sender, { concurrency: 1 });
    await p.start();
    await until(() => calls.prepare.size === 1, 'one in flight');
    let stopped = false;
    const stopping = p.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 5));
    expect(stopped).toBe(false);
    g.open();
    await stopping;
    // The payout under way finished its steps; the one behind it never started.
    expect(calls.broadcast).toHaveLength(1);
    expect(calls.prepare.size).toBe(1);
    p.wake();
    await new Promise((r) => setTimeout(r, 5));
    expect(calls.prepare.size).toBe(1);
  });

  it('reconciles before sending anything, and crashes at the fault point between recording and broadcasting a fill', async () => {
    const mem = memoryLedger([payout('c')]);
    const { sender, calls } = scriptedSender(mem, () => ({ kind: 'ready', prepared: 'c' }));
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => {
      throw new Error('simulated crash');
    });
    const { p } = pipeline(mem, sender, { faults: { crashAfterFillRecorded: true }, random: () => 1, backoff: { baseMs: 600_000, maxMs: 600_000 } });
    await p.start();
    await until(() => kill.mock.calls.length === 1, 'crash point');
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGKILL');
    expect(calls.order.slice(0, 2)).toEqual(['confirm', 'prepare:c']);
    expect(calls.submitted).toEqual(['c']);
    expect(calls.broadcast).toEqual([]);
  });

  it('serial: each pass confirms, then sends to the end', async () => {
    const mem = memoryLedger([payout('a'), payout('b')]);
    const { sender, calls } = scriptedSender(mem, (id) => ({ kind: 'ready', prepared: id }));
    const { p } = pipeline(mem, sender, { serial: true, concurrency: 1 });
    await p.start();
    await until(() => calls.broadcast.length === 2, 'both sent');
    expect(calls.order).toEqual(['confirm', 'prepare:a', 'prepare:b']);
  });
});
