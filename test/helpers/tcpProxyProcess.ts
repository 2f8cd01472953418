// A TcpProxy (tcpProxy.ts) in a process of its own, for a test whose main thread blocks in a synchronous
// PostgreSQL call (the ledger's client waits on a worker): a proxy on that thread could forward nothing meanwhile.
// Run as a child (`fork` with tsx), it takes 'cut' / 'heal' / 'stop' over IPC and answers each with 'ok'.
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { TcpProxy } from './tcpProxy.ts';
import { trackChild } from '../../src/devnet/children.ts';

/** The proxy process as the test drives it. */
export interface ProxyProcess {
  port: number;
  via(url: string): string;
  cut(): Promise<void>;
  heal(): Promise<void>;
  /** Stops the proxy and its process (by PID). */
  stop(): Promise<void>;
}

/** Forks a process running a TcpProxy in front of `target`; resolves once it listens. */
export async function startProxyProcess(target: { host: string; port: number }): Promise<ProxyProcess> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [target.host, String(target.port)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  trackChild(child, 'tcpProxyProcess');
  const [port] = (await once(child, 'message')) as [number];
  const ask = async (cmd: string) => {
    child.send(cmd);
    await once(child, 'message');
  };
  return {
    port,
    via(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    cut: () => ask('cut'),
    heal: () => ask('heal'),
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    },
  };
}

// The child: a proxy, commanded over IPC.
if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  const proxy = await TcpProxy.start({ host: process.argv[2]!, port: Number(process.argv[3]) });
  process.on('message', (cmd) => {
    if (cmd === 'cut') proxy.cut();
    else if (cmd === 'heal') proxy.heal();
    process.send!('ok');
  });
  process.on('disconnect', () => process.exit(0));
  process.send(proxy.port);
}
