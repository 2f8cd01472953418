import { describe, expect, it } from 'vitest';
import { UsageRecorder } from './usage.ts';

describe('UsageRecorder', () => {
  it('keeps the counts when the ledger does not answer, and writes them (with what came meanwhile) on the next flush', () => {
    const written: { count: number }[][] = [];
    let down = true;
    const store = {
      writable: true,
      add(rows: { count: number }[]) {
        if (down) throw new Error('the ledger database is unreachable');
        written.push(rows);
      },
    };
    const usage = new UsageRecorder(store as never, 60_000);
    usage.record('key', 0, 'GET /x', 200, undefined);
    usage.record('key', 0, 'GET /x', 200, undefined);
    expect(() => usage.flush()).toThrow(/unreachable/);
    usage.record('key', 0, 'GET /x', 200, undefined);
    down = false;
    usage.flush();
    expect(written).toEqual([[expect.objectContaining({ apiKeyId: 'key', endpoint: 'GET /x', statusCode: 200, count: 3 })]]);
    usage.stop();
  });
});
