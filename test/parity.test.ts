// Hosted-API parity over a real node: the units of every amount in every record, the published
// shapes of the reference routes, and the hosted paths of every operation the interface lists.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatUnits, zeroAddress, type Hex } from 'viem';
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

const get = (path: string) => api(s.url, path, { apiKey: key.key });

beforeAll(async () => {
  s = await startStack({ chain: (c) => (c.id === B ? { ...c, publicRpcUrl: PUBLIC_RPC } : c) });
  key = s.node.ledger.apiKeys.create('parity app');
  await linkWallet(s, key, 4);
  await fundAppBalance(s, 1, account(4).address, 50_000_000n);

  const q1 = await api(s.url, '/quote/v2', {
    apiKey: key.key,
    body: { user: account(1).address, originChainId: A, destinationChainId: B, originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: '30000000000000000', tradeType: 'EXACT_INPUT' },
  });
  expect(q1.status).toBe(200);
  const [depositTx] = await executeSteps(s, q1.body, 1);
  const id1 = q1.body.steps[0].requestId as Hex;
  ethBridge = { id: id1, depositTx: depositTx!, fillTx: (await waitForStatus(s.url, id1, ['success'])).txHashes[0] };

  const before = s.node.ledger.balances.summary(account(4).address).balance;
  const q2 = await api(s.url, '/quote/v2', {
    apiKey: key.key,
    body: { user: account(2).address, recipient: account(2).address, originChainId: A, destinationChainId: B, originCurrency: usdc(A), destinationCurrency: usdc(B), amount: '10000000', tradeType: 'EXACT_INPUT', subsidizeFees: true, maxSubsidizationAmount: '5000000' },
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

  it('reads inTxs[].fee from the deposit receipt', async () => {
    const d = (await get(`/requests/v3?id=${ethBridge.id}`)).body.requests[0].data;
    const receipt = await s.publicClient(A).getTransactionReceipt({ hash: ethBridge.depositTx });
    expect(d.inTxs[0].fee).toBe((receipt.gasUsed * receipt.effectiveGasPrice).toString());
    // Kept in the ledger: read once.
    expect(s.node.ledger.deposits.forRequest(ethBridge.id)[0]!.tx_fee).toBe(d.inTxs[0].fee);
  });

  it('omits continuation on the last page (v3 and v2)', async () => {
    const v3 = await get(`/requests/v3?id=${ethBridge.id}`);
    expect(v3.body.requests).toHaveLength(1);
    expect('continuation' in v3.body).toBe(false);
    const v2 = await api(s.url, `/requests/v2?user=${account(1).address}`);
    expect(v2.status).toBe(200);
    expect('continuation' in v2.body).toBe(false);
    const paged = await get(`/requests/v3?limit=1`);
    expect(typeof paged.body.continuation).toBe('string');
  });

  it('gives v2 expandedPriceImpact as {quoted, actual}', async () => {
    const v2 = await api(s.url, `/requests/v2?user=${account(2).address}`);
    const r = v2.body.requests.find((x: any) => x.id === usdcBridge.id);
    expect(r.data.expandedPriceImpact.quoted).toMatchObject({ execution: { usd: expect.stringMatching(/^[0-9.]+$/) }, relay: { usd: expect.any(String) } });
    expect(r.data.expandedPriceImpact.actual.execution.usd).toMatch(/^[0-9.]+$/);
  });

  it('every amount of every record (v3, v2, status, quote, price, app balance) is an integer string', async () => {
    const answers = [
      (await get(`/requests/v3?limit=50&includeAuthenticatedData=true`)).body,
      (await api(s.url, `/requests/v2?limit=50`)).body,
      (await api(s.url, `/app-fees/${account(4).address}/balances`)).body,
      (await api(s.url, `/price?originChainId=${A}&destinationChainId=${B}&originCurrency=${usdc(A)}&destinationCurrency=${usdc(B)}&amount=1000000`)).body,
      (await api(s.url, '/quote/v2', { apiKey: key.key, body: { user: account(3).address, originChainId: A, destinationChainId: B, originCurrency: usdc(A), destinationCurrency: usdc(B), amount: '2000000', tradeType: 'EXACT_INPUT', subsidizeFees: true } })).body,
    ];
    const found = answers.flatMap((a, i) => amounts(a, `answer${i}`));
    expect(found.length).toBeGreaterThan(50);
    const bad = found.filter(([, v]) => typeof v !== 'string' || !/^-?[0-9]+$/.test(v));
    expect(bad).toEqual([]);
  });
});

describe('reference routes in the published shapes', () => {
  it('GET /chains never shows the node\'s own RPC or exchange URLs, only a configured public RPC URL', async () => {
    const r = await api(s.url, '/chains');
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
    const chains = (await api(s.url, '/chains')).body.chains;
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
    expect((await api(s.url, `/chains?includeChains=${B}`)).body.chains.map((c: any) => c.id)).toEqual([B]);
  });

  it('GET /config/v2 takes currency ids, and omits user without one', async () => {
    const byId = await api(s.url, `/config/v2?originChainId=${A}&destinationChainId=${B}&currency=usdc&user=${account(1).address}`);
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ enabled: true, currency: { symbol: 'USDC' }, supportsExternalLiquidity: false });
    expect(BigInt(byId.body.user.balance)).toBeGreaterThan(0n);
    const noUser = await api(s.url, `/config/v2?originChainId=${A}&destinationChainId=${B}`);
    expect(noUser.status).toBe(200);
    expect('user' in noUser.body).toBe(false);
  });

  it('POST /currencies/v2 takes defaultList, verified, currencyId, tokens and includeAllChains', async () => {
    const all = await api(s.url, '/currencies/v2', { body: { defaultList: true, verified: true, limit: 100 } });
    expect(all.status).toBe(200);
    expect(all.body.length).toBeGreaterThan(5);
    expect(all.body.every((c: any) => c.metadata.verified === true && ['evm', 'svm', 'hypevm'].includes(c.vmType))).toBe(true);
    const byId = await api(s.url, '/currencies/v2', { body: { currencyId: 'usdc', chainIds: [A, B] } });
    expect(byId.body.map((c: any) => c.chainId).sort()).toEqual([B, A].sort());
    const byToken = await api(s.url, '/currencies/v2', { body: { tokens: [`${B}:${usdc(B)}`] } });
    expect(byToken.body).toEqual([expect.objectContaining({ chainId: B, symbol: 'USDC' })]);
    const everywhere = await api(s.url, '/currencies/v2', { body: { chainIds: [A], address: usdc(A), includeAllChains: true } });
    expect(everywhere.body.map((c: any) => c.chainId)).toEqual(expect.arrayContaining([A, B]));
    expect((await api(s.url, '/currencies/v2', { body: { tokens: ['nonsense'] } })).status).toBe(400);
  });

  it('GET /currencies/token/price answers a number (v2: the decimal string)', async () => {
    expect((await api(s.url, `/currencies/token/price?chainId=${B}&address=${zeroAddress}`)).body).toEqual({ price: 3000 });
    expect((await api(s.url, `/currencies/token/price/v2?chainId=${B}&address=${zeroAddress}`)).body).toEqual({ price: '3000' });
  });
});
