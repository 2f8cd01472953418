// Adversarial review of restarts and recovery: what a node that was down (or restarted) does to the deposits and payouts
// it recorded before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, keccak256, toHex, type Address, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { privateKeyToAccount } from 'viem/accounts';
import { ExchangeClient } from '../../src/chains/exchange/client.ts';
import { HYPERLIQUID_NONCE_WINDOW } from '../../src/devnet/exchange/standin.ts';
import { heldExchangeFill, setPerps } from '../helpers/exchangeSteps.ts';
import { api, executeSteps, holdSubmitter, nativeBridge, permitQuote, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;

describe("a signed deposit (usePermit) the node recorded in its quote's life and sent only after a restart", () => {
  let s: Stack;
  beforeAll(async () => {
    // Quotes live 10 s (the least the config takes), so a restart can outlast one.
    s = await startStack({ config: { quote: { ttlSeconds: 10 } } });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it("is filled once it lands within its permit's deadline: not refunded as ORDER_EXPIRED less the node's own deposit gas", async () => {
    const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
    const usdcOf = (chainId: number, who: Address) =>
      s.publicClient(chainId).readContract({ address: usdc(chainId), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
    const user = s.devnet.accounts[2]!;
    const q = await permitQuote(s, user.address);
    expect(q.status).toBe(200);
    const step = q.body.steps[0];
    const id = step.requestId as Hex;
    const expiresAt = s.node.ledger.requests.get(id)!.expires_at!;
    const deadline = Number(step.items[0].data.sign.value.deadline);
    const [inBefore, outBefore] = [await usdcOf(A, user.address), await usdcOf(B, user.address)];
    const { domain, types, primaryType, value } = step.items[0].data.sign;
    const signature = await privateKeyToAccount(user.privateKey).signTypedData({ domain, types, primaryType, message: value });
    // The node records the user's permit in the quote's life (POST /permits checks the expiry), then goes down before
    // chain A's submitter sends it.
    holdSubmitter(s, A);
    expect((await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body })).status).toBe(200);
    expect(s.node.ledger.payouts.get(`deposit:${id}`)?.state).toBe('queued');
    await s.restartNode(undefined, async () => {
      await until(() => (Date.now() > expiresAt + 1_000 ? true : undefined), 'the quote to expire while the node is down', 20_000);
      // Chain A's blocks lag the node's clock (a sequencer catching up after downtime): the permit is still good on chain.
      await s.publicClient(A).request({ method: 'evm_setTime' as never, params: [deadline - 3] as never });
    });
    const end = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 60_000);
    const deposited = s.node.ledger.deposits.byOrderRef(id)[0]!;
    const block = await s.publicClient(A).getBlock({ blockNumber: BigInt(deposited.block_number) });
    // The deposit landed within the permit's deadline (the quote's expiry): the chain took it in time.
    expect(Number(block.timestamp)).toBeLessThanOrEqual(deadline);
    // Before: failure, ORDER_EXPIRED (the deposit was judged by when the restarted indexer read it), and the refund
    // gave back 5.834483 of the 7 USDC the node itself pulled with the permit: 1.165517 USDC of the node's deposit gas and
    // the refund's, taken from a user who had done everything in time.
    expect({
      status: end.status,
      failReason: s.node.ledger.requests.get(id)!.fail_reason,
      refunds: s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'refund').length,
    }).toEqual({
      status: 'success',
      failReason: null,
      refunds: 0,
    });
    expect(await usdcOf(A, user.address)).toBe(inBefore - 7_000_000n);
    expect(await usdcOf(B, user.address)).toBe(outBefore + BigInt(s.node.ledger.payouts.get(`fill:${id}`)!.amount));
  });
});

// A fill a restarted node's submitters find failed while reconciling is refunded in the transaction that fails it, priced
// with the inventory and prices Solver.prime() read before the chains started (95d37f8). One failed read of any chain or
// price there (a provider's 500, a timeout) left the solver with no reading, and the fill's deposit to an operator.
describe('a fill a restarted node finds failed, when its first reading of inventory and prices fails once', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('is refunded: the start reads them again rather than leave the deposit to an operator (MANUAL_REFUND_REQUIRED)', { timeout: 120_000 }, async () => {
    const state = () => s.devnet.exchange!.standin.state;
    const usdc = s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin;
    const usdcOf = (who: Address) => s.publicClient(A).readContract({ address: usdc, abi: erc20Abi, functionName: 'balanceOf', args: [who] });
    const user = privateKeyToAccount(s.devnet.accounts[1]!.privateKey);
    const recipient = s.devnet.accounts[0]!.address;
    const solver = s.devnet.solver;
    const userBefore = await usdcOf(user.address);
    // The fill's first post is refused for funds (the solver's perps USD moved aside just before it): its signed action
    // stays open, posted again until it is applied.
    const { requestId, payoutId, stash } = await heldExchangeFill(s, 1, recipient);
    const st = state() as unknown as { now: () => number };
    const clock = st.now;
    const withdrawable = ExchangeClient.prototype.withdrawable;
    let failedReads = 0;
    try {
      await s.restartNode(undefined, async () => {
        setPerps(s, solver, stash);
        // Down two days: the exchange's clock is past the held action's nonce window (its ledger shows that time), so
        // the restarted node finds the fill dead and fails it.
        state().nonceWindow = HYPERLIQUID_NONCE_WINDOW;
        st.now = () => Date.now() + HYPERLIQUID_NONCE_WINDOW.behindMs + 60 * 60_000;
        state().credit(s.devnet.accounts[2]!.address, { perpsUsd: '1' });
        const usd = state().usdc;
        await new ExchangeClient({ url: s.devnet.exchange!.url }).sendAsset(
          s.devnet.accounts[2]!.privateKey,
          {
            exchangeChain: 'Mainnet',
            destination: solver.toLowerCase(),
            sourceDex: '',
            destinationDex: '',
            token: `${usd.name}:${usd.tokenId}`,
            amount: '0.5',
            fromSubAccount: '',
            nonce: st.now(),
          },
          { signatureChainId: 0xa4b1 },
        );
        // The restarted node's first read of the solver's perps USD fails (the exchange answers 500 now and then).
        ExchangeClient.prototype.withdrawable = async function (this: ExchangeClient, ...args: Parameters<typeof withdrawable>) {
          if (failedReads++ === 0) throw new Error('POST /info answered 500');
          return withdrawable.apply(this, args);
        };
      });
      await until(() => (s.node.ledger.payouts.get(payoutId)!.state === 'failed' ? true : undefined), 'the fill failed', 30_000);
    } finally {
      ExchangeClient.prototype.withdrawable = withdrawable;
      st.now = clock;
      state().nonceWindow = undefined;
    }
    expect(failedReads).toBeGreaterThan(0);
    const end = await until(
      async () => {
        const r = (await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body;
        return r.status === 'refund' || r.refundFailReason ? r : undefined;
      },
      'the deposit refunded or left to an operator',
      30_000,
    );
    // Before: failure, refundFailReason MANUAL_REFUND_REQUIRED: the 5 USDC stayed in the depository for an operator.
    expect({ status: end.status, refundFailReason: end.refundFailReason ?? null }).toEqual({ status: 'refund', refundFailReason: null });
    await until(async () => ((await usdcOf(user.address)) > userBefore - 5_000_000n ? true : undefined), 'the refund on 8453', 30_000);
  });
});

// A restarted node's submitters start before its indexers' first pass, and the solver right after: a deposit a reorg
// took back while the node was down, its payout queued before, was paid before any indexer looked at the blocks replaced.
// Up, the same reorg fails the queued payout DEPOSIT_REORGED, nothing paid.
describe('a deposit a reorg took back while the node was down, its payout still queued', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(async () => {
    await s?.stop();
  });
  const rpcA = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as never, params: params as never });
  const settled = (id: string) =>
    until(() => {
      const p = s.node.ledger.payouts.get(id);
      return p && (p.state === 'success' || p.state === 'failed') ? p : undefined;
    }, `${id} decided`);

  it('its fill is not paid by the restarted node before its indexer has looked at the blocks replaced', async () => {
    const user = s.devnet.accounts[4]!.address;
    const recipient = '0x00000000000000000000000000000000000ec0de' as Hex;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, recipient, A, B, '10000000000000000') });
    const id = q.body.steps[0].requestId as Hex;
    holdSubmitter(s, B); // the fill waits queued (a fee-cap wait, the moment of a crash)
    const before = (await rpcA('evm_snapshot')) as Hex;
    await executeSteps(s, q.body, 4);
    await until(() => (s.node.ledger.payouts.get(`fill:${id}`)?.state === 'queued' ? true : undefined), 'the fill queued');
    await s.restartNode(undefined, async () => {
      await rpcA('evm_revert', [before]); // the deposit's block is replaced while the node is down
      await rpcA('anvil_mine', ['0x5']);
    });
    const fill = await settled(`fill:${id}`);
    const paid = await s.publicClient(B).getBalance({ address: recipient });
    expect({ fill: fill.state, failReason: fill.fail_reason, paid }).toEqual({ fill: 'failed', failReason: 'DEPOSIT_REORGED', paid: 0n });
  });

  it("its refund is not paid out of the depository's other deposits by the restarted node", async () => {
    const other = s.devnet.accounts[3]!.address; // another user's filled order: its ETH stays in the depository
    const q = await api(s.url, '/quote', { body: nativeBridge(other, other, A, B, '10000000000000000') });
    await executeSteps(s, q.body, 3);
    await waitForStatus(s.url, q.body.steps[0].requestId, ['success']);
    const depositor = '0x00000000000000000000000000000000000ec0df' as Hex;
    holdSubmitter(s, A);
    const before = (await rpcA('evm_snapshot')) as Hex;
    const w = s.wallet(4, A);
    await s.publicClient(A).waitForTransactionReceipt({
      hash: await w.sendTransaction({
        account: w.account!,
        chain: w.chain,
        to: s.devnet.chains.find((c) => c.id === A)!.contracts.depository as Hex,
        data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [depositor, keccak256(toHex('no such order'))] }),
        value: 10n ** 16n,
      }),
    });
    const refund = await until(
      () =>
        s.node.ledger.db.prepare(`SELECT id FROM payouts WHERE kind = 'refund' AND recipient = ? COLLATE NOCASE AND state = 'queued'`).get(depositor) as
          | { id: string }
          | undefined,
      'the orphan refund queued',
    );
    await s.restartNode(undefined, async () => {
      await rpcA('evm_revert', [before]);
      await rpcA('anvil_mine', ['0x5']);
    });
    const p = await settled(refund.id);
    const paid = await s.publicClient(A).getBalance({ address: depositor });
    expect({ refund: p.state, failReason: p.fail_reason, paid }).toEqual({ refund: 'failed', failReason: 'DEPOSIT_REORGED', paid: 0n });
  });
});

