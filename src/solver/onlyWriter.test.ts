import { describe, expect, it } from 'vitest';
import { sourcesOutside } from '../../test/helpers/sources.ts';

describe('the solver is the only writer of payouts and failReasons', () => {
  it('creates payouts only in src/solver/', () => {
    const writers = sourcesOutside('ledger/', /\.payouts\.insert\(/);
    expect(writers.length).toBeGreaterThan(0);
    expect(writers.filter((p) => !p.startsWith('solver/'))).toEqual([]);
  });

  it('sets a request failReason only in src/solver/', () => {
    const writers = sourcesOutside('ledger/', /\.requests\.setStatus\([^)]*failReason/s);
    expect(writers.length).toBeGreaterThan(0);
    expect(writers.filter((p) => !p.startsWith('solver/'))).toEqual([]);
  });
});
