// Money review, "never pay without cover": what the node spends on the origin chain before a fill (a deposit address's
// sweep, a signed deposit) against what came in for it, with an attacker who is an app sponsoring its own quotes.
//
// A sponsored quote's fees, that gas among them, are charged to the sponsor only when the order is filled. Swept (or
// deposited by the node) and then not filled, the deposit bears the gas as its refund: a deposit worth less left the
// solver paying it. A sponsored deposit address could be quoted for 0.001 USDC; the attacker let it expire, sent the
// 0.001 USDC, and the solver paid the sweep (about 200,000 gas) and refunded nothing (AMOUNT_TOO_LOW_TO_REFUND), for as
// many addresses as the key may hold live (20,000 a day by default), the sponsor never charged. Likewise a sponsored
// signed deposit (usePermit), and a sponsored fill that reverts on chain: its sponsor's charge was reversed whole, and a
// deposit of 1 gwei could not bear the gas the fill burned.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { fundAppBalance, linkWallet } from '../helpers/appBalance.ts';
import {
  api,
  depositAddressQuote,
  executeSteps,
  MovablePrices,
  nativeBridge,
  permitQuote,
  startStack,
  until,
  waitForStatus,
  type Stack,
} from '../helpers/stack.ts';

let s: Stack;
const prices = new MovablePrices();
let key: { key: string; id: string };
const A = 8453;
const account = (i: number) => s.devnet.accounts[i]!;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;

// Sends `amount` of chain A's USDC from test account `from` to `to`.
async function payUsdc(from: number, to: Address, amount: bigint): Promise<void> {
  const w = s.wallet(from, A);
  const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] });
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: chain(A).contracts.stablecoin, data });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
}

// What a transaction cost its sender on chain (gas used at its price; anvil charges no L1 data fee).
async function feeOf(chainId: number, hash: Hex): Promise<bigint> {
  const r = await s.publicClient(chainId).getTransactionReceipt({ hash });
  return r.gasUsed * r.effectiveGasPrice;
}

