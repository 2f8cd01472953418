// Adversarial review: destination calls and swaps, where the attacker names the call's target and calldata, or the
// recipient of a native fill.
//
// 1. The filler copied whatever a payout's recipient returned (and CallExecutor a failed call's whole reason, which the
//    filler copied again to bubble it), with the 1/64 of the gas each frame keeps across a call. A recipient returning
//    1 MiB (or a call target reverting with 512 KiB at a gas bound its owner tuned) ran the fill out of gas at the
//    estimate's cap: an estimate that is no revert ("gas required exceeds allowance"), which the submitter takes for the
//    solver lacking funds and postpones for ever. The fill, priced at its decision's rate, stayed queued with no deadline
//    until the attacker disarmed its contract: paid after ETH rose 10%, or refunded had it fallen. A free option.
// 2. In a batch, the copy of a recipient's return data was outside the 100,000 gas each recipient is given: two
//    recipients returning 180 KiB on chain (nothing in the estimate, at gas price 0) ran the batch out of gas whole, and
//    the honest fills' shares of its gas were the solver's.
// Both fixed in the contracts: the filler never copies a recipient's return data, and the executor keeps at most 1 KiB
// of a failed call's reason.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, keccak256, parseEther, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { GrowingBurnerAbi, GrowingBurnerBytecode, OrderFillerAbi, RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import type { PayoutRow } from '../../src/ledger/types.ts';
import { api, executeSteps, holdSubmitter, MovablePrices, nativeBridge, startStack, until, usdcForEth, waitForStatus, type Stack } from '../helpers/stack.ts';

