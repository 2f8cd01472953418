// Adversarial review of this session's changes (d8bb083..HEAD).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWalletClient, encodeFunctionData, http, parseEther, zeroAddress, zeroHash, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { GasPriceOracleStandinAbi, OrderFillerAbi } from '../../contracts-abi/index.ts';
import { GAS_PRICE_ORACLE } from '../../src/chains/evm/l1DataFee.ts';
import type { Currency } from '../../src/config/registry.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import { createLogger } from '../../src/log.ts';
import { RelayNode } from '../../src/node.ts';
import { installL1Oracle, l1FeeOf } from '../helpers/l1Oracle.ts';
import { linkWallet } from '../helpers/link.ts';
import { api, byValueOn, executeSteps, MovablePrices, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;

// The node's price source (a live feed's stand-in), noting when it answered chain A's ETH at the moved price.
class WatchedPrices extends MovablePrices {
  ethAMoved = false;
  override async usdPrice(c: Currency): Promise<string> {
    const p = await super.usdPrice(c);
    if (c.chainId === A && c.native && p === '6000') this.ethAMoved = true;
    return p;
  }
}
const prices = new WatchedPrices();

const rpc = (chainId: number, method: string, params: unknown[] = []) => s.publicClient(chainId).request({ method: method as never, params: params as never });
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const marker = (credited: Address) => `012345abcdef${credited.slice(2).toLowerCase()}012345abcdef`;
const credit = (hash: Hex) => s.node.ledger.balances.get(`credit:${A}:${hash}`);

describe('confirmationsByValue at the seen price (3e108d8)', () => {
  beforeAll(async () => {
    // Chain A: one confirmation, but what is worth $1000 or more waits 4 blocks (deposits and app balance fundings alike).
    s = await startStack({ prices, chains: byValueOn(A, [{ minUsd: '1000', confirmations: 4 }]) });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it("weighs an app balance funding at the feed's price too: credited at the feed's worth, it waits for that worth's blocks", async () => {
    // ETH is configured at 3000; the node's feed says 6000. The attacker funds its app balance with 0.25 ETH: $750 at
    // the configured price (one block), $1500 at the feed's (the $1000 row: four blocks). The credit is booked at the
    // feed's price (Solver.onFunding), so a credit that came at one block is $1500 to spend while a shallow reorg can
    // still take the funding back.
    prices.set('ETH', '6000');
    try {
      await until(() => (prices.ethAMoved ? true : undefined), "the node's price source to answer ETH at 6000");
      const funder = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
      const wallet = privateKeyToAccount(generatePrivateKey());
      const key = s.node.ledger.apiKeys.create('funding at the seen price');
      expect((await linkWallet(s.url, key.key, wallet)).status).toBe(200);
      const q = await api(s.url, '/quote/v2', {
        apiKey: key.key,
        body: {
          user: wallet.address,
          recipient: wallet.address,
          originChainId: A,
          destinationChainId: B,
          originCurrency: usdc(A),
          destinationCurrency: usdc(B),
          amount: '1000000000',
          tradeType: 'EXACT_INPUT',
        },
      });
      expect(q.status).toBe(200);
      const requestId = q.body.steps.at(-1).requestId as Hex;

      const snapshot = (await rpc(A, 'evm_snapshot')) as Hex;
      const w = s.wallet(1, A);
      const hash = await w.sendTransaction({
        account: funder,
        chain: w.chain,
        to: s.devnet.solver,
        value: parseEther('0.25'),
        data: `0x${marker(wallet.address)}`,
      });
      const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
      // Two more blocks: the transfer is 3 blocks deep, one short of the row its feed worth reaches.
      await rpc(A, 'anvil_mine', ['0x2']);
      expect(Number(await s.publicClient(A).getBlockNumber({ cacheTime: 0 })) - Number(receipt.blockNumber) + 1).toBe(3);
      await until(() => ((s.node.ledger.indexer.cursor(A, 'app-balance') ?? 0) >= Number(receipt.blockNumber) - 1 ? true : undefined), 'the funding scan');
      // Bounded: a credit that is not due is not expected to appear.
      await until(() => credit(hash), 'a credit at 3 blocks', 5_000).catch(() => undefined);
      const early = credit(hash);
      // Spend it while the funding can still be reorged away.
      const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId } });
      if (ff.status === 200) await until(() => (s.node.ledger.payouts.get(`fill:${requestId}`)?.state === 'success' ? true : undefined), 'the fast fill paid');

      // The funding block is reorged away (3 deep, under the row's 4): the chain grows without it.
      await rpc(A, 'evm_revert', [snapshot]);
      await rpc(A, 'anvil_mine', ['0x6']);
      await until(
        () => ((s.node.ledger.indexer.cursor(A, 'app-balance') ?? 0) >= Number(receipt.blockNumber) + 4 ? true : undefined),
        'the scan past the reorg',
      );
      if (early) await until(() => (s.node.ledger.balances.get(`credit_reversal:credit:${A}:${hash}`) ? true : undefined), 'the reversal');
      const paid = s.node.ledger.payouts.get(`fill:${requestId}`);
      // Before: credited $1500 at one block (weighed at the configured 3000), the fast fill paid ~1000 USDC on chain B,
      // and the reorg left the wallet's app balance negative, a debt nobody pays. Now: nothing is credited before 4 blocks.
      expect({ credited: early?.amount, fastFill: ff.status, paid: paid?.state, available: s.node.ledger.balances.summary(wallet.address).available }).toEqual({
        credited: undefined,
        fastFill: 402,
        paid: undefined,
        available: 0n,
      });
    } finally {
      prices.overrides.clear();
    }
  });

  it("weighs a deposit at the feed's price from a restart's first pass: one made while the node was down waits its worth's blocks", async () => {
    // 0.25 ETH: $750 at the configured 3000 (one block), $1500 at the feed's 6000 (the $1000 row: four blocks). Made
    // while the node is down and two blocks deep when it starts, it was judged before the node had read any price.
    prices.set('ETH', '6000');
    try {
      const q = await api(s.url, '/quote', {
        body: {
          user: s.devnet.accounts[4]!.address,
          originChainId: A,
          destinationChainId: B,
          originCurrency: zeroAddress,
          destinationCurrency: zeroAddress,
          amount: '250000000000000000',
          tradeType: 'EXACT_INPUT',
        },
      });
      expect(q.status).toBe(200);
      expect(q.body.details.timeEstimate).toBe(5);
      const id = q.body.steps[0].requestId as Hex;
      const pc = s.publicClient(A);
      await s.restartNode(undefined, async () => {
        await executeSteps(s, q.body, 4);
        await pc.request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
      });
      const head = Number(await pc.getBlockNumber({ cacheTime: 0 }));
      await until(
        async () => ((await api(s.url, '/ready')).body.chains.find((c: any) => c.chainId === A)?.head >= head ? true : undefined),
        'the node to see the head',
      );
      await until(() => (s.node.ledger.deposits.byOrderRef(id).length ? true : undefined), 'the deposit indexed');
      // Two blocks deep of its four: still waiting (before: handled at the restart's first pass, weighed at 3000).
      expect({ state: s.node.ledger.deposits.byOrderRef(id)[0]!.state, status: (await api(s.url, `/intents/status/v3?requestId=${id}`)).body.status }).toEqual({
        state: 'unconfirmed',
        status: 'waiting',
      });
      await pc.request({ method: 'anvil_mine' as never, params: ['0x2'] as never });
      expect((await waitForStatus(s.url, id, ['success', 'failure', 'refund'])).status).toBe('success');
    } finally {
      prices.overrides.clear();
    }
  });
});

