// The run's record of the processes its tests start (anvil, postgres, node processes, proxies): each test
// worker records its children's PIDs there while they run. vitest ends a worker with SIGTERM (a file whose
// hook timed out mid-start, say), and a process ended by a signal runs no exit hook: what that worker had
// started would outlive the run. Teardown kills what is left, by PID.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHILD_PIDS_ENV, killRecordedChildren } from '../src/devnet/children.ts';

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'relay-node-pids-'));
  process.env[CHILD_PIDS_ENV] = dir;
  return () => {
    const killed = killRecordedChildren(dir);
    if (killed.length) process.stdout.write(`killed ${killed.length} process(es) the tests left running: ${killed.join(', ')}\n`);
    rmSync(dir, { recursive: true, force: true });
  };
}
