// Sixth money review, EVM: an attacker with an API key, a linked app balance and a funded wallet, on every path by
// which value leaves the solver or an app balance. Each case failed on the code before its fix.
//
// The prices: ETH on chain 10 is read from a live aggregator (as test/price-feed.test.ts configures it, "as an operator
// would"); ETH on 8453 keeps its configured 3000 USD. The two readings of one asset differ as soon as the feed moves.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, createWalletClient, erc20Abi, http, parseGwei, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { PriceFeedAbi, PriceFeedBytecode } from '../../contracts-abi/index.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import { fundAppBalance } from '../helpers/appBalance.ts';
import { linkWallet } from '../helpers/link.ts';
import { api, executeSteps, permitQuote, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
let post: (answer: bigint) => Promise<void>;
const A = 8453; // ETH at its configured 3000 USD; app balances are funded here
const B = 10; // ETH read from the feed
const account = (i: number) => s.devnet.accounts[i]!;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin as Address;
const rpc = (chainId: number, method: string, params: unknown[] = []) => s.publicClient(chainId).request({ method: method as never, params: params as never });
const fresh = () => privateKeyToAccount(generatePrivateKey()).address;
const marker = (credited: Address) => `0x012345abcdef${credited.slice(2).toLowerCase()}012345abcdef` as Hex;
let app: { key: string; id: string };

// Posts `usd` to the feed of ETH on chain B and waits until the node reads it (the feed is cached for a second). Polled
// with the app's key: polls every 25 ms without one run into the per-address limit of priced routes (60 a minute).
async function readsB(usd: string): Promise<void> {
  await post(BigInt(usd) * 10n ** 8n);
  await until(async () => {
    const r = await api(s.url, `/currencies/token/price/v2?chainId=${B}&address=${zeroAddress}`, { apiKey: app.key });
    if (r.body?.price !== usd) throw new Error(`answered ${r.status} ${JSON.stringify(r.body)}`);
    return true;
  }, `ETH on chain ${B} read at ${usd} USD`);
}

// Funds `credited`'s app balance with `wei` of ETH on chain A (a marked transfer to the solver), from account `from`.
async function fundWithEth(from: number, credited: Address, wei: bigint): Promise<void> {
  const w = s.wallet(from, A);
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: s.devnet.solver as Address, value: wei, data: marker(credited) });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the app balance credit');
}

// An ETH bridge of `wei` from chain B to chain A, paid to `recipient`, quoted with the app's key.
const bridgeBtoA = (user: number, recipient: Address, wei: bigint) => ({
  user: account(user).address,
  recipient,
  originChainId: B,
  destinationChainId: A,
  originCurrency: zeroAddress,
  destinationCurrency: zeroAddress,
  amount: wei.toString(),
  tradeType: 'EXACT_INPUT',
});

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
        if ((await pc.waitForTransactionReceipt({ hash: h })).status !== 'success') throw new Error(`the feed's post of ${answer} reverted`);
      };
      return (chains as Record<string, any>[]).map((c) =>
        c.id === B ? { ...c, nativeCurrency: { ...c.nativeCurrency, priceFeed: { chainId: A, aggregator: feed, maxAgeSeconds: 600 } } } : c,
      );
    },
  });
  app = s.node.ledger.apiKeys.create('app');
  expect((await linkWallet(s.url, app.key, privateKeyToAccount(account(4).privateKey))).status).toBe(200);
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

