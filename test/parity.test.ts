// Hosted-API parity over a real node: the units of every amount in every record, the published
// shapes of the reference routes, and the hosted paths of every operation the interface lists.
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatUnits, zeroAddress, type Hex } from 'viem';
import { pastFinality } from './helpers/finality.ts';
import { api, executeSteps, startStack, waitForStatus, type Stack } from './helpers/stack.ts';
import { fundAppBalance, linkWallet } from './helpers/appBalance.ts';

let s: Stack;
let key: { key: string; id: string };
const A = 8453;
const B = 10;
const account = (i: number) => s.devnet.accounts[i]!;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;

let ethBridge: { id: Hex; depositTx: Hex; fillTx: Hex };
let usdcBridge: { id: Hex; depositTxs: Hex[]; fillTx: Hex; paid: bigint };

const PUBLIC_RPC = 'https://rpc.public.example/optimism';

// Every answer this file receives, for the OpenAPI and published-type checks below.
const recorded: { method: string; path: string; status: number; body: unknown }[] = [];
type Init = Parameters<typeof api>[2];
async function call(path: string, init?: Init) {
  const r = await api(s.url, path, init);
  const method = init?.method ?? (init?.body !== undefined ? 'POST' : 'GET');
  recorded.push({ method, path, status: r.status, body: r.body });
  return r;
}
const get = (path: string) => call(path, { apiKey: key.key });

beforeAll(async () => {
  s = await startStack({ chain: (c) => (c.id === B ? { ...c, publicRpcUrl: PUBLIC_RPC } : c) });
  key = s.node.ledger.apiKeys.create('parity app');
  await linkWallet(s, key, 4);
  await fundAppBalance(s, 1, account(4).address, 50_000_000n);

  const q1 = await call('/quote/v2', {
    apiKey: key.key,
    body: {
      user: account(1).address,
      originChainId: A,
      destinationChainId: B,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: '30000000000000000',
      tradeType: 'EXACT_INPUT',
    },
  });
  expect(q1.status).toBe(200);
  const [depositTx] = await executeSteps(s, q1.body, 1);
  const id1 = q1.body.steps[0].requestId as Hex;
  ethBridge = { id: id1, depositTx: depositTx!, fillTx: (await waitForStatus(s.url, id1, ['success'])).txHashes[0] };

  const before = s.node.ledger.balances.summary(account(4).address).balance;
  const q2 = await call('/quote/v2', {
    apiKey: key.key,
    body: {
      user: account(2).address,
      recipient: account(2).address,
      originChainId: A,
      destinationChainId: B,
      originCurrency: usdc(A),
      destinationCurrency: usdc(B),
      amount: '10000000',
      tradeType: 'EXACT_INPUT',
      subsidizeFees: true,
      maxSubsidizationAmount: '5000000',
    },
  });
  expect(q2.status).toBe(200);
  const depositTxs = await executeSteps(s, q2.body, 2);
  const id2 = q2.body.steps.at(-1).requestId as Hex;
  const fillTx = (await waitForStatus(s.url, id2, ['success'])).txHashes[0];
  usdcBridge = { id: id2, depositTxs, fillTx, paid: before - s.node.ledger.balances.summary(account(4).address).balance };
}, 120_000);

afterAll(async () => {
  await s?.stop();
});

// Every `amount` and `minimumAmount` anywhere in an answer: one rule, an integer in the smallest unit.
function amounts(v: unknown, path = '$', out: [string, unknown][] = []): [string, unknown][] {
  if (Array.isArray(v)) v.forEach((x, i) => amounts(x, `${path}[${i}]`, out));
  else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      if ((k === 'amount' || k === 'minimumAmount') && (typeof x !== 'object' || x === null)) out.push([`${path}.${k}`, x]);
      else amounts(x, `${path}.${k}`, out);
    }
  }
  return out;
}