// L1 dear against the devnet's L2 gas (as test/l1-data-fee.test.ts), then ten times dearer.
const L1 = { baseFee: 200_000_000_000n, blobBaseFee: 100_000_000_000n, baseFeeScalar: 2269, blobBaseFeeScalar: 1_055_778 };

describe('the L1 data fee quoted by a standby (e9ab359)', () => {
  let h: Stack;
  let standby: RelayNode | undefined;
  const setL1 = async (times: bigint) => {
    const b = h.devnet.chains.find((c) => c.id === B)!;
    const wallet = createWalletClient({
      account: privateKeyToAccount(h.devnet.accounts[0]!.privateKey),
      chain: devnetChain(B, b.rpcUrl),
      transport: http(b.rpcUrl),
    });
    const hash = await wallet.writeContract({
      address: GAS_PRICE_ORACLE,
      abi: GasPriceOracleStandinAbi,
      functionName: 'setL1Fees',
      args: [L1.baseFee * times, L1.blobBaseFee * times, L1.baseFeeScalar, L1.blobBaseFeeScalar],
    });
    await h.publicClient(B).waitForTransactionReceipt({ hash });
  };
  beforeAll(async () => {
    h = await startStack({
      config: { ha: { enabled: true, leaseMs: 3_000, renewMs: 500, nodeId: 'leader' } },
      chains: async (devnet, chains) => {
        await installL1Oracle(devnet.chains.find((c) => c.id === B)!, devnet.accounts[0]!.privateKey);
        return chains;
      },
    });
    await setL1(1n);
    await until(() => (h.node.leadership?.role === 'leader' ? true : undefined), 'the stack node to lead');
  });
  afterAll(async () => {
    await standby?.stop();
    await h?.stop();
  });

  it("a standby's quotes price today's L1 data fee, not the one of its first quote: the leader fills them at what they charged", async () => {
    // A second node on the same ledger: a standby, serving the API (quotes included) while the leader acts.
    const c = h.node.config;
    standby = await new RelayNode(
      { ...c, ha: { ...c.ha, nodeId: 'standby' }, api: { ...c.api, port: 0 } },
      { log: createLogger('silent'), onLeaseLost: () => undefined },
    ).start();
    expect(standby.leadership?.role).not.toBe('leader');

    const recipient = h.devnet.accounts[2]!.address;
    const data = `0x${'5a'.repeat(20_000)}` as Hex;
    const body = {
      user: recipient,
      originChainId: A,
      destinationChainId: B,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: parseEther('0.01').toString(),
      tradeType: 'EXACT_OUTPUT',
      txs: [{ to: recipient, value: parseEther('0.01').toString(), data }],
    };
    const gasOf = (q: { status: number; body: any }) => {
      expect(q.status, JSON.stringify(q.body)).toBe(200);
      return BigInt(q.body.fees.relayerGas.amount);
    };
    // The fill the leader would send for it, and the oracle's bound for it now.
    const fillData = encodeFunctionData({
      abi: OrderFillerAbi,
      functionName: 'fillCalls',
      args: [zeroHash, recipient, [{ to: recipient, value: parseEther('0.01'), data }]],
    });
    const filler = h.devnet.chains.find((x) => x.id === B)!.contracts.filler;
    const l1Now = () => l1FeeOf(h.publicClient(B), B, filler, fillData);

    const first = gasOf(await api(standby.url, '/quote', { body }));
    expect(first).toBeGreaterThanOrEqual(2n * (await l1Now()));
    const feeBefore = await standby.chains.costs(B)!.feePerGas!();
    // L1 fees rise tenfold, and so does the L2 base fee; the chain moves on, and the leader sees it.
    await setL1(10n);
    const base = (await h.publicClient(B).getBlock()).baseFeePerGas!;
    await h.publicClient(B).request({ method: 'anvil_setNextBlockBaseFeePerGas' as never, params: [`0x${(base * 10n).toString(16)}`] as never });
    await h.publicClient(B).request({ method: 'anvil_mine' as never, params: ['0x1'] as never });
    const head = Number(await h.publicClient(B).getBlockNumber({ cacheTime: 0 }));
    await until(
      async () => ((await api(h.url, '/ready')).body.chains.find((x: any) => x.chainId === B)?.head >= head ? true : undefined),
      'the leader to see the head',
    );
    const l1 = await l1Now();
    // The most a transaction pays per gas now, as each node prices it (twice the base fee and the tip).
    const feeLeader = await h.node.chains.costs(B)!.feePerGas!();
    const feeStandby = await standby.chains.costs(B)!.feePerGas!();
    const onLeader = gasOf(await api(h.url, '/quote', { body }));
    const q = await api(standby.url, '/quote', { body });
    const onStandby = gasOf(q);
    // The order quoted on the standby is deposited for and filled by the leader (one ledger).
    const id = q.body.steps[0].requestId as Hex;
    await executeSteps(h, q.body, 2);
    expect((await waitForStatus(h.url, id, ['success', 'failure', 'refund'])).status).toBe('success');
    const fill = h.node.ledger.payouts.txsOf(`fill:${id}`).find((t) => t.fee !== null)!;
    // Before: the standby still quoted its first quote's L1 fee (its chains' heads never move: it does not index),
    // and the leader filled the order paying today's, many times what the order was charged for it.
    expect({
      leaderCovers: onLeader >= 2n * l1,
      standbyCovers: onStandby >= 2n * l1,
      standbyMoved: onStandby > first,
      // On an OP-stack chain the fill's receipt adds l1Fee (anvil's has none): L2 gas plus the oracle's figure.
      fillCovered: BigInt(fill.fee!) + l1 <= onStandby,
      // The L2 part likewise (the standby's base fee was read once, at its first quote; pre-existing, same cause).
      standbyFeeMoved: feeStandby > feeBefore && feeStandby === feeLeader,
    }).toMatchObject({
      leaderCovers: true,
      standbyCovers: true,
      standbyMoved: true,
      fillCovered: true,
      standbyFeeMoved: true,
    });
  });
});
