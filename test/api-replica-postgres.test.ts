// An API replica on another "host": `relay-node api`'s node (read-only) whose ledger.url names a streaming hot
// standby of the leader's PostgreSQL. It answers status and listings for an order the leader filled (once the
// standby replayed it), streams the order's status events over the websocket (it follows the outbox by polling),
// and never writes: a hot standby refuses every write, so any write on its path would show as an error. A replica on
// the primary itself keeps the Status records it reads, listening for their changes, and follows an order to its end.
import { once } from 'node:events';

import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { startStandby, type PostgresHandle } from '../src/devnet/postgres.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { LISTENER_NAME } from '../src/ledger/postgres/statusListener.ts';
import { withPostgres } from '../src/ledger/pgUrl.ts';
import { api, executeSteps, type Stack, startStack, until, waitForStatus, nativeBridge } from './helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;
let standby: PostgresHandle;
let replica: RelayNode;
let stopped = false;
const replicaLog: string[] = [];
let key: string;
const sockets: WebSocket[] = [];

beforeAll(async () => {
  s = await startStack({ ledger: 'postgres' });
  const url = s.node.config.ledger.url!.reveal();
  standby = await startStandby(s.postgres!, url);
  key = s.node.ledger.apiKeys.create('integrator').key;
  const raw = s.devnet.nodeConfig({ port: 0, dataDir: s.dataDir, logLevel: 'debug' });
  const config = buildConfigWithKeys({ ...raw, ledger: { url: standby.url } }, s.devnet.keys);
  replica = await new RelayNode(config, {
    readOnly: true,
    log: createLogger('debug', { write: (line: string) => void replicaLog.push(line) }),
  }).start();
}, 180_000);
afterAll(async () => {
  for (const ws of sockets) ws.terminate();
  if (!stopped) await replica?.stop();
  await standby?.stop();
  await s?.stop();
});

async function order(account: number): Promise<{ requestId: string; body: any }> {
  const q = await api(s.url, '/quote/v2', {
    apiKey: key,
    body: nativeBridge(s.devnet.accounts[account]!.address, s.devnet.accounts[account]!.address, A, B, '10000000000000000'),
  });
  expect(q.status).toBe(200);
  return { requestId: q.body.steps[0].requestId, body: q.body };
}

// Errors the replica logged (a write refused by the standby would be one).
const replicaErrors = () => replicaLog.filter((l) => /"level":(50|60)/.test(l) || /read-only transaction/.test(l));

