import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { listensOn } from './listener.ts';

const servers: Server[] = [];
afterAll(() => {
  for (const s of servers) s.close();
});

async function listen(): Promise<number> {
  const s = createServer();
  servers.push(s);
  await new Promise<void>((r) => s.listen({ host: '127.0.0.1', port: 0 }, r));
  return (s.address() as { port: number }).port;
}

describe('listensOn', () => {
  it('names the process holding a loopback port, and no other', async () => {
    const port = await listen();
    expect(listensOn(process.pid, port)).toBe(true);
    // Another process (a child that listens on nothing) does not hold it.
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 5000)'], { stdio: 'ignore' });
    try {
      expect(listensOn(child.pid!, port)).toBe(false);
    } finally {
      child.kill('SIGKILL');
    }
    // A port nobody listens on (the server closed): held by no one.
    const closed = await listen();
    await new Promise<void>((r) => servers.pop()!.close(() => r()));
    expect(listensOn(process.pid, closed)).toBe(false);
  });
});
