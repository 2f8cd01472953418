import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

// The rest of the node reaches chains through the registry's narrow ports (ports.ts): a module
// outside src/chains/ that names the whole adapter, or a concrete adapter class (to test
// `instanceof`), would depend on every member of every kind again.
const SRC = join(import.meta.dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return sources(p);
    return p.endsWith('.ts') && !p.endsWith('.test.ts') ? [p] : [];
  });
}

/** Source files outside src/chains/ whose text matches `re`. */
function outsideChains(re: RegExp): string[] {
  return sources(SRC)
    .map((p) => relative(SRC, p))
    .filter((p) => !p.startsWith('chains/') && re.test(readFileSync(join(SRC, p), 'utf8')));
}

describe('chains are reached through narrow ports', () => {
  it('no module outside src/chains/ names ChainAdapter', () => {
    expect(outsideChains(/\bChainAdapter\b/)).toEqual([]);
  });

  it('no module outside src/chains/ names a concrete adapter class', () => {
    expect(outsideChains(/\b(Evm|Svm|Exchange)Adapter\b/)).toEqual([]);
  });
});
