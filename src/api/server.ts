import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { apiReads } from '../lib/apiReads.ts';
import Fastify, { type FastifyHttpOptions, type FastifyInstance } from 'fastify';
import type { Config } from '../config/load.ts';
import { authHooks } from './auth.ts';
import { capConnections, capOperatorConnections, defaultMaxConnections, isUpgrade } from './connectionCap.ts';
import { authorizeRoutes } from './routes/authorize.ts';
import type { ApiContext } from './context.ts';
import { DepositAddressReindex } from './depositReindex.ts';
import { errorHandler } from './errors.ts';
import { registerOpenApi } from './openapi.ts';
import { ApiLimits } from './limits.ts';
import { loggedUrl } from './loggedUrl.ts';
import { healthRoutes } from './routes/health.ts';
import { hostedRoutes } from './routes/hosted.ts';
import { appBalanceRoutes } from './routes/appBalances.ts';
import { permitRoutes } from './routes/permits.ts';
import { quoteRoutes } from './routes/quote.ts';
import { referenceRoutes } from './routes/reference.ts';
import { requestRoutes } from './routes/requests.ts';
import { statusRoutes } from './routes/status.ts';
import { transactionRoutes } from './routes/transactions.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { statusStreamRoutes, type StatusStream } from './statusStream.ts';

/**
 * Fastify: a maintained HTTP server with body limits, JSON parsing that rejects prototype
 * poisoning, and per-route hooks, which a hand-written node:http router would have to repeat.
 */
export function createApi(ctx: ApiContext): FastifyInstance {
  const app = Fastify({ bodyLimit: 64 * 1024, ...serverOptions(ctx.config.api) });
  closeSilentConnections(app, ctx.config.api.headersTimeoutMs);
  closeStalledConnections(app, ctx.config.api.requestTimeoutMs);
  capPipelining(app, MAX_PIPELINED);
  capConnections(app, {
    perAddress: ctx.config.api.connectionsPerIp,
    total: ctx.config.api.maxConnections ?? defaultMaxConnections(),
    trustProxy: ctx.config.api.trustProxy,
  });
  app.setErrorHandler(errorHandler(ctx.log));
  app.setNotFoundHandler((req, reply) => reply.status(404).send({ message: `no route ${req.method} ${req.url.split('?')[0]}`, errorCode: 'NOT_FOUND' }));
  // Every chain read a request makes is the API's: it yields to the node's own (lib/apiReads.ts).
  app.addHook('onRequest', (_req, _reply, done) => apiReads.run(true, done));
  app.addHook('onRequest', async (req, reply) => {
    reply.header('access-control-allow-origin', '*');
    if (req.method === 'OPTIONS') {
      reply.header('access-control-allow-methods', 'GET, POST, DELETE, OPTIONS');
      reply.header('access-control-allow-headers', 'content-type, x-api-key, authorization');
      return reply.status(204).send();
    }
  });
  registerOpenApi(app);
  const limits = new ApiLimits(ctx.config.api.rateLimit);
  authHooks(app, ctx, limits);
  app.addHook('onResponse', async (req, reply) => {
    ctx.log.debug({ method: req.method, url: loggedUrl(req.url.split('?')[0]!), status: reply.statusCode, ms: reply.elapsedTime }, 'http');
  });
  // The routes load after @fastify/swagger (registered above), whose onRoute hook collects them.
  let stream: StatusStream | undefined;
  app.decorate('statusStream', { getter: () => stream! });
  // One for both reindex paths (the node's and the hosted alias): they share its guards and buckets.
  const reindex = new DepositAddressReindex(ctx);
  app.register(async (routes) => {
    // /ready and /metrics move to the operator's own address when one is configured (createOperatorApi).
    healthRoutes(routes, ctx, { operator: ctx.config.api.metricsListen === undefined });
    quoteRoutes(routes, ctx);
    statusRoutes(routes, ctx);
    transactionRoutes(routes, ctx, reindex);
    referenceRoutes(routes, ctx);
    appBalanceRoutes(routes, ctx);
    requestRoutes(routes, ctx);
    permitRoutes(routes, ctx);
    authorizeRoutes(routes, ctx);
    webhookRoutes(routes, ctx);
    hostedRoutes(routes, ctx, reindex);
    // Last: registers @fastify/websocket and GET /intents/status/ws.
    stream = statusStreamRoutes(routes, ctx, limits);
  });
  return app;
}

/**
 * The operator's endpoints (/ready, /metrics, and /health) on their own listener, for
 * `api.metricsListen`: bound to a private interface, not reachable from the public API address.
 */
export function createOperatorApi(ctx: ApiContext): FastifyInstance {
  const app = Fastify({ bodyLimit: 1024, ...serverOptions(ctx.config.api) });
  closeSilentConnections(app, ctx.config.api.headersTimeoutMs);
  closeStalledConnections(app, ctx.config.api.requestTimeoutMs);
  capPipelining(app, MAX_PIPELINED);
  capOperatorConnections(app);
  app.setErrorHandler(errorHandler(ctx.log));
  app.setNotFoundHandler((req, reply) => reply.status(404).send({ message: `no route ${req.method} ${req.url.split('?')[0]}`, errorCode: 'NOT_FOUND' }));
  healthRoutes(app, ctx, { operator: true });
  return app;
}

/**
 * The server options both API listeners share: whose X-Forwarded-For names the client (none unless
 * configured: see api.trustProxy) and how long receiving a request may take. Fastify's own request
 * log stays off: the API logs what it chooses, without query strings that may carry a key.
 */