describe('an API replica on a streaming standby of the PostgreSQL ledger', () => {
  it('answers status and listings for an order the leader filled, once replicated, with an API key, writing nothing', async () => {
    const { requestId, body } = await order(1);
    await executeSteps(s, body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status).toBe('success');
    // The standby replays the primary's WAL: poll until the replica sees the final status.
    const seen = await until(async () => {
      const r = await api(replica.url, `/intents/status/v3?requestId=${requestId}`, { apiKey: key });
      return r.status === 200 && r.body.status === 'success' ? r.body : undefined;
    }, 'the replica to see the fill');
    expect(seen).toEqual(done);
    const listed = await api(replica.url, `/requests/v3?id=${requestId}`, { apiKey: key });
    expect(listed.status).toBe(200);
    expect(listed.body.requests.map((r: { id: string }) => r.id)).toEqual([requestId]);
    expect(listed.body.requests[0].status).toBe('success');
    const mine = await api(replica.url, `/requests/v3?user=${s.devnet.accounts[1]!.address}`, { apiKey: key });
    expect(mine.status).toBe(200);
    expect(mine.body.requests.map((r: { id: string }) => r.id)).toContain(requestId);
    // Read-only routes it serves too; the usage counters of its key calls are not written there.
    expect((await api(replica.url, '/chains', { apiKey: key })).status).toBe(200);
    expect(replicaErrors()).toEqual([]);
  }, 120_000);

  it('streams the status events of an order the leader fills to a websocket client of the replica', async () => {
    const { requestId, body } = await order(2);
    // The quote is on the primary; the replica streams once the standby has it.
    await until(async () => ((await api(replica.url, `/intents/status/v3?requestId=${requestId}`)).body.status ? true : undefined), 'the quote replicated');
    const ws = new WebSocket(`${replica.url.replace(/^http/, 'ws')}/intents/status/ws`);
    sockets.push(ws);
    const msgs: any[] = [];
    ws.on('message', (d) => msgs.push(JSON.parse(d.toString())));
    ws.on('error', () => {});
    await once(ws, 'open');
    ws.send(JSON.stringify({ type: 'subscribe', requestIds: [requestId] }));
    await until(() => msgs.find((m) => m.type === 'snapshot'), 'the snapshot');
    await executeSteps(s, body, 2);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'], 60_000)).status).toBe('success');
    const statuses = () => msgs.filter((m) => m.requestId === requestId && m.type !== 'snapshot').map((m) => m.status ?? m.data?.status);
    await until(() => (statuses().includes('success') ? true : undefined), 'the success event on the replica');
    expect(statuses().at(-1)).toBe('success');
    expect(replicaErrors()).toEqual([]);
  }, 120_000);
  it('on the primary itself, keeps the records it reads (listening for their changes) and follows an order the leader fills', async () => {
    const onPrimary = await new RelayNode(
      buildConfigWithKeys(
        { ...s.devnet.nodeConfig({ port: 0, dataDir: s.dataDir, logLevel: 'warn' }), ledger: { url: s.node.config.ledger.url!.reveal() } },
        s.devnet.keys,
      ),
      { readOnly: true, log: createLogger('warn', { write: () => {} }) },
    ).start();
    try {
      const { requestId, body } = await order(3);
      // Read (and kept) before the deposit: each change after it must reach the replica's answer.
      expect((await api(onPrimary.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('waiting');
      // Its listening connection (opened on its first status read); the replica on the standby has none.
      await until(
        () =>
          withPostgres(s.node.config.ledger.url!.reveal(), (c) =>
            c.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [LISTENER_NAME]),
          ).then((r) => (r.rows[0]!.n === 1 ? true : undefined)),
        'the replica on the primary to listen',
      );
      await executeSteps(s, body, 3);
      const seen = await waitForStatus(onPrimary.url, requestId, ['success', 'failure', 'refund'], 60_000);
      expect(seen).toEqual(await waitForStatus(s.url, requestId, ['success'], 60_000));
      // The leader's guard of the notification queue this listener reads (notifyQueueGuard.test.ts): nothing held back.
      const { usage, ended } = s.node.notifyQueue!.check();
      expect(usage).toBeLessThan(0.001);
      expect(ended).toBe(0);
      expect(await s.node.metrics.registry.getSingleMetricAsString('relay_ledger_notify_queue_usage')).toContain(`relay_ledger_notify_queue_usage ${usage}`);
    } finally {
      await onPrimary.stop();
    }
  }, 120_000);

  it('refuses the signed writes an integrator would send it (app balance link and unlink) with 503 READ_ONLY, not a 500', async () => {
    const wallet = privateKeyToAccount(s.devnet.accounts[3]!.privateKey);
    // The message to sign, from the node; signed and posted to the replica.
    const step = await api(s.url, '/app-balance/link', { apiKey: key, body: { wallet: wallet.address } });
    expect(step.status).toBe(200);
    const { sign, post } = step.body.steps[0].items[0].data;
    const signature = await wallet.signMessage({ message: sign.message });
    const linked = await api(replica.url, '/app-balance/link', { apiKey: key, body: { ...post.body, signature } });
    expect({ status: linked.status, errorCode: linked.body.errorCode }).toEqual({ status: 503, errorCode: 'READ_ONLY' });
    // Nor does it hand out a message to sign that it could not record.
    const ask = await api(replica.url, '/app-balance/link', { apiKey: key, body: { wallet: wallet.address } });
    expect({ status: ask.status, errorCode: ask.body.errorCode }).toEqual({ status: 503, errorCode: 'READ_ONLY' });
    const unlink = await api(replica.url, '/app-balance/unlink', { body: { wallet: wallet.address } });
    expect({ status: unlink.status, errorCode: unlink.body.errorCode }).toEqual({ status: 503, errorCode: 'READ_ONLY' });
    // The node itself links (the step was never used).
    const done = await api(s.url, '/app-balance/link', { apiKey: key, body: { ...post.body, signature } });
    expect(done.status).toBe(200);
  }, 60_000);
  it('stopped, it has written nothing: its key usage counters (flushed at stop) are skipped, nothing was refused by the standby', async () => {
    await replica.stop();
    stopped = true;
    expect(replicaErrors()).toEqual([]);
  });
});
