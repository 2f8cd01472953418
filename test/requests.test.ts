import http from 'node:http';
// GET /requests/v3 and its deprecated predecessor, over a real node: the Request record as the
// node recorded it, every filter and its 400s, pagination under inserts, and v2's retirement.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, getAddress, keccak256, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import type { NewRequest } from '../src/ledger/requests.ts';
import { api, executeSteps, startStack, waitForStatus, type Stack } from './helpers/stack.ts';

let s: Stack;
let key: string;
let keyId: string;
let otherKey: string;
const A = 8453;
const B = 10;
const user = (i: number) => s.devnet.accounts[i]!.address;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;

let filled: { id: Hex; depositTx: Hex; fillTx: Hex };
let refunded: { id: Hex; depositTx: Hex; refundTx: Hex };

const get = (path: string, apiKey: string | undefined = key) => api(s.url, path, { apiKey });

function quoteBody(from: Address, amount: string, extra: Record<string, unknown> = {}) {
  return {
    user: from,
    originChainId: A,
    destinationChainId: B,
    originCurrency: zeroAddress,
    destinationCurrency: zeroAddress,
    amount,
    tradeType: 'EXACT_INPUT',
    ...extra,
  };
}

beforeAll(async () => {
  s = await startStack();
  ({ key, id: keyId } = s.node.ledger.apiKeys.create('acme'));
  ({ key: otherKey } = s.node.ledger.apiKeys.create('other'));

  // A bridge that fills.
  const q1 = await api(s.url, '/quote/v2', { apiKey: key, body: quoteBody(user(1), '50000000000000000', { referrer: 'acme.app', recipient: user(2) }) });
  const [depositTx] = await executeSteps(s, q1.body, 1);
  const id1 = q1.body.steps[0].requestId as Hex;
  const st1 = await waitForStatus(s.url, id1, ['success']);
  filled = { id: id1, depositTx: depositTx!, fillTx: st1.txHashes[0] };

  // A deposit of less than the quote asked for: refunded.
  const q2 = await api(s.url, '/quote/v2', { body: quoteBody(user(3), '50000000000000000') });
  const id2 = q2.body.steps[0].requestId as Hex;
  const w = s.wallet(3, A);
  const tx = await w.sendTransaction({
    account: w.account!,
    chain: w.chain,
    to: chain(A).contracts.depository,
    data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [user(3), id2] }),
    value: 40000000000000000n,
  });
  const st2 = await waitForStatus(s.url, id2, ['refund']);
  refunded = { id: id2, depositTx: tx, refundTx: st2.txHashes[0] };
}, 90_000);

afterAll(async () => {
  await s?.stop();
});

// Synthetic requests, straight into the ledger, for the filter semantics.
let seq = 0;
function synth(over: Partial<NewRequest> & { status?: string; sender?: string } = {}): Hex {
  seq++;
  const id = keccak256(toHex(`synthetic-${seq}-${Math.random()}`));
  const { status, sender, ...rest } = over;
  s.node.ledger.requests.insert({
    id,
    parent_id: null,
    kind: 'order',
    request_type: 'Bridge',
    user: getAddress(`0x${((seq % 5) + 1).toString(16).padStart(40, '7')}`),
    recipient: null,
    refund_to: null,
    origin_chain_id: A,
    destination_chain_id: B,
    origin_currency: zeroAddress,
    destination_currency: zeroAddress,
    trade_type: 'EXACT_INPUT',
    amount_in: '1',
    amount_out: '1',
    min_amount_out: '1',
    pricing: null,
    order_data: null,
    quote: null,
    expires_at: null,
    fill_deadline: null,
    created_at: Date.now(),
    currency_in_symbol: 'ETH',
    currency_out_symbol: 'ETH',
    ...rest,
  });
  if (status) s.node.ledger.requests.setStatus(id, status as 'success');
  if (sender) s.node.ledger.db.prepare('UPDATE requests SET sender = ? WHERE id = ?').run(sender, id);
  return id;
}

