// Several RPC providers per chain (src/chains/providers): real anvil, real HTTP, and the chaos
// proxy in front of it standing in for providers that lag, lie about `latest`, rate-limit or lie
// about state. Each case first shows the faulty provider alone misleading a plain client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, encodeFunctionData, erc20Abi, http, type Address, type Hex } from 'viem';
import { startAnvil, type AnvilHandle } from '../src/devnet/anvil.ts';
import { ProviderPool, ProviderPoolError, QuorumDisagreementError } from '../src/chains/providers/index.ts';
import { apiReads } from '../src/lib/apiReads.ts';
import { createMetrics } from '../src/metrics.ts';
import { createLogger } from '../src/log.ts';
import { RpcProxy, type ProxyOptions } from './chaos/proxy.ts';
import { Rng } from './chaos/prng.ts';
import { api, startStack, until, type Stack } from './helpers/stack.ts';

const log = createLogger('silent');
let anvil: AnvilHandle;
const proxies: RpcProxy[] = [];

async function rpc(url: string, method: string, params: unknown[] = []): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await res.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(body.error.message);
  return body.result;
}

async function proxy(target: string, opts: Omit<ProxyOptions, 'target' | 'rng'> = {}): Promise<RpcProxy> {
  const p = new RpcProxy({ target, rng: new Rng(proxies.length + 1), ...opts });
  await p.start();
  proxies.push(p);
  return p;
}
// A node `blocks` behind the chain, for good.
const lagging = (target: string, blocks = 3) => proxy(target, { rates: { lag: 1 }, lagBlocks: blocks, lagMs: 1e9 });

function pool(urls: { url: string; name: string; maxRps?: number }[], extra: Partial<ConstructorParameters<typeof ProviderPool>[0]> = {}) {
  const metrics = createMetrics();
  const p = new ProviderPool({
    chainId: 31337,
    providers: urls.map((u) => ({ url: u.url, name: u.name, weight: 1, maxRps: u.maxRps ?? 0, maxConcurrent: 32, role: 'any' as const })),
    metrics,
    log,
    maxWaitMs: 10_000,
    ...extra,
  });
  return { pool: p, metrics };
}

// Sends a transfer and waits for its receipt: anvil's automine answers the send before it mines the block
// (under load the head read right after the send was one behind).
async function sendTx(): Promise<Hex> {
  const [from] = (await rpc(anvil.rpcUrl, 'eth_accounts')) as Address[];
  const hash: Hex = await rpc(anvil.rpcUrl, 'eth_sendTransaction', [{ from, to: '0x000000000000000000000000000000000000dEaD', value: '0x1' }]);
  await until(async () => (await rpc(anvil.rpcUrl, 'eth_getTransactionReceipt', [hash])) ?? undefined, `the receipt of ${hash}`);
  return hash;
}

beforeAll(async () => {
  anvil = await startAnvil({ chainId: 31337 });
  await rpc(anvil.rpcUrl, 'anvil_mine', ['0x10']);
});

afterAll(async () => {
  for (const p of proxies) await p.stop();
  await anvil?.stop();
});

