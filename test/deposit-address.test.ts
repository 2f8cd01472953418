// Strict deposit addresses on the devnet: a per-order CREATE2 address paid by a plain transfer,
// swept into the depository by the solver, then filled or refunded like any deposit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, parseEther, zeroAddress, type Address, type Hex } from 'viem';
import { AcceptOnceAbi, AcceptOnceBytecode } from '../contracts-abi/index.ts';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { depositAddressOf } from '../src/chains/evm/depositAddress.ts';
import { rpc } from '../src/devnet/rawTransactions.ts';
import { daysLater } from './helpers/daysLater.ts';
import { api, payAddress, holdSubmitter, MovablePrices, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

let s: Stack;
let key: string;
const prices = new MovablePrices();
const A = 8453;
const B = 10;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;

beforeAll(async () => {
  s = await startStack({
    prices,
    // Behind a proxy on loopback, each X-Forwarded-For is a client (the reindex test below is three).
    config: { api: { trustProxy: ['127.0.0.1/32', '::1'] }, depositAddresses: { reindexPerClientPerMinute: 3, reindexPerMinute: 12 } },
  });
  key = s.node.ledger.apiKeys.create('t').key;
});
afterAll(async () => {
  await s?.stop();
});

function quote(extra: Record<string, unknown>) {
  return api(s.url, '/quote/v2', {
    body: {
      user: account(1).address,
      recipient: account(2).address,
      refundTo: account(3).address,
      originChainId: A,
      destinationChainId: B,
      tradeType: 'EXACT_INPUT',
      useDepositAddress: true,
      ...extra,
    },
  });
}

const pay = (from: number, to: Address, currency: Address, amount: bigint) => payAddress(s, from, A, to, currency, amount);

// The node reads chain A at the head it knows: once its indexer is past `block`, that block's state is what it reads.
async function nodePast(block: bigint): Promise<void> {
  const indexed = () =>
    (s.node.ledger.db.prepare(`SELECT block_number FROM cursors WHERE chain_id = ? AND source = 'depository'`).get(A) as { block_number: number }).block_number;
  await until(() => (indexed() >= Number(block) ? true : undefined), `the node past block ${block}`);
}

const balance = (chainId: number, who: Address, currency: Address = zeroAddress) =>
  currency === zeroAddress
    ? s.publicClient(chainId).getBalance({ address: who })
    : s.publicClient(chainId).readContract({ address: currency, abi: erc20Abi, functionName: 'balanceOf', args: [who] });

describe('strict deposit addresses', () => {
  it('pays out exactly the quote when exactly the quote arrives by plain transfer', async () => {
    const q = await quote({ originCurrency: usdc(A), destinationCurrency: usdc(B), amount: '10000000' });
    expect(q.status).toBe(200);
    const step = q.body.steps.at(-1);
    const id = step.requestId as Hex;
    const at = step.depositAddress as Address;
    // The address is the factory's CREATE2 clone for (refundTo, order id), before anything is deployed.
    expect(at).toBe(depositAddressOf(chain(A).contracts.depositAddressFactory, account(3).address, id));
    expect(await s.publicClient(A).getCode({ address: at })).toBeUndefined();
    expect(step.items[0].data).toMatchObject({ to: usdc(A), value: '0', chainId: A });
    const before = await balance(B, account(2).address, usdc(B));
    await pay(1, at, usdc(A), 10_000_000n);
    await waitForStatus(s.url, id, ['success']);
    expect(await balance(B, account(2).address, usdc(B))).toBe(before + BigInt(q.body.details.currencyOut.amount));
    expect(await balance(A, at, usdc(A))).toBe(0n);
    const rec = (await api(s.url, `/requests/v3?id=${id}`, { apiKey: key })).body.requests[0];
    expect(rec.depositAddress).toMatchObject({ address: at, type: 'strict' });
    expect(rec.features).toContain('deposit_address');
    expect(rec.refundTo).toBe(account(3).address);
    expect(rec.data.inTxs[0].data.amount).toBe('10000000');
  });

  it('judges a payment by when the watcher saw it at the address, not by when the sweep landed: paid in time, it is filled', async () => {
    // The sweep's deposit event is read once the sweep lands, which any delay (a held queue, a paused chain, a slow
    // watcher pass) can push past the quote's expiry: an address paid in time came back as ORDER_EXPIRED.
    const q = await quote({ originCurrency: usdc(A), destinationCurrency: usdc(B), amount: '10000000' });
    const id = q.body.steps.at(-1).requestId as Hex;
    const release = holdSubmitter(s, A);
    await pay(1, q.body.steps.at(-1).depositAddress as Address, usdc(A), 10_000_000n);
    const sweep = await until(() => s.node.ledger.payouts.forRequest(id).find((p) => p.kind === 'sweep'), 'the sweep queued');
    // The quote expires while the sweep waits.
    const expiresAt = sweep.decided_at + 1;
    s.node.ledger.db.prepare('UPDATE requests SET expires_at = ? WHERE id = ?').run(expiresAt, id);
    await until(() => (Date.now() > expiresAt + 50 ? true : undefined), 'the quote expired');
    release();
    expect(await waitForStatus(s.url, id, ['success', 'failure', 'refund'])).toMatchObject({ status: 'success' });
  });

  it("sweeps a quoted amount however small next to the sweep's gas: the quote charged the sweep, and what it priced never stays at the address", async () => {
    // Below sweepMinCostMultiple times the sweep's gas an arrival is dust and waits, but the quote only asked its
    // output to cover the fees (one sweep among them): an amount in between was quoted, paid exactly, and never swept.
    const sweep = await s.node.chains.costs(A)!.sweepCost!();
    const amount = sweep * 2n + parseEther('0.0003');
    const q = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: amount.toString() });
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    await pay(1, q.body.steps.at(-1).depositAddress as Address, zeroAddress, amount);
    expect(await waitForStatus(s.url, id, ['success', 'failure', 'refund'])).toMatchObject({ status: 'success' });
  });

  it('refunds an underpayment to refundTo (DEPOSITED_AMOUNT_TOO_LOW_TO_FILL)', async () => {
    const q = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString() });
    const id = q.body.steps.at(-1).requestId as Hex;
    const before = await balance(A, account(3).address);
    await pay(1, q.body.steps.at(-1).depositAddress, zeroAddress, parseEther('0.008'));
    const done = await waitForStatus(s.url, id, ['refund', 'success']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL' });
    const back = (await balance(A, account(3).address)) - before;
    expect(back).toBeGreaterThan(parseEther('0.007'));
    expect(back).toBeLessThan(parseEther('0.008'));
  });

  it("the sweep's gas is the user's: the fill's price covers it, and so does an underpayment's refund", async () => {
    // The solver deploys and sweeps each deposit address (about 200,000 gas): priced nowhere, every deposit-address order
    // anyone made cost the solver that much, filled or refunded.
    const spent = (requestId: Hex, kind: string) =>
      s.node.ledger.payouts
        .forRequest(requestId)
        .filter((p) => p.kind === kind)
        .flatMap((p) => s.node.ledger.payouts.txsOf(p.id))
        .reduce((t, x) => t + BigInt(x.fee ?? 0), 0n);
    const q = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString() });
    const id = q.body.steps.at(-1).requestId as Hex;
    await pay(1, q.body.steps.at(-1).depositAddress, zeroAddress, parseEther('0.01'));
    await waitForStatus(s.url, id, ['success']);
    const out = BigInt(s.node.ledger.payouts.get(`fill:${id}`)!.amount);
    // ETH on both chains at one price: what the solver kept of the deposit pays the gas it spent, the sweep's included.
    expect(spent(id, 'sweep')).toBeGreaterThan(0n);
    expect(parseEther('0.01') - out).toBeGreaterThanOrEqual(spent(id, 'sweep') + spent(id, 'fill'));

    const under = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString() });
    const uid = under.body.steps.at(-1).requestId as Hex;
    await pay(1, under.body.steps.at(-1).depositAddress, zeroAddress, parseEther('0.008'));
    expect((await waitForStatus(s.url, uid, ['refund', 'success'])).status).toBe('refund');
    const back = BigInt(s.node.ledger.payouts.get(`refund:${uid}`)!.amount);
    expect(back + spent(uid, 'sweep') + spent(uid, 'refund')).toBeLessThanOrEqual(parseEther('0.008'));
  });

  it('fills the quoted amount of an overpayment and returns the excess', async () => {
    const q = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString() });
    const id = q.body.steps.at(-1).requestId as Hex;
    const refundBefore = await balance(A, account(3).address);
    const recipientBefore = await balance(B, account(2).address);
    await pay(1, q.body.steps.at(-1).depositAddress, zeroAddress, parseEther('0.013'));
    await waitForStatus(s.url, id, ['success']);
    expect((await balance(B, account(2).address)) - recipientBefore).toBe(BigInt(q.body.details.currencyOut.amount));
    await until(() => (s.node.ledger.payouts.get(`excess:${id}`)?.state === 'success' ? true : undefined), 'the excess returned');
    const back = (await balance(A, account(3).address)) - refundBefore;
    // The excess, less the gas of returning it (its priced gas at the chain's fee, which varies from run to run:
    // a bound of 0.0028 failed at 2.24 gwei).
    expect(back).toBe(BigInt(s.node.ledger.payouts.get(`excess:${id}`)!.amount));
    expect(back).toBeGreaterThan(parseEther('0.0025'));
    expect(back).toBeLessThan(parseEther('0.003'));
    expect((await waitForStatus(s.url, id, ['success'])).status).toBe('success');
  });

  it('earns app fees on the quoted amount an overpayment filled, not on the excess that went back', async () => {
    // Fees on the whole deposit let a quote's app fee recipient take a share of money returned to the
    // payer: 10,000x the quote sent to the address paid the recipient on all of it.
    const feeTo = privateKeyToAccount(generatePrivateKey()).address;
    const q = await quote({
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: parseEther('0.01').toString(),
      appFees: [{ recipient: feeTo, fee: '5000' }],
    });
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    await pay(1, q.body.steps.at(-1).depositAddress, zeroAddress, parseEther('0.03'));
    await waitForStatus(s.url, id, ['success']);
    const accrued = await until(() => {
      const entries = s.node.ledger.appFees.accruedFor(id);
      return entries.length ? entries : undefined;
    }, 'the app fee accrued');
    // Half of the quoted 0.01, at most (the service fee comes first): never a share of the 0.02 returned.
    expect(accrued.map((e) => e.recipient)).toEqual([feeTo]);
    expect(BigInt(accrued[0]!.amount)).toBeLessThanOrEqual(parseEther('0.005'));
    expect(BigInt(accrued[0]!.amount)).toBeGreaterThan(parseEther('0.004'));
  });

  it('returns an overpayment once when its fill fails: the refund is the quoted amount, the excess went back on its own', async () => {
    // The recipient is a token contract, which refuses ether: the fill reverts and the deposit is refunded.
    const q = await quote({
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      recipient: usdc(B),
      amount: parseEther('0.01').toString(),
    });
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const refundBefore = await balance(A, account(3).address);
    await pay(1, q.body.steps.at(-1).depositAddress, zeroAddress, parseEther('0.013'));
    const settled = (kind: string) => {
      const p = s.node.ledger.payouts.get(`${kind}:${id}`);
      return p && (p.state === 'success' || p.state === 'failed') ? p : undefined;
    };
    const [refund, excess] = [await until(() => settled('refund'), 'the refund settled'), await until(() => settled('excess'), 'the excess settled')];
    expect([refund.state, excess.state]).toEqual(['success', 'success']);
    expect(await waitForStatus(s.url, id, ['refund'])).toMatchObject({ status: 'refund', failReason: 'EXECUTION_REVERTED' });
    // Together they return the deposit less the gas of the two transfers, never more than came in.
    expect(BigInt(refund.amount) + BigInt(excess.amount)).toBeLessThan(parseEther('0.013'));
    expect(BigInt(refund.amount)).toBeLessThan(parseEther('0.01'));
    // Less the gas of the sweep, the failed fill and the two transfers (about 0.0008 ETH at this devnet's fees).
    const back = (await balance(A, account(3).address)) - refundBefore;
    expect(back).toBeGreaterThan(parseEther('0.012'));
    expect(back).toBeLessThan(parseEther('0.013'));
  });

  // 0.013 ETH at the address of a 0.01 ETH order whose fill fails (the recipient, a token contract, refuses ether)
  // and whose refund refundTo refuses after taking the excess (the first ether it is sent): left for an operator.
  async function refundRefused(): Promise<{ id: Hex; refundTo: Address }> {
    const deployer = s.wallet(0, A);
    const deployed = await deployer.deployContract({ account: deployer.account!, chain: deployer.chain, abi: AcceptOnceAbi, bytecode: AcceptOnceBytecode });
    const refundTo = (await s.publicClient(A).waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const q = await quote({
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      recipient: usdc(B),
      refundTo,
      amount: parseEther('0.01').toString(),
    });
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    await pay(1, q.body.steps.at(-1).depositAddress, zeroAddress, parseEther('0.013'));
    // A sweep, a failed fill, an excess and a refused refund, one after the other: on a loaded machine more than 30 s.
    await until(() => (s.node.ledger.payouts.get(`excess:${id}`)?.state === 'success' ? true : undefined), 'the excess returned', 90_000);
    await until(() => (s.node.ledger.payouts.get(`refund:${id}`)?.state === 'failed' ? true : undefined), "the fill's refund refused", 90_000);
    return { id, refundTo };
  }

  const later = <T>(days: number, fn: () => Promise<T>) => daysLater(chain(A).rpcUrl, days, fn);
  const refundByHand = (id: Hex) => s.node.solver!.manualRefund(id, { actor: 'test', reason: 'refundTo refused the refund' });

  it("an operator's manual refund after the excess went back returns the quoted part only", async () => {
    const { id } = await refundRefused();
    expect(await waitForStatus(s.url, id, ['failure'])).toMatchObject({ failReason: 'EXECUTION_REVERTED', refundFailReason: 'MANUAL_REFUND_REQUIRED' });

    // While the failed refund's signed call can still be executed, a refund by hand could pay twice.
    await expect(refundByHand(id)).rejects.toMatchObject({ status: 409, message: expect.stringMatching(/can still be executed until/) });
    const manual = await later(8, () => refundByHand(id));
    // The quoted 0.01 less the gas of the refund and of the sweep: with the excess already back, never the whole 0.013.
    expect(BigInt(manual.amount)).toBeLessThan(parseEther('0.01'));
    expect(BigInt(manual.amount)).toBeGreaterThan(parseEther('0.009'));
    const returned = [`excess:${id}`, manual.payoutId].map((p) => BigInt(s.node.ledger.payouts.get(p)!.amount));
    expect(returned[0]! + returned[1]!).toBeLessThan(parseEther('0.013'));
  }, 240_000);

  it("an operator's manual refund never pays out a deposit a reorg took back", async () => {
    // The refund would come out of money the depository never got: the manual refund took the request's first
    // deposit whatever its state.
    const { id } = await refundRefused();
    // The deposit's block is then replaced (its write-off aside: only its state matters here).
    s.node.ledger.db.prepare(`UPDATE deposits SET state = 'reorged' WHERE request_id = ?`).run(id);
    await expect(later(8, () => refundByHand(id))).rejects.toMatchObject({ status: 409, message: expect.stringMatching(/no deposit to refund/) });
    expect(s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'refund' && p.state !== 'failed')).toEqual([]);
  }, 240_000);

  it("a failed refund's signed call someone executed later is never paid again by hand", async () => {
    // The failed refund's signed call (public: the input of its reverted transaction) stays valid for 7 days: once its
    // recipient accepts, anyone may submit it. A refund by hand is a new request, so it paid the deposit a second time.
    const { id, refundTo } = await refundRefused();
    const [reverted] = s.node.ledger.payouts.txsOf(`refund:${id}`);
    expect(reverted?.state).toBe('reverted');
    const call = (await s.publicClient(A).getTransaction({ hash: reverted!.hash as Hex })).input;
    await rpc(chain(A).rpcUrl, 'anvil_setCode', [refundTo, '0x']);
    const w = s.wallet(4, A);
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: chain(A).contracts.depository, data: call });
    const executed = await s.publicClient(A).waitForTransactionReceipt({ hash });
    expect(executed.status).toBe('success');
    await nodePast(executed.blockNumber);
    await expect(later(8, () => refundByHand(id))).rejects.toMatchObject({ status: 409, message: expect.stringMatching(/was executed on chain/) });
    expect(s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'refund' && p.state !== 'failed')).toEqual([]);
  }, 240_000);

  it('refunds another currency than the quoted one with DEPOSIT_ADDRESS_MISMATCH', async () => {
    const q = await quote({ originCurrency: usdc(A), destinationCurrency: usdc(B), amount: '5000000' });
    const id = q.body.steps.at(-1).requestId as Hex;
    await pay(1, q.body.steps.at(-1).depositAddress, zeroAddress, parseEther('0.01'));
    const done = await waitForStatus(s.url, id, ['refund', 'success']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'DEPOSIT_ADDRESS_MISMATCH' });
  });

  it('needs refundTo, refuses sponsoredFeeComponents, and reindexes on request', async () => {
    const noRefund = await api(s.url, '/quote/v2', {
      body: {
        user: account(1).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '1000000000000000',
        tradeType: 'EXACT_INPUT',
        useDepositAddress: true,
      },
    });
    expect(noRefund.status).toBe(400);
    expect(noRefund.body.message).toMatch(/refundTo: is required/);
    const components = await quote({
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: '1000000000000000',
      subsidizeFees: true,
      sponsoredFeeComponents: ['execution'],
    });
    expect(components.status).toBe(400);
    expect(components.body.message).toMatch(/sponsoredFeeComponents/);
    expect((await api(s.url, '/deposit-address/reindex', { body: {} })).status).toBe(400);
    expect((await api(s.url, '/deposit-address/reindex', { body: { depositAddress: account(4).address } })).status).toBe(404);
    const q = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString() });
    const r = await api(s.url, '/deposit-address/reindex', { body: { depositAddress: q.body.steps.at(-1).depositAddress } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ requestId: q.body.steps.at(-1).requestId, sweeps: 0 });
  });
});

