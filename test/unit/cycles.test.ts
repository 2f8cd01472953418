// Folder cycles in src/ cannot come back: scripts/check-cycles.mjs walks the imports between the
// top-level folders of src/ (type-only imports included) and fails on a cycle that does not go
// through one of its listed backward edges.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const script = join(import.meta.dirname, '..', '..', 'scripts', 'check-cycles.mjs');

function check(src?: string): { code: number; out: string } {
  try {
    const out = execFileSync(process.execPath, [script, ...(src ? [src] : [])], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return { code: 0, out };
  } catch (e) {
    const err = e as { status: number; stdout: string; stderr: string };
    return { code: err.status, out: err.stdout + err.stderr };
  }
}

describe('folder cycles', () => {
  it('src/ has none besides the listed backward edges', () => {
    const r = check();
    expect(r.code, r.out).toBe(0);
  });

  it('finds a cycle between two folders, a type-only import closing it, and names the imports', () => {
    const src = mkdtempSync(join(tmpdir(), 'cycles-'));
    try {
      mkdirSync(join(src, 'api'));
      mkdirSync(join(src, 'events'));
      mkdirSync(join(src, 'ledger'));
      const server = "import { stream } from '../events/stream.ts';\nimport { db } from '../ledger/db.ts';\nexport const s = [stream, db];\n";
      writeFileSync(join(src, 'api', 'server.ts'), server);
      writeFileSync(join(src, 'events', 'stream.ts'), "import type { Ctx } from '../api/context.ts';\nexport const stream = (c: Ctx) => c;\n");
      writeFileSync(join(src, 'api', 'context.ts'), 'export interface Ctx { a: number }\n');
      writeFileSync(join(src, 'ledger', 'db.ts'), 'export const db = 1;\n');
      const r = check(src);
      expect(r.code).toBe(1);
      expect(r.out).toContain('folder cycle: api ↔ events');
      expect(r.out).toContain('events → api: events/stream.ts → api/context.ts');
      expect(r.out).not.toContain('ledger');
      // The same tree without the type import has no cycle.
      writeFileSync(join(src, 'events', 'stream.ts'), 'export const stream = 1;\n');
      expect(check(src).code).toBe(0);
    } finally {
      rmSync(src, { recursive: true, force: true });
    }
  });
});
