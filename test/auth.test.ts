// API keys: created and revoked from the CLI, stored hashed, required where the interface
// requires them, and the rate limits that depend on them.
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { Ledger } from '../src/ledger/index.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { RateLimiter } from '../src/api/rateLimit.ts';
import { api, startStack, type Stack } from './helpers/stack.ts';

function cli(args: string[]) {
  const r = spawnSync(process.execPath, ['bin/relay-node.js', ...args], { encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, out: r.stdout + r.stderr };
}

describe('relay-node keys', () => {
  it('creates a key shown once, lists it without the key, and revokes it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-keys-'));
    const created = cli(['keys', 'create', '--name', 'acme backend', '--data-dir', dir]);
    expect(created.code).toBe(0);
    const id = /created (key_[0-9a-f]+)/.exec(created.out)![1]!;
    const key = /^(rn_\S+)$/m.exec(created.out)![1]!;

    const listed = cli(['keys', 'list', '--data-dir', dir]);
    expect(listed.out).toContain(id);
    expect(listed.out).toContain('acme backend');
    expect(listed.out).toContain('active');
    expect(listed.out).not.toContain(key);

    const ledger = Ledger.open(join(dir, 'ledger.sqlite'));
    // Only the hash is stored.
    const stored = JSON.stringify(ledger.db.prepare('SELECT * FROM api_keys').all());
    expect(stored).not.toContain(key);
    expect(ledger.apiKeys.lookup(key).state).toBe('valid');
    ledger.close();

    expect(cli(['keys', 'revoke', id, '--data-dir', dir]).code).toBe(0);
    expect(cli(['keys', 'list', '--data-dir', dir]).out).toMatch(/revoked \d{4}-/);
    const again = cli(['keys', 'revoke', id, '--data-dir', dir]);
    expect(again.code).toBe(1);
    expect(again.out).toContain(`no active key ${id}`);
    const reopened = Ledger.open(join(dir, 'ledger.sqlite'));
    expect(reopened.apiKeys.lookup(key).state).toBe('revoked');
    expect(reopened.apiKeys.lookup(`${key}x`).state).toBe('unknown');
    reopened.close();
    // Six CLI processes, each loading the whole node: on a loaded 2-core machine that passes 60 s.
  }, 180_000);
});

describe('API key checks over HTTP', () => {
  let stack: Stack;
  let key: string;
  let keyId: string;
  beforeAll(async () => {
    stack = await startStack({ blockTime: 1 });
    ({ key, id: keyId } = stack.node.ledger.apiKeys.create('tests'));
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('answers 401 with a message without a key where one is required', async () => {
    const r = await api(stack.url, '/fast-fill', { body: { requestId: `0x${'1'.repeat(64)}` } });
    expect(r.status).toBe(401);
    expect(r.body.message).toMatch(/API key/);
    expect(r.body.errorCode).toBe('MISSING_API_KEY');
  });

  it('answers 403 for an unknown key, on every endpoint, without echoing it', async () => {
    for (const path of ['/fast-fill', '/chains']) {
      const r = await api(stack.url, path, { apiKey: 'rn_not-a-key', ...(path === '/fast-fill' ? { body: {} } : {}) });
      expect(r.status).toBe(403);
      expect(r.body.errorCode).toBe('INVALID_API_KEY');
      expect(JSON.stringify(r.body)).not.toContain('rn_not-a-key');
    }
  });

  it('accepts the key as x-api-key and as Authorization: Bearer', async () => {
    for (const headers of [{ 'x-api-key': key }, { authorization: `Bearer ${key}` }] as Record<string, string>[]) {
      const r = await api(stack.url, '/fast-fill', { body: { requestId: 'nope' }, headers });
      // Past authentication: the body is what is wrong now.
      expect(r.status).toBe(400);
    }
  });

  it('records the quoting key and referrer on the request', async () => {
    const acct = stack.devnet.accounts[0]!.address;
    const q = await api(stack.url, '/quote/v2', {
      apiKey: key,
      body: {
        user: acct,
        originChainId: 8453,
        destinationChainId: 10,
        originCurrency: '0x0000000000000000000000000000000000000000',
        destinationCurrency: '0x0000000000000000000000000000000000000000',
        amount: '1000000000000000',
        tradeType: 'EXACT_INPUT',
        referrer: 'acme.app',
      },
    });
    expect(q.status).toBe(200);
    const id = q.body.steps[0].requestId;
    const row = stack.node.ledger.requests.get(id)!;
    expect(row.api_key_id).toBe(keyId);
    expect(row.referrer).toBe('acme.app');
  });

  it('refuses a revoked key at once', async () => {
    const { key: k2, id } = stack.node.ledger.apiKeys.create('short-lived');
    expect((await api(stack.url, '/chains', { apiKey: k2 })).status).toBe(200);
    stack.node.ledger.apiKeys.revoke(id);
    const r = await api(stack.url, '/chains', { apiKey: k2 });
    expect(r.status).toBe(403);
    expect(r.body.message).toMatch(/revoked/);
  });

  it('limits calls per IP without a key and per key with one (429, Retry-After)', async () => {
    // A read-only replica over the same ledger, with small limits.
    const raw = { ...stack.devnet.nodeConfig({ port: 0, dataDir: stack.dataDir, logLevel: 'silent' }), ...stack.ledgerConfig };
    const config = buildConfigWithKeys(
      { ...raw, api: { host: '127.0.0.1', port: 0, rateLimit: { perKeyPerMinute: 8, unauthenticatedPerMinute: 3 } } },
      stack.devnet.keys,
    );
    const replica = await new RelayNode(config, { readOnly: true, log: createLogger('silent') }).start();
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await api(replica.url, '/chains')).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      const limited = await api(replica.url, '/chains');
      expect(limited.body.errorCode).toBe('RATE_LIMITED');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      // The key has its own, larger budget; probes are never limited.
      for (let i = 0; i < 8; i++) expect((await api(replica.url, '/chains', { apiKey: key })).status).toBe(200);
      expect((await api(replica.url, '/chains', { apiKey: key })).status).toBe(429);
      expect((await api(replica.url, '/health')).status).toBe(200);
    } finally {
      await replica.stop();
    }
  });
});

describe('RateLimiter', () => {
  it('refills continuously and bounds what it tracks', () => {
    const rl = new RateLimiter(60, 10);
    const t0 = 1_000_000;
    for (let i = 0; i < 60; i++) expect(rl.take('a', t0).ok).toBe(true);
    const denied = rl.take('a', t0);
    expect(denied).toEqual({ ok: false, retryAfterMs: 1000 });
    expect(rl.take('a', t0 + 1000).ok).toBe(true);
    for (let i = 0; i < 50; i++) rl.take(`ip${i}`, t0);
    // Still answers for new callers after cycling many identities.
    expect(rl.take('fresh', t0).ok).toBe(true);
  });
});