describe('the deposit-address reindex', () => {
  it("one client cannot use up the node's reindex budget: past its own share it is refused, and another client's reindex goes on", async () => {
    // Anyone may ask (no key), and the node-wide budget bounds the chain reads; one client taking all of it, an address
    // or two at a time, kept every other user from recovering a deposit the watcher missed.
    const addresses = await Promise.all(
      [0, 1, 2, 3, 4].map(
        async () =>
          (await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString() })).body.steps.at(-1)
            .depositAddress as Address,
      ),
    );
    const reindex = (depositAddress: Address, client: string) =>
      api(s.url, '/deposit-address/reindex', { body: { depositAddress }, headers: { 'x-forwarded-for': client } });
    const greedy = [];
    for (const a of addresses.slice(0, 4)) greedy.push(await reindex(a, '203.0.113.1'));
    expect(greedy.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(greedy[3]!.body.message).toMatch(/from this client/);
    expect((await reindex(addresses[4]!, '203.0.113.2')).status).toBe(200);
  });

  it('recovers a configured token sent to an address quoted for another currency: swept and refunded to refundTo', async () => {
    // The watcher reads an address's quoted currency and the native one on every block; a user who sent another of
    // the chain's tokens (USDC to an ETH address) had no way to get it back: it stayed at the address for good.
    const q = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString() });
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const before = await balance(A, account(3).address, usdc(A));
    const paid = await pay(1, at, usdc(A), 20_000_000n);
    await nodePast((await s.publicClient(A).getTransactionReceipt({ hash: paid })).blockNumber);
    const r = await api(s.url, '/deposit-address/reindex', { body: { depositAddress: at }, headers: { 'x-forwarded-for': '203.0.113.3' } });
    expect(r.status).toBe(200);
    expect(await waitForStatus(s.url, id, ['refund', 'success'])).toMatchObject({ status: 'refund', failReason: 'DEPOSIT_ADDRESS_MISMATCH' });
    expect(await balance(A, at, usdc(A))).toBe(0n);
    await until(async () => ((await balance(A, account(3).address, usdc(A))) > before ? true : undefined), 'the USDC back at refundTo');
  });
});

