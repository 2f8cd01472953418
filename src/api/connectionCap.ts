import type { IncomingMessage, ServerResponse } from 'node:http';
import { BlockList, isIPv6, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { clientOf } from './clientAddress.ts';

interface Tracked {
  /** Requests being answered on it now. */
  inFlight: number;
  /** It made a request, and none is in flight: keep-alive holds it for the next. */
  spoke: boolean;
  /** Upgraded (the status stream): never idle. */
  upgraded: boolean;
}

/**
 * Caps the open connections of each client address (counted as every per-IP limit counts it: an IPv6 client by its
 * /64) at `perAddress`. A connection past the cap closes the address's oldest idle keep-alive connection (one that has
 * answered every request it made) and is kept, or, when none is idle, is refused (closed at once). A request answered
 * 429 costs its client nothing and leaves its connection open for keep-alive's time: without a cap, a client held as
 * many of the node's file descriptors as it could open connections, until the node could open none for itself.
 * Connections from a trusted proxy (api.trustProxy) are not counted: its clients are known only from their requests.
 */
export function capConnectionsPerAddress(app: FastifyInstance, perAddress: number, trustProxy: false | string[]): void {
  const trusted = trustedProxies(trustProxy);
  const byClient = new Map<string, Map<Socket, Tracked>>();
  const tracked = new WeakMap<Socket, Tracked>();

  app.server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress;
    if (peer === undefined || trusted(peer)) return;
    const client = clientOf(peer);
    let open = byClient.get(client);
    if (!open) byClient.set(client, (open = new Map()));
    if (open.size >= perAddress) {
      // A Map keeps insertion order: the first idle one found is the oldest.
      let idle: Socket | undefined;
      for (const [s, t] of open) {
        if (t.spoke && t.inFlight === 0 && !t.upgraded) {
          idle = s;
          break;
        }
      }
      if (!idle) {
        socket.destroy();
        return;
      }
      open.delete(idle);
      idle.destroy();
    }
    const t: Tracked = { inFlight: 0, spoke: false, upgraded: false };
    open.set(socket, t);
    tracked.set(socket, t);
    socket.once('close', () => {
      const m = byClient.get(client);
      if (!m) return;
      m.delete(socket);
      if (m.size === 0) byClient.delete(client);
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
  app.addHook('onRequest', (req, _reply, done) => {
    const t = tracked.get(req.raw.socket);
    if (t && req.headers.upgrade !== undefined) {
      t.spoke = true;
      t.upgraded = true;
    }
    done();
  });
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
