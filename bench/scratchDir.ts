// A bench's ledgers and devnet state are scratch: each run's directory goes when the run ends (a
// throughput run alone left 14–47 MB behind in the OS temp directory).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh directory under the OS temp directory, removed when the process exits (after its processes are stopped). */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
