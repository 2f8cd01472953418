// Review of fast fills against deposit addresses: a fast fill is settled by the deposit of the request it paid,
// and what that deposit brings beyond what the fast fill was priced at is the payer's, as any deposit address's
// overpayment is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, parseEther, zeroAddress, type Address, type Hex } from 'viem';
import { TestNftAbi } from '../../contracts-abi/index.ts';
import { privateKeyToAccount } from 'viem/accounts';
import { linkWallet } from '../helpers/link.ts';
import { api, depositAddressQuote, holdSubmitter, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;
const marker = (credited: Address) => `012345abcdef${credited.slice(2).toLowerCase()}012345abcdef`;
let app: { key: string; id: string };

beforeAll(async () => {
  s = await startStack();
  app = s.node.ledger.apiKeys.create('app');
  // The app's wallet (account 4) funds its app balance with 100 USDC and links it to the app's key.
  const acct = privateKeyToAccount(account(4).privateKey);
  expect((await linkWallet(s.url, app.key, acct)).status).toBe(200);
  const w = s.wallet(4, A);
  const data = `${encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 100_000_000n] })}${marker(acct.address)}` as Hex;
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc(A), data });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the app balance credit');
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

const usdcOf = (chainId: number, who: Address) =>
  s.publicClient(chainId).readContract({ address: usdc(chainId), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

async function payUsdc(from: number, to: Address, amount: bigint): Promise<void> {
  const w = s.wallet(from, A);
  const hash = await w.sendTransaction({
    account: w.account!,
    chain: w.chain,
    to: usdc(A),
    data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] }),
  });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
}

describe('fast fills of deposit-address quotes', () => {
  it("an open deposit address's template is not fast-filled: its arrivals are requests of their own, so no deposit could settle it and the user was paid twice at the app's cost", async () => {
    const wallet = account(4).address;
    const before = s.node.ledger.balances.summary(wallet);
    const recipientBefore = await usdcOf(B, account(2).address);
    // 10 USDC from A to B for account 2, through an open deposit address, quoted with the app's key.
    const q = await depositAddressQuote(s, { depositAddressType: 'open' }, app.key);
    expect(q.status).toBe(200);
    const template = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: template } });
    if (ff.status === 200) await waitForStatus(s.url, template, ['success', 'failure']);

    // The user pays the address the quoted 10 USDC: an arrival, filled as a request of its own.
    await payUsdc(1, at, 10_000_000n);
    const child = await until(
      () => s.node.ledger.db.prepare('SELECT id FROM requests WHERE parent_id = ?').get(template) as { id: Hex } | undefined,
      'the arrival',
      60_000,
    );
    await waitForStatus(s.url, child.id, ['success']);
    // The hold's deadline passes: the template has no deposit to settle it.
    s.node.solver!.expireHolds(Date.now() + 10 ** 9);

    const childFill = BigInt(s.node.ledger.payouts.get(`fill:${child.id}`)!.amount);
    const received = (await usdcOf(B, account(2).address)) - recipientBefore;
    // Paid once for one deposit, and nothing taken from the app's balance.
    expect(received).toBe(childFill);
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    expect(ff.status).toBe(400);
    expect(ff.body.errorCode).toBe('OPEN_DEPOSIT_ADDRESS');
  });

  it("a strict deposit address's overpayment after its fast fill goes back to refundTo: the deposit that settles the fast fill is not kept whole", async () => {
    const wallet = account(4).address;
    const before = s.node.ledger.balances.summary(wallet);
    const q = await depositAddressQuote(s, {}, app.key);
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: id } })).status).toBe(200);
    await waitForStatus(s.url, id, ['success']);

    // The user sends 25 USDC to the address quoted for 10: the sweep's deposit settles the fast fill.
    const refundBefore = await usdcOf(A, account(3).address);
    await payUsdc(1, at, 25_000_000n);
    const d = await until(() => s.node.ledger.deposits.byOrderRef(id).find((x) => x.state === 'handled'), 'the deposit settling the fast fill', 60_000);
    expect(d.amount).toBe('25000000');
    expect(s.node.ledger.balances.get(`hold_release:${id}`)?.detail).toBe(d.id);
    // The 15 USDC beyond the quote go back to refundTo (less the return's gas), as without a fast fill.
    const excess = s.node.ledger.payouts.get(`excess:${id}`);
    expect(excess, 'an excess payout of the 15 USDC overpaid').toBeDefined();
    await until(() => (s.node.ledger.payouts.get(`excess:${id}`)?.state === 'success' ? true : undefined), 'the excess returned');
    const back = (await usdcOf(A, account(3).address)) - refundBefore;
    expect(back).toBe(BigInt(excess!.amount));
    expect(back).toBeGreaterThan(14_000_000n);
    expect(back).toBeLessThanOrEqual(15_000_000n);
    // One fill, the app charged nothing, and the depository owes the solver what the fill was made of.
    expect(s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'fill')).toHaveLength(1);
    expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    const owed = s.node.ledger.withdrawals.owed(A).find((o) => o.id === d.id);
    expect(owed?.owed).toBe(25_000_000n - BigInt(excess!.amount));
  });
});

