// Adversarial review of the public API as a hostile client (fifth pass): answers a client can bend by how it spells
// its input, and reads whose cost it sets. Costs are counted, never timed.
import { getAddress } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, nativeBridge, startStack, until, type Stack } from '../helpers/stack.ts';

let s: Stack;

beforeAll(async () => {
  s = await startStack({ ledger: 'sqlite', config: { api: { host: '127.0.0.1', port: 0 }, events: { heartbeatSeconds: 1 } } });
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

// The node's own connection (SQLite in the stack's data directory), for seeding what an app's fills leave behind.
const db = () => (s.node.ledger as unknown as { db: { prepare(sql: string): any } }).db;

describe('GET /app-fees/:wallet/claims of a wallet spelled in lower case', () => {
  // The ledger keeps an EVM wallet checksummed. /app-fees/:wallet/balances and the claim itself read the wallet in any
  // spelling (lower case is how the interface writes addresses, and how most clients send them), but the claims
  // listing looked the path's spelling up as it came: a wallet that had claimed was shown no claims at all.
  it('lists the same claims as the checksummed spelling', async () => {
    const wallet = privateKeyToAccount(s.devnet.accounts[3]!.privateKey);
    const usdc = getAddress(s.devnet.chains.find((c) => c.id === 10)!.contracts.stablecoin);
    // 5 USDC of app fees owed to the wallet on chain 10, as a filled request with an app fee books them.
    db()
      .prepare(
        `INSERT INTO app_fee_entries (recipient, chain_id, currency, amount, kind, request_id, ref, created_at) VALUES (?, 10, ?, '5000000', 'accrual', ?, ?, ?)`,
      )
      .run(wallet.address, usdc, `0x${'a5'.repeat(32)}`, 'review-api-5:claims', Date.now());
    // The claim as the SDK makes it: ask for the message, sign it, post it.
    const ask = await api(s.url, `/app-fees/${wallet.address}/claim`, { body: { chainId: 10, currency: usdc } });
    expect(ask.status).toBe(200);
    const step = ask.body.steps[0].items[0].data;
    const signature = await wallet.signMessage({ message: step.sign.message });
    const claim = await api(s.url, `${step.post.endpoint}?signature=${signature}`, { body: step.post.body });
    expect(claim.status).toBe(200);
    const claimId = claim.body.claimId as string;
    await until(() => (s.node.ledger.payouts.get(claimId)?.state === 'success' ? true : undefined), 'the claim paid');

    const checksummed = await api(s.url, `/app-fees/${wallet.address}/claims`);
    expect(checksummed.status).toBe(200);
    expect(checksummed.body.claims.map((c: { claimId: string }) => c.claimId)).toEqual([claimId]);
    const lower = await api(s.url, `/app-fees/${wallet.address.toLowerCase()}/claims`);
    expect(lower.status).toBe(200);
    // Before: 200 with no claims.
    expect(lower.body).toEqual(checksummed.body);
    // The balances read already took either spelling: the two routes now agree.
    const balances = await api(s.url, `/app-fees/${wallet.address.toLowerCase()}/balances`);
    expect(balances.body).toEqual((await api(s.url, `/app-fees/${wallet.address}/balances`)).body);
  }, 60_000);
});

describe('wallet subscriptions on the status stream after their API key is revoked', () => {
  // A wallet's stream needs an API key (the upgrade's x-api-key, or apiKey in a message). The key was checked once,
  // when the connection was opened or the message named it, and kept on the connection: after the operator revoked the
  // key (every HTTP call refuses it at once), an open connection still subscribed to any wallet it named, and kept
  // receiving every status change of the wallets it had, for as long as it stayed open.
  type Message = { type: string; errorCode?: string; wallet?: string; wallets?: string[]; requestId?: string };
  async function open(apiKey: string): Promise<{ ws: WebSocket; messages: Message[] }> {
    const ws = new WebSocket(`${s.url.replace(/^http/, 'ws')}/intents/status/ws`, { headers: { 'x-api-key': apiKey } });
    const messages: Message[] = [];
    ws.on('message', (d) => messages.push(JSON.parse(String(d))));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return { ws, messages };
  }
  const next = (c: { messages: Message[] }, from: number, match: (m: Message) => boolean, what: string) =>
    until(() => c.messages.slice(from).find(match), what);
  const subscribe = async (c: { ws: WebSocket; messages: Message[] }, wallet: string) => {
    const from = c.messages.length;
    c.ws.send(JSON.stringify({ type: 'subscribe', wallet }));
    return next(c, from, (m) => m.type === 'subscribed' || m.type === 'error', 'the answer to a subscribe');
  };
  // A quote for `wallet` (its 'waiting' status is an event of the wallet), then a ping on the connection: the event is
  // sent on the turn after the quote's commit, before the node reads the ping, so it comes before the pong when the
  // wallet is subscribed. Returns whether it came.
  const quoteSeen = async (c: { ws: WebSocket; messages: Message[] }, wallet: string): Promise<boolean> => {
    const q = await api(s.url, '/quote', { body: nativeBridge(wallet, wallet, 8453, 10, '1000000000000000') });
    expect(q.status).toBe(200);
    const id = q.body.steps[0].requestId as string;
    const from = c.messages.length;
    c.ws.send(JSON.stringify({ type: 'ping' }));
    await next(c, from, (m) => m.type === 'pong', 'the pong');
    const upToPong = c.messages.slice(
      from,
      c.messages.findIndex((m, i) => i >= from && m.type === 'pong'),
    );
    return upToPong.some((m) => m.type === 'request.status' && m.requestId === id);
  };

  it('are refused from then on, and those open end within a heartbeat', async () => {
    const key = s.node.ledger.apiKeys.create('revoked-on-the-stream');
    const wallet = s.devnet.accounts[1]!.address;
    const asking = await open(key.key);
    const idle = await open(key.key);
    try {
      expect(await subscribe(asking, wallet)).toMatchObject({ type: 'subscribed' });
      expect(await subscribe(idle, wallet)).toMatchObject({ type: 'subscribed' });
      // While the key is valid, the wallet's changes come (the ordering the checks below rely on).
      expect(await quoteSeen(idle, wallet)).toBe(true);

      expect(s.node.ledger.apiKeys.revoke(key.id)).toBe(true);
      expect((await api(s.url, '/requests/v3', { apiKey: key.key })).status).toBe(403);
      // Before: {"type":"subscribed"} on the same connection.
      expect(await subscribe(asking, s.devnet.accounts[2]!.address)).toMatchObject({ type: 'error', errorCode: 'INVALID_API_KEY', wallets: [wallet] });
      // A connection that asks nothing more is told at its next heartbeat (1 s here)...
      expect(await next(idle, 0, (m) => m.errorCode === 'INVALID_API_KEY', 'the revocation notice')).toMatchObject({ wallets: [wallet] });
      // ...and neither gets the wallet's changes any more. Before: both still did.
      expect(await quoteSeen(idle, wallet)).toBe(false);
      expect(await quoteSeen(asking, wallet)).toBe(false);
    } finally {
      asking.ws.terminate();
      idle.ws.terminate();
    }
  });
});
