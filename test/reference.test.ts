import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zeroAddress } from 'viem';
import { api, startStack, type Stack } from './helpers/stack.ts';

let s: Stack;
beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  await s?.stop();
});
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;

describe('reference endpoints', () => {
  it('GET /chains lists each chain with its RPC, currencies, depository and solver', async () => {
    const r = await api(s.url, '/chains');
    expect(r.status).toBe(200);
    expect(r.body.chains.map((c: any) => c.id)).toEqual([8453, 10, 1337]);
    // The devnet's perpetuals exchange: perps USD is its native currency (32 hex zeros).
    expect(r.body.chains[2]).toMatchObject({
      vmType: 'hypevm',
      currency: { symbol: 'USDC', decimals: 6, address: `0x${'0'.repeat(32)}` },
      solverAddresses: [s.devnet.solver],
    });
    const base = r.body.chains[0];
    const devnetBase = s.devnet.chains.find((c) => c.id === 8453)!;
    expect(base).toMatchObject({
      id: 8453,
      displayName: 'Base (devnet)',
      // No public RPC URL configured: none shown (never the node's own).
      httpRpcUrl: '',
      vmType: 'evm',
      depositEnabled: true,
      currency: { symbol: 'ETH', decimals: 18, address: zeroAddress },
      protocol: { v2: { depository: devnetBase.contracts.depository } },
      solverAddresses: [s.devnet.solver],
    });
    expect(base.erc20Currencies).toEqual([
      expect.objectContaining({ symbol: 'USDC', decimals: 6, address: usdc(8453).toLowerCase() }),
      expect.objectContaining({ symbol: 'WETH', decimals: 18 }),
    ]);
  });

  it('GET and POST /currencies/v2 search by chain, address and symbol', async () => {
    const bySymbol = await api(s.url, '/currencies/v2?symbol=usdc');
    expect(bySymbol.body.map((c: any) => c.chainId).sort()).toEqual([10, 1337, 1337, 8453]);
    const byChain = await api(s.url, '/currencies/v2?chainIds=10');
    expect(byChain.body.map((c: any) => c.symbol).sort()).toEqual(['ETH', 'USDC', 'WETH']);
    const byAddress = await api(s.url, '/currencies/v2', { body: { chainIds: [8453], address: usdc(8453).toUpperCase().replace('0X', '0x') } });
    expect(byAddress.body).toEqual([expect.objectContaining({ chainId: 8453, symbol: 'USDC', metadata: expect.objectContaining({ isNative: false }) })]);
    expect((await api(s.url, '/currencies/v2?term=ether&chainIds=10')).body.map((c: any) => c.symbol).sort()).toEqual(['ETH', 'WETH']);
    expect((await api(s.url, '/currencies/v2?limit=0')).status).toBe(400);
    expect((await api(s.url, '/currencies/v2?bogus=1')).status).toBe(400);
  });

  it('GET /config/v2 reports the route and the most the solver can carry', async () => {
    const user = s.devnet.accounts[1]!.address;
    const r = await api(s.url, `/config/v2?originChainId=8453&destinationChainId=10&currency=${usdc(8453)}&user=${user}`);
    expect(r.status).toBe(200);
    expect(r.body.enabled).toBe(true);
    const solverUsdc = await s.node.adapters.get(10)!.balance(usdc(10));
    expect(r.body.solver.capacityPerRequest).toBe(solverUsdc.toString());
    expect(BigInt(r.body.user.balance)).toBeGreaterThan(0n);
    expect((await api(s.url, '/config/v2?originChainId=8453&destinationChainId=8453')).body.enabled).toBe(false);
    expect((await api(s.url, '/config/v2?originChainId=1&destinationChainId=10')).status).toBe(400);
  });

  it('GET /price quotes without steps and without creating a request', async () => {
    const count = () => (s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM requests').get() as { n: number }).n;
    const before = count();
    const r = await api(
      s.url,
      `/price?originChainId=8453&destinationChainId=10&originCurrency=${zeroAddress}&destinationCurrency=${zeroAddress}&amount=1000000000000000000`,
    );
    expect(r.status).toBe(200);
    expect(r.body.steps).toBeUndefined();
    expect(BigInt(r.body.details.currencyOut.amount)).toBeLessThan(10n ** 18n);
    expect(r.body.fees.relayerService.amount).toBe('1000000000000000'); // 10 bps
    expect(count()).toBe(before);
    expect((await api(s.url, '/price?originChainId=8453&destinationChainId=10&originCurrency=0x1&destinationCurrency=0x2&amount=1')).status).toBe(400);
  });

  it('GET /currencies/token/price answers the USD price as a number (the published type)', async () => {
    expect((await api(s.url, `/currencies/token/price?chainId=10&address=${zeroAddress}`)).body).toEqual({ price: 3000 });
    expect((await api(s.url, `/currencies/token/price?chainId=10&address=${usdc(10)}`)).body).toEqual({ price: 1 });
    expect((await api(s.url, `/currencies/token/price?chainId=10&address=0x00000000000000000000000000000000000000aa`)).status).toBe(404);
  });

  it('lets browsers call it (CORS)', async () => {
    const pre = await fetch(`${s.url}/quote`, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-headers')).toMatch(/x-api-key/);
    const get = await fetch(`${s.url}/chains`, { headers: { origin: 'https://app.example' } });
    expect(get.headers.get('access-control-allow-origin')).toBe('*');
  });
});