describe('the Request record', () => {
  it('shows a filled bridge as the node recorded it', async () => {
    const r = await get(`/requests/v3?id=${filled.id}&includeAuthenticatedData=true`);
    expect(r.status).toBe(200);
    expect(r.body.requests).toHaveLength(1);
    const rec = r.body.requests[0];
    expect(rec).toMatchObject({
      id: filled.id,
      status: 'success',
      user: user(1),
      sender: user(1),
      recipient: user(2),
      requestType: 'Bridge',
      supersededByRequestId: null,
      depositAddress: null,
      features: [],
    });
    expect(new Date(rec.createdAt).toISOString()).toBe(rec.createdAt);
    expect(Date.parse(rec.updatedAt)).toBeGreaterThanOrEqual(Date.parse(rec.createdAt));
    const d = rec.data;
    expect(d.failReason).toBeNull();
    expect(d.refundFailReason).toBeNull();
    expect(d.inTxs).toHaveLength(1);
    expect(d.inTxs[0]).toMatchObject({ txHash: filled.depositTx, type: 'onchain', chainId: A, status: 'success', stateChanges: [] });
    expect(typeof d.inTxs[0].block).toBe('number');
    expect(d.outTxs[0]).toMatchObject({ txHash: filled.fillTx, chainId: B, status: 'success' });
    // The fill's real fee, from its receipt.
    const receipt = await s.publicClient(B).getTransactionReceipt({ hash: filled.fillTx });
    expect(d.outTxs[0].fee).toBe((receipt.gasUsed * receipt.effectiveGasPrice).toString());
    expect(d.fees.quoted.execution.usd).toMatch(/^[0-9.]+$/);
    expect(d.fees.actual.execution.amount).toBe(d.outTxs[0].fee);
    expect(d.route.actual.origin.inputCurrency.amount).toBe('50000000000000000');
    expect(BigInt(d.route.actual.destination.outputCurrency.amount)).toBeGreaterThan(0n);
    expect(d.route.quoted.destination.outputCurrency.currency.chainId).toBe(B);
    expect(d.externalMetadata).toEqual({ moonpayId: null });
    // Authenticated fields, for the key that created it.
    expect(d.referrer).toBe('acme.app');
    expect(d.apiKeyName).toBe('acme');
    expect(d.platformFee).toMatchObject({ bps: 10 });
    expect(rec.protocol).toMatchObject({
      orderId: filled.id,
      hubType: 'onchain',
      isWithdrawable: false,
      solver: { address: s.devnet.solver, chainId: A, protocolChainId: String(A) },
      deposit: { origin: { amount: '50000000000000000', chainId: A, depositor: user(1), onchainId: filled.id, transactionId: filled.depositTx } },
      settlement: { destination: { fills: [{ chainId: B, transactionId: filled.fillTx }], refunds: [] } },
    });
  });

  it('hides the authenticated fields from other keys and without the flag', async () => {
    const other = await get(`/requests/v3?id=${filled.id}&includeAuthenticatedData=true`, otherKey);
    expect(other.body.requests[0].data).not.toHaveProperty('referrer');
    expect(other.body.requests[0].data).not.toHaveProperty('apiKeyName');
    const noFlag = await get(`/requests/v3?id=${filled.id}`);
    expect(noFlag.body.requests[0].data).not.toHaveProperty('referrer');
  });

  it('shows a refund with its reason and its refund transaction', async () => {
    const rec = (await get(`/requests/v3?id=${refunded.id}`)).body.requests[0];
    expect(rec.status).toBe('refund');
    expect(rec.data.failReason).toBe('DEPOSITED_AMOUNT_TOO_LOW_TO_FILL');
    expect(rec.data.refundFailReason).toBeNull();
    expect(rec.protocol.settlement.destination.fills).toEqual([]);
    expect(rec.protocol.settlement.destination.refunds[0]).toMatchObject({ chainId: A, transactionId: refunded.refundTx });
    expect(rec.data.refundCurrencyData.currency.chainId).toBe(A);
  });
});