// A deposit's arrival was when the indexer read it: one made in its quote's life while the node was down was refunded
// as ORDER_EXPIRED, less the refund's gas (0.0098575 of 0.01 ETH back), never filled.
describe('a deposit made in time while the node was down', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ config: { quote: { ttlSeconds: 10 } } });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('is judged by when the chain took it, not by when the restarted indexer read it: filled, not refunded as ORDER_EXPIRED', async () => {
    const user = s.devnet.accounts[4]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, 8453, 10, '10000000000000000') });
    const id = q.body.steps[0].requestId as Hex;
    const expiresAt = s.node.ledger.requests.get(id)!.expires_at!;
    let depositedAt = 0n;
    await s.restartNode(undefined, async () => {
      const [hash] = await executeSteps(s, q.body, 4);
      const receipt = await s.publicClient(8453).getTransactionReceipt({ hash: hash! });
      depositedAt = (await s.publicClient(8453).getBlock({ blockNumber: receipt.blockNumber })).timestamp;
      await until(() => (Date.now() > expiresAt + 1_000 ? true : undefined), 'the quote to expire while the node is down', 20_000);
    });
    expect(Number(depositedAt) * 1000).toBeLessThan(expiresAt);
    const end = await waitForStatus(s.url, id, ['success', 'failure', 'refund']);
    expect({ status: end.status, failReason: s.node.ledger.requests.get(id)!.fail_reason }).toEqual({ status: 'success', failReason: null });
  });
});
