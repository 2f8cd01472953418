import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';

function run(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, ['bin/relay-node.js', ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, out: r.stdout + r.stderr };
}

describe('relay-node CLI', () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-cli-'));

  it('stops at start on a bad config, naming the key and what is wrong', () => {
    const path = join(dir, 'bad.json');
    writeFileSync(path, JSON.stringify({ solverKey: { env: 'K' }, chains: [{ id: 1, name: 'x', rpcUrl: 'nope' }] }));
    const r = run(['start', '--config', path], { K: KEY });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/relay-node: invalid config: chains\.0\.rpcUrl: Invalid url/);
    expect(r.out).toMatch(/chains\.0\.depository: Required/);
    expect(r.out).not.toContain(KEY.slice(2));
  });

  it('names the environment variable a key should come from', () => {
    const r = run(['start', '--config', 'config/example.json'], { RELAY_SOLVER_KEY: '', RELAY_ALLOCATOR_KEY: KEY });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/solverKey: the key is not a 0x-prefixed 32-byte hex string/);
  });

  it('creates and upgrades a ledger with db migrate', () => {
    const first = run(['db', 'migrate', '--data-dir', dir]);
    expect(first.code).toBe(0);
    expect(first.out).toMatch(/applied migrations 1/);
    expect(run(['db', 'migrate', '--data-dir', dir]).out).toMatch(/up to date/);
  });

  it('asks for a command', () => {
    const r = run([]);
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/start, dev, api, keys, audit, admin or db migrate/);
  });
});
