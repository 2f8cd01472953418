// Adversarial review of the session's commits (review-today-7): what a client without a key can do to the permit flow
// now that a permit's post is checked within the signature budgets (src/api/routes/signatureChecks.ts).
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProviderPool } from '../../src/chains/providers/index.ts';
import { type AnvilHandle, startAnvil } from '../../src/devnet/anvil.ts';
import type { OpenedLedger } from '../../src/ledger/index.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { JsonRpcProxy, type RpcCall } from '../helpers/jsonRpcProxy.ts';
import { LEDGER_KINDS, testLedgers } from '../helpers/ledgers.ts';
import { waitingOrder } from '../helpers/statusFixtures.ts';
import { api, permitQuote, startStack, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
// Small budgets so that a test spends them whole: per client address, and of all clients without a key together.
const PER_CALLER = 5;
const TOTAL = 10;
// The checks a request waiting for its permit has of its own (signatureChecks.ts PERMIT_CHECKS_PER_REQUEST).
const REQUEST_OWN = 1;

describe('the anonymous signature budget and a user posting their own permit', () => {
  beforeAll(async () => {
    // The loopback peer is a trusted proxy: its X-Forwarded-For names a client, so a test can speak from many addresses.
    s = await startStack({
      ledger: 'sqlite',
      config: {
        api: {
          host: '127.0.0.1',
          port: 0,
          trustProxy: ['127.0.0.1'],
          rateLimit: {
            signatureChecksPerMinute: PER_CALLER,
            signatureChecksPerMinuteTotal: TOTAL,
            anonymousQuotesPerMinute: PER_CALLER,
            anonymousQuotesPerMinuteTotal: TOTAL,
          },
        },
      },
    });
  }, 120_000);
  afterAll(async () => s?.stop(), 120_000);

  // Every client without a key shares two node-wide budgets: of signature checks (600 a minute by default), and of
  // quotes and prices (600 a minute, src/api/auth.ts PRICED, /permits among them). A permit's post took from both: a few
  // addresses (TOTAL / PER_CALLER of them; 30 and 10 at the defaults, and one /48 of IPv6 holds 65,536 /64s) posting
  // made-up signatures, or asking prices, all the time kept them empty, and every user's POST /permits was refused (429)
  // until their permit's deadline passed: no deposit through usePermit for anyone. A permit posted for a request still
  // waiting for it (quoted with usePermit, nothing submitted) is held to the signature budgets alone (its reads run
  // within them), with a check of that request's own: the attacker's spending cannot reach a request it does not
  // know, and a request to spend them on costs a quote.
  it('an honest permit is still checked (and paid) while others keep the shared budgets empty', async () => {
    // A user quotes, from an address of their own, and signs the permit the quote asks for.
    const user = privateKeyToAccount(s.devnet.accounts[2]!.privateKey);
    const q = await permitQuote(s, user.address);
    expect(q.status).toBe(200);
    const step = q.body.steps[0];
    const { domain, types, primaryType, value } = step.items[0].data.sign;
    const signature = await user.signTypedData({ domain, types, primaryType, message: value });

    // Meanwhile others empty both shared budgets from new addresses, each address within its own budgets.
    const attacker = privateKeyToAccount(`0x${'77'.repeat(32)}`);
    const junk = await attacker.signMessage({ message: 'not a permit' });
    const unlink = (ip: string) =>
      api(s.url, '/app-balance/unlink', {
        body: { wallet: attacker.address, signature: junk, nonce: 'n0nce0f16letters', expiresAt: Date.now() + 60_000 },
        headers: { 'x-forwarded-for': ip },
      });
    const price = (ip: string) => api(s.url, '/price', { body: {}, headers: { 'x-forwarded-for': ip } });
    const empty = async (ask: (ip: string) => Promise<{ status: number }>, net: number) => {
      let refused = 0;
      for (let a = 0; a < (3 * TOTAL) / PER_CALLER && refused === 0; a++) {
        for (const r of await Promise.all(Array.from({ length: PER_CALLER }, () => ask(`10.${net}.${a}.1`)))) if (r.status === 429) refused++;
      }
      return refused;
    };
    expect(await empty(unlink, 7)).toBeGreaterThan(0);
    expect(await empty(price, 9)).toBeGreaterThan(0);

    // The user posts their permit: checked, and paid.
    const posted = await api(s.url, `${step.items[0].data.post.endpoint}?signature=${signature}`, {
      body: step.items[0].data.post.body,
      headers: { 'x-forwarded-for': '10.8.0.1' },
    });
    expect([posted.status, posted.body.errorCode]).toEqual([200, undefined]);
    await waitForStatus(s.url, step.requestId as Hex, ['success']);
  }, 120_000);

  // A request's own check is one: past it, its posts take from the shared budget (and the caller's) again, so
  // quoting one request does not buy unbounded recoveries.
  it("a request's own check is one: past it, posts for it take from the shared budget", async () => {
    const owner = privateKeyToAccount(s.devnet.accounts[3]!.privateKey);
    // Quoted with a key (the shared budget of quotes is empty, above); posted without one.
    const q = await permitQuote(s, owner.address, {}, s.node.ledger.apiKeys.create('review-today-7').key);
    expect(q.status).toBe(200);
    const post = q.body.steps[0].items[0].data.post;
    const junk = await owner.signMessage({ message: 'not a permit' });
    const answers: [number, string][] = [];
    // From a new address each time: only the request's own checks and the shared budget count. The shared budget
    // refills as the tests run (TOTAL a minute): bounded, the posts end refused.
    for (let i = 0; i < 3 * TOTAL && answers.at(-1)?.[0] !== 429; i++) {
      const r = await api(s.url, `${post.endpoint}?signature=${junk}`, { body: post.body, headers: { 'x-forwarded-for': `10.10.${i}.1` } });
      answers.push([r.status, r.body.errorCode]);
    }
    expect(answers.at(-1)).toEqual([429, 'RATE_LIMITED']);
    expect(answers.slice(0, -1).every(([st, code]) => st === 400 && code === 'INVALID_SIGNATURE')).toBe(true);
    expect(answers.length - 1).toBeLessThanOrEqual(REQUEST_OWN + TOTAL);
  }, 120_000);
});

// requests.fillDeadline (one read, in the submitter's deadline rule) on both ledgers: a request's own deadline, or for an
// open deposit address's arrival (a request with a parent) its template's window counted from the arrival's creation;
// none for a request without either. Timestamps in ms are past 2^31 (PostgreSQL BIGINT, SQLite INTEGER).
const ledgers = testLedgers();
describe.each(LEDGER_KINDS)('requests.fillDeadline (%s)', (kind) => {
  let ledger: OpenedLedger;
  beforeEach(async () => {
    ledger = await ledgers.open(kind);
  });
  const T0 = 1_765_000_000_000;
  const id = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as `0x${string}`;

  it("is the request's own, else its template's window from its creation, else none", () => {
    ledger.tx(() => {
      ledger.requests.insert({ ...waitingOrder(id(1), T0), fill_deadline: T0 + 600_000 });
      // A template with a deadline and its arrival (no deadline of its own), created an hour later.
      ledger.requests.insert({ ...waitingOrder(id(2), T0), fill_deadline: T0 + 900_000 });
      ledger.requests.insert({ ...waitingOrder(id(3), T0 + 3_600_000), parent_id: id(2) });
      // A template without a deadline and its arrival; a request with neither.
      ledger.requests.insert(waitingOrder(id(4), T0));
      ledger.requests.insert({ ...waitingOrder(id(5), T0 + 60_000), parent_id: id(4) });
      ledger.requests.insert(waitingOrder(id(6), T0));
      // An arrival with a deadline of its own: its own.
      ledger.requests.insert({ ...waitingOrder(id(7), T0 + 7_200_000), parent_id: id(2), fill_deadline: T0 + 7_260_000 });
    });
    expect(ledger.requests.fillDeadline(id(1))).toBe(T0 + 600_000);
    expect(ledger.requests.fillDeadline(id(2))).toBe(T0 + 900_000);
    expect(ledger.requests.fillDeadline(id(3))).toBe(T0 + 3_600_000 + 900_000);
    expect(ledger.requests.fillDeadline(id(4))).toBeUndefined();
    expect(ledger.requests.fillDeadline(id(5))).toBeUndefined();
    expect(ledger.requests.fillDeadline(id(6))).toBeUndefined();
    expect(ledger.requests.fillDeadline(id(7))).toBe(T0 + 7_260_000);
    expect(ledger.requests.fillDeadline(id(99))).toBeUndefined();
  });
});

// A provider that answers a read of a block it has (its head, read in the same batch, at or above it) with null. The
// indexer's rewind no longer takes a failed read for a replaced block (the pass ends instead), but this answer was no
// failure to the pool: it went back to the caller as the answer (viem: BlockNotFoundError), the provider unscored and
// picked again, so every indexer pass (a rewind reads a block per step) that reached it failed, as often as it was
// picked. Now it is a failure of that provider: the read is asked elsewhere, and the provider scored down.
class NullBlocks extends JsonRpcProxy {
  protected async answer(c: RpcCall): Promise<unknown> {
    const tag = c.params?.[0];
    if (c.method === 'eth_getBlockByNumber' && typeof tag === 'string' && tag.startsWith('0x')) return { jsonrpc: '2.0', id: c.id, result: null };
    return { ...(await this.forward(c.method, c.params)), jsonrpc: '2.0', id: c.id };
  }
}

describe('a provider answering null for a block at or below its own head', () => {
  let anvil: AnvilHandle;
  let liar: NullBlocks;
  beforeAll(async () => {
    anvil = await startAnvil({ chainId: 31337 });
    liar = await new NullBlocks(anvil.rpcUrl).start();
    await fetch(anvil.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_mine', params: ['0x10'] }),
    });
  });
  afterAll(async () => {
    await liar?.stop();
    await anvil?.stop();
  });

  it('is a failure of that provider: the block is read from another', async () => {
    const pool = new ProviderPool({
      chainId: 31337,
      providers: [
        { url: anvil.rpcUrl, name: 'honest', weight: 1, maxRps: 0, maxConcurrent: 32, role: 'any' as const },
        { url: liar.url, name: 'liar', weight: 1, maxRps: 0, maxConcurrent: 32, role: 'any' as const },
      ],
      metrics: createMetrics(),
      log: createLogger('silent'),
      maxWaitMs: 10_000,
    });
    const answers: unknown[] = [];
    for (let n = 1; n <= 16; n++) answers.push(await pool.request({ method: 'eth_getBlockByNumber', params: [`0x${n.toString(16)}`, false] }));
    expect(answers.map((b) => (b as { number?: string } | null)?.number ?? null)).toEqual(Array.from({ length: 16 }, (_, i) => `0x${(i + 1).toString(16)}`));
    await pool.stop();
  });
});
