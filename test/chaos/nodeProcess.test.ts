// The chaos harness's node process never runs twice on one port, and never takes another process's answer for its own
// start (both ways an orphan node made later starts exit by themselves, counted as the node's own exits).
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/devnet/freePort.ts';
import { NodeProcess } from './nodeProcess.ts';

// A stand-in for `relay-node start`: answers /health on its port (and fails to start if the port is taken).
const HEALTH_SERVER = `require('node:http').createServer((q, r) => r.end('{"role":"leader"}')).listen(Number(process.argv[1]), '127.0.0.1')`;
const command = (port: number) => ({ args: () => ['-e', HEALTH_SERVER, String(port)], env: process.env });
const dirs: string[] = [];
const logFile = () => {
  dirs.push(mkdtempSync(join(tmpdir(), 'relay-node-chaos-node-')));
  return join(dirs.at(-1)!, 'node.log');
};

const started: NodeProcess[] = [];
afterEach(async () => {
  for (const n of started.splice(0)) {
    await n.kill('SIGKILL');
    n.close();
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('chaos node process', () => {
  it('starts one process when two callers ask at once (the watchdog during the monkey’s restart)', async () => {
    const port = await freePort();
    const node = new NodeProcess(command(port), port, logFile());
    started.push(node);
    // A caller asking for a fault the start under way does not carry is refused, not silently joined.
    const [first, faulted] = await Promise.allSettled([node.start(), node.start('crash-after-fill-recorded'), node.start()]);
    expect(first.status).toBe('fulfilled');
    expect(faulted).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ message: expect.stringMatching(/would be lost/) }) });
    expect(node.starts).toBe(1);
    expect(node.alive()).toBe(true);
    // Asked again while it runs, it is left as it is.
    await node.start();
    expect(node.starts).toBe(1);
    expect(await node.role()).toBe('leader');
    await node.kill('SIGKILL');
    expect(node.unexpectedExits).toBe(0);
  });

  it('does not take another process’s /health on its port for its own start', async () => {
    const other = createServer((_q, r) => r.end('{"role":"leader"}')).listen(0, '127.0.0.1');
    await once(other, 'listening');
    const port = (other.address() as AddressInfo).port;
    try {
      const node = new NodeProcess(command(port), port, logFile(), 'node', 10_000);
      started.push(node);
      // Each start exits on the taken port: a failure to start, never a start followed by an exit of its own.
      await expect(node.start()).rejects.toThrow(/exited while starting/);
      expect(node.starts).toBe(5);
      expect(node.unexpectedExits).toBe(0);
      expect(node.alive()).toBe(false);
    } finally {
      other.close();
    }
  });
});