describe('provider pool', () => {
  it('a lagging provider never makes a mined transaction look absent, nor the head go back', async () => {
    const behind = await lagging(anvil.rpcUrl);
    const honest = await proxy(anvil.rpcUrl);
    const hash = await sendTx();
    const head = BigInt(await rpc(anvil.rpcUrl, 'eth_blockNumber'));
    // The lagging provider alone: the transaction has no receipt and the head is 3 blocks back.
    const plain = createPublicClient({ transport: http(behind.url) });
    await expect(plain.getTransactionReceipt({ hash })).rejects.toThrow(/could not be found/);
    expect(await plain.getBlockNumber({ cacheTime: 0 })).toBe(head - 3n);

    const honest2 = await proxy(anvil.rpcUrl);
    const { pool: p, metrics } = pool([
      { url: behind.url, name: 'laggy' },
      { url: honest.url, name: 'honest' },
      { url: honest2.url, name: 'honest2' },
    ]);
    await p.probeHeads();
    expect(p.floor).toBe(head); // two providers claim it
    await until(
      async () => ((await p.request({ method: 'eth_getBlockByNumber', params: ['latest', false] })) as any).number === `0x${head.toString(16)}` || undefined,
      'a latest block',
    );
    expect(p.floor).toBe(head);
    for (let i = 0; i < 20; i++) {
      const r = (await p.request({ method: 'eth_getTransactionReceipt', params: [hash] })) as { blockNumber: string } | null;
      expect(r?.blockNumber).toBe(`0x${head.toString(16)}`);
      expect(BigInt((await p.request({ method: 'eth_blockNumber', params: [] })) as string)).toBe(head);
      const q = (await p.quorum({ method: 'eth_getTransactionReceipt', params: [hash] })) as { blockNumber: string } | null;
      expect(q?.blockNumber).toBe(`0x${head.toString(16)}`);
    }
    // Reads at `latest` are pinned to the floor; the lagging provider cannot serve them.
    const [from] = (await rpc(anvil.rpcUrl, 'eth_accounts')) as Address[];
    const nonce = await p.request({ method: 'eth_getTransactionCount', params: [from, 'latest'] });
    expect(nonce).toBe(await rpc(anvil.rpcUrl, 'eth_getTransactionCount', [from, 'latest']));
    expect(await metrics.registry.getSingleMetricAsString('relay_rpc_provider_head_lag_blocks')).toMatch(/provider="laggy"} 3/);
    expect(p.health().providers.find((x) => x.name === 'laggy')?.state).toMatch(/^behind by [34] blocks$/);

    // With only the lagging provider to agree with, a decision read waits and then fails: it never
    // answers "no receipt".
    const { pool: two } = pool(
      [
        { url: behind.url, name: 'laggy' },
        { url: honest.url, name: 'honest' },
      ],
      { maxWaitMs: 500 },
    );
    await two.probeHeads();
    // One agreeing head is the laggy one's: the floor reaches the head once the honest provider
    // has served a latest block (the pool may route the first reads to either).
    await until(
      async () => ((await two.request({ method: 'eth_getBlockByNumber', params: ['latest', false] })) as any).number === `0x${head.toString(16)}` || undefined,
      'a latest block from the honest provider',
    );
    expect(two.floor).toBe(head);
    await expect(two.quorum({ method: 'eth_getTransactionReceipt', params: [hash] })).rejects.toThrow(
      /no quorum of 2 for eth_getTransactionReceipt.*laggy: behind by/,
    );
  });

  it('a provider lying ahead about latest does not move the floor past the real head', async () => {
    const liar = await proxy(anvil.rpcUrl, { leadBlocks: 50 });
    const a = await proxy(anvil.rpcUrl);
    const b = await proxy(anvil.rpcUrl);
    const plain = createPublicClient({ transport: http(liar.url) });
    const head = BigInt(await rpc(anvil.rpcUrl, 'eth_blockNumber'));
    expect(await plain.getBlockNumber({ cacheTime: 0 })).toBe(head + 50n);

    const { pool: p } = pool([
      { url: liar.url, name: 'liar' },
      { url: a.url, name: 'a' },
      { url: b.url, name: 'b' },
    ]);
    for (let i = 0; i < 10; i++) {
      await p.probeHeads();
      expect(BigInt((await p.request({ method: 'eth_blockNumber', params: [] })) as string)).toBe(head);
    }
    expect(p.floor).toBe(head);
    // Pinned reads keep working (nobody is asked for a block that does not exist).
    const [from] = (await rpc(anvil.rpcUrl, 'eth_accounts')) as Address[];
    expect(await p.quorum({ method: 'eth_getBalance', params: [from, 'latest'] })).toBe(await rpc(anvil.rpcUrl, 'eth_getBalance', [from, 'latest']));
    expect(liar.liedHeads).toBeGreaterThan(0);
  });

  it('a rate-limited provider: the calls wait or go elsewhere, none is dropped', async () => {
    const limited = await proxy(anvil.rpcUrl, { maxRps: 5 });
    const { pool: alone, metrics: m1 } = pool([{ url: limited.url, name: 'metered' }], { maxWaitMs: 60_000 });
    const [from] = (await rpc(anvil.rpcUrl, 'eth_accounts')) as Address[];
    const expected = await rpc(anvil.rpcUrl, 'eth_getBalance', [from, 'latest']);
    // Alone: 20 calls against 5 per second all complete, after the backoffs.
    const answers = await Promise.all(Array.from({ length: 20 }, () => alone.request({ method: 'eth_getBalance', params: [from, 'latest'] })));
    expect(answers.every((x) => x === expected)).toBe(true);
    expect(limited.rateLimited).toBeGreaterThan(0);
    expect(await m1.registry.getSingleMetricAsString('relay_rpc_provider_errors_total')).toMatch(/provider="metered",kind="rate_limited"} [1-9]/);

    const other = await proxy(anvil.rpcUrl);
    const { pool: two } = pool([
      { url: limited.url, name: 'metered' },
      { url: other.url, name: 'other' },
    ]);
    const more = await Promise.all(Array.from({ length: 200 }, () => two.request({ method: 'eth_getBalance', params: [from, 'latest'] })));
    expect(more.every((x) => x === expected)).toBe(true);
    expect(other.requests).toBeGreaterThan(0);
  });

  it("a read for the public API leaves half of a provider's budget to the node's own reads, which go first", async () => {
    // A client reading the solver's liquidity as fast as it was answered kept every read a fill needed waiting
    // behind its own (an adversarial review's run: a fill of 0.85 s took 36 s against a provider of 20 calls/s).
    const { pool: p } = pool([{ url: anvil.rpcUrl, name: 'metered', maxRps: 4 }], { maxWaitMs: 60_000 });
    const call = { method: 'eth_chainId', params: [] };
    // The budget spent (a second's worth of calls), then four reads for the API waiting for it, then one of the node's.
    await Promise.all(Array.from({ length: 4 }, () => p.request(call)));
    let apiAnswered = 0;
    const waiting = Array.from({ length: 4 }, () => apiReads.run(true, () => p.request(call)).then(() => apiAnswered++));
    // The node's read is answered first: the API's wait until half the budget is there again. Before, the API's,
    // asked first, took the budget as it came back, and the node's waited behind them.
    const beforeNode = await p.request(call).then(() => apiAnswered);
    await Promise.all(waiting);
    expect(apiAnswered).toBe(4);
    expect(beforeNode).toBe(0);
  });

  it("reads for the public API asked in one tick take no more than their half: the node's read is not held behind them", async () => {
    // The budget was checked when a provider was picked but spent only when the call was sent, so every read picked
    // in one tick (the API's reads of a burst of requests) passed the same check and all went, spending the node's half.
    const { pool: p } = pool([{ url: anvil.rpcUrl, name: 'metered', maxRps: 4 }], { maxWaitMs: 60_000 });
    const call = { method: 'eth_chainId', params: [] };
    let apiAnswered = 0;
    const burst = Array.from({ length: 8 }, () => apiReads.run(true, () => p.request(call)).then(() => apiAnswered++));
    // Half of 4 calls a second is the node's: two of the burst went, and the node's read goes at once.
    const beforeNode = await p.request(call).then(() => apiAnswered);
    await Promise.all(burst);
    expect(apiAnswered).toBe(8);
    expect(beforeNode).toBeLessThanOrEqual(2);
  });

  it('providers disagreeing on a decision read: the node refuses to act on it', async () => {
    const honest = await proxy(anvil.rpcUrl);
    // A provider that lies about state: every balance reads zero.
    const lies = await proxy(anvil.rpcUrl, { rewrite: (method, _params, result) => (method === 'eth_getBalance' ? '0x0' : result) });
    const { pool: p, metrics } = pool([
      { url: honest.url, name: 'honest' },
      { url: lies.url, name: 'lies' },
    ]);
    const [from] = (await rpc(anvil.rpcUrl, 'eth_accounts')) as Address[];
    await expect(p.quorum({ method: 'eth_getBalance', params: [from, 'latest'] })).rejects.toThrow(QuorumDisagreementError);
    expect(await metrics.registry.getSingleMetricAsString('relay_rpc_quorum_disagreements_total')).toMatch(/method="eth_getBalance"} 1/);
    // A read they agree on goes through.
    expect(await p.quorum({ method: 'eth_chainId', params: [] })).toBe('0x7a69');
  });

  it('provider URLs never appear in errors or metrics', async () => {
    const gone = await proxy(anvil.rpcUrl);
    const down = await proxy(anvil.rpcUrl);
    const urls = [gone.url, down.url];
    await gone.stop();
    await down.stop();
    const { pool: p, metrics } = pool(
      [
        { url: `${urls[0]}/v3/SECRETKEY`, name: 'infura' },
        { url: `${urls[1]}/v2/SECRETKEY`, name: 'alchemy' },
      ],
      { maxWaitMs: 300 },
    );
    const err = await p.request({ method: 'eth_blockNumber', params: [] }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(ProviderPoolError);
    expect(err!.message).toMatch(/chain 31337: no provider answered eth_blockNumber/);
    expect(err!.message).toMatch(/infura: .*alchemy: /);
    const text = await metrics.registry.metrics();
    for (const s of [err!.message, err!.stack ?? '', text]) {
      expect(s).not.toMatch(/SECRETKEY|127\.0\.0\.1/);
    }
  });
});

