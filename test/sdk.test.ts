import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { convertViemChainToRelayChain, createClient, getClient } from '@relayprotocol/relay-sdk';
import { encodeFunctionData, erc20Abi, parseEther, parseEventLogs, zeroAddress } from 'viem';
import { OrderFillerAbi, TestNftAbi } from '../contracts-abi/index.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { startStack, type Stack } from './helpers/stack.ts';

// The public client, unchanged, against the node: what an integrator's app does.
let s: Stack;
beforeAll(async () => {
  s = await startStack();
  createClient({
    baseApiUrl: s.url,
    source: 'relay-node-tests',
    chains: s.devnet.chains.map((c) => convertViemChainToRelayChain(devnetChain(c.id, c.rpcUrl))),
    pollingInterval: 100,
    maxPollingAttemptsBeforeTimeout: 300,
  });
});
afterAll(async () => {
  await s?.stop();
});

describe('@relayprotocol/relay-sdk against the node', () => {
  it('getQuote + execute a native bridge resolves with the fill transaction', async () => {
    const wallet = s.wallet(1, 8453);
    const quote = await getClient().actions.getQuote(
      {
        chainId: 8453,
        toChainId: 10,
        currency: zeroAddress,
        toCurrency: zeroAddress,
        amount: '20000000000000000',
        tradeType: 'EXACT_INPUT',
        wallet,
      },
      true,
    );
    expect(quote.steps?.[0]?.id).toBe('deposit');
    const progress: string[] = [];
    const result = await getClient().actions.execute({
      quote,
      wallet,
      onProgress: ({ currentStep }) => {
        if (currentStep?.id) progress.push(currentStep.id);
      },
    });
    const item = result.data.steps!.at(-1)!.items![0]!;
    const fill = item.txHashes?.find((t) => t.chainId === 10);
    expect(fill?.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    const receipt = await s.publicClient(10).getTransactionReceipt({ hash: fill!.txHash as `0x${string}` });
    const [filled] = parseEventLogs({ abi: OrderFillerAbi, logs: receipt.logs, eventName: 'OrderFilled' });
    expect(filled!.args.orderId).toBe(quote.steps![0]!.requestId);
    expect(filled!.args.recipient).toBe(wallet.account!.address);
    expect(progress).toContain('deposit');
  });

  it('executes a stablecoin bridge with its approval step', async () => {
    const wallet = s.wallet(2, 10);
    const usdcA = s.devnet.chains.find((c) => c.id === 8453)!.contracts.stablecoin;
    const usdcB = s.devnet.chains.find((c) => c.id === 10)!.contracts.stablecoin;
    const before = await s.publicClient(8453).readContract({ address: usdcA, abi: erc20Abi, functionName: 'balanceOf', args: [wallet.account!.address] });
    const quote = await getClient().actions.getQuote(
      { chainId: 10, toChainId: 8453, currency: usdcB, toCurrency: usdcA, amount: '5000000', tradeType: 'EXACT_INPUT', wallet },
      true,
    );
    expect(quote.steps!.map((x) => x.id)).toEqual(['approve', 'deposit']);
    await getClient().actions.execute({ quote, wallet, onProgress: () => {} });
    const after = await s.publicClient(8453).readContract({ address: usdcA, abi: erc20Abi, functionName: 'balanceOf', args: [wallet.account!.address] });
    expect(after - before).toBe(BigInt(quote.details!.currencyOut!.amount!));
  });

  it('executes a cross-chain swap (USDC on 10 for ETH on 8453)', async () => {
    const wallet = s.wallet(3, 10);
    const usdcB = s.devnet.chains.find((c) => c.id === 10)!.contracts.stablecoin;
    const before = await s.publicClient(8453).getBalance({ address: wallet.account!.address });
    const quote = await getClient().actions.getQuote(
      { chainId: 10, toChainId: 8453, currency: usdcB, toCurrency: zeroAddress, amount: '30000000', tradeType: 'EXACT_INPUT', wallet },
      true,
    );
    expect(quote.details?.currencyOut?.currency?.symbol).toBe('ETH');
    await getClient().actions.execute({ quote, wallet, onProgress: () => {} });
    const received = (await s.publicClient(8453).getBalance({ address: wallet.account!.address })) - before;
    expect(received).toBeGreaterThanOrEqual(BigInt(quote.details!.currencyOut!.minimumAmount!));
  });

  it('executes a call quote: the fill mints the NFT for the user on the destination', async () => {
    const wallet = s.wallet(4, 8453);
    const nft = s.devnet.chains.find((c) => c.id === 10)!.contracts.testNft;
    const user = wallet.account!.address;
    const data = encodeFunctionData({ abi: TestNftAbi, functionName: 'mint', args: [user] });
    const quote = await getClient().actions.getQuote(
      {
        chainId: 8453,
        toChainId: 10,
        currency: zeroAddress,
        toCurrency: zeroAddress,
        amount: parseEther('0.01').toString(),
        tradeType: 'EXACT_OUTPUT',
        wallet,
        txs: [{ to: nft, value: parseEther('0.01').toString(), data }],
      },
      true,
    );
    const owned = () => s.publicClient(10).readContract({ address: nft, abi: TestNftAbi, functionName: 'balanceOf', args: [user] });
    const before = await owned();
    await getClient().actions.execute({ quote, wallet, onProgress: () => {} });
    expect(await owned()).toBe(before + 1n);
  });

  it('executes a permit quote: the SDK signs the permit and posts it; the node deposits and fills', async () => {
    const wallet = s.wallet(1, 8453);
    const usdcA = s.devnet.chains.find((c) => c.id === 8453)!.contracts.stablecoin;
    const usdcB = s.devnet.chains.find((c) => c.id === 10)!.contracts.stablecoin;
    const quote = await getClient().actions.getQuote(
      {
        chainId: 8453,
        toChainId: 10,
        currency: usdcA,
        toCurrency: usdcB,
        amount: '4000000',
        tradeType: 'EXACT_INPUT',
        wallet,
        options: { usePermit: true } as any,
      },
      true,
    );
    expect(quote.steps!.map((x) => x.id)).toEqual(['authorize']);
    const gasBefore = await s.publicClient(8453).getBalance({ address: wallet.account!.address });
    const out = () => s.publicClient(10).readContract({ address: usdcB, abi: erc20Abi, functionName: 'balanceOf', args: [wallet.account!.address] });
    const before = await out();
    await getClient().actions.execute({ quote, wallet, onProgress: () => {} });
    expect((await out()) - before).toBe(BigInt(quote.details!.currencyOut!.amount!));
    expect(await s.publicClient(8453).getBalance({ address: wallet.account!.address })).toBe(gasBefore);
  });
});