describe('a fast fill that fails on chain', () => {
  it("the gas its transactions burned is the app's, as a deposit's refund bears it: the solver paid a batch for two fast fills and was charged nothing", async () => {
    // The stablecoin contract has no receive function: a fill paying it native currency is skipped by a batch (which
    // lands, on the solver's gas), then refused alone. A fast fill's failure released its hold whole: a key could have
    // the solver burn a batch's gas as often as it quoted, at no cost.
    const wallet = account(4).address;
    const before = s.node.ledger.balances.summary(wallet);
    const ids: Hex[] = [];
    const release = holdSubmitter(s, B);
    try {
      for (let i = 0; i < 2; i++) {
        const q = await api(s.url, '/quote/v2', {
          apiKey: app.key,
          body: {
            user: account(1).address,
            recipient: usdc(B),
            originChainId: A,
            destinationChainId: B,
            originCurrency: zeroAddress,
            destinationCurrency: zeroAddress,
            amount: '10000000000000000',
            tradeType: 'EXACT_INPUT',
          },
        });
        expect(q.status).toBe(200);
        const requestId = q.body.steps[0].requestId as Hex;
        expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } })).status).toBe(200);
        ids.push(requestId);
      }
    } finally {
      release();
    }
    for (const id of ids) expect(await waitForStatus(s.url, id, ['failure', 'success'], 60_000)).toMatchObject({ status: 'failure' });
    // What the solver's transactions for them cost (their shares of the batch).
    const burned = await until(() => {
      const txs = ids.flatMap((id) => s.node.ledger.payouts.txsOf(`fill:${id}`));
      if (!txs.length || txs.some((t) => t.fee === null)) return undefined;
      return txs.reduce((sum, t) => sum + BigInt(t.fee!) / BigInt(s.node.ledger.payouts.rowsOfTx(t.hash).length), 0n);
    }, "the fees of the fast fills' transactions");
    expect(burned).toBeGreaterThan(0n);
    await until(() => (s.node.ledger.balances.summary(wallet).held === before.held ? true : undefined), 'the holds released');
    // The app is charged what its fast fills burned, at ETH's price: a loss to it, not to the solver.
    const charged = before.balance - s.node.ledger.balances.summary(wallet).balance;
    const eth = s.node.registry.native(B);
    const worth = (burned * BigInt(Math.round(Number(eth.usdPrice) * 1e6))) / 10n ** 18n;
    expect(charged, `the app was charged ${charged} micro-USD for ${burned} wei the solver burned`).toBeGreaterThanOrEqual((worth * 9n) / 10n);
    expect(charged).toBeGreaterThan(0n);
  });
});

describe('fast fills of quotes with destination calls', () => {
  it('a fast fill of a quote with destination calls runs the calls: it paid their value to the recipient instead', async () => {
    const nft = s.devnet.chains.find((c) => c.id === B)!.contracts.testNft;
    const user = account(3).address;
    const nfts = () => s.publicClient(B).readContract({ address: nft, abi: TestNftAbi, functionName: 'balanceOf', args: [user] });
    const before = await nfts();
    const q = await api(s.url, '/quote', {
      apiKey: app.key,
      body: {
        user,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: parseEther('0.01').toString(),
        tradeType: 'EXACT_OUTPUT',
        txs: [{ to: nft, value: parseEther('0.01').toString(), data: encodeFunctionData({ abi: TestNftAbi, functionName: 'mint', args: [user] }) }],
      },
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } })).status).toBe(200);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect(JSON.parse(s.node.ledger.payouts.get(`fill:${requestId}`)!.calls ?? '[]')).toHaveLength(1);
    expect(await nfts()).toBe(before + 1n);
  });
});
