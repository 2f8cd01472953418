import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The variable naming a directory where every tracked child's PID is recorded while it runs (a file named by
 * the PID, holding the program's name). A parent killed by a signal runs no exit hook: a test runner that
 * terminates a worker (vitest's SIGTERM) would leave its anvils and postgres running. The runner's own
 * teardown (test/globalSetup.ts) kills what is left in the directory, by PID.
 */
export const CHILD_PIDS_ENV = 'RELAY_CHILD_PIDS_DIR';

// Every live tracked child and its program's name, killed synchronously if this process exits without stopping it.
const live = new Map<ChildProcess, string>();
let hooked = false;

/** Kills `child` with SIGKILL if this process exits while it runs, and records its PID (see CHILD_PIDS_ENV). */
export function trackChild(child: ChildProcess, name: string): void {
  if (child.pid === undefined) return;
  const pid = child.pid;
  const dir = process.env[CHILD_PIDS_ENV];
  const file = dir && join(dir, String(pid));
  if (file) writeFileSync(file, name);
  live.set(child, name);
  child.once('exit', () => {
    live.delete(child);
    if (file) rmSync(file, { force: true });
  });
  if (hooked) return;
  hooked = true;
  process.on('exit', () => {
    killTracked();
  });
}

/** SIGKILLs every live tracked child (of the program `name`, if given): a test's afterAll, or this process's exit. */
export function killTracked(name?: string): void {
  for (const [c, n] of live) {
    if (name !== undefined && n !== name) continue;
    try {
      c.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}

/**
 * SIGKILLs every process recorded in `dir` that still runs the program recorded for it (a PID reused by
 * another program is left alone), and empties the directory. Returns the PIDs killed.
 */
export function killRecordedChildren(dir: string): number[] {
  const killed: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return killed;
  }
  for (const entry of entries) {
    const pid = Number(entry);
    const file = join(dir, entry);
    const name = readFileSync(file, 'utf8');
    rmSync(file, { force: true });
    if (!Number.isInteger(pid) || pid <= 0 || !runs(pid, name)) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // gone meanwhile
    }
  }
  return killed;
}

// Whether the process `pid` is alive and runs `name` (its /proc command line names it).
function runs(pid: number, name: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(name);
  } catch {
    return false;
  }
}