describe('GET /requests/v3 parameters', () => {
  it('needs an API key', async () => {
    expect((await get('/requests/v3', '')).status).toBe(401);
    expect((await get('/requests/v3', 'rn_wrong')).status).toBe(403);
  });

  it('searches by term across ids, wallets and every transaction hash', async () => {
    for (const [term, id] of [
      [filled.depositTx, filled.id],
      [filled.fillTx, filled.id],
      [refunded.refundTx, refunded.id],
      [refunded.id, refunded.id],
      [filled.fillTx.toUpperCase().replace('0X', '0x'), filled.id],
    ] as const) {
      const ids = (await get(`/requests/v3?term=${term}`)).body.requests.map((r: any) => r.id);
      expect(ids).toEqual([id]);
    }
    const byWallet = (await get(`/requests/v3?term=${user(2).toLowerCase()}`)).body.requests.map((r: any) => r.id);
    expect(byWallet).toContain(filled.id);
  });

  it('matches each hash to its own kind of transaction', async () => {
    const ids = async (q: string) => (await get(`/requests/v3?${q}`)).body.requests.map((r: any) => r.id);
    expect(await ids(`depositTxHash=${filled.depositTx}`)).toEqual([filled.id]);
    expect(await ids(`fillTxHash=${filled.fillTx}`)).toEqual([filled.id]);
    expect(await ids(`fillTxHash=${filled.depositTx}`)).toEqual([]);
    expect(await ids(`refundTxHash=${refunded.refundTx}`)).toEqual([refunded.id]);
    expect(await ids(`orderId=${filled.id}`)).toEqual([filled.id]);
  });

  it('filters by chain, address, status, reason, type, currency and key', async () => {
    const ids = async (q: string) => new Set((await get(`/requests/v3?limit=50&${q}`)).body.requests.map((r: any) => r.id));
    expect((await ids(`status=refund`)).has(refunded.id)).toBe(true);
    expect((await ids(`status=refund`)).has(filled.id)).toBe(false);
    expect((await ids(`failReason=DEPOSITED_AMOUNT_TOO_LOW_TO_FILL`)).has(refunded.id)).toBe(true);
    expect((await ids(`user=${user(1)}`)).has(filled.id)).toBe(true);
    expect((await ids(`recipient=${user(2).toLowerCase()}`)).has(filled.id)).toBe(true);
    expect((await ids(`originChainId=${B}`)).has(filled.id)).toBe(false);
    expect((await ids(`chainId=${B}`)).has(filled.id)).toBe(true);
    expect((await ids(`destinationChainId=${B}`)).has(filled.id)).toBe(true);
    expect((await ids(`requestType=Bridge`)).has(filled.id)).toBe(true);
    expect((await ids(`requestType=Wrap`)).has(filled.id)).toBe(false);
    expect((await ids(`currencyInSymbol=eth`)).has(filled.id)).toBe(true);
    expect((await ids(`currencyOutSymbol=USDC`)).has(filled.id)).toBe(false);
    expect((await ids(`currencyInAddress=${zeroAddress}&currencyInChainId=${A}`)).has(filled.id)).toBe(true);
    expect((await ids(`apiKey=${keyId}`)).has(filled.id)).toBe(true);
    expect((await ids(`apiKey=${keyId}`)).has(refunded.id)).toBe(false);
    expect((await ids(`startBlock=0&endBlock=100000`)).has(filled.id)).toBe(true);
    expect((await ids(`amountUsdMin=100&amountUsdMax=200`)).has(filled.id)).toBe(true);
    expect((await ids(`amountUsdMin=200`)).has(filled.id)).toBe(false);
    expect((await ids(`fillTimeMin=0&fillTimeMax=600`)).has(filled.id)).toBe(true);
    expect((await ids(`fillTimeMin=600`)).has(filled.id)).toBe(false);
    const t = Math.floor(Date.now() / 1000);
    expect((await ids(`startTimestamp=${t - 3600}&endTimestamp=${t + 60}`)).has(filled.id)).toBe(true);
    expect((await ids(`endTimestamp=${t - 3600}`)).has(filled.id)).toBe(false);
  });

  it('ORs filter groups, ANDs within a group, negates with not: and null-checks', async () => {
    const tag = Date.now();
    const a = synth({ status: 'success', origin_chain_id: A, created_at: tag });
    const b = synth({ status: 'failure', origin_chain_id: B, destination_chain_id: A, created_at: tag });
    const c = synth({ status: 'success', origin_chain_id: B, destination_chain_id: A, created_at: tag, currency_in_symbol: null, user: null });
    const mine = new Set([a, b, c]);
    const ids = async (filters: unknown, extra = '') => {
      const r = await get(
        `/requests/v3?limit=50&startTimestamp=${Math.floor(tag / 1000)}&endTimestamp=${Math.ceil(tag / 1000)}&filters=${encodeURIComponent(JSON.stringify(filters))}${extra}`,
      );
      expect(r.status).toBe(200);
      return new Set(r.body.requests.map((x: any) => x.id).filter((x: Hex) => mine.has(x)));
    };
    expect(await ids([{ status: 'success', originChainId: A }, { status: 'failure' }])).toEqual(new Set([a, b]));
    expect(await ids([{ status: ['success', 'failure'], originChainId: B }])).toEqual(new Set([b, c]));
    expect(await ids([{ 'not:status': 'success' }])).toEqual(new Set([b]));
    expect(await ids([{ currencyInSymbol: null }])).toEqual(new Set([c]));
    expect(await ids([{ 'not:currencyInSymbol': null, originChainId: B }])).toEqual(new Set([b]));
    expect(await ids([{ user: null }])).toEqual(new Set([c]));
    // Top-level parameters still apply.
    expect(await ids([{ originChainId: B }], '&status=success')).toEqual(new Set([c]));
  });

  it('answers 400 naming what is wrong', async () => {
    const cases: [string, RegExp][] = [
      ['limit=51', /limit/],
      ['limit=0', /limit/],
      ['status=delayed', /status/],
      ['failReason=NOPE', /failReason/],
      ['sortBy=amount', /sortBy/],
      ['sortDirection=up', /sortDirection/],
      ['hash=0x00', /hash: is not a parameter/],
      ['referrer=x', /referrer: is not a parameter/],
      ['originChainId=abc', /originChainId/],
      ['amountUsdMin=1.2345678', /amountUsdMin/],
      ['includeTotal=yes', /includeTotal/],
      [`filters=${encodeURIComponent('{not json')}`, /filters: must be a JSON array/],
      [`filters=${encodeURIComponent('{"status":"success"}')}`, /filters: must be a JSON array/],
      [`filters=${encodeURIComponent('[{"colour":"red"}]')}`, /unknown field colour/],
      [`filters=${encodeURIComponent('[{"amountUsdMin":"1"}]')}`, /top-level parameter only/],
      [`filters=${encodeURIComponent('[{"features":["fast_fill"]}]')}`, /top-level parameter only/],
      [`filters=${encodeURIComponent('[{"user":[null,"0x1"]}]')}`, /null cannot be mixed/],
      [`filters=${encodeURIComponent('[{"originChainId":{"a":1}}]')}`, /values must be/],
      [`filters=${encodeURIComponent('[{"status":"nope"}]')}`, /filters\[0\]\.status/],
      ['continuation=garbage!!', /continuation/],
    ];
    for (const [q, msg] of cases) {
      const r = await get(`/requests/v3?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.message, q).toMatch(msg);
    }
  });

  it('is not fooled by SQL in values', async () => {
    const before = s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM requests').get() as { n: number };
    const r = await get(`/requests/v3?user=${encodeURIComponent("x' OR 1=1; DROP TABLE requests; --")}`);
    expect(r.status).toBe(200);
    expect(r.body.requests).toEqual([]);
    expect(s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM requests').get()).toEqual(before);
  });

  it('filters by features (all of them) and hides child requests unless asked', async () => {
    const tag = Date.now() + 1;
    const f1 = synth({ created_at: tag, features: JSON.stringify(['fast_fill', 'app_fees']) });
    const f2 = synth({ created_at: tag, features: JSON.stringify(['app_fees']) });
    const child = synth({ created_at: tag, parent_id: f2 });
    const range = `startTimestamp=${Math.floor(tag / 1000)}&endTimestamp=${Math.ceil(tag / 1000)}&limit=50`;
    const ids = async (q: string) => new Set((await get(`/requests/v3?${range}&${q}`)).body.requests.map((x: any) => x.id));
    expect((await ids('features=app_fees')).has(f1) && (await ids('features=app_fees')).has(f2)).toBe(true);
    expect(await ids('features=app_fees,fast_fill')).toEqual(new Set([f1]));
    expect((await ids('')).has(child)).toBe(false);
    expect((await ids('includeChildRequests=true')).has(child)).toBe(true);
  });

  it('pages with a continuation that neither skips nor repeats while requests arrive', async () => {
    const tagUser = getAddress(`0x${'ab'.repeat(20)}`);
    const base = Date.now() - 10_000;
    const original = new Set<Hex>();
    for (let i = 0; i < 23; i++) original.add(synth({ user: tagUser, created_at: base + (i % 5) }));
    const seen: Hex[] = [];
    let continuation: string | null = null;
    let pages = 0;
    do {
      const r: any = await get(`/requests/v3?user=${tagUser}&limit=7&includeTotal=true${continuation ? `&continuation=${continuation}` : ''}`);
      expect(r.status).toBe(200);
      if (pages === 0) expect(r.body.total).toBe(23);
      seen.push(...r.body.requests.map((x: any) => x.id));
      continuation = r.body.continuation;
      // New requests keep arriving between pages, newer than everything listed so far.
      synth({ user: tagUser, created_at: Date.now() });
      pages++;
    } while (continuation && pages < 20);
    expect(seen.length).toBe(new Set(seen).size);
    expect(seen.filter((x) => original.has(x)).length).toBe(23);
    expect(seen.length).toBe(23);
    // Without includeTotal, no total.
    expect((await get(`/requests/v3?user=${tagUser}`)).body).not.toHaveProperty('total');
  });

  it('sorts by createdAt desc by default, amountUsd asc by default, and refuses a foreign continuation', async () => {
    const u = getAddress(`0x${'cd'.repeat(20)}`);
    for (const usd of [5_000_000, 1_000_000, 3_000_000]) synth({ user: u, amount_usd: usd, created_at: Date.now() + usd });
    const byTime = (await get(`/requests/v3?user=${u}`)).body.requests.map((r: any) => Date.parse(r.createdAt));
    expect(byTime).toEqual([...byTime].sort((x, y) => y - x));
    const byUsd = await get(`/requests/v3?user=${u}&sortBy=amountUsd&limit=2`);
    const amounts = byUsd.body.requests.map((r: any) => s.node.ledger.requests.get(r.id)!.amount_usd);
    expect(amounts).toEqual([1_000_000, 3_000_000]);
    const foreign = await get(`/requests/v3?user=${u}&sortBy=createdAt&continuation=${byUsd.body.continuation}`);
    expect(foreign.status).toBe(400);
    expect(foreign.body.message).toMatch(/different sortBy/);
    const next = await get(`/requests/v3?user=${u}&sortBy=amountUsd&limit=2&continuation=${byUsd.body.continuation}`);
    expect(next.body.requests.map((r: any) => s.node.ledger.requests.get(r.id)!.amount_usd)).toEqual([5_000_000]);
  });
});

describe('private chains', () => {
  it('hides requests on a private chain unless privateChainsToInclude names it', async () => {
    const raw = { ...s.devnet.nodeConfig({ port: 0, dataDir: s.dataDir, logLevel: 'silent' }), ...s.ledgerConfig };
    const config = buildConfigWithKeys(
      { ...raw, chains: (raw.chains as { id: number }[]).map((c) => (c.id === B ? { ...c, private: true } : c)) },
      s.devnet.keys,
    );
    const replica = await new RelayNode(config, { readOnly: true, log: createLogger('silent') }).start();
    try {
      const ids = async (q: string) => (await api(replica.url, `/requests/v3?id=${filled.id}${q}`, { apiKey: key })).body.requests.map((r: any) => r.id);
      expect(await ids('')).toEqual([]);
      expect(await ids(`&privateChainsToInclude=${B}`)).toEqual([filled.id]);
      expect((await api(replica.url, '/requests/v3?privateChainsToInclude=x', { apiKey: key })).status).toBe(400);
    } finally {
      await replica.stop();
    }
  });
});

describe('GET /requests/v2, deprecated then retired', () => {
  let clock = Date.parse('2026-08-15T00:00:00Z');
  let replica: RelayNode;
  beforeAll(async () => {
    const raw = { ...s.devnet.nodeConfig({ port: 0, dataDir: s.dataDir, logLevel: 'silent' }), ...s.ledgerConfig };
    const config = buildConfigWithKeys({ ...raw, requestsV2: { monthlyLimits: [4, 2] } }, s.devnet.keys);
    replica = await new RelayNode(config, { readOnly: true, log: createLogger('silent'), now: () => clock }).start();
  });
  afterAll(async () => {
    await replica?.stop();
  });
  const v2 = (q = '') => api(replica.url, `/requests/v2${q}`, { headers: { 'x-forwarded-for': 'ignored' } });

  function expectHeaders(h: Headers) {
    expect(h.get('deprecation')).toBe(`@${Date.parse('2026-07-22T00:00:00Z') / 1000}`);
    expect(h.get('sunset')).toBe('Tue, 24 Nov 2026 00:00:00 GMT');
    const link = h.get('link')!;
    expect(link).toMatch(/rel="deprecation"/);
    expect(link).toMatch(/rel="sunset"/);
    // Relative to the request's own address (RFC 8288 §3.1): never built from the client's Host header.
    expect(link).toContain('</requests/v3>; rel="successor-version"');
    expect(h.get('access-control-expose-headers')).toMatch(/Deprecation/);
    expect(h.get('access-control-expose-headers')).toMatch(/Sunset/);
    expect(h.get('access-control-expose-headers')).toMatch(/Link/);
    expect(h.get('retry-after')).toBeNull();
  }

  it("never builds its links from the client's Host header: a cache in front would serve them to others", async () => {
    // fetch sets Host itself; node:http sends the one given.
    const r = await new Promise<{ status: number; link: string; body: string }>((resolve, reject) => {
      const req = http.get(`${replica.url}/requests/v2?hash=${filled.fillTx}`, { headers: { host: 'attacker.example' } }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, link: String(res.headers.link), body }));
      });
      req.on('error', reject);
    });
    expect(r.status).toBe(200);
    expect(r.link).toContain('</requests/v3>; rel="successor-version"');
    expect(r.link).not.toContain('attacker.example');
    expect(r.body).not.toContain('attacker.example');
    expect(JSON.parse(r.body).deprecation).toMatchObject({ successor: '/requests/v3', migrationGuide: '/requests/v2/migration-guide' });
  });

  it('answers the v2 shape with the deprecation object and headers, without a key', async () => {
    const r = await v2(`?hash=${filled.fillTx}`);
    expect(r.status).toBe(200);
    expectHeaders(r.headers);
    expect(r.body.deprecation).toMatchObject({
      deprecatedAt: '2026-07-22T00:00:00.000Z',
      throttledFrom: '2026-09-01T00:00:00.000Z',
      sunsetAt: '2026-11-24T00:00:00.000Z',
    });
    expect(r.body.deprecation.successor).toMatch(/\/requests\/v3$/);
    const rec = r.body.requests[0];
    expect(rec.id).toBe(filled.id);
    expect(rec.data.outTxs[0].hash).toBe(filled.fillTx);
    expect(rec.data.outTxs[0]).not.toHaveProperty('txHash');
    expect(rec.data.failReason).toBe('N/A');
    expect(rec.data.metadata.sender).toBe(user(1));
    expect(rec.data.feesUsd).toHaveProperty('gas');
    // The referrer is the quoting key's own data (v3 shows it only to that key): v2 filters by it only within the
    // caller's requests. Before, anyone could list the requests quoted with any referrer.
    const byRef = (apiKey?: string) => api(replica.url, '/requests/v2?referrer=acme.app', { apiKey });
    expect((await byRef(key)).body.requests.map((x: any) => x.id)).toEqual([filled.id]);
    expect((await byRef(otherKey)).body.requests).toEqual([]);
    expect(await byRef()).toMatchObject({ status: 401, body: { errorCode: 'MISSING_API_KEY' } });
  });

  it('carries the headers on errors too', async () => {
    const r = await v2('?limit=500');
    expect(r.status).toBe(400);
    expectHeaders(r.headers);
    const badKey = await api(replica.url, '/requests/v2', { apiKey: 'rn_unknown' });
    expect(badKey.status).toBe(403);
    expectHeaders(badKey.headers);
  });

  it('throttles in monthly stages from September, then answers 410 from the sunset', async () => {
    const burst = async (n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await v2()).status);
      return out;
    };
    clock = Date.parse('2026-09-10T00:00:00Z');
    expect(await burst(5)).toEqual([200, 200, 200, 200, 429]);
    const limited = await v2();
    expect(limited.status).toBe(429);
    expect(limited.body.message).toMatch(/4 calls per minute/);
    expect(limited.body.successor).toMatch(/\/requests\/v3$/);
    expect(limited.body.migrationGuide).toMatch(/migration-guide$/);
    expectHeaders(limited.headers);
    // October: the next, smaller stage.
    clock = Date.parse('2026-10-10T00:00:00Z');
    expect(await burst(3)).toEqual([200, 200, 429]);
    clock = Date.parse('2026-11-24T00:00:00Z');
    const gone = await v2();
    expect(gone.status).toBe(410);
    expect(gone.body).toMatchObject({ message: expect.stringMatching(/retired/), successor: expect.any(String), migrationGuide: expect.any(String) });
    expectHeaders(gone.headers);
    const guide = await api(replica.url, '/requests/v2/migration-guide');
    expect(guide.body).toMatch(/hash is txHash/);
  });
});