describe("a fast fill's hold on a route that moves one asset", () => {
  it("covers what the fill pays at the output's reading: an input read lower since the quote holds no less (0.1 ETH of balance, 0.15 ETH paid)", async () => {
    const wallet = account(4).address;
    // 0.1 ETH into the app balance on chain A, credited at A's 3000 USD: 300 USD.
    await fundWithEth(4, wallet, 10n ** 17n);
    const before = s.node.ledger.balances.summary(wallet);
    expect(before.available).toBeGreaterThanOrEqual(300_000_000n);
    // Quoted while both chains read 3000 USD: the bridge of 0.15 ETH from B to A pays one for one, less its fees.
    await readsB('3000');
    const recipient = fresh();
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: bridgeBtoA(3, recipient, 15n * 10n ** 16n) });
    expect(q.status).toBe(200);
    expect(q.body.details.operation).toBe('bridge');
    const requestId = q.body.steps[0].requestId as Hex;
    // ETH on B is then read at 2000 USD (A keeps its configured 3000): the 0.15 ETH input is worth 300 USD there.
    await readsB('2000');
    const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } });
    if (ff.status === 200) {
      await waitForStatus(s.url, requestId, ['success', 'failure']);
      s.node.solver!.expireHolds(Date.now() + 10 ** 9); // no deposit ever
    }
    const paid = await s.publicClient(A).getBalance({ address: recipient });
    const charged = before.balance - s.node.ledger.balances.summary(wallet).balance;
    // Held at 300 USD and paid, the fill moved 0.1497 ETH on chain A, where the app's 0.1 ETH came in; the app was
    // charged its 300 USD. The hold must cover 0.15 ETH at A's reading (450 USD): the balance does not.
    expect({ status: ff.status, code: ff.body.errorCode, paid, charged }).toEqual({ status: 402, code: 'APP_BALANCE_TOO_LOW', paid: 0n, charged: 0n });
  });

  it("a hold at the higher reading is released whole by the deposit that settles it: no permanent debit for the readings' gap", async () => {
    const wallet = account(4).address;
    await fundWithEth(4, wallet, 10n ** 16n);
    const before = s.node.ledger.balances.summary(wallet);
    await readsB('3000');
    const recipient = fresh();
    const q = await api(s.url, '/quote/v2', { apiKey: app.key, body: bridgeBtoA(3, recipient, 5n * 10n ** 15n) });
    expect(q.status).toBe(200);
    const requestId = q.body.steps[0].requestId as Hex;
    await readsB('2000');
    // 0.005 ETH: held at A's 3000 USD, 15 USD (10 USD at B's reading).
    const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } });
    expect({ status: ff.status, body: ff.body }).toMatchObject({ status: 200 });
    await waitForStatus(s.url, requestId, ['success']);
    expect(s.node.ledger.balances.get(`hold:${requestId}`)!.amount).toBe(15_000_000n);
    // The user deposits the quoted 0.005 ETH on chain B: the deposit settles the fast fill, the hold goes back whole.
    await executeSteps(s, q.body, 3);
    await until(() => (s.node.ledger.balances.get(`hold_release:${requestId}`) ? true : undefined), 'the hold release');
    expect(s.node.ledger.balances.get(`permanent_debit:${requestId}`)).toBeUndefined();
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    expect(s.node.ledger.payouts.forRequest(requestId).filter((p) => p.kind === 'refund')).toEqual([]);
  });
});