const prices = new MovablePrices();
let s: Stack;
beforeAll(async () => {
  s = await startStack({ prices });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const A = 8453;
const B = 10;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const user = (i: number) => s.devnet.accounts[i]!.address;

// How many times a chain's submitter (B's unless named) postponed a payout for want of funds.
async function noFundsPostponements(chainId = B): Promise<number> {
  const m = await s.node.metrics.payoutPostponed.get();
  return m.values.filter((v) => v.labels.chain === String(chainId) && v.labels.reason === 'no-funds').reduce((t, v) => t + v.value, 0);
}

// Deposits as the quote's steps say, then the fill's payout once it settled (failed, say), or once chain B's submitter
// postponed it three more times for want of funds (held: it stays queued, tried again for ever).
async function depositAndDecide(quote: any, account: number): Promise<PayoutRow> {
  const requestId = quote.steps.at(-1).requestId as Hex;
  const before = await noFundsPostponements();
  await executeSteps(s, quote, account);
  return until(async () => {
    const fill = s.node.ledger.payouts.get(`fill:${requestId}`);
    if (!fill) return undefined;
    if (fill.state !== 'queued' && fill.state !== 'sent') return fill;
    return (await noFundsPostponements()) >= before + 3 ? fill : undefined;
  }, `the fill of ${requestId} settled, or held`);
}

describe('destination calls: a call the estimate cannot run', () => {
  it("a call that loops past any gas in the fill's estimate is refused (EXECUTION_REVERTED) and refunded, never held", async () => {
    const pc = s.publicClient(B);
    const funder = s.wallet(0, B);
    // The attacker's own wallet: a plain account at its quote, so the call (a transfer of the order's ETH to it) is cheap.
    const wallet = privateKeyToAccount(generatePrivateKey());
    const deployed = await funder.deployContract({ account: funder.account!, chain: funder.chain, abi: GrowingBurnerAbi, bytecode: GrowingBurnerBytecode });
    const burner = (await pc.waitForTransactionReceipt({ hash: deployed })).contractAddress!;

    // 30 USDC on A for a call on B spending 0.01 ETH: priced and filled as a swap.
    const q = await api(s.url, '/quote', { body: usdcForEth(s, user(4), { callTarget: wallet.address }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;

    // After the quote the wallet delegates (EIP-7702) to code that, in an estimate (gas price 0), loops past any gas.
    const send = async (data: Hex, contractAddress: Address, nonce: number) =>
      pc.waitForTransactionReceipt({
        hash: await funder.sendTransaction({
          account: funder.account!,
          chain: funder.chain,
          to: wallet.address,
          data,
          authorizationList: [await funder.signAuthorization({ account: wallet, contractAddress, chainId: B, nonce })],
        }),
      });
    await send(encodeFunctionData({ abi: GrowingBurnerAbi, functionName: 'setRounds', args: [10n ** 9n] }), burner, 0);
    await expect(pc.estimateGas({ account: s.devnet.solver as Address, to: wallet.address, data: '0x' })).rejects.toThrow(/gas required exceeds/);

    await executeSteps(s, q.body, 4);
    // The call runs inside the filler's executor, which catches the out-of-gas and reverts with CallFailed: the
    // estimate reverts, so the fill is refused and the deposit refunded, never held.
    const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'EXECUTION_REVERTED' });
    expect(await pc.getBalance({ address: wallet.address })).toBe(0n);
  });
});

// A contract in raw bytecode: a call with calldata stores its first word (armed when not zero); a call without calldata
// (a payment) stops when unarmed, and when armed burns its gas down to 2,500,000 and then returns 1 MiB of zeros. The
// filler copied a recipient's return data: with the 1/64 of the gas it kept, it could not, so the whole transaction ran
// out of gas at any limit up to the block's (an estimate answered "gas required exceeds allowance", not a revert).
const RETURN_BOMB: Hex = '0x6025600c60003960256000f33615600c57600035600055005b600054601457005b5a622625a010601457621000006000f3';
const word = (n: bigint): Hex => `0x${n.toString(16).padStart(64, '0')}`;

describe('swaps: a recipient that returns more than the filler can copy', () => {
  it('a native fill to a recipient whose return data the filler could not copy is refused and refunded, never held until the price moves and paid then', async () => {
    const pc = s.publicClient(B);
    const attacker = s.wallet(2, B);
    const deployed = await attacker.deployContract({ account: attacker.account!, chain: attacker.chain, abi: [], bytecode: RETURN_BOMB });
    const bomb = (await pc.waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const arm = async (on: boolean) =>
      pc.waitForTransactionReceipt({
        hash: await attacker.sendTransaction({ account: attacker.account!, chain: attacker.chain, to: bomb, data: word(on ? 1n : 0n) }),
      });

    // 30 USDC on A for 0.01 ETH on B, paid to the attacker's contract: a swap, priced at its fill's moment.
    const q = await api(s.url, '/quote', { body: usdcForEth(s, user(2), { recipient: bomb }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    await arm(true);
    // Armed, the filler's payment to it ran out of gas at any limit (the filler copied the 1 MiB with the 1/64 of the gas it
    // kept): the estimate failed as no revert, which the submitter took for the solver lacking funds and tried for ever.
    const fillNative = encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillNative', args: [keccak256('0x01'), bomb] });
    const estimate = await pc.estimateGas({ account: s.devnet.solver as Address, to: chain(B).contracts.filler, data: fillNative, value: 1n }).then(
      (gas) => `${gas} gas`,
      (e: Error) => e.message,
    );
    expect(estimate).not.toMatch(/gas required exceeds allowance/);

    // The deposit is decided at today's rate, which fixes the fill's amount.
    const decided = await depositAndDecide(q.body, 2);

    // ETH then rises 10%, and the attacker disarms its contract: the fill pays what was decided before the rise.
    prices.set('ETH', '3300');
    try {
      s.node.solver!.invalidate();
      await arm(false);
      const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
      const seen = {
        status: done.status,
        failReason: done.failReason,
        fillState: decided.state,
        fillAmount: decided.amount,
        received: await pc.getBalance({ address: bomb }),
      };
      // A fill that cannot run within its priced gas is refused and refunded, never held until the price moves.
      expect(
        seen,
        JSON.stringify(seen, (_, v) => (typeof v === 'bigint' ? v.toString() : v)),
      ).toMatchObject({ status: 'refund', fillState: 'failed' });
    } finally {
      prices.overrides.clear();
      s.node.solver!.invalidate();
    }
  });
});

// A payout recipient in raw bytecode: paid in an estimate (gas price 0) it returns nothing; paid on chain it returns
// 180 KiB of zeros, which costs it about 82,000 of the 100,000 gas a batch gives it. The filler copied the return data
// into its own memory, outside that allowance: two such recipients cost the batch about 330,000 gas more than its
// estimate, past the room its limit leaves.
const RETURNS_ON_CHAIN: Hex = '0x600e600c600039600e6000f33a15600c576202d0006000f35b00';

describe('batches: a recipient that returns a large blob on chain', () => {
  it('a batch paying recipients that return 180 KiB on chain lands whole: the filler never copies what a recipient returns', async () => {
    const pc = s.publicClient(B);
    const w = s.wallet(0, B);
    const deployed = await w.deployContract({ account: w.account!, chain: w.chain, abi: [], bytecode: RETURNS_ON_CHAIN });
    const receipt = await pc.waitForTransactionReceipt({ hash: deployed });
    const blob = receipt.contractAddress!;
    // Quoted once the node has seen the deployment: quoted before, a recipient is priced as an account without code,
    // and its fill, given code since, goes alone, bounded by that price (review-left-money).
    await until(() => (BigInt(s.node.adapters.get(B)!.progress().head) >= receipt.blockNumber ? true : undefined), 'the node at the deployment');
    const payouts = s.node.ledger.payouts;
    const from = await pc.getBlockNumber({ cacheTime: 0 });
    const release = holdSubmitter(s, B);
    const ids: Hex[] = [];
    try {
      for (const recipient of [user(3), blob, blob]) {
        const q = await api(s.url, '/quote', { body: nativeBridge(user(1), recipient, A, B, '20000000000000000') });
        expect(q.status, JSON.stringify(q.body)).toBe(200);
        await executeSteps(s, q.body, 1);
        ids.push(q.body.steps[0].requestId as Hex);
      }
      await until(() => (ids.every((id) => payouts.get(`fill:${id}`)?.state === 'queued') ? true : undefined), 'the three fills queued');
    } finally {
      release();
    }
    const outcomes = [];
    for (const id of ids) outcomes.push((await waitForStatus(s.url, id, ['success', 'refund'])).status);
    // Nothing of the solver's reverted on B meanwhile: the honest fill's share of a reverted batch is burned for nothing.
    const reverted: string[] = [];
    for (let n = from + 1n; n <= (await pc.getBlockNumber({ cacheTime: 0 })); n++) {
      for (const tx of (await pc.getBlock({ blockNumber: n, includeTransactions: true })).transactions) {
        if (tx.from.toLowerCase() !== s.devnet.solver.toLowerCase()) continue;
        const r = await pc.getTransactionReceipt({ hash: tx.hash });
        if (r.status !== 'success') reverted.push(`${tx.hash}: ${r.gasUsed} of ${tx.gas} gas`);
      }
    }
    expect({ outcomes, reverted, txs: new Set(ids.map((id) => payouts.get(`fill:${id}`)!.tx_hash)).size }).toEqual({
      outcomes: ['success', 'success', 'success'],
      reverted: [],
      txs: 1,
    });
  });
});

// A call target in raw bytecode: a call with calldata stores its first word, K; a call without calldata does nothing
// while K is 0, else burns its gas down to K and reverts with 512 KiB of zeros. The executor copied that reason and
// wrapped it in CallFailed, and the filler copied the executor's reason to bubble it, with the 1/64 of the gas it kept:
// at a K its owner tunes, the fill ran out of gas at the estimate's cap (no revert, "gas required exceeds allowance").
const REVERT_BOMB: Hex = '0x6025600c60003960256000f33615600c57600035600055005b60005480156023575b805a11601557620800006000fd5b00';

describe('destination calls: a reason bigger than the filler can copy', () => {
  it("a call that reverts with a 512 KiB reason never runs the fill out of gas at the estimate's cap: it is refused and refunded", async () => {
    const pc = s.publicClient(B);
    const attacker = s.wallet(3, B);
    const deployed = await attacker.deployContract({ account: attacker.account!, chain: attacker.chain, abi: [], bytecode: REVERT_BOMB });
    const bomb = (await pc.waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const setK = async (k: bigint) =>
      pc.waitForTransactionReceipt({ hash: await attacker.sendTransaction({ account: attacker.account!, chain: attacker.chain, to: bomb, data: word(k) }) });
    const fillCalls = encodeFunctionData({
      abi: OrderFillerAbi,
      functionName: 'fillCalls',
      args: [keccak256('0x02'), user(3), [{ to: bomb, value: parseEther('0.01'), data: '0x' }]],
    });
    // What the attacker tunes offline: the K at which the fill's estimate runs out of gas rather than reverting.
    const outOfGas: bigint[] = [];
    for (let k = 1_000_000n; k <= 4_000_000n; k += 50_000n) {
      await setK(k);
      const e = await pc.estimateGas({ account: s.devnet.solver as Address, to: chain(B).contracts.filler, data: fillCalls, value: parseEther('0.01') }).then(
        () => '',
        (err: Error) => err.message,
      );
      if (/gas required exceeds allowance/.test(e)) outOfGas.push(k);
    }
    expect(outOfGas).toEqual([]);

    // And the fill itself: a Call paid in USDC (priced as a swap), armed after its quote. It is refused and refunded at
    // once; held, its payout (priced at the decision's rate) was paid when the attacker disarmed after ETH rose.
    await setK(0n);
    const q = await api(s.url, '/quote', { body: usdcForEth(s, user(3), { callTarget: bomb }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    await setK(2_500_000n);
    const decided = await depositAndDecide(q.body, 3);
    prices.set('ETH', '3300');
    try {
      s.node.solver!.invalidate();
      await setK(0n);
      const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
      const seen = { status: done.status, failReason: done.failReason, fillState: decided.state, fillAmount: decided.amount };
      expect(seen).toMatchObject({ status: 'refund', failReason: 'EXECUTION_REVERTED', fillState: 'failed' });
    } finally {
      prices.overrides.clear();
      s.node.solver!.invalidate();
    }
  });
});

// The node's side of finding 1: an estimate that runs out of gas at the chain's own limit ("gas required exceeds
// allowance" from an estimate sent without fees, which no balance caps) was taken for the solver lacking funds, and
// postponed for ever. The depository's refund still copies what its target returns: a refund target that returns 1 MiB
// ran the refund out of gas at any limit.
describe('refunds: a refund target that runs the refund out of gas at any limit', () => {
  it('fails the refund as QUOTED_GAS_LIMIT_EXCEEDED, never postponed for ever as if the solver lacked funds', async () => {
    const pc = s.publicClient(A);
    const attacker = s.wallet(2, A);
    const deployed = await attacker.deployContract({ account: attacker.account!, chain: attacker.chain, abi: [], bytecode: RETURN_BOMB });
    const bomb = (await pc.waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    await pc.waitForTransactionReceipt({
      hash: await attacker.sendTransaction({ account: attacker.account!, chain: attacker.chain, to: bomb, data: word(1n) }),
    });
    // An orphan deposit (a ref no quote made) naming the bomb its depositor: refunded to it on A.
    const ref = keccak256('0x0bad');
    const before = await noFundsPostponements(A);
    await pc.waitForTransactionReceipt({
      hash: await attacker.sendTransaction({
        account: attacker.account!,
        chain: attacker.chain,
        to: chain(A).contracts.depository,
        data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [bomb, ref] }),
        value: parseEther('0.01'),
      }),
    });
    const refund = await until(async () => {
      const rid = s.node.ledger.deposits.byOrderRef(ref)[0]?.request_id;
      const p = rid ? s.node.ledger.payouts.forRequest(rid).find((x) => x.kind === 'refund') : undefined;
      if (!p) return undefined;
      if (p.state !== 'queued' && p.state !== 'sent') return p;
      return (await noFundsPostponements(A)) >= before + 3 ? p : undefined;
    }, 'the refund settled, or postponed for want of funds');
    expect({ state: refund.state, reason: refund.fail_reason }).toEqual({ state: 'failed', reason: 'QUOTED_GAS_LIMIT_EXCEEDED' });
  });
});