describe("node whose favoured provider is behind its tokens' deployment", () => {
  let s: Stack;
  const B = 10;
  beforeAll(async () => {
    s = await startStack({
      chains: async (_devnet, chains) =>
        Promise.all(
          (chains as { id: number; rpcUrl: string; kind?: string }[]).map(async (c) => {
            if (c.id !== B) return c;
            // As many blocks behind as the chain has: at the node's start this provider has none of the devnet's
            // contracts, and the configured tokens answer it no decimals().
            const laggy = await lagging(c.rpcUrl, Number(await rpc(c.rpcUrl, 'eth_blockNumber')));
            const honest = await proxy(c.rpcUrl);
            return {
              ...c,
              rpcUrl: undefined,
              rpc: [
                { url: laggy.url, name: 'laggy', weight: 1_000 },
                { url: honest.url, name: 'honest' },
              ],
              quorum: 1,
            };
          }),
        ),
    });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it("starts: its tokens' decimals are read at the chain's head, not at the lagging provider's", async () => {
    await until(async () => ((await api(s.url, '/ready')).status === 200 ? true : undefined), 'the node to be ready');
    // Before: the node refused to start (ChainConfigMismatch: USDC and WETH answer no decimals()), failing beforeAll.
    // The lagging provider's readiness state varies with what it was asked meanwhile (behind, failing): not asserted.
    const b = (await api(s.url, '/ready')).body.chains.find((c: any) => c.chainId === B);
    expect(b.providers.map((p: { name: string }) => p.name).sort()).toEqual(['honest', 'laggy']);
  });
});

describe('node behind several providers', () => {
  let s: Stack;
  const B = 10;
  let laggyUrl = '';
  beforeAll(async () => {
    s = await startStack({
      chains: async (_devnet, chains) =>
        Promise.all(
          (chains as { id: number; rpcUrl: string; kind?: string }[]).map(async (c) => {
            if (c.id !== B) return c;
            const laggy = await lagging(c.rpcUrl);
            const honest = await proxy(c.rpcUrl);
            laggyUrl = laggy.url;
            // The lagging provider first: the single-URL node used it for everything.
            return {
              ...c,
              rpcUrl: undefined,
              rpc: [
                { url: laggy.url, name: 'laggy' },
                { url: honest.url, name: 'honest' },
              ],
              quorum: 1,
            };
          }),
        ),
    });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it("a quote's allowance read cannot go back in time: a lagging provider does not drop a needed approve step", async () => {
    const chain = s.devnet.chains.find((c) => c.id === B)!;
    const usdc = chain.contracts.stablecoin;
    const user = s.devnet.accounts[4]!.address;
    const w = s.wallet(4, B);
    const pc = s.publicClient(B);
    const approve = async (amount: bigint) =>
      pc.waitForTransactionReceipt({
        hash: await w.sendTransaction({
          account: w.account!,
          chain: w.chain,
          to: usdc,
          data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [chain.contracts.depository, amount] }),
        }),
      });
    // The node's own start-up transactions done (nothing else mines on this chain meanwhile).
    await until(async () => ((await api(s.url, '/ready')).status === 200 ? true : undefined), 'the node to be ready');
    await approve(50_000_000n);
    const revoked = await approve(0n);
    await rpc(chain.rpcUrl, 'anvil_mine', ['0x2']);
    const head = Number(revoked.blockNumber) + 2;
    // The lagging provider still shows the allowance the user took back.
    const plain = createPublicClient({ transport: http(laggyUrl) });
    // (Polled: the proxy reads the chain's head at most every 20 ms, so it may still be on a block before the approval.)
    await until(
      async () =>
        (await plain.readContract({ address: usdc, abi: erc20Abi, functionName: 'allowance', args: [user, chain.contracts.depository] })) === 50_000_000n
          ? true
          : undefined,
      'the lagging provider to show the old allowance',
      5_000,
    );
    // Once the node has seen the newest block, its quote needs the approval.
    await until(
      async () => ((await api(s.url, '/ready')).body.chains.find((c: any) => c.chainId === B)?.head >= head ? true : undefined),
      'the node to see the head',
    );
    const q = await api(s.url, '/quote', {
      body: {
        user,
        originChainId: B,
        destinationChainId: 8453,
        originCurrency: usdc,
        destinationCurrency: s.devnet.chains.find((c) => c.id === 8453)!.contracts.stablecoin,
        amount: '20000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    expect(q.body.steps.map((x: any) => x.id)).toEqual(['approve', 'deposit']);
  });

  it('readiness names the chain and the provider holding it back', async () => {
    const ready = await api(s.url, '/ready');
    const b = ready.body.chains.find((c: any) => c.chainId === B);
    expect(b.providers).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'laggy', state: expect.stringMatching(/^behind by \d+ blocks$/) }),
        expect.objectContaining({ name: 'honest', state: 'ok' }),
      ]),
    );
    expect(JSON.stringify(ready.body)).not.toContain('127.0.0.1');
  });

  // Mines 5 blocks and has `p` read them, reverts them, then polls `p` at `latest` (bounded): the read and the
  // floor must come back to the shorter chain's head.
  async function readsAfterShortening(p: ProviderPool) {
    const snap = await rpc(anvil.rpcUrl, 'evm_snapshot');
    await rpc(anvil.rpcUrl, 'anvil_mine', ['0x5']);
    const top = BigInt(await rpc(anvil.rpcUrl, 'eth_blockNumber'));
    await p.request({ method: 'eth_getBlockByNumber', params: ['latest', false] });
    expect(p.floor).toBe(top);
    await rpc(anvil.rpcUrl, 'evm_revert', [snap]);
    const shorter = BigInt(await rpc(anvil.rpcUrl, 'eth_blockNumber'));
    expect(shorter).toBeLessThan(top);
    const got = await until(
      async () => {
        try {
          return BigInt(((await p.request({ method: 'eth_getBlockByNumber', params: ['latest', false] })) as { number: string }).number);
        } catch {
          return undefined;
        }
      },
      'a read on the shorter chain',
      15_000,
    );
    expect(got).toBe(shorter);
    expect(p.floor).toBe(shorter);
  }

  // Last: it shortens the shared chain.
  it('lowers its floor when the chain itself gets shorter (a reorg to a shorter branch), once every provider has said so for a while', async () => {
    const { pool: p } = pool([{ url: anvil.rpcUrl, name: 'only' }], { maxWaitMs: 1_000, shorterAfterMs: 500 });
    await readsAfterShortening(p);
  });

  // Last too: it shortens the shared chain again. With one provider there is no head probe: a read pinned to a
  // block the shorter chain lacks (eth_getBalance at `latest`) is the only call, and it must find the chain's head
  // itself, lower the floor and answer, not wait out its bound while nothing else reads the head.
  it('answers a read pinned above a shorter chain with one provider and no other call reading the head', async () => {
    const { pool: p } = pool([{ url: anvil.rpcUrl, name: 'only' }], { maxWaitMs: 5_000, shorterAfterMs: 500 });
    const snap = await rpc(anvil.rpcUrl, 'evm_snapshot');
    await rpc(anvil.rpcUrl, 'anvil_mine', ['0x5']);
    await p.request({ method: 'eth_getBlockByNumber', params: ['latest', false] });
    const top = p.floor;
    await rpc(anvil.rpcUrl, 'evm_revert', [snap]);
    const shorter = BigInt(await rpc(anvil.rpcUrl, 'eth_blockNumber'));
    expect(shorter).toBeLessThan(top);
    const [account] = (await rpc(anvil.rpcUrl, 'eth_accounts')) as Address[];
    const balance = await p.request({ method: 'eth_getBalance', params: [account, 'latest'] });
    expect(BigInt(balance as string)).toBeGreaterThan(0n);
    expect(p.floor).toBe(shorter);
  });

  // Last too: it shortens the shared chain again. A provider lying ahead must not hold the floor up.
  it('lowers its floor on a shorter chain even when one provider claims a head far ahead (quorum 2 of 3)', async () => {
    const liar = await proxy(anvil.rpcUrl, { leadBlocks: 50 });
    const a = await proxy(anvil.rpcUrl);
    const b = await proxy(anvil.rpcUrl);
    const { pool: p } = pool(
      [
        { url: liar.url, name: 'liar' },
        { url: a.url, name: 'a' },
        { url: b.url, name: 'b' },
      ],
      { quorum: 2, maxWaitMs: 1_000, shorterAfterMs: 500, probeMs: 100 },
    );
    p.start();
    try {
      await readsAfterShortening(p);
    } finally {
      await p.stop();
    }
  });
});
