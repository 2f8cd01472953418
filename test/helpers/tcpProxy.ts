import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of one server (PostgreSQL, between a node and its ledger). `cut()` is a
 * partition as a network makes one: every byte in both directions is held, nothing is closed, so neither side learns
 * of it except by its own timeouts; new connections are accepted and held the same way. `heal()` forwards again
 * (what was held is delivered); `reset()` closes every connection instead.
 */
export class TcpProxy {
  readonly #server: Server;
  readonly #pairs = new Set<{ client: Socket; upstream: Socket }>();
  #cut = false;
  port = 0;

  private constructor(target: { host: string; port: number }) {
    this.#server = createServer((client) => {
      const upstream = createConnection(target);
      const pair = { client, upstream };
      this.#pairs.add(pair);
      const close = () => {
        client.destroy();
        upstream.destroy();
        this.#pairs.delete(pair);
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
      client.pipe(upstream);
      upstream.pipe(client);
      if (this.#cut) this.#hold(pair);
    });
  }

  /** Starts a proxy to `target` (host:port) on a free loopback port. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await new Promise<void>((resolve) => proxy.#server.listen({ host: '127.0.0.1', port: 0 }, resolve));
    proxy.port = (proxy.#server.address() as { port: number }).port;
    return proxy;
  }

  /** `url` (postgres://…) with its host and port replaced by the proxy's. */
  via(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  #hold(pair: { client: Socket; upstream: Socket }): void {
    pair.client.pause();
    pair.upstream.pause();
  }

  /** Holds every byte, in both directions, on every connection (present and future). */
  cut(): void {
    this.#cut = true;
    for (const pair of this.#pairs) this.#hold(pair);
  }

  /** Forwards again. */
  heal(): void {
    this.#cut = false;
    for (const { client, upstream } of this.#pairs) {
      client.resume();
      upstream.resume();
    }
  }

  /** Closes every connection (a reset, not a partition). */
  reset(): void {
    for (const { client, upstream } of this.#pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.#pairs.clear();
  }

  /** Closes every connection and stops listening. */
  async stop(): Promise<void> {
    this.reset();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
