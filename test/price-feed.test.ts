import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, createWalletClient, http, zeroAddress, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { PriceFeedAbi, PriceFeedBytecode } from '../contracts-abi/index.ts';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startDevnet, type Devnet } from '../src/devnet/devnet.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';
import { api, until } from './helpers/stack.ts';

// ETH's price on chain 10 comes from an aggregator on chain 8453, as an operator would point the
// node at a live feed; the quote follows it, and a stale feed stops quoting.
let devnet: Devnet;
let node: RelayNode;
let feed: Address;
let post: (answer: bigint, at?: bigint) => Promise<void>;

beforeAll(async () => {
  devnet = await startDevnet({ dataDir: mkdtempSync(join(tmpdir(), 'relay-feed-')) });
  const base = devnet.chains.find((c) => c.id === 8453)!;
  const chain = devnetChain(8453, base.rpcUrl);
  const wallet = createWalletClient({ account: privateKeyToAccount(devnet.accounts[0]!.privateKey), chain, transport: http(base.rpcUrl) });
  const pc = createPublicClient({ chain, transport: http(base.rpcUrl) });
  const hash = await wallet.deployContract({ abi: PriceFeedAbi, bytecode: PriceFeedBytecode, args: [8, 'ETH / USD', 300_000_000_000n] });
  feed = (await pc.waitForTransactionReceipt({ hash })).contractAddress!;
  post = async (answer, at) => {
    const h =
      at === undefined
        ? await wallet.writeContract({ address: feed, abi: PriceFeedAbi, functionName: 'post', args: [answer] })
        : await wallet.writeContract({ address: feed, abi: PriceFeedAbi, functionName: 'postAt', args: [answer, at] });
    await pc.waitForTransactionReceipt({ hash: h });
  };
  const raw = devnet.nodeConfig({ port: 0, dataDir: mkdtempSync(join(tmpdir(), 'relay-feed-node-')) });
  const chains = (raw.chains as Record<string, any>[]).map((c) =>
    c.id === 10 ? { ...c, nativeCurrency: { ...c.nativeCurrency, priceFeed: { chainId: 8453, aggregator: feed, maxAgeSeconds: 600 } } } : c,
  );
  node = await new RelayNode(buildConfigWithKeys({ ...raw, chains }, devnet.keys), { log: createLogger('silent') }).start();
});
afterAll(async () => {
  await node?.stop();
  await devnet?.stop();
});

const price = async () => (await api(node.url, `/currencies/token/price/v2?chainId=10&address=${zeroAddress}`)).body;

describe('live price feed', () => {
  it('reads the price from the aggregator, and follows it', async () => {
    expect(await price()).toEqual({ price: '3000' });
    await post(312_345_000_000n);
    // The feed is cached for a second; poll until the node sees the new answer.
    // A wait that times out names the node's last answer.
    const seen = await until(
      async () => {
        const p = await price();
        if (p.price !== '3123.45') throw new Error(`the node answered ${JSON.stringify(p)}`);
        return p;
      },
      'the new price',
      30_000,
    );
    expect(seen).toEqual({ price: '3123.45' });
    // The price on chain 8453 (no feed configured there) stays the config's.
    expect((await api(node.url, `/currencies/token/price/v2?chainId=8453&address=${zeroAddress}`)).body).toEqual({ price: '3000' });
  });

  it('stops quoting when the feed is stale, rather than quote wrong', async () => {
    const longAgo = BigInt(Math.floor(Date.now() / 1000) - 3600);
    await post(300_000_000_000n, longAgo);
    const r = await until(
      async () => {
        const x = await api(node.url, `/currencies/token/price/v2?chainId=10&address=${zeroAddress}`);
        return x.status === 503 ? x : undefined;
      },
      'the node to notice the stale feed',
      30_000,
    );
    expect(r.body).toMatchObject({ errorCode: 'PRICE_UNAVAILABLE' });
    expect(r.body.message).toMatch(/the price feed of ETH is stale: last updated \d+ s ago \(at most 600 s\)/);
    const q = await api(node.url, '/quote', {
      body: {
        user: devnet.accounts[1]!.address,
        originChainId: 8453,
        destinationChainId: 10,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '10000000000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(503);
    expect(q.body.message).toMatch(/^not quoting: the price feed of ETH is stale/);
  });
});
