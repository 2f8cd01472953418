import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CHILD_PIDS_ENV, killRecordedChildren } from './children.ts';

// Alive: running, not a zombie waiting for its parent.
function alive(pid: number): boolean {
  try {
    return !/State:\s+Z/.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}
async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// A parent (as a test worker would be) that starts an anvil, prints its PID, and waits to be ended.
const PARENT = `
import { startAnvil } from './src/devnet/anvil.ts';
const a = await startAnvil({ chainId: 31337 });
process.stdout.write(String(a.pid) + '\\n');
setInterval(() => {}, 1000);
`;

describe('child processes recorded by PID', () => {
  const dirs: string[] = [];
  const strays: number[] = [];
  afterEach(() => {
    // A test that failed midway: its parent and whatever the parent recorded.
    for (const pid of strays.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
    for (const d of dirs.splice(0)) {
      killRecordedChildren(d);
      rmSync(d, { recursive: true, force: true });
    }
  });
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'children-test-'));
    dirs.push(d);
    return d;
  };

  it('kills, by PID, the anvil of a parent ended by SIGTERM (whose exit hook never ran), and only it', async () => {
    const dir = tempDir();
    const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', PARENT], {
      env: { ...process.env, [CHILD_PIDS_ENV]: dir },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    strays.push(parent.pid!);
    let out = '';
    parent.stdout!.on('data', (d) => (out += d));
    await until(() => out.includes('\n'), 'the parent to start its anvil', 30_000);
    const anvil = Number(out.trim());
    strays.push(anvil);
    expect(readdirSync(dir)).toEqual([String(anvil)]);

    const ended = new Promise((r) => parent.once('exit', r));
    parent.kill('SIGTERM');
    await ended;
    // What vitest's SIGTERM to a worker does: the parent is gone, its anvil runs on.
    expect(alive(anvil)).toBe(true);

    expect(killRecordedChildren(dir)).toEqual([anvil]);
    await until(() => !alive(anvil), 'the stray anvil to die');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('leaves a recorded PID alone when the process there runs another program', () => {
    const dir = tempDir();
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    strays.push(other.pid!);
    writeFileSync(join(dir, String(other.pid)), 'anvil');
    writeFileSync(join(dir, '999999999'), 'anvil');
    expect(killRecordedChildren(dir)).toEqual([]);
    expect(alive(other.pid!)).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("removes a child's record when it exits", async () => {
    const dir = tempDir();
    const parent = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', `${PARENT.replace('setInterval(() => {}, 1000);', 'await a.stop();')}`],
      { env: { ...process.env, [CHILD_PIDS_ENV]: dir }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const code = await new Promise((r) => parent.once('exit', r));
    expect(code).toBe(0);
    expect(readdirSync(dir)).toEqual([]);
  });
});
