import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BlockList, isIPv6, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { clientOf, networkOf } from './clientAddress.ts';

interface Tracked {
  /** Requests being answered on it now. */
  inFlight: number;
  /** It made a request, and none is in flight: keep-alive holds it for the next. */
  spoke: boolean;
  /** Upgraded (the status stream): never idle. */
  upgraded: boolean;
}

/**
 * The most connections an operator's listener (the admin API, api.metricsListen) holds open from one client address or
 * one network; all clients together hold eight times as many. Operators, the CLI and a scraper need a few.
 */
export const OPERATOR_MAX_CONNECTIONS = 64;

/**
 * Caps an operator's listener's connections (OPERATOR_MAX_CONNECTIONS). Uncapped, whoever reached it (a listener
 * bound to a network interface, or any process of the host) held as many of the node's file descriptors as it opened
 * silent connections, each for api.headersTimeoutMs and then again, until the node could open none for its own RPC,
 * ledger and webhook connections.
 */
export function capOperatorConnections(app: FastifyInstance): void {
  capConnections(app, { perAddress: OPERATOR_MAX_CONNECTIONS, total: 8 * OPERATOR_MAX_CONNECTIONS, trustProxy: false });
}

/**
 * Caps the open connections of each client address (counted as every per-IP limit counts it: an IPv6 client by its
 * /64) at `perAddress`, of each network (an IPv4 /24, an IPv6 /48) at an eighth of `total`, and of all clients together
 * at `total`. A connection past a cap closes the oldest idle keep-alive connection under that cap (one that has
 * answered every request it made) and is kept, or, when none is idle, is refused (closed at once). A request answered
 * 429 costs its client nothing and leaves its connection open for keep-alive's time: without a cap, a client held as
 * many of the node's file descriptors as it could open connections, until the node could open none for itself; and
 * addresses are cheap (a /48 of IPv6 holds 65,536 /64s: without the network's cap, one /48 held the whole total).
 * Connections from a trusted proxy (api.trustProxy) count in the total only: its clients are known only from their requests.
 * Upgraded connections (status streams), never idle, take at most half of `total` together.
 */
export function capConnections(app: FastifyInstance, caps: { perAddress: number; total: number; trustProxy: false | string[] }): void {
  const trusted = trustedProxies(caps.trustProxy);
  const all = new Map<Socket, Tracked>();
  // The address's cap first, then its network's (an idle connection closed under either frees a place in those above
  // it): the total made room first, a connection a narrower cap then refused had closed another client's idle one for
  // nothing, one per attempt.
  const groups = [
    { of: clientOf, cap: caps.perAddress },
    { of: networkOf, cap: Math.max(1, Math.floor(caps.total / 8)) },
  ].map((g) => ({ ...g, open: new Map<string, Map<Socket, Tracked>>(), keyOf: new WeakMap<Socket, string>() }));
  const tracked = new WeakMap<Socket, Tracked>();
  // Upgraded connections open (status streams), and the most of them at once (see the onRequest hook below).
  const streamShare = Math.max(1, Math.floor(caps.total / 2));
  let upgraded = 0;
  const isIdle = (t: Tracked) => t.spoke && t.inFlight === 0 && !t.upgraded;
  // Makes room in `open` (a Map keeps insertion order: the first idle one found is the oldest); false when none is idle.
  const makeRoom = (open: Map<Socket, Tracked>): boolean => {
    for (const [s, t] of open) {
      if (isIdle(t)) {
        forget(s);
        s.destroy();
        return true;
      }
    }
    return false;
  };
  const forget = (socket: Socket) => {
    all.delete(socket);
    for (const g of groups) {
      const k = g.keyOf.get(socket);
      const m = k === undefined ? undefined : g.open.get(k);
      if (!m) continue;
      m.delete(socket);
      if (m.size === 0) g.open.delete(k!);
    }
  };

  app.server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress;
    const t: Tracked = { inFlight: 0, spoke: false, upgraded: false };
    const counted = peer !== undefined && !trusted(peer);
    for (const g of counted ? groups : []) {
      const own = g.open.get(g.of(peer!));
      if (own && own.size >= g.cap && !makeRoom(own)) return void socket.destroy();
    }
    if (all.size >= caps.total && !makeRoom(all)) return void socket.destroy();
    for (const g of counted ? groups : []) {
      const k = g.of(peer!);
      let open = g.open.get(k);
      if (!open) g.open.set(k, (open = new Map()));
      open.set(socket, t);
      g.keyOf.set(socket, k);
    }
    all.set(socket, t);
    tracked.set(socket, t);
    socket.once('close', () => {
      forget(socket);
      if (t.upgraded) upgraded--;
    });
  });
  // Busy from a request's headers until its answer is finished (or its connection is gone). Before Fastify's own
  // listener: the answer's close is watched before anything can send it.
  app.server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const t = tracked.get(req.socket);
    if (!t) return;
    t.spoke = true;
    t.inFlight++;
    res.once('close', () => t.inFlight--);
  });
  // An upgrade is no 'request' event: the first onRequest hook sees it. The stream's own cap counts it from then on.
  // Upgraded connections together take at most half the total: one is never idle, so never closed to make room, and
  // lives for as long as its client answers pings. Without a share of their own, 20 streams (wsConnectionsPerIp) from
  // each of total / 20 addresses held the whole cap for good, and every other client's connection was refused. One
  // past the share is closed (the public SDK polls the status when its stream fails).
  app.addHook('onRequest', (req, _reply, done) => {
    const t = tracked.get(req.raw.socket);
    // As Node parsed it: an `Upgrade` header on an ordinary request (no `Connection: upgrade`) is answered as any, and
    // counted as a stream, it took the streams' share, never idle.
    if (t && !t.upgraded && isUpgrade(req.raw)) {
      t.spoke = true;
      if (upgraded >= streamShare) {
        req.raw.socket.destroy();
        return done();
      }
      // Counted until the connection's close (its listener, added when it opened, sees `upgraded`); one closed already
      // is not counted, or its place would be lost for good.
      if (!req.raw.socket.destroyed) {
        t.upgraded = true;
        upgraded++;
      }
    }
    done();
  });
}

/**
 * Whether a request asks for a protocol upgrade as Node's parser takes one: an `Upgrade` header with `upgrade` among
 * the `Connection` tokens. The `Upgrade` header alone is an ordinary request's, answered as any.
 */
export function isUpgrade(req: IncomingMessage): boolean {
  return req.headers.upgrade !== undefined && /(?:^|,)\s*upgrade\s*(?:,|$)/i.test(req.headers.connection ?? '');
}

// Whether a peer address is one of the trusted proxies (addresses or CIDR ranges of either family).
function trustedProxies(trustProxy: false | string[]): (peer: string) => boolean {
  if (trustProxy === false) return () => false;
  const list = new BlockList();
  for (const p of trustProxy) {
    const [ip = '', bits] = p.split('/');
    const family = isIPv6(ip) ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(ip, family);
    else list.addSubnet(ip, Number(bits), family);
  }
  return (peer) => {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(peer);
    if (mapped) return list.check(mapped[1]!, 'ipv4') || list.check(peer, 'ipv6');
    return list.check(peer, isIPv6(peer) ? 'ipv6' : 'ipv4');
  };
}

/** Half the process's open-file limit (Linux: /proc/self/limits), at most 10,000: the default of api.maxConnections. */
export function defaultMaxConnections(): number {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (m) return Math.max(1, Math.min(10_000, Math.floor(Number(m[1]) / 2)));
  } catch {
    // Not Linux: the ceiling alone.
  }
  return 10_000;
}