beforeAll(async () => {
  s = await startStack({ prices });
  // The attacker's app: a key whose sponsor wallet (account 4) holds 10 USD of app balance.
  key = s.node.ledger.apiKeys.create('attacker app');
  await linkWallet(s, key, 4);
  await fundAppBalance(s, 1, account(4).address as Address, 10_000_000n);
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

describe('a sponsored strict deposit address', () => {
  it('is not quoted for a deposit worth less than its sweep: swept and not filled, the deposit could not bear it', async () => {
    const q = await depositAddressQuote(s, { amount: '1000', subsidizeFees: true }, key.key);
    expect(q.status, q.body?.message).toBe(400);
    expect(q.body).toMatchObject({ errorCode: 'AMOUNT_TOO_LOW', message: expect.stringMatching(/the node pays to sweep it should it not be filled/) });
  });

  it('quoted for a deposit worth its sweep, expired and then paid: the refund bears the whole sweep', async () => {
    const q = await depositAddressQuote(s, { amount: '5000000', subsidizeFees: true }, key.key);
    expect(q.status, q.body?.message).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    // The quote expires (as it does 10 minutes on): the arrival is refunded ORDER_EXPIRED, less its sweep and refund.
    s.node.ledger.db.prepare('UPDATE requests SET expires_at = ? WHERE id = ?').run(Date.now() - 1, id);
    await payUsdc(1, at, 5_000_000n);
    expect(await waitForStatus(s.url, id, ['failure', 'refund'], 60_000)).toMatchObject({ failReason: 'ORDER_EXPIRED' });
    const payouts = () => s.node.ledger.payouts.forRequest(id);
    const refund = await until(() => payouts().find((p) => p.kind === 'refund' && p.state === 'success'), 'the refund paid', 60_000);
    const sweep = payouts().find((p) => p.kind === 'sweep')!;
    // What the refund kept back of the deposit, in wei at the configured 3000 USD per ETH (USDC: 1 USD).
    const keptWei = ((5_000_000n - BigInt(refund.amount)) * 10n ** 12n) / 3000n;
    const spent = (await feeOf(A, sweep.tx_hash as Hex)) + (await feeOf(A, refund.tx_hash as Hex));
    expect(spent, `the sweep and the refund cost ${spent} wei; the refund kept back ${keptWei}`).toBeLessThanOrEqual(keptWei);
  });
});

describe('a sponsored signed deposit (usePermit)', () => {
  it('is not quoted for a deposit worth less than the gas the node pays to submit it', async () => {
    const user = account(3).address;
    const low = await permitQuote(s, user, { amount: '1000', subsidizeFees: true }, key.key);
    expect(low.status, low.body?.message).toBe(400);
    expect(low.body).toMatchObject({ errorCode: 'AMOUNT_TOO_LOW', message: expect.stringMatching(/the node pays to submit it should it not be filled/) });
    const enough = await permitQuote(s, user, { subsidizeFees: true }, key.key);
    expect(enough.status, enough.body?.message).toBe(200);
  });

  it('quoted for a deposit worth its gas, deposited by the node and then failed (SLIPPAGE): the refund bears that gas', async () => {
    // Before, the same at 0.001 USDC: the node paid 159,539,026,435,830 wei for the deposit, the sponsor was charged
    // nothing, the user (no gas of its own: the permit is a signature) lost 0.001 USDC (AMOUNT_TOO_LOW_TO_REFUND).
    const user = privateKeyToAccount(account(3).privateKey);
    const q = await api(s.url, '/quote/v2', {
      apiKey: key.key,
      body: {
        user: user.address,
        originChainId: A,
        destinationChainId: 10,
        originCurrency: chain(A).contracts.stablecoin,
        destinationCurrency: zeroAddress,
        amount: '5000000',
        tradeType: 'EXACT_INPUT',
        usePermit: true,
        subsidizeFees: true,
        slippageTolerance: 0,
      },
    });
    expect(q.status, q.body?.message).toBe(200);
    const id = q.body.steps[0].requestId as Hex;
    const step = q.body.steps[0];
    // The market moves against the swap after the quote: at a tolerance of 0, any move fails it.
    prices.set('ETH', '3100');
    try {
      s.node.solver!.invalidate();
      const signature = await user.signTypedData({ ...step.items[0].data.sign, message: step.items[0].data.sign.value });
      const r = await api(s.url, '/execute', { apiKey: key.key, body: { ...step.items[0].data.post.body, signature } });
      expect(r.status, r.body?.message).toBe(200);
      expect(await waitForStatus(s.url, id, ['failure', 'refund'], 60_000)).toMatchObject({ failReason: 'SLIPPAGE' });
      const payouts = () => s.node.ledger.payouts.forRequest(id);
      const refund = await until(() => payouts().find((p) => p.kind === 'refund' && p.state === 'success'), 'the refund paid', 60_000);
      const deposit = payouts().find((p) => p.kind === 'deposit')!;
      // In wei at the 3100 USD per ETH the node priced the refund at.
      const keptWei = ((5_000_000n - BigInt(refund.amount)) * 10n ** 12n) / 3100n;
      const spent = (await feeOf(A, deposit.tx_hash as Hex)) + (await feeOf(A, refund.tx_hash as Hex));
      expect(spent, `the deposit and the refund cost ${spent} wei; the refund kept back ${keptWei}`).toBeLessThanOrEqual(keptWei);
    } finally {
      prices.overrides.delete('ETH');
      s.node.solver!.invalidate();
    }
  });
});

describe('a sponsored fill that reverts on chain for its recipient', () => {
  it('costs the solver nothing: the gas it burned is borne by the deposit or the sponsor', async () => {
    // The recipient accepts in an estimate (sent at gas price 0) and reverts on chain (GASPRICE; ISZERO; PUSH1 9; JUMPI;
    // PUSH1 0; DUP1; REVERT; JUMPDEST; STOP), as any contract its owner arms between the estimate and the fill does.
    const B = 10;
    const trap = privateKeyToAccount(generatePrivateKey()).address;
    await s.publicClient(B).request({ method: 'anvil_setCode' as never, params: [trap, '0x3a15600957600080fd5b00'] as never });
    const amount = 1_000_000_000n; // 1 gwei of ETH: the sponsor pays the fill's gas
    const q = await api(s.url, '/quote/v2', {
      apiKey: key.key,
      body: { ...nativeBridge(account(3).address, trap, A, B, amount.toString(), { refundTo: account(3).address }), subsidizeFees: true },
    });
    expect(q.status, q.body?.message).toBe(200);
    const id = q.body.steps[0].requestId as Hex;
    const sponsor = account(4).address as Address;
    const before = s.node.ledger.balances.summary(sponsor).balance;
    await executeSteps(s, q.body, 3);
    const done = await waitForStatus(s.url, id, ['failure', 'refund'], 60_000);
    const payouts = () => s.node.ledger.payouts.forRequest(id);
    const fill = await until(() => payouts().find((p) => p.kind === 'fill' && p.state === 'failed'), 'the fill failed');
    const burned = await feeOf(B, fill.tx_hash as Hex);
    const refund = payouts().find((p) => p.kind === 'refund');
    const refundCost = refund?.tx_hash ? await feeOf(A, refund.tx_hash as Hex) : 0n;
    // What the solver was left with: the deposit less what it refunded, and what the sponsor was charged in the end
    // (micro-USD, at the configured 3000 USD per ETH: 1 micro-USD is 333,333,333 wei).
    const kept = amount - BigInt(refund?.amount ?? 0);
    const charged = (before - s.node.ledger.balances.summary(sponsor).balance) * 333_333_333n;
    expect(
      burned + refundCost,
      `${JSON.stringify(done)}: the fill burned ${burned} wei, the refund cost ${refundCost}; kept ${kept}, sponsor charged ${charged}`,
    ).toBeLessThanOrEqual(kept + charged);
  });
});

describe('a native fill to a contract recipient that takes its 40,000 gas allowance', () => {
  // The submitter signs a fill with up to GAS.recipient (40,000) more gas than its quote priced, for a recipient whose
  // code runs on receipt (a smart wallet). The quote charged the priced gas alone, at twice the base fee plus the tip:
  // where the tip is most of the fee (anvil's 1 gwei over a base fee of 0.05 gwei), that margin covered little of the
  // 40,000, and every fill to such a recipient cost the solver more than it earned.
  const rpc = (id: number, method: string, params: unknown[] = []) => s.publicClient(id).request({ method: method as never, params: params as never });
  // Reverts unless given 60,000 gas, then burns all but 3,000 of what it was given.
  const GATED = '0x5a6200ea60116014575b610bb85a1160095700005b600080fd';
  const B = 10;

  it('is charged for that allowance by its quote: the fill costs the solver no more than the quote charged', async () => {
    const gated = privateKeyToAccount(generatePrivateKey()).address;
    for (const id of [A, B]) await rpc(id, 'anvil_setCode', [gated, GATED]);
    await rpc(B, 'anvil_setNextBlockBaseFeePerGas', [toHex(50_000_000n)]);
    await rpc(B, 'evm_mine');
    const head = await s.publicClient(B).getBlockNumber({ cacheTime: 0 });
    await until(
      async () => ((await api(s.url, '/ready')).body.chains.find((c: any) => c.chainId === B)?.head >= Number(head) ? true : undefined),
      'the head read',
    );
    s.node.solver!.invalidate();
    const q = await api(s.url, '/quote', { body: nativeBridge(account(1).address, gated, A, B, '10000000000000000', { refundTo: account(1).address }) });
    expect(q.status, q.body?.message).toBe(200);
    const id = q.body.steps[0].requestId as Hex;
    await executeSteps(s, q.body, 1);
    await waitForStatus(s.url, id, ['success'], 60_000);
    const pricing = JSON.parse(s.node.ledger.requests.get(id)!.pricing!);
    const earned = BigInt(pricing.gasFeeOut) + (10n ** 16n * BigInt(pricing.serviceBps) + 9_999n) / 10_000n;
    const cost = await feeOf(B, s.node.ledger.payouts.get(`fill:${id}`)!.tx_hash as Hex);
    expect(cost, `the fill cost ${cost} wei; its quote charged ${earned}`).toBeLessThanOrEqual(earned);
  });
});
