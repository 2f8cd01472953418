import { once } from 'node:events';
import { connect } from 'node:net';
import { until } from './until.ts';

/**
 * Sends `POST path` to the listener at `url` promising 100 bytes of body, sends one of them and never
 * the rest; resolves with what the server answered once it closed the connection (a bounded wait:
 * rejects when it never closes). The socket is destroyed either way, so it cannot hold the server's close.
 */
export async function stalledRequest(url: string, path: string, headers: Record<string, string> = {}): Promise<string> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  try {
    await once(socket, 'connect');
    let closed = false;
    let answer = '';
    socket.on('data', (d) => (answer += d));
    socket.on('close', () => (closed = true));
    socket.on('error', () => {});
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\n${extra}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{`);
    await until(() => (closed ? true : undefined), 'the server to close the stalled connection', 20_000);
    return answer;
  } finally {
    socket.destroy();
  }
}