describe('units: one rule for every amount', () => {
  it('states the actual execution fee in the fee currency, not in wei', async () => {
    const rec = (await get(`/requests/v3?id=${usdcBridge.id}`)).body.requests[0];
    const d = rec.data;
    expect(d.fees.currency).toMatchObject({ symbol: 'USDC', decimals: 6 });
    const receipt = await s.publicClient(B).getTransactionReceipt({ hash: usdcBridge.fillTx });
    const gas = receipt.gasUsed * receipt.effectiveGasPrice;
    // ETH at 3000 USD, USDC at 1: wei * 3000 * 10^6 / 10^18.
    const inUsdc = (gas * 3000n * 10n ** 6n) / 10n ** 18n;
    expect(d.fees.actual.execution.amount).toBe(inUsdc.toString());
    expect(d.fees.actual.execution.amountFormatted).toBe(formatUnits(inUsdc, 6));
    expect(d.outTxs[0].fee).toBe(gas.toString());
  });

  it('states the sponsor payment as an integer in the sponsorship currency, with that currency', async () => {
    const rec = (await get(`/requests/v3?id=${usdcBridge.id}`)).body.requests[0];
    const fs = rec.data.feeSponsorship;
    expect(usdcBridge.paid).toBeGreaterThan(0n);
    // USDC at 1 USD: the app balance's micro-USD are USDC units one for one.
    expect(fs.actual.sponsorPayment).toEqual({ amount: usdcBridge.paid.toString(), address: fs.currency.address, chainId: fs.currency.chainId });
  });

  it('gives the swap component "0" on requests without a swap', async () => {
    for (const id of [ethBridge.id, usdcBridge.id]) {
      const d = (await get(`/requests/v3?id=${id}`)).body.requests[0].data;
      expect(d.fees.quoted.swap).toMatchObject({ amount: '0', amountFormatted: '0' });
      expect(d.fees.actual.swap).toMatchObject({ amount: '0', amountFormatted: '0' });
    }
  });

  it('reads inTxs[].fee from the deposit receipt, beside the indexer (never on a client request)', async () => {
    const receipt = await s.publicClient(A).getTransactionReceipt({ hash: ethBridge.depositTx });
    // The fee reader runs every few seconds after a deposit is recorded; until then there is no fee.
    let d: any;
    for (const end = Date.now() + 20_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
      d = (await get(`/requests/v3?id=${ethBridge.id}`)).body.requests[0].data;
      if (d.inTxs[0].fee !== undefined) break;
    }
    expect(d.inTxs[0].fee).toBe((receipt.gasUsed * receipt.effectiveGasPrice).toString());
    // Kept in the ledger: read once.
    expect(s.node.ledger.deposits.forRequest(ethBridge.id)[0]!.tx_fee).toBe(d.inTxs[0].fee);
  });

  it('omits continuation on the last page (v3 and v2)', async () => {
    const v3 = await get(`/requests/v3?id=${ethBridge.id}`);
    expect(v3.body.requests).toHaveLength(1);
    expect('continuation' in v3.body).toBe(false);
    const v2 = await call(`/requests/v2?user=${account(1).address}`);
    expect(v2.status).toBe(200);
    expect('continuation' in v2.body).toBe(false);
    const paged = await get(`/requests/v3?limit=1`);
    expect(typeof paged.body.continuation).toBe('string');
  });

  it('gives v2 expandedPriceImpact as {quoted, actual}', async () => {
    const v2 = await call(`/requests/v2?user=${account(2).address}`);
    const r = v2.body.requests.find((x: any) => x.id === usdcBridge.id);
    expect(r.data.expandedPriceImpact.quoted).toMatchObject({ execution: { usd: expect.stringMatching(/^[0-9.]+$/) }, relay: { usd: expect.any(String) } });
    expect(r.data.expandedPriceImpact.actual.execution.usd).toMatch(/^[0-9.]+$/);
  });

  it('every amount of every record (v3, v2, status, quote, price, app balance) is an integer string', async () => {
    const answers = [
      (await get(`/requests/v3?limit=50&includeAuthenticatedData=true`)).body,
      (await call(`/requests/v2?limit=50`)).body,
      (await call(`/app-fees/${account(4).address}/balances`)).body,
      (await call(`/price?originChainId=${A}&destinationChainId=${B}&originCurrency=${usdc(A)}&destinationCurrency=${usdc(B)}&amount=1000000`)).body,
      (
        await call('/quote/v2', {
          apiKey: key.key,
          body: {
            user: account(3).address,
            originChainId: A,
            destinationChainId: B,
            originCurrency: usdc(A),
            destinationCurrency: usdc(B),
            amount: '2000000',
            tradeType: 'EXACT_INPUT',
            subsidizeFees: true,
          },
        })
      ).body,
    ];
    const found = answers.flatMap((a, i) => amounts(a, `answer${i}`));
    expect(found.length).toBeGreaterThan(50);
    const bad = found.filter(([, v]) => typeof v !== 'string' || !/^-?[0-9]+$/.test(v));
    expect(bad).toEqual([]);
  });
});

