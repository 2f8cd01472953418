// One API key's webhooks cannot take every delivery slot. A key whose receivers hold each delivery until it
// times out (a tarpit) and that has many events due keeps at most its share of the slots in flight; another
// key's event is delivered meanwhile, ahead of the first key's backlog.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LEDGER_KINDS, testLedgers } from '../../test/helpers/ledgers.ts';
import { hex, waitingOrder } from '../../test/helpers/statusFixtures.ts';
import { until } from '../../test/helpers/until.ts';
import type { Config } from '../config/load.ts';
import { createLogger } from '../log.ts';
import { createMetrics } from '../metrics.ts';
import { Deliverer } from './deliverer.ts';

// A receiver on loopback: answers 200 at once, or (tarpit) never answers while the test runs.
class Receiver {
  held: ServerResponse[] = [];
  bodies: { requestId: string }[] = [];
  #server: Server;
  constructor(tarpit: boolean) {
    this.#server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        this.bodies.push(JSON.parse(raw));
        if (tarpit) this.held.push(res);
        else res.end('ok');
      });
    });
  }
  async start(): Promise<string> {
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hook`;
  }
  close(): void {
    this.#server.closeAllConnections();
    this.#server.close();
  }
}

const ledgers = testLedgers();

describe.each(LEDGER_KINDS)('webhook deliveries under a hostile key (%s)', (kind) => {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it("keeps a tarpit key to its share of the slots: another key's event is delivered while the tarpit holds its own", async () => {
    const ledger = await ledgers.open(kind);
    const [tarpitA, tarpitB, honest] = [new Receiver(true), new Receiver(true), new Receiver(false)];
    for (const r of [tarpitA, tarpitB, honest]) cleanup.push(() => r.close());
    const hostileKey = ledger.apiKeys.create('hostile').id;
    const honestKey = ledger.apiKeys.create('honest').id;
    // Two webhooks of the hostile key: its share is per key, not per webhook.
    ledger.events.addWebhook(hostileKey, await tarpitA.start());
    ledger.events.addWebhook(hostileKey, await tarpitB.start());
    ledger.events.addWebhook(honestKey, await honest.start());
    const now = Date.now();
    // Twenty of the hostile key's requests: forty deliveries due at once, all before the honest one.
    for (let i = 1; i <= 20; i++) ledger.requests.insert({ ...waitingOrder(hex(i), now - 1_000), api_key_id: hostileKey });

    const events = {
      deliveryTimeoutMs: 60_000,
      maxAttempts: 20,
      backoffBaseMs: 1_000,
      backoffMaxMs: 60_000,
      concurrency: 4,
      pollIntervalMs: 20,
      allowPrivateTargets: true,
    };
    const deliverer = new Deliverer({ ledger, config: { events } as Config, metrics: createMetrics(), log: createLogger('silent') }).start();
    cleanup.push(() => deliverer.stop());
    const held = () => tarpitA.held.length + tarpitB.held.length;
    await until(() => held() > 0 || undefined, 'the hostile key holds deliveries', 10_000);

    ledger.requests.insert({ ...waitingOrder(hex(1_000), now), api_key_id: honestKey });
    await until(() => honest.bodies.length === 1 || undefined, "the honest key's event delivered while the tarpits hold theirs", 10_000);
    expect(honest.bodies[0]!.requestId).toBe(hex(1_000));
    // The default share of 4 slots is one: the hostile key never had more in flight.
    expect(held()).toBe(1);
    expect(deliverer.inFlight).toBe(1);
  });
});