export function serverOptions(api: Config['api']): FastifyHttpOptions<Server> {
  return { logger: false, return503OnClosing: true, trustProxy: api.trustProxy, ...receiveBounds(api) };
}

/**
 * How long receiving one request may take on a listener (the API's and the admin's): its headers
 * within headersTimeoutMs, all of it within requestTimeoutMs, else 408 and the connection closed.
 */
export function receiveBounds(t: Pick<Config['api'], 'headersTimeoutMs' | 'requestTimeoutMs'>): FastifyHttpOptions<Server> {
  return {
    requestTimeout: t.requestTimeoutMs,
    http: {
      requestTimeout: t.requestTimeoutMs,
      headersTimeout: t.headersTimeoutMs,
      // Node enforces both bounds only when it checks its connections (every 30 s by default): checked
      // at a quarter of the shorter bound, a stalled request is cut within 1.25 times its bound.
      connectionsCheckingInterval: Math.max(100, Math.floor(Math.min(t.headersTimeoutMs, t.requestTimeoutMs) / 4)),
    },
  };
}

/**
 * Closes a connection that has not made a request within `ms` of opening (api.headersTimeoutMs). Node starts its
 * headers and request clocks at a request's first byte: a connection that sends nothing is no request, with the
 * server's socket timeout off it stayed open for good, and a client could hold as many of the node's file descriptors
 * as it could open. Its first request (a status stream's upgrade included) ends the wait; later idle time between
 * requests is keep-alive's to bound.
 */
export function closeSilentConnections(app: FastifyInstance, ms: number): void {
  const waiting = new WeakMap<Socket, NodeJS.Timeout>();
  const spoke = (socket: Socket | undefined) => {
    if (!socket) return;
    clearTimeout(waiting.get(socket));
    waiting.delete(socket);
  };
  app.server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => {
      if (waiting.get(socket) === timer) socket.destroy();
    }, ms);
    timer.unref();
    waiting.set(socket, timer);
    socket.once('close', () => spoke(socket));
  });
  // Every parsed request, whatever answers it (a 404, a refusal before the hooks); an upgrade is not a 'request'
  // event: the first onRequest hook sees it.
  app.server.on('request', (req: IncomingMessage) => spoke(req.socket));
  app.addHook('onRequest', (req, _reply, done) => {
    spoke(req.raw.socket);
    done();
  });
}

/**
 * Closes a connection whose client has taken nothing of what the node sent it for `ms` (api.requestTimeoutMs): its
 * unsent bytes did not move in that time. Answering has no bound of its own (a listing or a quote may take long, and
 * sends nothing meanwhile: such a connection has nothing unsent and is left alone), and keep-alive's clock runs only
 * between requests. A client that pipelines requests and never reads made the node parse a whole read of them (1,600
 * from one 300 KB write) and hold every answer on the connection for as long as the client kept it open. Status
 * stream connections are the stream's: it bounds what it buffers for each (4008).
 */
export function closeStalledConnections(app: FastifyInstance, ms: number): void {
  // Per connection: its unsent bytes when last seen, and since when they have been that many.
  const open = new Map<Socket, { unsent: number; since: number }>();
  app.server.on('connection', (socket: Socket) => {
    open.set(socket, { unsent: 0, since: 0 });
    socket.once('close', () => open.delete(socket));
  });
  app.addHook('onRequest', (req, _reply, done) => {
    // An upgrade as Node parsed it (`Upgrade` with `Connection: upgrade`), not the header alone: one sent on an ordinary
    // request is answered as any, and exempted its connection from this bound.
    if (isUpgrade(req.raw)) open.delete(req.raw.socket);
    done();
  });
  // Checked at a quarter of the bound, as Node checks its receiving bounds: a stalled connection goes within 1.25 times it.
  const check = setInterval(
    () => {
      const now = Date.now();
      for (const [socket, seen] of open) {
        const unsent = socket.writableLength;
        if (unsent === 0 || unsent !== seen.unsent) {
          seen.unsent = unsent;
          seen.since = now;
        } else if (now - seen.since >= ms) {
          open.delete(socket);
          socket.destroy();
        }
      }
    },
    Math.max(100, Math.floor(ms / 4)),
  );
  check.unref();
  app.addHook('onClose', async () => clearInterval(check));
}

/** The most requests one connection may have waiting for their answers at once (HTTP/1.1 pipelining). */
export const MAX_PIPELINED = 16;

/**
 * Closes a connection with more than `max` requests waiting for their answers. Node parses every request of a read
 * (64 KB: 1,500 short ones) and hands each to the API before it looks at whether the client takes its answers; each
 * then holds its request, its answer and their state (about 12 KB) until its answer is sent. Browsers never pipeline,
 * and clients that do keep a few requests ahead. Once the connection is closed, the rest of that read's requests (Node
 * still parses them) never reach Fastify: no route is looked up, no hook or handler runs.
 */
export function capPipelining(app: FastifyInstance, max: number): void {
  const waiting = new WeakMap<Socket, number>();
  const cut = new WeakSet<Socket>();
  // Fastify's own listener, added when it created the server (the first): put back behind a check of the connection.
  const [fastify] = app.server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  if (fastify) {
    app.server.removeListener('request', fastify);
    app.server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
      if (!cut.has(req.socket)) fastify.call(app.server, req, res);
    });
  }
  app.server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const n = (waiting.get(socket) ?? 0) + 1;
    waiting.set(socket, n);
    res.once('close', () => waiting.set(socket, (waiting.get(socket) ?? 1) - 1));
    if (n > max && !cut.has(socket)) {
      cut.add(socket);
      socket.destroy();
    }
  });
}
