// Pricing as an attacker: a bridge, a wrap or an unwrap moves one asset, so what it pays is the deposit less its fees,
// in that asset, whatever USD prices the node reads for it on each chain. Here ETH on chain 10 is priced by a live
// aggregator (as test/price-feed.test.ts configures it, "as an operator would") and ETH on 8453 and WETH keep their
// configured price: the two prices of one asset differ as soon as the feed moves.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, createWalletClient, erc20Abi, http, zeroAddress, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { PriceFeedAbi, PriceFeedBytecode, WrappedNativeAbi } from '../../contracts-abi/index.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import { api, executeSteps, startStack, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
let post: (answer: bigint) => Promise<void>;
const A = 8453;
const B = 10;
const fresh = () => privateKeyToAccount(generatePrivateKey()).address;
const weth = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.wrappedNative;

beforeAll(async () => {
  s = await startStack({
    chains: async (devnet, chains) => {
      const base = devnet.chains.find((c) => c.id === A)!;
      const chain = devnetChain(A, base.rpcUrl);
      const wallet = createWalletClient({ account: privateKeyToAccount(devnet.accounts[0]!.privateKey), chain, transport: http(base.rpcUrl) });
      const pc = createPublicClient({ chain, transport: http(base.rpcUrl) });
      const hash = await wallet.deployContract({ abi: PriceFeedAbi, bytecode: PriceFeedBytecode, args: [8, 'ETH / USD', 300_000_000_000n] });
      const feed = (await pc.waitForTransactionReceipt({ hash })).contractAddress!;
      post = async (answer) => {
        const h = await wallet.writeContract({ address: feed, abi: PriceFeedAbi, functionName: 'post', args: [answer] });
        await pc.waitForTransactionReceipt({ hash: h });
      };
      return (chains as Record<string, any>[]).map((c) =>
        c.id === B ? { ...c, nativeCurrency: { ...c.nativeCurrency, priceFeed: { chainId: A, aggregator: feed, maxAgeSeconds: 600 } } } : c,
      );
    },
  });
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

describe('one asset moved is paid in that asset, not at the ratio of two USD prices', () => {
  it('a bridge of ETH from 8453 to 10, with ETH on 10 read at 2000 USD and on 8453 at 3000, pays no more ETH than was deposited', async () => {
    await post(200_000_000_000n); // 2000 USD
    const recipient = fresh();
    const amount = 10n ** 16n; // 0.01 ETH
    const q = await api(s.url, '/quote', {
      body: {
        user: s.devnet.accounts[3]!.address,
        recipient,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: amount.toString(),
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    expect(q.body.details.operation).toBe('bridge');
    await executeSteps(s, q.body, 3);
    expect((await waitForStatus(s.url, q.body.steps.at(-1).requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    // What left the solver on chain 10 for 0.01 ETH that came in on 8453: the deposit less the fees, and the quote said so.
    const paid = await s.publicClient(B).getBalance({ address: recipient });
    expect(paid).toBe(BigInt(q.body.details.currencyOut.amount));
    expect(paid).toBeLessThan(amount);
  });

  it('an unwrap of WETH on 10 (configured at 3000 USD) into ETH (read at 2000 USD) pays no more ETH than the WETH deposited', async () => {
    await post(200_000_000_000n);
    const me = s.devnet.accounts[4]!;
    const amount = 10n ** 16n;
    const wallet = s.wallet(4, B);
    const h = await wallet.writeContract({
      address: weth(B),
      abi: WrappedNativeAbi,
      functionName: 'deposit',
      value: amount,
      account: wallet.account!,
      chain: wallet.chain,
    });
    await s.publicClient(B).waitForTransactionReceipt({ hash: h });
    expect(
      await s.publicClient(B).readContract({ address: weth(B), abi: erc20Abi, functionName: 'balanceOf', args: [me.address as Address] }),
    ).toBeGreaterThanOrEqual(amount);
    const recipient = fresh();
    const q = await api(s.url, '/quote', {
      body: {
        user: me.address,
        recipient,
        originChainId: B,
        destinationChainId: B,
        originCurrency: weth(B),
        destinationCurrency: zeroAddress,
        amount: amount.toString(),
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    expect(q.body.details.operation).toBe('unwrap');
    await executeSteps(s, q.body, 4);
    expect((await waitForStatus(s.url, q.body.steps.at(-1).requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    const paid = await s.publicClient(B).getBalance({ address: recipient });
    expect(paid).toBe(BigInt(q.body.details.currencyOut.amount));
    expect(paid).toBeLessThan(amount);
  });
});
