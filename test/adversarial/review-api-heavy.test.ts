// Adversarial review of the public API's heavy requests: a hostile client sends the most expensive requests it can
// find, and none may hold the node's event loop (the solver, the submitters and the indexers share it). Costs are
// counted (items parsed, issues answered), never asserted as times; the event loop's delay is measured and printed.
import { createRequire } from 'node:module';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { type Hex, zeroAddress } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { api, nativeBridge, permitQuote, startStack, type Stack } from '../helpers/stack.ts';

let s: Stack;
let key: string;
const USER = '0x00000000000000000000000000000000000000a1';

beforeAll(async () => {
  // The loopback peer is a trusted proxy: its X-Forwarded-For names a client, so a test can speak from many addresses.
  s = await startStack({ ledger: 'sqlite', config: { api: { host: '127.0.0.1', port: 0, trustProxy: ['127.0.0.1'] } } });
  key = s.node.ledger.apiKeys.create('heavy').key;
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

// The event loop's longest delay (ms) while `run` runs: printed for the record, never asserted.
async function loopDelay<T>(label: string, run: () => Promise<T>): Promise<T> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  try {
    return await run();
  } finally {
    h.disable();
    console.log(`${label}: event loop delay max ${(h.max / 1e6).toFixed(1)} ms`);
  }
}

// As many copies of `item` as fit in the API's 64 KB body limit around `wrap`.
function filling(item: string, wrap: (items: string) => string): string {
  const room = 64 * 1024 - wrap('').length - 16;
  const n = Math.floor(room / (item.length + 1));
  return wrap(Array(n).fill(item).join(','));
}

describe('JSON bodies at the size limit with thousands of array items', () => {
  // zod's .max() adds its issue and still parses every item: `{"txs":[{},{},…]}` at 64 KB was 21,000 items parsed, an
  // issue for each, and an error message of 0.5 to 1.8 MB built and sent, about half a second of the node's event
  // loop per request (6,000 a minute with a key). Now the length is checked first: one issue, no item read.
  const quote = nativeBridge(USER, USER, 8453, 10, '1000000000000000');
  const quoteWith = (field: string, item: string) => filling(item, (items) => `${JSON.stringify(quote).slice(0, -1)},"${field}":[${items}]}`);

  it.each([
    ['txs', '{}', 'txs: must have at most 10 items'],
    ['appFees', '{}', 'appFees: must have at most 10 items'],
    ['sponsoredFeeComponents', '1', 'sponsoredFeeComponents: must have at most 4 items'],
  ])('POST /quote/v2 with %s of thousands of items: one issue naming the bound', async (field, item, message) => {
    const raw = quoteWith(field, item);
    expect(raw.length).toBeGreaterThan(60_000);
    const answers = await loopDelay(`POST /quote/v2 ${field}`, () =>
      Promise.all(Array.from({ length: 4 }, () => api(s.url, '/quote/v2', { raw, apiKey: key }))),
    );
    for (const r of answers) expect([r.status, r.body.message]).toEqual([400, `invalid request: ${message}`]);
  });

  it('POST /currencies/v2 with thousands of tokens or chainIds: one issue naming the bound', async () => {
    const tokens = filling(`"8453:${zeroAddress}"`, (items) => `{"tokens":[${items}]}`);
    const chainIds = filling('"x"', (items) => `{"chainIds":[${items}]}`);
    const answers = await loopDelay('POST /currencies/v2', () =>
      Promise.all([tokens, chainIds, tokens, chainIds].map((raw) => api(s.url, '/currencies/v2', { raw, apiKey: key }))),
    );
    expect(answers.map((r) => [r.status, r.body.message])).toEqual([
      [400, 'invalid request: tokens: must have at most 100 items'],
      [400, 'invalid request: chainIds: must have at most 100 items'],
      [400, 'invalid request: tokens: must have at most 100 items'],
      [400, 'invalid request: chainIds: must have at most 100 items'],
    ]);
    // In the query string (as far as a URL goes: 16 KB of headers), the same.
    const r = await api(s.url, `/currencies/v2?chainIds=${Array(4_000).fill('x').join(',')}`, { apiKey: key });
    expect([r.status, r.body.message]).toEqual([400, 'invalid request: chainIds: must have at most 100 items']);
  });

  it('POST /execute with thousands of authorizations: one issue naming the bound', async () => {
    const raw = filling('{}', (items) =>
      JSON.stringify({
        executionKind: 'rawCalls',
        data: { chainId: 1, to: USER, data: '0x', value: '0', authorizationList: ['ITEMS'] },
        executionOptions: { referrer: 'x', subsidizeFees: true },
      }).replace('"ITEMS"', items),
    );
    const r = await loopDelay('POST /execute', () => api(s.url, '/execute', { raw, apiKey: key }));
    expect([r.status, r.body.message]).toEqual([400, 'invalid request: data.authorizationList: at most 8 authorizations']);
  });

  it('still takes arrays within their bounds, and names a bad item', async () => {
    const r = await api(s.url, '/currencies/v2', { body: { tokens: [`8453:${zeroAddress}`, `10:${zeroAddress}`], limit: 5 }, apiKey: key });
    expect(r.status).toBe(200);
    expect(r.body.length).toBeGreaterThan(0);
    const bad = await api(s.url, '/quote/v2', { body: { ...quote, txs: [{ to: USER, value: 'x' }] }, apiKey: key });
    expect([bad.status, bad.body.message]).toEqual([400, 'invalid request: txs.0.value: must be an integer in wei, as a string']);
  });
});

// Counts the BigInts read from strings of more than `digits` characters while `run` runs: the node runs in this
// process, and its modules call the global BigInt.
async function longBigInts<T>(digits: number, run: () => Promise<T>): Promise<{ result: T; parsed: number }> {
  const original = globalThis.BigInt;
  let parsed = 0;
  const counting = (v: string | number | bigint | boolean) => {
    if (typeof v === 'string' && v.length > digits) parsed++;
    return original(v);
  };
  globalThis.BigInt = Object.assign(counting, { asIntN: original.asIntN, asUintN: original.asUintN }) as unknown as BigIntConstructor;
  try {
    return { result: await run(), parsed };
  } finally {
    globalThis.BigInt = original;
  }
}

describe("numbers of a body limit's digits", () => {
  // A uint256 has 78 digits; `amount` took any run of digits and refused it only once BigInt had read it: 60,000 digits
  // are 3.5 ms of the node's event loop, on every quote and price (100 a second with a key).
  const digits = '9'.repeat(60_000);

  it('POST /quote/v2 and GET /price refuse an amount past 78 digits before reading it', async () => {
    const { result, parsed } = await longBigInts(100, () =>
      loopDelay('amount of 60,000 digits', () =>
        Promise.all([
          api(s.url, '/quote/v2', { body: nativeBridge(USER, USER, 8453, 10, digits), apiKey: key }),
          api(
            s.url,
            `/price?originChainId=8453&destinationChainId=10&originCurrency=${zeroAddress}&destinationCurrency=${zeroAddress}&amount=${digits.slice(0, 12_000)}`,
            {
              apiKey: key,
            },
          ),
        ]),
      ),
    );
    expect(result.map((r) => [r.status, r.body.message])).toEqual([
      [400, 'invalid request: amount: must fit in uint256'],
      [400, 'invalid request: amount: must fit in uint256'],
    ]);
    expect(parsed).toBe(0);
    // Leading zeros do not count: 0…01 is one.
    const ok = await api(s.url, '/quote/v2', { body: nativeBridge(USER, USER, 8453, 10, `${'0'.repeat(100)}1000000000000000`), apiKey: key });
    expect(ok.body.message ?? '').not.toMatch(/amount/);
  });

  it('POST /execute (value) and POST /fast-fill (maxFillAmountUsd) refuse a number of thousands of digits as input', async () => {
    const execute = await api(s.url, '/execute', {
      body: {
        executionKind: 'rawCalls',
        data: { chainId: 8453, to: USER, data: '0x', value: digits },
        executionOptions: { referrer: 'x', subsidizeFees: true },
      },
      apiKey: key,
    });
    expect([execute.status, execute.body.message]).toEqual([400, 'invalid request: data.value: must fit in uint256']);
    const fastFill = await api(s.url, '/fast-fill', { body: { requestId: `0x${'ab'.repeat(32)}`, maxFillAmountUsd: digits }, apiKey: key });
    expect([fastFill.status, fastFill.body.message]).toEqual([400, 'invalid request: maxFillAmountUsd: must be at most 40 characters']);
  });
});

describe('GET /currencies/v2 with a chain named many times', () => {
  // chainIds took up to 100 values, duplicates included: each was searched again (every currency of the chain matched,
  // and an `address` made canonical, a keccak, once per currency per copy) and listed again.
  it('searches each chain once and lists each currency once', async () => {
    const once = await api(s.url, '/currencies/v2?chainIds=8453&limit=100', { apiKey: key });
    const many = await api(s.url, `/currencies/v2?chainIds=${Array(100).fill('8453').join(',')}&limit=100`, { apiKey: key });
    expect(once.status).toBe(200);
    expect(once.body.length).toBeGreaterThan(0);
    expect(many.body).toEqual(once.body);
  });
});

describe('the OpenAPI document', () => {
  // @fastify/swagger built the document's YAML (330 KB, 0.3 to 0.5 s of stringifying on the node's event loop) on the
  // first GET /documentation/yaml of whoever asked first; now it is built at startup, and requests read the copy.
  it('is not built on a request: the first GET /documentation/yaml stringifies nothing', async () => {
    const yaml = createRequire(createRequire(import.meta.url).resolve('@fastify/swagger'))('yaml') as { stringify: (...a: unknown[]) => string };
    const stringify = vi.spyOn(yaml, 'stringify');
    try {
      const r = await loopDelay('first GET /documentation/yaml', () => api(s.url, '/documentation/yaml'));
      expect(r.status).toBe(200);
      expect(String(r.body)).toMatch(/^openapi: 3\.1\.0/);
      expect(stringify).not.toHaveBeenCalled();
    } finally {
      stringify.mockRestore();
    }
  });

  // GET /documentation/json sent the document as an object: its 140 KB were stringified again for every request.
  it('is not stringified on a request: GET /documentation/json sends the text made at startup', async () => {
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      const answers = await loopDelay('20 GET /documentation/json', () => Promise.all(Array.from({ length: 20 }, () => api(s.url, '/documentation/json'))));
      for (const r of answers) expect([r.status, r.body.openapi, r.headers.get('content-type')]).toEqual([200, '3.1.0', 'application/json; charset=utf-8']);
      expect(answers[0]!.body.paths['/quote/v2']).toBeDefined();
      const large = stringify.mock.results.filter((x) => x.type === 'return' && typeof x.value === 'string' && x.value.length > 50_000);
      expect(large).toHaveLength(0);
    } finally {
      stringify.mockRestore();
    }
  });
});

