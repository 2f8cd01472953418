import { describe, expect, it } from 'vitest';
import { Loop } from './loop.ts';

/** A pass that waits for the test to release it, counting runs and overlaps. */
function gatedPass() {
  const state = { runs: 0, active: 0, maxActive: 0, release: [] as (() => void)[] };
  const run = async () => {
    state.runs++;
    state.active++;
    state.maxActive = Math.max(state.maxActive, state.active);
    await new Promise<void>((r) => state.release.push(r));
    state.active--;
  };
  return { state, run };
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}

describe('Loop', () => {
  it('coalesces wakes during a pass into exactly one more pass, never two at once', async () => {
    const { state, run } = gatedPass();
    const loop = new Loop(run, 60_000, () => {});
    loop.start();
    await until(() => state.runs === 1);
    loop.wake();
    loop.wake();
    loop.wake();
    state.release.shift()!();
    await until(() => state.runs === 2);
    state.release.shift()!();
    await loop.settle();
    expect(state.runs).toBe(2);
    expect(state.maxActive).toBe(1);
    await loop.stop();
  });

  it('runs again on its interval, reports a failed pass and keeps going', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const loop = new Loop(
      async () => {
        runs++;
        if (runs === 1) throw new Error('provider down');
      },
      1,
      (e) => errors.push(e),
    );
    loop.start();
    await until(() => runs >= 3);
    await loop.stop();
    expect((errors[0] as Error).message).toBe('provider down');
    expect(loop.started).toBe(false);
  });

  it('stop waits for the pass under way, and no pass starts afterwards', async () => {
    const { state, run } = gatedPass();
    const loop = new Loop(run, 1, () => {});
    loop.start();
    await until(() => state.runs === 1);
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    loop.wake();
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    state.release.shift()!();
    await stopping;
    expect(state.runs).toBe(1);
  });
});