describe('open deposit addresses', () => {
  it('take any number of arrivals, each a request of its own at the amount that arrived', async () => {
    const q = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString(), depositAddressType: 'open' });
    expect(q.status).toBe(200);
    const template = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const children = () =>
      s.node.ledger.db.prepare('SELECT id, status, amount_in FROM requests WHERE parent_id = ? ORDER BY created_at').all(template) as {
        id: Hex;
        status: string;
        amount_in: string;
      }[];
    const recipientBefore = await balance(B, account(2).address);

    await pay(1, at, zeroAddress, parseEther('0.005'));
    const [first] = await until(() => (children()[0] ? children() : undefined), 'the first arrival');
    await waitForStatus(s.url, first!.id, ['success']);
    await pay(1, at, zeroAddress, parseEther('0.02'));
    await until(() => (children().length === 2 ? true : undefined), 'the second arrival');
    const second = children()[1]!;
    await waitForStatus(s.url, second.id, ['success']);

    expect(children().map((c) => c.amount_in)).toEqual([parseEther('0.005').toString(), parseEther('0.02').toString()]);
    const paid = s.node.ledger.payouts
      .forRequest(first!.id)
      .concat(s.node.ledger.payouts.forRequest(second.id))
      .filter((p) => p.kind === 'fill');
    expect(paid).toHaveLength(2);
    expect((await balance(B, account(2).address)) - recipientBefore).toBe(paid.reduce((t, p) => t + BigInt(p.amount), 0n));
    // Each was priced at its own amount: the larger arrival pays out about four times the smaller.
    const [a, b] = paid.map((p) => BigInt(p.amount));
    expect(b! > a! * 3n && b! < a! * 5n).toBe(true);
    expect(s.node.ledger.requests.get(template)!.status).toBe('waiting');
    const rec = (await api(s.url, `/requests/v3?id=${second.id}&includeChildRequests=true`, { apiKey: key })).body.requests[0];
    expect(rec.depositAddress).toMatchObject({ address: at, type: 'open' });
  });

  it("a reindex naming an arrival sweeps the address for its template: never an empty sweep under the arrival's id", async () => {
    // An arrival copies its template's address, but a sweep is made for (refundTo, request id): under the arrival's id it
    // would deploy and sweep another, empty address, on the solver's gas, as often as anyone asked.
    const q = await quote({ originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: parseEther('0.01').toString(), depositAddressType: 'open' });
    const template = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const arrivals = () => s.node.ledger.db.prepare('SELECT id FROM requests WHERE parent_id = ? ORDER BY created_at').all(template) as { id: Hex }[];
    await pay(1, at, zeroAddress, parseEther('0.005'));
    const [first] = await until(() => (arrivals()[0] ? arrivals() : undefined), 'the first arrival');
    await waitForStatus(s.url, first!.id, ['success']);
    // The template is past the watcher's window (24 hours), not the reindex's (30 days): what reaches the address now stays there.
    s.node.ledger.db.prepare('UPDATE requests SET created_at = ? WHERE id = ?').run(Date.now() - 2 * 86_400_000, template);
    const parked = await s.publicClient(A).getTransactionReceipt({ hash: await pay(1, at, zeroAddress, parseEther('0.02')) });
    await nodePast(parked.blockNumber);
    const r = await api(s.url, '/deposit-address/reindex', { body: { requestId: first!.id } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ requestId: template, depositAddress: at, sweeps: 1 });
    const second = await until(() => arrivals()[1], 'the second arrival, swept for the template');
    await waitForStatus(s.url, second.id, ['success']);
    expect(await balance(A, at)).toBe(0n);
    expect(s.node.ledger.payouts.forRequest(first!.id).filter((p) => p.kind === 'sweep')).toEqual([]);
    // Found by its address, the template answers too (not one of its arrivals).
    expect(s.node.ledger.requests.byDepositAddress(at)!.id).toBe(template);
  });

  it("an arrival pays its gas top-up at today's price: a quote kept until the native currency rose gives no more than came in", async () => {
    // Each arrival is priced by its template, which has no expiry: at the template's price, the top-up (native currency
    // bought at the quote's rate) was an option anyone could exercise after the native currency rose, arrival after arrival.
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const q = await quote({
      recipient,
      originCurrency: usdc(A),
      destinationCurrency: usdc(B),
      amount: '60000000',
      depositAddressType: 'open',
      topupGas: true,
      topupGasAmount: '50000000',
    });
    expect(q.status).toBe(200);
    const template = q.body.steps.at(-1).requestId as Hex;
    const topUp = BigInt(JSON.parse(s.node.ledger.requests.get(template)!.pricing!).topUpNative);
    try {
      prices.set('ETH', '6000');
      s.node.solver!.invalidate();
      await pay(1, q.body.steps.at(-1).depositAddress, usdc(A), 150_000_000n);
      const arrival = await until(
        () => (s.node.ledger.db.prepare('SELECT id FROM requests WHERE parent_id = ?').get(template) as { id: Hex } | undefined)?.id,
        'the arrival',
      );
      await waitForStatus(s.url, arrival, ['success']);
      const out = BigInt(s.node.ledger.payouts.get(`fill:${arrival}`)!.amount);
      expect(await balance(B, recipient)).toBe(topUp);
      // What it paid, valued today (USDC at 1, ETH at 6000, in USDC units), is no more than the 150 USDC that came in.
      expect(out + (topUp * 6000n) / 10n ** 12n).toBeLessThanOrEqual(150_000_000n);
    } finally {
      prices.overrides.delete('ETH');
      s.node.solver!.invalidate();
    }
  });

  it("an arrival pays its gas at today's price: what the solver keeps of it covers its sweep and its fill", async () => {
    // The template's gas fee was fixed at its quote, and a template has no expiry: after the native currency (or the
    // gas price) rose, each arrival's sweep and fill cost the solver more than it was charged, arrival after arrival.
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const q = await quote({ recipient, originCurrency: usdc(A), destinationCurrency: usdc(B), amount: '60000000', depositAddressType: 'open' });
    expect(q.status).toBe(200);
    const template = q.body.steps.at(-1).requestId as Hex;
    try {
      prices.set('ETH', '60000');
      s.node.solver!.invalidate();
      await pay(1, q.body.steps.at(-1).depositAddress, usdc(A), 100_000_000n);
      const arrival = await until(
        () => (s.node.ledger.db.prepare('SELECT id FROM requests WHERE parent_id = ?').get(template) as { id: Hex } | undefined)?.id,
        'the arrival',
      );
      await waitForStatus(s.url, arrival, ['success']);
      const out = BigInt(s.node.ledger.payouts.get(`fill:${arrival}`)!.amount);
      const fee = (payoutId: string) => s.node.ledger.payouts.txsOf(payoutId).reduce((t, x) => t + BigInt(x.fee ?? 0), 0n);
      const sweep = s.node.ledger.payouts.forRequest(template).find((p) => p.kind === 'sweep')!;
      const gasWei = fee(`fill:${arrival}`) + fee(sweep.id);
      expect(gasWei).toBeGreaterThan(0n);
      // The gas both transactions burned, valued today (ETH at 60,000, in USDC units), within what the solver kept.
      expect((gasWei * 60_000n) / 10n ** 12n).toBeLessThanOrEqual(100_000_000n - out);
    } finally {
      prices.overrides.delete('ETH');
      s.node.solver!.invalidate();
    }
  });

  it('needs useDepositAddress', async () => {
    const r = await api(s.url, '/quote/v2', {
      body: {
        user: account(1).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '1000000000000000',
        tradeType: 'EXACT_INPUT',
        depositAddressType: 'open',
      },
    });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/depositAddressType: needs useDepositAddress/);
  });
});
