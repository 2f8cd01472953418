// The node's own source files, for the tests that check the architecture's rules on the text of
// src/ (who may write payouts, who may name an adapter, who may touch the SQLite connection).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The root of the node's sources (src/). */
export const SRC = join(import.meta.dirname, '..', '..', 'src');

/** Every source file under src/ (tests excluded), as a path relative to src/ with its text. */
export function sourceFiles(dir = SRC): { rel: string; text: string }[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith('.ts') && !p.endsWith('.test.ts') ? [{ rel: relative(SRC, p), text: readFileSync(p, 'utf8') }] : [];
  });
}

/** Source files outside the folder `folder` of src/ (e.g. 'chains/') whose text matches `re`, relative to src/. */
export function sourcesOutside(folder: string, re: RegExp): string[] {
  return sourceFiles()
    .filter((f) => !f.rel.startsWith(folder) && re.test(f.text))
    .map((f) => f.rel);
}