describe('reference routes in the published shapes', () => {
  it("GET /chains never shows the node's own RPC or exchange URLs, only a configured public RPC URL", async () => {
    const r = await call('/chains');
    expect(r.status).toBe(200);
    const text = JSON.stringify(r.body);
    for (const c of s.node.config.chains) {
      if ('rpcUrl' in c && c.rpcUrl) expect(text).not.toContain(c.rpcUrl);
      if (c.kind === 'exchange') expect(text).not.toContain(c.exchangeUrl);
    }
    const byId = new Map(r.body.chains.map((c: any) => [c.id, c]));
    expect((byId.get(B) as any).httpRpcUrl).toBe(PUBLIC_RPC);
    expect((byId.get(A) as any).httpRpcUrl).toBe('');
  });

  it('GET /chains carries the published fields: vmType, currency ids, erc20 and solver currencies, contracts', async () => {
    const chains = (await call('/chains')).body.chains;
    const base = chains.find((c: any) => c.id === A);
    const devnetBase = s.devnet.chains.find((c) => c.id === A)!;
    expect(base).toMatchObject({
      vmType: 'evm',
      explorerUrl: expect.any(String),
      currency: { id: 'eth', symbol: 'ETH', decimals: 18, address: zeroAddress, supportsBridging: true },
      contracts: { relayReceiver: devnetBase.contracts.depository },
      protocol: { v2: { chainId: String(A), depository: devnetBase.contracts.depository } },
      tokenSupport: 'Limited',
      disabled: false,
    });
    expect(base.erc20Currencies).toContainEqual(expect.objectContaining({ id: 'usdc', symbol: 'USDC', supportsPermit: true, supportsBridging: true }));
    expect(base.solverCurrencies.map((c: any) => c.id)).toEqual(['eth', 'usdc', 'weth']);
    expect(chains.find((c: any) => c.id === 1337).vmType).toBe('hypevm');
    expect((await call(`/chains?includeChains=${B}`)).body.chains.map((c: any) => c.id)).toEqual([B]);
  });

  it('GET /config/v2 takes currency ids, and omits user without one', async () => {
    const byId = await call(`/config/v2?originChainId=${A}&destinationChainId=${B}&currency=usdc&user=${account(1).address}`);
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ enabled: true, currency: { symbol: 'USDC' }, supportsExternalLiquidity: false });
    expect(BigInt(byId.body.user.balance)).toBeGreaterThan(0n);
    const noUser = await call(`/config/v2?originChainId=${A}&destinationChainId=${B}`);
    expect(noUser.status).toBe(200);
    expect('user' in noUser.body).toBe(false);
  });

  it('GET /config/v2 computes fee: the relayer fee, in the currency, of bridging the amount it names', async () => {
    const cfg = await call(`/config/v2?originChainId=${A}&destinationChainId=${B}&currency=usdc&user=${account(1).address}`);
    expect(cfg.status).toBe(200);
    expect(cfg.body.fee).toMatch(/^[0-9]+$/);
    // The same bridge priced by /price: the fee is its relayer fee (gas + service), in USDC units.
    const amount = cfg.body.user.maxBridgeAmount;
    const priced = await call('/price', {
      body: {
        user: account(1).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount,
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(priced.status).toBe(200);
    expect(BigInt(cfg.body.fee)).toBeGreaterThan(0n);
    expect(cfg.body.fee).toBe(priced.body.fees.relayer.amount);
    // Without a user: the fee of bridging one whole unit of the currency.
    const unit = await call(`/config/v2?originChainId=${A}&destinationChainId=${B}&currency=usdc`);
    const unitPriced = await call('/price', {
      body: { originChainId: A, destinationChainId: B, originCurrency: usdc(A), destinationCurrency: usdc(B), amount: '1000000', tradeType: 'EXACT_INPUT' },
    });
    expect(unit.body.fee).toBe(unitPriced.body.fees.relayer.amount);
  });

  it('POST /currencies/v2 takes defaultList, verified, currencyId, tokens and includeAllChains', async () => {
    const all = await call('/currencies/v2', { body: { defaultList: true, verified: true, limit: 100 } });
    expect(all.status).toBe(200);
    expect(all.body.length).toBeGreaterThan(5);
    expect(all.body.every((c: any) => c.metadata.verified === true && ['evm', 'svm', 'hypevm'].includes(c.vmType))).toBe(true);
    const byId = await call('/currencies/v2', { body: { currencyId: 'usdc', chainIds: [A, B] } });
    expect(byId.body.map((c: any) => c.chainId).sort()).toEqual([B, A].sort());
    const byToken = await call('/currencies/v2', { body: { tokens: [`${B}:${usdc(B)}`] } });
    expect(byToken.body).toEqual([expect.objectContaining({ chainId: B, symbol: 'USDC' })]);
    const everywhere = await call('/currencies/v2', { body: { chainIds: [A], address: usdc(A), includeAllChains: true } });
    expect(everywhere.body.map((c: any) => c.chainId)).toEqual(expect.arrayContaining([A, B]));
    expect((await call('/currencies/v2', { body: { tokens: ['nonsense'] } })).status).toBe(400);
  });

  it('GET /currencies/token/price answers a number (v2: the decimal string)', async () => {
    expect((await call(`/currencies/token/price?chainId=${B}&address=${zeroAddress}`)).body).toEqual({ price: 3000 });
    expect((await call(`/currencies/token/price/v2?chainId=${B}&address=${zeroAddress}`)).body).toEqual({ price: '3000' });
  });
});

describe('operations at the hosted paths', () => {
  it('POST /execute/permits submits a permit as /permits does', async () => {
    const q = await call('/quote/v2', {
      body: {
        user: account(3).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '3000000',
        tradeType: 'EXACT_INPUT',
        usePermit: true,
      },
    });
    expect(q.status).toBe(200);
    const step = q.body.steps[0];
    // The step points the SDK at the hosted path (the SDK posts wherever the step says).
    expect(step.items[0].data.post).toMatchObject({ endpoint: '/execute/permits', method: 'POST' });
    const { domain, types, primaryType, value } = step.items[0].data.sign;
    const w = s.wallet(3, A);
    const signature = await w.signTypedData({ account: w.account!, domain, types, primaryType, message: value });
    const posted = await call(`/execute/permits?signature=${signature}`, { body: { kind: 'eip2612', ...step.items[0].data.post.body } });
    expect(posted.status).toBe(200);
    expect(posted.body).toMatchObject({ message: 'Success', requestId: step.requestId });
    await waitForStatus(s.url, step.requestId, ['success']);
  });

  it('POST /transactions/single indexes the transaction the SDK reports', async () => {
    const tx = JSON.stringify({ to: zeroAddress, data: '0x', value: '0', chainId: A, txHash: ethBridge.depositTx });
    const r = await call('/transactions/single', { body: { requestId: ethBridge.id, chainId: String(A), tx } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ message: 'Success' });
    expect((await call('/transactions/single', { body: { requestId: ethBridge.id, chainId: String(A), tx: '{}' } })).status).toBe(400);
    expect((await call('/transactions/single', { body: { requestId: ethBridge.id, chainId: String(B), tx } })).status).toBe(400);
    expect((await call('/transactions/single', { body: { requestId: `0x${'ab'.repeat(32)}`, chainId: String(A), tx } })).status).toBe(404);
  });

  it('deposit addresses: GET /deposit-addresses/v1 and POST /transactions/deposit-address/reindex (hosted body)', async () => {
    const q = await call('/quote/v2', {
      body: {
        user: account(3).address,
        recipient: account(3).address,
        refundTo: account(3).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '4000000',
        tradeType: 'EXACT_INPUT',
        useDepositAddress: true,
      },
    });
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as string;
    const byAddress = await call(`/deposit-addresses/v1?address=${at}`, { apiKey: key.key });
    expect(byAddress.status).toBe(200);
    expect(byAddress.body).toMatchObject({ depositAddress: at, type: 'strict', requestId: id, chainId: A, currency: 'usdc', refundTo: account(3).address });
    expect(new Date(byAddress.body.createdAt).toISOString()).toBe(byAddress.body.createdAt);
    expect((await call(`/deposit-addresses/v1?requestId=${id}`, { apiKey: key.key })).body.depositAddress).toBe(at);
    expect((await call(`/deposit-addresses/v1?address=${at}`)).status).toBe(401);
    expect((await call(`/deposit-addresses/v1?address=${zeroAddress}`, { apiKey: key.key })).status).toBe(404);
    const nothing = await call('/transactions/deposit-address/reindex', { body: { chainId: A, depositAddress: at } });
    expect(nothing.status).toBe(200);
    expect(nothing.body).toEqual({ message: 'Success', triggeredCurrencies: [], checkedCurrencies: 1, failedCurrencies: 0 });
    expect((await call('/transactions/deposit-address/reindex', { body: { chainId: B, depositAddress: at } })).status).toBe(404);
    expect((await call('/transactions/deposit-address/reindex', { body: { depositAddress: at } })).status).toBe(400);
  });

  it("GET /app-fees/{wallet}/claims lists a wallet's claims, newest first, paged", async () => {
    const feeTo = account(2).address;
    // 10% of 20 and 30 USDC: each claim pays its fees less its own gas.
    const paid: string[] = [];
    for (const amount of ['20000000', '30000000']) {
      const q = await call('/quote/v2', {
        body: {
          user: account(1).address,
          originChainId: A,
          destinationChainId: B,
          originCurrency: usdc(A),
          destinationCurrency: usdc(B),
          amount,
          tradeType: 'EXACT_INPUT',
          appFees: [{ recipient: feeTo, fee: 1000 }],
        },
      });
      await executeSteps(s, q.body, 1);
      await waitForStatus(s.url, q.body.steps.at(-1).requestId, ['success']);
      // Claimable once the deposit on A is final.
      await pastFinality(s, A);
      const ask = await call(`/app-fees/${feeTo}/claim`, { body: { chainId: B, currency: usdc(B), recipient: feeTo } });
      const item = ask.body.steps[0].items[0].data;
      const w = s.wallet(2, B);
      const signature = await w.signMessage({ account: w.account!, message: item.sign.message });
      const claimed = await call(`${item.post.endpoint}?signature=${signature}`, { body: item.post.body });
      expect(claimed.status).toBe(200);
      expect(BigInt(claimed.body.amount)).toBeLessThan(BigInt(amount) / 10n);
      paid.unshift(claimed.body.amount);
    }
    const all = await call(`/app-fees/${feeTo}/claims`);
    expect(all.status).toBe(200);
    expect(all.body.claims).toHaveLength(2);
    expect(all.body.claims.map((c: any) => c.currency.amount)).toEqual(paid);
    expect(all.body.claims[0]).toMatchObject({
      wallet: feeTo,
      recipient: feeTo,
      currency: { currency: { chainId: B, symbol: 'USDC' }, amountFormatted: formatUnits(BigInt(paid[0]!), 6) },
    });
    expect('continuation' in all.body).toBe(false);
    const first = await call(`/app-fees/${feeTo}/claims?limit=1`);
    expect(first.body.claims.map((c: any) => c.claimId)).toEqual([all.body.claims[0].claimId]);
    const second = await call(`/app-fees/${feeTo}/claims?limit=1&continuation=${first.body.continuation}`);
    expect(second.body.claims.map((c: any) => c.claimId)).toEqual([all.body.claims[1].claimId]);
    expect((await call(`/app-fees/0x00000000000000000000000000000000000a11ce/claims`)).body).toEqual({ claims: [] });
    expect((await call(`/app-fees/${feeTo}/claims?continuation=xyz`)).status).toBe(400);
    // A continuation's time is an integer: a fraction or one past the safe integers reached the database (a 500 on
    // PostgreSQL's BIGINT).
    for (const at of ['0.5', '1e400', '9007199254740993'])
      expect((await call(`/app-fees/${feeTo}/claims?continuation=${Buffer.from(`[${at},"x"]`).toString('base64url')}`)).status).toBe(400);
  });

  it('GET /chains/liquidity, /swap-sources, /lives and /intents/status/v2', async () => {
    // Compared with a direct read: nothing may be in flight on B between the two.
    for (const end = Date.now() + 20_000; s.node.ledger.payouts.reservedOn(B).size > 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 50));
    const liq = await call(`/chains/liquidity?chainId=${B}`);
    expect(liq.status).toBe(200);
    const usdcLiq = liq.body.liquidity.find((l: any) => l.currencyId === 'usdc');
    expect(usdcLiq.balance).toBe((await s.node.adapters.get(B)!.balance(usdc(B))).toString());
    expect(usdcLiq).toMatchObject({ chainId: B, symbol: 'USDC', decimals: 6, amountUsd: expect.stringMatching(/^[0-9.]+$/) });
    expect((await call('/chains/liquidity?chainId=999')).status).toBe(400);
    expect((await call(`/swap-sources?chainId=${A}`)).body).toEqual({ sources: ['relay-node'] });
    expect((await call('/lives')).body).toEqual({ status: 'ok' });
    const report = await call('/lives?withReport=true');
    expect(report.body.report).toMatchObject({ ledger: { status: 'ok' }, [`chain-${A}`]: { status: 'ok' } });
    const st = await call(`/intents/status/v2?requestId=${ethBridge.id}`);
    expect(st.body).toMatchObject({
      status: 'success',
      inTxHashes: [ethBridge.depositTx],
      txHashes: [ethBridge.fillTx],
      originChainId: A,
      destinationChainId: B,
    });
    expect(typeof st.body.time).toBe('number');
  });

  it("GET /metrics/usage counts the key's own calls per endpoint and status", async () => {
    const other = s.node.ledger.apiKeys.create('usage probe');
    for (let i = 0; i < 3; i++) await call(`/requests/v3?limit=1`, { apiKey: other.key });
    await call(`/requests/v3?limit=0`, { apiKey: other.key });
    const r = await call('/metrics/usage?granularity=daily', { apiKey: other.key });
    expect(r.status).toBe(200);
    expect(r.body.metrics).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ endpoint: 'GET /requests/v3', statusCode: 200, count: 3 }),
        expect.objectContaining({ endpoint: 'GET /requests/v3', statusCode: 400, errorCode: 'INVALID_INPUT_PARAMETERS', count: 1 }),
      ]),
    );
    expect(r.body.metrics.every((m: any) => m.apiKey === other.id)).toBe(true);
    expect((await call('/metrics/usage')).status).toBe(401);
    expect((await call(`/metrics/usage?apiKey=${key.key}`, { apiKey: other.key })).status).toBe(403);
  });

  it('GET /metrics/usage bounds the span it reads per granularity, and the timestamps: a 400 naming the bound', async () => {
    const other = s.node.ledger.apiKeys.create('usage span');
    const now = Math.floor(Date.now() / 1000);
    const cases: [string, RegExp][] = [
      ['granularity=minutely&startTimestamp=0', /minutely: at most 1 day from startTimestamp to endTimestamp/],
      [`granularity=hourly&startTimestamp=${now - 32 * 86_400}&endTimestamp=${now}`, /hourly: at most 31 days/],
      [`granularity=daily&startTimestamp=0&endTimestamp=${now}`, /daily: at most 366 days/],
      ['granularity=daily&endTimestamp=99999999999999999999', /endTimestamp: must be a Unix time in seconds from 0 to 253402300799/],
      ['granularity=daily&startTimestamp=1e300', /startTimestamp: must be a Unix time in seconds/],
      [`startTimestamp=${now}&endTimestamp=${now - 60}`, /startTimestamp: must not be after endTimestamp/],
    ];
    for (const [q, message] of cases) {
      const r = await call(`/metrics/usage?${q}`, { apiKey: other.key });
      expect([q, r.status, r.body.message]).toEqual([q, 400, expect.stringMatching(message)]);
    }
    // At each bound exactly: answered.
    for (const [g, days] of [
      ['minutely', 1],
      ['hourly', 31],
      ['daily', 366],
    ] as const) {
      const r = await call(`/metrics/usage?granularity=${g}&startTimestamp=${now - days * 86_400}&endTimestamp=${now}`, { apiKey: other.key });
      expect([g, r.status]).toEqual([g, 200]);
    }
    expect((await call('/metrics/usage?granularity=minutely', { apiKey: other.key })).status).toBe(200);
  });
});

