// The public SDK (@relayprotocol/relay-sdk), unchanged, driven against the node through each action it exports that
// the node serves: what an integrator who only changes the base URL gets. Every call the SDK makes is recorded (its own
// axios instance), so a call it makes and swallows (the deposit notice to /transactions/index, the same-chain report
// to /transactions/single) is checked too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { axios as sdkAxios, convertViemChainToRelayChain, createClient, getClient, isAPIError } from '@relayprotocol/relay-sdk';
import { configureDynamicChains } from '@relayprotocol/relay-sdk/chain-utils';
import { WebSocket } from 'ws';
import { erc20Abi, zeroAddress, type Address, type Hex, type WalletClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { pastFinality } from './helpers/finality.ts';
import { startStack, until, type Stack } from './helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const address = (i: number) => s.devnet.accounts[i]!.address as Address;
// Every answer the SDK read: its path, status and body.
const calls: { path: string; status: number; body: any }[] = [];
const since = (n: number) => calls.slice(n);

/** (Re)configures the SDK's one client against the node; the websocket on or off (the SDK keeps the last setting). */
function sdk(websocket = false) {
  return createClient({
    baseApiUrl: s.url,
    source: 'sdk-parity-2',
    chains: s.devnet.chains.map((c) => convertViemChainToRelayChain(devnetChain(c.id, c.rpcUrl))),
    pollingInterval: 100,
    maxPollingAttemptsBeforeTimeout: 300,
    websocket: { enabled: websocket, url: `${s.url.replace(/^http/, 'ws')}/intents/status/ws` },
  });
}

/** Runs fn with a browser's WebSocket in place: the SDK follows the status stream only where window.WebSocket exists. */
async function inBrowser<T>(fn: () => Promise<T>): Promise<T> {
  const g = globalThis as Record<string, unknown>;
  const had = { window: g.window, WebSocket: g.WebSocket };
  g.WebSocket = WebSocket;
  g.window = globalThis;
  try {
    return await fn();
  } finally {
    g.window = had.window;
    g.WebSocket = had.WebSocket;
  }
}

/** getQuote (with the wallet's defaults) and execute, as an integrator's app does; the steps' items of the result. */
async function quoteAndExecute(wallet: WalletClient, params: Record<string, unknown>) {
  const quote = await getClient().actions.getQuote({ ...params, wallet } as any, true);
  const result = await getClient().actions.execute({ quote, wallet, onProgress: () => {} });
  return { quote, items: result.data.steps!.flatMap((step) => step.items ?? []) as any[] };
}

const DENIED = privateKeyToAccount(generatePrivateKey()).address;
const path = (url: string) => url.replace(s.url, '');
const failed = (from: number) => since(from).filter((c) => !(c.status >= 200 && c.status < 300));
// For each { txHash, chainId } the SDK reports: whether that chain has the transaction.
const onTheirChains = (txs: { txHash: Hex; chainId: number }[]) =>
  Promise.all(
    txs.map((t) =>
      s
        .publicClient(t.chainId)
        .getTransactionReceipt({ hash: t.txHash })
        .then(
          () => true,
          () => false,
        ),
    ),
  );

beforeAll(async () => {
  // One recipient the operator denies: a fill to it is refused and the deposit refunded.
  s = await startStack({ configure: (c) => ({ ...c, risk: { ...c.risk, denyRecipients: [...(c.risk?.denyRecipients ?? []), DENIED] } }) });
  sdkAxios.interceptors.response.use(
    (r) => {
      calls.push({ path: path(r.config.url ?? ''), status: r.status, body: r.data });
      return r;
    },
    (e) => {
      // The SDK's own interceptor (registered first) has made the error an APIError: the answer's body is its rawError.
      calls.push({ path: path(e?.endpoint ?? ''), status: Number(e?.rawError?.statusCode ?? 0) || -1, body: e?.rawError });
      return Promise.reject(e);
    },
  );
  sdk();
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

describe('configureDynamicChains (GET /chains, as the SDK asks for it)', () => {
  // The SDK sends its `source` as ?referrer= on GET /chains. The node's strict query refused it (400: "Unrecognized
  // key(s) in object: 'referrer'"): an app that loads its chains from the API (configureDynamicChains) had none.
  it("loads the node's chains, and a bridge executes with them", async () => {
    sdk();
    const chains = await configureDynamicChains();
    // The devnet's EVM chains and its perpetuals exchange (1337, hypevm), each a chain the SDK can use.
    expect(chains.map((c) => c.id).sort()).toEqual([...s.devnet.chains.map((c) => c.id), 1337].sort());
    for (const c of chains) {
      expect(c.vmType).toBe(c.id === 1337 ? 'hypevm' : 'evm');
      expect(c.viemChain?.id).toBe(c.id);
    }
    const wallet = s.wallet(1, A);
    const { items } = await quoteAndExecute(wallet, {
      chainId: A,
      toChainId: B,
      currency: zeroAddress,
      toCurrency: zeroAddress,
      amount: '10000000000000000',
      tradeType: 'EXACT_INPUT',
    });
    expect(items.at(-1).txHashes.find((t: { chainId: number }) => t.chainId === B)?.txHash).toMatch(/^0x[0-9a-f]{64}$/);
  }, 90_000);
});

describe('getQuote: every trade type and operation answers what execute reads', () => {
  it('steps with the request id, a status check on the deposit, the origin chain in details', async () => {
    sdk();
    const wallet = s.wallet(1, A);
    const me = address(1);
    const bridge = { chainId: A, toChainId: B, currency: usdc(A), toCurrency: usdc(B), amount: '20000000', tradeType: 'EXACT_INPUT' };
    const cases: Record<string, Record<string, unknown>> = {
      exactInput: bridge,
      exactOutput: { ...bridge, tradeType: 'EXACT_OUTPUT', amount: '10000000' },
      expectedOutput: { ...bridge, tradeType: 'EXPECTED_OUTPUT', amount: '10000000' },
      swap: { ...bridge, toCurrency: zeroAddress, options: { slippageTolerance: '50' } },
      sameChain: { ...bridge, toChainId: A, toCurrency: zeroAddress },
      call: {
        chainId: A,
        toChainId: B,
        currency: zeroAddress,
        toCurrency: zeroAddress,
        amount: '1000000000000000',
        tradeType: 'EXACT_OUTPUT',
        txs: [{ to: address(2), value: '1000000000000000', data: '0x' }],
      },
      appFees: { ...bridge, options: { appFees: [{ recipient: address(4), fee: '100' }] } },
      referrer: { ...bridge, options: { referrer: 'an-app' } },
      depositAddress: { ...bridge, options: { useDepositAddress: true, refundTo: me } },
      externalLiquidity: { ...bridge, options: { useExternalLiquidity: true } },
      refundTo: { ...bridge, options: { refundTo: address(3) } },
      topupGas: { ...bridge, options: { topupGas: true } },
    };
    for (const [name, params] of Object.entries(cases)) {
      const quote: any = await getClient().actions.getQuote({ ...params, wallet } as any, true);
      const last = quote.steps.at(-1);
      expect(quote.details.currencyIn.currency.chainId, name).toBe(A);
      expect(
        quote.steps.every((x: any) => x.kind === 'transaction' && /^0x[0-9a-f]{64}$/.test(x.requestId)),
        name,
      ).toBe(true);
      expect(last.items[0].check, name).toEqual({ endpoint: `/intents/status/v3?requestId=${last.requestId}`, method: 'GET' });
      for (const item of quote.steps.flatMap((x: any) => x.items)) {
        expect(item.status, name).toBe('incomplete');
        expect(item.data, name).toMatchObject({
          chainId: A,
          to: expect.stringMatching(/^0x/),
          data: expect.stringMatching(/^0x/),
          value: expect.stringMatching(/^\d+$/),
        });
      }
    }
  }, 60_000);

  it('an error is an APIError carrying the message and errorCode the node answered', async () => {
    sdk();
    const wallet = s.wallet(1, A);
    const e: any = await getClient()
      .actions.getQuote(
        { chainId: A, toChainId: B, currency: '0x1234', toCurrency: usdc(B), amount: '20000000', tradeType: 'EXACT_INPUT', wallet } as any,
        true,
      )
      .catch((x) => x);
    expect(isAPIError(e)).toBe(true);
    expect(e.message).toMatch(/0x1234/);
    expect(e.rawError.errorCode).toBe('UNSUPPORTED_CURRENCY');
  });
});

describe('execute, following the request by polling and by the status stream', () => {
  for (const websocket of [false, true]) {
    const how = websocket ? 'status stream' : 'polling';
    const run = <T>(fn: () => Promise<T>) => (websocket ? inBrowser(fn) : fn());

    it(`${how}: a stablecoin bridge (approve, deposit) resolves with the fill on the destination; every call answered`, async () => {
      sdk(websocket);
      const from = calls.length;
      const wallet = s.wallet(websocket ? 2 : 3, A);
      const before = await s.publicClient(B).readContract({ address: usdc(B), abi: erc20Abi, functionName: 'balanceOf', args: [wallet.account!.address] });
      const { quote, items } = await run(() =>
        quoteAndExecute(wallet, { chainId: A, toChainId: B, currency: usdc(A), toCurrency: usdc(B), amount: '5000000', tradeType: 'EXACT_INPUT' }),
      );
      const fill = items.at(-1).txHashes.find((t: { chainId: number }) => t.chainId === B);
      expect((await s.publicClient(B).getTransactionReceipt({ hash: fill.txHash })).status).toBe('success');
      const after = await s.publicClient(B).readContract({ address: usdc(B), abi: erc20Abi, functionName: 'balanceOf', args: [wallet.account!.address] });
      expect(after - before).toBe(BigInt(quote.details!.currencyOut!.amount!));
      expect(failed(from)).toEqual([]);
      expect(since(from).map((c) => c.path.split('?')[0])).toContain('/transactions/index');
    }, 90_000);

    it(`${how}: a same-chain swap resolves; its report to /transactions/single is answered`, async () => {
      sdk(websocket);
      const from = calls.length;
      const wallet = s.wallet(websocket ? 2 : 3, A);
      const before = await s.publicClient(A).getBalance({ address: wallet.account!.address });
      const { quote } = await run(() =>
        quoteAndExecute(wallet, { chainId: A, toChainId: A, currency: usdc(A), toCurrency: zeroAddress, amount: '10000000', tradeType: 'EXACT_INPUT' }),
      );
      const min = BigInt(quote.details!.currencyOut!.minimumAmount!);
      // Gas comes off the same balance: poll until the swap's output has landed.
      await until(
        async () => ((await s.publicClient(A).getBalance({ address: wallet.account!.address })) > before + min / 2n ? true : undefined),
        'the swap output',
      );
      expect(failed(from)).toEqual([]);
      expect(since(from).map((c) => c.path.split('?')[0])).toContain('/transactions/single');
    }, 90_000);

    it(`${how}: a permit quote (a signature step the SDK posts) resolves with the fill`, async () => {
      sdk(websocket);
      const from = calls.length;
      const wallet = s.wallet(websocket ? 2 : 3, A);
      const before = await s.publicClient(B).readContract({ address: usdc(B), abi: erc20Abi, functionName: 'balanceOf', args: [wallet.account!.address] });
      const { quote, items } = await run(() =>
        quoteAndExecute(wallet, {
          chainId: A,
          toChainId: B,
          currency: usdc(A),
          toCurrency: usdc(B),
          amount: '4000000',
          tradeType: 'EXACT_INPUT',
          options: { usePermit: true },
        }),
      );
      expect(quote.steps!.map((x) => x.kind)).toEqual(['signature']);
      expect(items.at(-1).status).toBe('complete');
      const after = await s.publicClient(B).readContract({ address: usdc(B), abi: erc20Abi, functionName: 'balanceOf', args: [wallet.account!.address] });
      expect(after - before).toBe(BigInt(quote.details!.currencyOut!.amount!));
      expect(failed(from)).toEqual([]);
      // The SDK takes every outgoing hash for a destination transaction: the node's own deposit of the permit is incoming.
      expect(await onTheirChains(items.at(-1).txHashes)).toEqual(items.at(-1).txHashes.map(() => true));
    }, 90_000);

    it(`${how}: a deposit-address quote resolves once the node sweeps and fills`, async () => {
      sdk(websocket);
      const from = calls.length;
      const wallet = s.wallet(websocket ? 2 : 3, A);
      const { items } = await run(() =>
        quoteAndExecute(wallet, {
          chainId: A,
          toChainId: B,
          currency: usdc(A),
          toCurrency: usdc(B),
          amount: '5000000',
          tradeType: 'EXACT_INPUT',
          options: { useDepositAddress: true, refundTo: wallet.account!.address },
        }),
      );
      expect(items.at(-1).status).toBe('complete');
      expect(failed(from).filter((c) => c.path !== '/transactions/index')).toEqual([]);
      // The sweep of the deposit address is incoming too (its deposit's hash), not a fill on the destination.
      expect(await onTheirChains(items.at(-1).txHashes)).toEqual(items.at(-1).txHashes.map(() => true));
    }, 90_000);
  }
});

describe('app fees: getAppFees and claimAppFees', () => {
  it('an app fee earned by a fill is listed, and claimAppFees signs, posts and is paid', async () => {
    sdk();
    const app = address(4);
    // 5% of 50 USDC: 2.5 USDC, more than a claim's gas on chain B.
    const wallet = s.wallet(1, A);
    await quoteAndExecute(wallet, {
      chainId: A,
      toChainId: B,
      currency: usdc(A),
      toCurrency: usdc(B),
      amount: '50000000',
      tradeType: 'EXACT_INPUT',
      options: { appFees: [{ recipient: app, fee: '500' }] },
    });
    await pastFinality(s, A);
    const balances: any[] = await getClient().actions.getAppFees({ wallet: app });
    const fee = balances.find((b) => b.type === 'app-fees' && b.currency.chainId === B);
    expect(fee).toMatchObject({ currency: { address: usdc(B).toLowerCase(), decimals: 6 }, amount: expect.stringMatching(/^\d+$/) });
    const before = await s.publicClient(B).readContract({ address: usdc(B), abi: erc20Abi, functionName: 'balanceOf', args: [app] });
    const from = calls.length;
    const claimed = await getClient().actions.claimAppFees({ wallet: s.wallet(4, B), chainId: B, currency: fee.currency.address, amount: fee.amount });
    expect(failed(from)).toEqual([]);
    expect(claimed.data.steps?.[0]?.items?.[0]?.status).toBe('complete');
    const paid = await until(async () => {
      const now = await s.publicClient(B).readContract({ address: usdc(B), abi: erc20Abi, functionName: 'balanceOf', args: [app] });
      return now > before ? now - before : undefined;
    }, 'the claim paid on chain B');
    expect(paid).toBeGreaterThan(0n);
    expect(paid).toBeLessThanOrEqual(BigInt(fee.amount));
  }, 120_000);
});

describe('fastFill', () => {
  // The SDK sends x-api-key only to the hosted URLs (getApiKeyHeader/isRelayApiUrl): against any other base URL its
  // fastFill goes without a key, and the node, which fast-fills only for the key that quoted, answers 401. What the
  // SDK can read of it: the message.
  it('without the key the SDK withholds, answers a message the SDK shows', async () => {
    createClient({ baseApiUrl: s.url, apiKey: 'rn_unsent' });
    const e: any = await getClient()
      .actions.fastFill({ requestId: `0x${'1'.repeat(64)}` })
      .catch((x: unknown) => x);
    expect(isAPIError(e)).toBe(true);
    expect(e.message).toMatch(/API key/);
    createClient({ baseApiUrl: s.url, apiKey: '' });
  });
});