describe('signatures made up by clients without a key', () => {
  // Recovering a signer (secp256k1 in JavaScript) is 2 to 6 ms of the node's event loop, and unlink, claim and authorize
  // take no key: every made-up signature was recovered, at the general rate (600 a minute per address, any number of
  // addresses). Now each caller has api.rateLimit.signatureChecksPerMinute (20), and callers without a key share
  // signatureChecksPerMinuteTotal (600): past them, 429 before any recovery.
  const SIGNATURE_CHECKS_PER_CALLER = 20;
  const ANONYMOUS_SIGNATURE_CHECKS = 600;
  it('the budgets are the defaults this file counts with', () => {
    const { signatureChecksPerMinute, signatureChecksPerMinuteTotal } = s.node.config.api.rateLimit;
    expect([signatureChecksPerMinute, signatureChecksPerMinuteTotal]).toEqual([SIGNATURE_CHECKS_PER_CALLER, ANONYMOUS_SIGNATURE_CHECKS]);
  });
  const signer = privateKeyToAccount(`0x${'42'.repeat(32)}`);
  // When this file's first signature check was sent: the shared budget refills from then on.
  let since = 0;
  const unlink = async (signature: Hex, from?: string) =>
    api(s.url, '/app-balance/unlink', {
      body: { wallet: USER, signature, nonce: 'n0nce0f16letters', expiresAt: Date.now() + 60_000 },
      headers: from ? { 'x-forwarded-for': from } : {},
    });

  it('are checked at most SIGNATURE_CHECKS_PER_CALLER a minute per address', async () => {
    const signature = await signer.signMessage({ message: 'not the unlink message' });
    since = Date.now();
    const answers = await loopDelay(`${SIGNATURE_CHECKS_PER_CALLER + 5} unlinks from one address`, async () => {
      const out: [number, string][] = [];
      for (let i = 0; i < SIGNATURE_CHECKS_PER_CALLER + 5; i++) {
        const r = await unlink(signature, '10.1.0.1');
        out.push([r.status, r.body.errorCode]);
      }
      return out;
    });
    expect(answers).toEqual([...Array(SIGNATURE_CHECKS_PER_CALLER).fill([400, 'INVALID_SIGNATURE']), ...Array(5).fill([429, 'RATE_LIMITED'])]);
  });

  // A permit's post (POST /permits, no key) was checked outside the budget: each made-up signature cost its recovery and
  // four reads of the origin chain (the token's name, version, the owner's nonce and balance) on the solver's providers,
  // at the priced rate of any number of addresses. Without a key it now takes from the same budgets.
  it('a permit posted without a key is checked within the same budget', async () => {
    const q = await permitQuote(s, USER);
    expect(q.status).toBe(200);
    const post = q.body.steps[0].items[0].data.post;
    const signature = await signer.signMessage({ message: 'not a permit' });
    const answers: [number, string][] = [];
    for (let i = 0; i < SIGNATURE_CHECKS_PER_CALLER + 3; i++) {
      const r = await api(s.url, `${post.endpoint}?signature=${signature}`, { body: post.body, headers: { 'x-forwarded-for': '10.3.0.1' } });
      answers.push([r.status, r.body.errorCode]);
    }
    expect(answers).toEqual([...Array(SIGNATURE_CHECKS_PER_CALLER).fill([400, 'INVALID_SIGNATURE']), ...Array(3).fill([429, 'RATE_LIMITED'])]);
  });

  it('are checked at most ANONYMOUS_SIGNATURE_CHECKS a minute from all addresses together', async () => {
    const signature = await signer.signMessage({ message: 'not the unlink message either' });
    // Batches of a budget's worth from new addresses, until the node refuses (it refills as the test runs).
    const counts: Record<string, number> = {};
    await loopDelay('unlinks from many addresses', async () => {
      for (let a = 0; a < (3 * ANONYMOUS_SIGNATURE_CHECKS) / SIGNATURE_CHECKS_PER_CALLER && !counts['429 RATE_LIMITED']; a++) {
        const answers = await Promise.all(Array.from({ length: SIGNATURE_CHECKS_PER_CALLER }, () => unlink(signature, `10.2.${a}.1`)));
        for (const r of answers) counts[`${r.status} ${r.body.errorCode}`] = (counts[`${r.status} ${r.body.errorCode}`] ?? 0) + 1;
      }
    });
    expect(counts['429 RATE_LIMITED'] ?? 0).toBeGreaterThan(0);
    // The budget is a bucket: full, plus what it refilled while the test ran (its rate, not a time, is the bound). The
    // test's own checks above (one address) took from it too.
    const refilled = Math.ceil(((Date.now() - since) * ANONYMOUS_SIGNATURE_CHECKS) / 60_000);
    expect((counts['400 INVALID_SIGNATURE'] ?? 0) + SIGNATURE_CHECKS_PER_CALLER).toBeLessThanOrEqual(ANONYMOUS_SIGNATURE_CHECKS + refilled);
    // A key has its own budget.
    const keyed = await api(s.url, '/app-balance/unlink', {
      body: { wallet: USER, signature, nonce: 'n0nce0f16letters', expiresAt: Date.now() + 60_000 },
      apiKey: key,
    });
    expect([keyed.status, keyed.body.errorCode]).toEqual([400, 'INVALID_SIGNATURE']);
  });
});