describe('a gasless signed deposit that reverts on chain after its request was fast-filled', () => {
  it("charges the sponsor the gas it burned: the fast fill's sponsorship entry does not stand for it", async () => {
    // The attacker holds an API key linked to its own app balance and owns the permit. It quotes a sponsored usePermit
    // order with the key, posts the permit through POST /execute (the node pays the deposit's gas on the sponsor's
    // word), fast-fills the request with the same key, and moves its tokens away ahead of the node's deposit, in the
    // same block: the deposit reverts on chain. review-balances.test.ts charges that gas to the sponsor; here the fast
    // fill had booked the request's sponsorship first, under the same entry, and the gas went uncharged.
    const key = s.node.ledger.apiKeys.create('fast-filled gasless griefer');
    const sponsor = privateKeyToAccount(generatePrivateKey());
    expect((await linkWallet(s.url, key.key, sponsor)).status).toBe(200);
    await fundAppBalance(s, 0, sponsor.address, 20_000_000n);
    expect(s.node.ledger.balances.summary(sponsor.address).balance).toBe(20_000_000n);

    const owner = s.devnet.accounts[3]!;
    const q = await permitQuote(s, owner.address, { subsidizeFees: true, maxSubsidizationAmount: '1000000' }, key.key);
    expect(q.status).toBe(200);
    const step = q.body.steps[0];
    const requestId = step.requestId as Hex;
    const signature = await privateKeyToAccount(owner.privateKey).signTypedData({ ...step.items[0].data.sign, message: step.items[0].data.sign.value });

    await rpc(A, 'evm_setAutomine', [false]);
    try {
      expect((await api(s.url, '/execute', { apiKey: key.key, body: { ...step.items[0].data.post.body, signature } })).status).toBe(200);
      await until(() => (s.node.ledger.payouts.txsOf(`deposit:${requestId}`).some((t) => t.state === 'broadcast') ? true : undefined), 'the deposit broadcast');
      // Chain B mines on its own: the fast fill pays the user there while the deposit waits in chain A's mempool.
      const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId } });
      expect({ status: ff.status, body: ff.body }).toMatchObject({ status: 200 });
      await until(() => (s.node.ledger.payouts.get(`fill:${requestId}`)?.state === 'success' ? true : undefined), 'the fast fill paid');
      const user = s.wallet(3, A);
      const held = await s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [owner.address as Address] });
      await user.writeContract({
        account: user.account!,
        chain: user.chain,
        address: usdc(A),
        abi: erc20Abi,
        functionName: 'transfer',
        args: [s.devnet.accounts[4]!.address as Address, held],
        gas: 100_000n,
        maxPriorityFeePerGas: parseGwei('50'),
        maxFeePerGas: parseGwei('200'),
      });
      await rpc(A, 'evm_mine');
    } finally {
      await rpc(A, 'evm_setAutomine', [true]);
    }
    await until(() => (s.node.ledger.payouts.get(`deposit:${requestId}`)?.state === 'failed' ? true : undefined), 'the signed deposit failed');
    const tx = s.node.ledger.payouts.txsOf(`deposit:${requestId}`).find((t) => t.state === 'reverted');
    expect(tx?.fee).toBeDefined();
    const burned = BigInt(tx!.fee!);
    expect(burned).toBeGreaterThan(0n);
    // The gas the solver burned, in micro-USD at chain A's ETH price, 3000 USD (rounded up).
    const burnedMicro = (burned * 3000n * 10n ** 6n + 10n ** 18n - 1n) / 10n ** 18n;
    const sponsored = -BigInt(s.node.ledger.balances.get(`sponsorship:${requestId}`)!.amount);
    expect(sponsored).toBeGreaterThan(0n);
    // Charged: the fast fill's sponsored fees, and the deposit's burned gas. (The hold stays until its deadline.)
    expect(s.node.ledger.balances.summary(sponsor.address).balance).toBe(20_000_000n - sponsored - burnedMicro);
    // And the request the fast fill paid still says so: it read 'failure' (TRANSACTION_REVERTED) once the deposit failed.
    expect(s.node.ledger.requests.get(requestId)).toMatchObject({ status: 'success', fail_reason: null });
  });
});

describe("a depository deposit beyond the input its request's fast fill was priced at", () => {
  it("goes back to refundTo as an excess, as a deposit address's does: the user deposited 10 USDC, was paid for 5, and lost the other 5", async () => {
    const key = s.node.ledger.apiKeys.create('fast fill at a smaller input');
    const sponsor = privateKeyToAccount(generatePrivateKey());
    expect((await linkWallet(s.url, key.key, sponsor)).status).toBe(200);
    await fundAppBalance(s, 0, sponsor.address, 20_000_000n);
    expect(s.node.ledger.balances.summary(sponsor.address).balance).toBe(20_000_000n);

    // 10 USDC from A to B, quoted with the app's key; the app fast-fills it priced at 5 USDC (solverInputCurrencyAmount).
    const user = account(2).address as Address;
    const q = await api(s.url, '/quote/v2', {
      apiKey: key.key,
      body: {
        user,
        recipient: fresh(),
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '10000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const ff = await api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId, solverInputCurrencyAmount: '5000000' } });
    expect({ status: ff.status, body: ff.body }).toMatchObject({ status: 200 });
    await waitForStatus(s.url, requestId, ['success']);

    // The user deposits the quoted 10 USDC into the depository: 5 of them settle the fast fill, the other 5 are the user's.
    await executeSteps(s, q.body, 2);
    await until(() => (s.node.ledger.balances.get(`hold_release:${requestId}`) ? true : undefined), 'the hold release');
    await until(() => (s.node.ledger.payouts.get(`excess:${requestId}`)?.state === 'success' ? true : undefined), 'the excess returned', 30_000);
    const excess = s.node.ledger.payouts.get(`excess:${requestId}`)!;
    expect(excess).toMatchObject({ kind: 'excess', recipient: user, chain_id: A, currency: usdc(A) });
    // The 5 USDC beyond the fast fill's input, less the return's own gas (some 0.4 USDC at the devnet's fees).
    expect(BigInt(excess.amount)).toBeGreaterThan(4_000_000n);
    expect(BigInt(excess.amount)).toBeLessThan(5_000_000n);
    // The hold settles at the 5 USDC the fill was made of: nothing charged to the app.
    expect(s.node.ledger.balances.get(`permanent_debit:${requestId}`)).toBeUndefined();
  });
});