describe('the OpenAPI document', () => {
  it('is served at /documentation/json, with a browsable page at /documentation', async () => {
    const doc = await call('/documentation/json');
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe('3.1.0');
    const page = await fetch(`${s.url}/documentation/static/index.html`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('swagger-ui');
  });

  it('validates the recorded answers of every route', async () => {
    // The routes the tests above did not call, called here (their error answers are documented too).
    const hook = await call('/webhooks', { apiKey: key.key, body: { url: 'http://127.0.0.1:9/hook' } });
    await call('/webhooks', { apiKey: key.key });
    await call(`/webhooks/${hook.body.id}/deliveries`, { apiKey: key.key });
    await call(`/webhooks/${hook.body.id}/redeliver`, { apiKey: key.key, body: {} });
    await call(`/webhooks/${hook.body.id}`, { apiKey: key.key, method: 'DELETE' });
    for (const path of [
      '/health',
      '/ready',
      '/metrics',
      '/requests/v2/migration-guide',
      `/intents/status/v3?requestId=${ethBridge.id}`,
      `/intents/status?requestId=${ethBridge.id}`,
      '/currencies/v2?chainIds=10',
      `/currencies/v2?chainIds=10&bogus=1`,
    ])
      await call(path);
    await call('/price', {
      body: { originChainId: A, destinationChainId: B, originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: '1000000000000000' },
    });
    await call('/quote', {
      body: {
        user: account(1).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '1000000000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    await call('/transactions/index', { body: { txHash: ethBridge.depositTx, chainId: A } });
    await call('/deposit-address/reindex', { body: { requestId: ethBridge.id } });
    await call('/fast-fill', { apiKey: key.key, body: { requestId: `0x${'cd'.repeat(32)}` } });
    await call('/authorize', { body: {} });
    await call(`/permits?signature=0x${'11'.repeat(65)}`, { body: { requestId: `0x${'ef'.repeat(32)}` } });
    await call('/execute', { apiKey: key.key, body: { requestId: ethBridge.id, signature: `0x${'11'.repeat(65)}` } });
    // The hosted gasless relay (test/gasless-relay.test.ts covers it in full): a relayed call, and a refusal.
    const rawCalls = {
      executionKind: 'rawCalls',
      data: { chainId: A, to: account(2).address, data: '0x', value: '0' },
      executionOptions: { referrer: 'parity', subsidizeFees: true },
    };
    const relayed = await call('/execute', { apiKey: key.key, body: rawCalls });
    expect(relayed.status).toBe(200);
    await waitForStatus(s.url, relayed.body.requestId, ['success']);
    expect((await call('/execute', { body: rawCalls })).body.error).toBeTruthy();
    await call('/app-balance/link', { apiKey: key.key, body: { wallet: account(4).address, signature: '0x00' } });
    await call('/app-balance/unlink', { body: { wallet: account(4).address } });

    const doc = (await api(s.url, '/documentation/json')).body;
    const ajv = new Ajv({ strict: false, allErrors: true });
    (addFormatsModule as unknown as (a: Ajv) => void)(ajv);
    const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ path, method: method.toUpperCase(), op, re: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`) })),
    );
    const seen = new Set<string>();
    const failures: string[] = [];
    for (const r of recorded) {
      const bare = r.path.split('?')[0]!;
      if (bare.startsWith('/documentation')) continue;
      const op = operations.find((o) => o.method === r.method && o.re.test(bare));
      if (!op) {
        failures.push(`${r.method} ${bare}: not in the document`);
        continue;
      }
      seen.add(`${op.method} ${op.path}`);
      const responses = op.op.responses as Record<string, any>;
      const res = responses[String(r.status)] ?? responses[`${String(r.status)[0]}XX`];
      if (!res) {
        failures.push(`${r.method} ${bare}: status ${r.status} is not documented`);
        continue;
      }
      const schema = (Object.values(res.content ?? {})[0] as { schema: object } | undefined)?.schema;
      if (!schema) continue;
      const validate = ajv.compile(schema);
      if (!validate(r.body)) failures.push(`${r.method} ${bare} ${r.status}: ${ajv.errorsText(validate.errors)}`);
    }
    expect(failures).toEqual([]);
    // Every documented operation was answered here, but the websocket stream (test/events.test.ts).
    const unanswered = operations
      .map((o) => `${o.method} ${o.path}`)
      .filter((k) => !seen.has(k) && !k.startsWith('GET /documentation') && k !== 'GET /intents/status/ws');
    expect(unanswered).toEqual([]);
  });
});

// Where the interface document and the published types disagree, the interface wins ("Where the
// interface document and those types disagree, the interface document wins"): these fields are
// left out of the type check, each with its clause.
const EXCEPTIONS: { route: string; path: RegExp; clause: string }[] = [
  {
    route: 'GET /requests/v3',
    path: /^requests\.\d+\.data\.failedTxHash$/,
    clause: 'interface, Request record data: "failedTxHash, failedTxBlockNumber, failedCallData | nullable"',
  },
  {
    route: 'GET /requests/v3',
    path: /^requests\.\d+\.data\.failedTxBlockNumber$/,
    clause: 'interface, Request record data: "failedTxHash, failedTxBlockNumber, failedCallData | nullable"',
  },
  {
    route: 'GET /requests/v3',
    path: /^requests\.\d+\.data\.failedCallData$/,
    clause: 'interface, Request record data: "failedTxHash, failedTxBlockNumber, failedCallData | nullable"',
  },
  {
    route: 'GET /requests/v3',
    path: /^requests\.\d+\.data\.feeSponsorship\.quoted\.maxSubsidizationAmount$/,
    clause: 'interface, data.feeSponsorship: "maxSubsidizationAmount (nullable)"',
  },
  {
    route: 'GET /requests/v3',
    path: /^requests\.\d+\.data\.(failReason|refundFailReason)$/,
    clause: 'interface, Request record data: "failReason | string or null | null instead of N/A"',
  },
  { route: 'GET /requests/v3', path: /^requests\.\d+\.refundTo$/, clause: 'interface, Request record: "refundTo | string or null"' },
  { route: 'GET /requests/v3', path: /^requests\.\d+\.depositAddress$/, clause: 'interface, Request record: "depositAddress | object or null"' },
  { route: 'GET /requests/v3', path: /^requests\.\d+\.supersededByRequestId$/, clause: 'interface, Request record: "supersededByRequestId | string or null"' },
  {
    route: 'GET /requests/v3',
    path: /^requests\.\d+\.data\.(triggeredByFastFill|quoteOraclePrice|refundCurrencyData|platformFee|apiKeyName)$/,
    clause:
      'interface, Request record data: "triggeredByFastFill | nullable", "quoteOraclePrice | object or null", "refundCurrencyData | nullable", "platformFee | nullable", "apiKeyName | string or null"',
  },
  {
    route: 'GET /requests/v3',
    path: /^requests\.\d+\.data\.externalMetadata\.moonpayId$/,
    clause: 'interface, Request record data: "externalMetadata | moonpayId (nullable)"',
  },
  {
    route: 'GET /requests/v2',
    path: /^requests\.\d+\.depositAddress$/,
    clause: 'issue 14 (the interface\'s v2 to v3 changes, 4: "depositAddress becomes an object"): v2\'s is a string',
  },
  {
    route: 'GET /requests/v2',
    path: /^requests\.\d+\.data\.(failReason|refundFailReason)$/,
    clause: 'interface, v2 to v3 changes 5: v2 used "N/A" where v3 has null',
  },
];

describe("the SDK's published types", () => {
  it('type-check the recorded answers of each route (tsc), but the listed exceptions', async () => {
    const published = readFileSync(SDK_TYPES, 'utf8');
    const templates = [...published.matchAll(/^ {4}"(\/[^"]*)": \{$/gm)].map((m) => m[1]!);
    const lines: string[] = [];
    const exempted = new Set<string>();
    let n = 0;
    for (const r of recorded) {
      if (r.status !== 200 || typeof r.body !== 'object') continue;
      const bare = r.path.split('?')[0]!;
      const template = templates.find((t) => new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(bare));
      if (!template || !published.includes(`"${template}": {\n        ${r.method.toLowerCase()}: {`)) continue;
      const route = `${r.method} ${template}`;
      const body = strip(structuredClone(r.body), '', (path) => {
        const e = EXCEPTIONS.find((x) => x.route === route && x.path.test(path));
        if (e) exempted.add(`${route} ${e.path.source}`);
        return Boolean(e);
      });
      lines.push(
        `// ${r.method} ${r.path}`,
        `const v${n} = ${JSON.stringify(body)} as const;`,
        `export const c${n}: Ok<'${template}', '${r.method.toLowerCase()}'> = null as unknown as Mutable<typeof v${n}>;`,
      );
      n++;
    }
    expect(n).toBeGreaterThan(40);
    const dir = join(process.cwd(), 'test', '.published-types');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'recorded.ts');
    writeFileSync(
      file,
      [
        `import type { paths } from '${relative(dir, SDK_TYPES).replace(/\.d\.ts$/, '.js')}';`,
        `type Mutable<T> = T extends readonly (infer U)[] ? Mutable<U>[] : T extends object ? { -readonly [K in keyof T]: Mutable<T[K]> } : T;`,
        `type Ok<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { responses: { 200: { content: { 'application/json': infer R } } } } ? R : never;`,
        ...lines,
      ].join('\n'),
    );
    const program = ts.createProgram([file], {
      strict: true,
      noEmit: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      skipLibCheck: true,
      types: [],
    });
    const errors = ts.getPreEmitDiagnostics(program).map((d) => {
      const line = d.file ? d.file.getLineAndCharacterOfPosition(d.start ?? 0).line : 0;
      const src = d.file?.text.split('\n')[line - 1] ?? '';
      return `${src.slice(0, 120)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n').split('\n').slice(-3).join(' / ')}`;
    });
    expect(errors).toEqual([]);
    // Every exception is still needed somewhere (a fixed disagreement leaves the list).
    expect(EXCEPTIONS.filter((e) => !exempted.has(`${e.route} ${e.path.source}`)).map((e) => e.path.source)).toEqual([]);
  }, 120_000);
});

const SDK_TYPES = join(process.cwd(), 'node_modules', '@relayprotocol', 'relay-sdk', '_types', 'src', 'types', 'api.d.ts');

// Removes the fields `exempt` names (by dotted path), for the type check.
function strip(v: unknown, path: string, exempt: (path: string) => boolean): unknown {
  if (Array.isArray(v)) return v.map((x, i) => strip(x, path ? `${path}.${i}` : String(i), exempt));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const p = path ? `${path}.${k}` : k;
      if (!exempt(p)) out[k] = strip(x, p, exempt);
    }
    return out;
  }
  return v;
}
