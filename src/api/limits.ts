import type { Config } from '../config/load.ts';
import { RateLimiter } from './rateLimit.ts';

/**
 * The API's rate limits, shared by the HTTP hooks and the status stream (one instance per API
 * server, so each replica limits on its own). Every bucket is a token bucket per minute.
 */
export class ApiLimits {
  /** Calls per API key, and per client IP without one (a failed key lookup costs the IP bucket too). */
  readonly perKey: RateLimiter;
  readonly perIp: RateLimiter;
  /** Calls without a key per network (src/api/clientAddress.ts networkOf): a client holding one holds its every address. */
  readonly perNetwork: RateLimiter;
  /** Quotes and prices (the routes below) per API key. */
  readonly pricedPerKey: RateLimiter;
  /** Quotes and prices (/quote, /price, /config/v2) without a key, per IP: each costs RPC calls, a quote is stored too. */
  readonly anonymousQuotes: RateLimiter;
  /** The same, all callers without a key in one bucket: a client with many addresses has many per-IP buckets. */
  readonly anonymousQuotesTotal: RateLimiter;
  /** /health, /ready, /metrics per IP. */
  readonly probes: RateLimiter;
  /** Status stream messages, per connection and per IP. */
  readonly wsPerConnection: RateLimiter;
  readonly wsPerIp: RateLimiter;
  readonly #wsConnections = new Map<string, number>();

  constructor(readonly config: Config['api']['rateLimit']) {
    this.perKey = new RateLimiter(config.perKeyPerMinute);
    this.perIp = new RateLimiter(config.unauthenticatedPerMinute);
    this.perNetwork = new RateLimiter(config.unauthenticatedPerNetworkPerMinute ?? 10 * config.unauthenticatedPerMinute);
    this.pricedPerKey = new RateLimiter(config.pricedPerKeyPerMinute);
    this.anonymousQuotes = new RateLimiter(config.anonymousQuotesPerMinute);
    this.anonymousQuotesTotal = new RateLimiter(config.anonymousQuotesPerMinuteTotal);
    this.probes = new RateLimiter(config.probesPerMinute);
    this.wsPerConnection = new RateLimiter(config.wsMessagesPerConnectionPerMinute);
    this.wsPerIp = new RateLimiter(config.wsMessagesPerIpPerMinute);
  }

  /** Whether the IP may open one more status stream connection. */
  wsConnectionAllowed(ip: string): boolean {
    return (this.#wsConnections.get(ip) ?? 0) < this.config.wsConnectionsPerIp;
  }

  /** Counts an open status stream connection of the IP; returns the function that uncounts it (once). */
  wsConnected(ip: string): () => void {
    this.#wsConnections.set(ip, (this.#wsConnections.get(ip) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (this.#wsConnections.get(ip) ?? 1) - 1;
      if (n <= 0) this.#wsConnections.delete(ip);
      else this.#wsConnections.set(ip, n);
    };
  }
}
