import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return sources(p);
    return p.endsWith('.ts') && !p.endsWith('.test.ts') ? [p] : [];
  });
}

/** Files outside the ledger that call a ledger method matching `call`. */
function callers(call: RegExp): string[] {
  return sources(SRC)
    .map((p) => relative(SRC, p))
    .filter((p) => !p.startsWith('ledger/') && call.test(readFileSync(join(SRC, p), 'utf8')));
}

describe('the solver is the only writer of payouts and failReasons', () => {
  it('creates payouts only in src/solver/', () => {
    const writers = callers(/\.payouts\.insert\(/);
    expect(writers.length).toBeGreaterThan(0);
    expect(writers.filter((p) => !p.startsWith('solver/'))).toEqual([]);
  });

  it('sets a request failReason only in src/solver/', () => {
    const writers = callers(/\.requests\.setStatus\([^)]*failReason/s);
    expect(writers.length).toBeGreaterThan(0);
    expect(writers.filter((p) => !p.startsWith('solver/'))).toEqual([]);
  });
});
