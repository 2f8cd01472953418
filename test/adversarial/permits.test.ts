// Attacks on POST /permits (and /execute, which shares it): a permit the quote never priced, and
// currencies that have no permit at all.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, parseAbi, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { PERMIT_TYPES } from '../../src/chains/evm/adapter.ts';
import { api, holdSubmitter, permitQuote, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { linkWallet } from '../helpers/link.ts';

let s: Stack;
const A = 8453;
const B = 10;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const weth = (id: number) => chain(id).contracts.wrappedNative;
const account = (i: number) => s.devnet.accounts[i]!;
const noncesAbi = parseAbi(['function nonces(address) view returns (uint256)']);
const depositNativeAbi = parseAbi(['function depositNative(address depositor, bytes32 id) payable']);

beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  await s?.stop();
});

const quote = (from: number, extra: Record<string, unknown>) =>
  api(s.url, '/quote/v2', {
    body: { user: account(from).address, originChainId: A, destinationChainId: B, amount: '7000000', tradeType: 'EXACT_INPUT', ...extra },
  });

// A usePermit quote of 7 USDC from `user` (any address) on A to USDC on B.
const permitQuoteFor = (user: Address, extra: Record<string, unknown> = {}, apiKey?: string) => permitQuote(s, user, extra, apiKey);

// The signature a quote's permit step asks for, by `from` (an account index, or a key of its own).
const signStep = (from: number | PrivateKeyAccount, step: any): Promise<Hex> =>
  (typeof from === 'number' ? privateKeyToAccount(account(from).privateKey) : from).signTypedData({
    ...step.items[0].data.sign,
    message: step.items[0].data.sign.value,
  });

// A permit the user really signed, for exactly the request's owner, token, depository and amount.
async function validPermit(from: number | PrivateKeyAccount, token: Address, value: string) {
  const owner = typeof from === 'number' ? privateKeyToAccount(account(from).privateKey) : from;
  const nonce = await s.publicClient(A).readContract({ address: token, abi: noncesAbi, functionName: 'nonces', args: [owner.address] });
  const deadline = BigInt(Math.floor(Date.now() / 1000) + 600);
  const message = { owner: owner.address, spender: chain(A).contracts.depository, value: BigInt(value), nonce, deadline };
  const signature = await owner.signTypedData({
    domain: { name: 'Test USD Coin', version: '1', chainId: A, verifyingContract: token },
    types: { Permit: PERMIT_TYPES },
    primaryType: 'Permit',
    message,
  });
  return {
    body: { kind: 'eip2612', chainId: A, token, owner: owner.address, spender: message.spender, value, nonce: nonce.toString(), deadline: deadline.toString() },
    signature,
  };
}

describe('POST /permits', () => {
  it('refuses a valid permit for a request quoted without usePermit: the quote never priced the gas the node would pay', async () => {
    const q = await quote(2, { originCurrency: usdc(A), destinationCurrency: usdc(B) });
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const { body, signature } = await validPermit(2, usdc(A), q.body.details.currencyIn.amount);
    const r = await api(s.url, `/permits?signature=${signature}`, { body: { ...body, requestId: id } });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/usePermit/);
    expect(s.node.ledger.payouts.get(`deposit:${id}`)).toBeUndefined();
    expect(s.node.ledger.requests.get(id)!.status).toBe('waiting');
  });

  it('answers 400, not 500, for a currency without a permit (native, WETH), before any RPC call', async () => {
    const adapter = s.node.adapters.get(A) as unknown as { client: { readContract: (...a: unknown[]) => unknown } };
    const read = adapter.client.readContract;
    let reads = 0;
    adapter.client.readContract = (...a: unknown[]) => {
      reads++;
      return read.apply(adapter.client, a);
    };
    try {
      for (const [currency, amount] of [
        [zeroAddress, '1000000000000000'],
        [weth(A), '1000000000000000'],
      ] as const) {
        const q = await quote(3, { originCurrency: currency, destinationCurrency: currency === zeroAddress ? zeroAddress : weth(B), amount });
        expect(q.status).toBe(200);
        const id = q.body.steps.at(-1).requestId as Hex;
        const body = {
          kind: 'eip2612',
          requestId: id,
          chainId: A,
          token: currency,
          owner: account(3).address,
          spender: chain(A).contracts.depository,
          value: q.body.details.currencyIn.amount,
          nonce: '0',
          deadline: String(Math.floor(Date.now() / 1000) + 600),
        };
        reads = 0;
        const r = await api(s.url, `/permits?signature=0x${'11'.repeat(65)}`, { body });
        expect(r.status).toBe(400);
        expect(reads).toBe(0);
        expect(s.node.ledger.requests.get(id)!.status).toBe('waiting');
      }
    } finally {
      adapter.client.readContract = read;
    }
  });

  it('refuses a permit from a wallet that lacks the amount (GASLESS_PERMIT_BALANCE_TOO_LOW), before recording a deposit the node would pay gas for', async () => {
    const broke = privateKeyToAccount(generatePrivateKey());
    const q = await permitQuoteFor(broke.address);
    expect(q.status).toBe(200);
    const step = q.body.steps[0];
    const signature = await signStep(broke, step);
    const r = await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body });
    expect(r.status).toBe(400);
    expect(r.body.errorCode).toBe('GASLESS_PERMIT_BALANCE_TOO_LOW');
    expect(s.node.ledger.payouts.get(`deposit:${step.requestId}`)).toBeUndefined();
    expect(s.node.ledger.requests.get(step.requestId)!.status).toBe('waiting');
  });

  it('POST /execute refuses a gasless deposit the sponsor can no longer pay for, before the node pays its gas', async () => {
    const k = s.node.ledger.apiKeys.create('gasless app');
    const sponsor = privateKeyToAccount(generatePrivateKey());
    expect((await linkWallet(s.url, k.key, sponsor)).status).toBe(200);
    // 0.50 USD of app balance; each quote's sponsorship is capped at 0.30 USD: each quote alone is covered, both are not.
    const w = s.wallet(0, A);
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 500_000n] });
    const fund = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: usdc(A),
      data: `${data}012345abcdef${sponsor.address.slice(2).toLowerCase()}012345abcdef` as Hex,
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: fund });
    await until(() => (s.node.ledger.balances.summary(sponsor.address).balance === 500_000n ? true : undefined), 'the app balance credit');
    // Two users: each permit has its own token nonce.
    const gasless = (user: number) => permitQuoteFor(account(user).address, { subsidizeFees: true, maxSubsidizationAmount: '300000' }, k.key);
    const [q1, q2] = [await gasless(1), await gasless(2)];
    expect([q1.status, q2.status]).toEqual([200, 200]);
    const post = async (q: any, user: number) => {
      const step = q.body.steps[0];
      const signature = await signStep(user, step);
      return api(s.url, '/execute', { apiKey: k.key, body: { ...step.items[0].data.post.body, signature } });
    };
    expect((await post(q1, 1)).status).toBe(200);
    await waitForStatus(s.url, q1.body.steps[0].requestId, ['success']);
    expect(s.node.ledger.balances.summary(sponsor.address).balance).toBe(200_000n);
    const r = await post(q2, 2);
    expect(r.status).toBe(400);
    expect(r.body.errorCode).toBe('SPONSOR_BALANCE_TOO_LOW');
    expect(s.node.ledger.payouts.get(`deposit:${q2.body.steps[0].requestId}`)).toBeUndefined();
  });
  it('POST /execute: two gasless posts racing against one sponsor balance: the charge is held at execute, only one passes', async () => {
    const k = s.node.ledger.apiKeys.create('racing gasless app');
    const sponsor = privateKeyToAccount(generatePrivateKey());
    expect((await linkWallet(s.url, k.key, sponsor)).status).toBe(200);
    // 0.50 USD of app balance; each quote's sponsorship is capped at 0.30 USD: one fits, two do not.
    const w = s.wallet(0, A);
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 500_000n] });
    const fund = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: usdc(A),
      data: `${data}012345abcdef${sponsor.address.slice(2).toLowerCase()}012345abcdef` as Hex,
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: fund });
    await until(() => (s.node.ledger.balances.summary(sponsor.address).balance === 500_000n ? true : undefined), 'the app balance credit');
    const gasless = (user: number) =>
      api(s.url, '/quote/v2', {
        apiKey: k.key,
        body: {
          user: account(user).address,
          originChainId: A,
          destinationChainId: B,
          originCurrency: usdc(A),
          destinationCurrency: usdc(B),
          amount: '7000000',
          tradeType: 'EXACT_INPUT',
          usePermit: true,
          subsidizeFees: true,
          maxSubsidizationAmount: '300000',
        },
      });
    const [q1, q2] = [await gasless(3), await gasless(4)];
    expect([q1.status, q2.status]).toEqual([200, 200]);
    const signed = async (q: any, user: number) => {
      const step = q.body.steps[0];
      const signature = await signStep(user, step);
      return { ...step.items[0].data.post.body, signature };
    };
    const [b1, b2] = [await signed(q1, 3), await signed(q2, 4)];
    const ids = [q1.body.steps[0].requestId as Hex, q2.body.steps[0].requestId as Hex];
    // Both posts in flight at once: each passes its checks before the other records its deposit.
    const rs = await Promise.all([api(s.url, '/execute', { apiKey: k.key, body: b1 }), api(s.url, '/execute', { apiKey: k.key, body: b2 })]);
    expect(rs.map((r) => r.status).sort()).toEqual([200, 400]);
    const lost = rs.findIndex((r) => r.status === 400);
    expect(rs[lost]!.body.errorCode).toBe('SPONSOR_BALANCE_TOO_LOW');
    expect(s.node.ledger.payouts.get(`deposit:${ids[lost]}`)).toBeUndefined();
    expect(s.node.ledger.requests.get(ids[lost]!)!.status).toBe('waiting');
    await waitForStatus(s.url, ids[1 - lost]!, ['success']);
    // The hold became the charge: 0.30 USD spent, nothing left held.
    await until(() => (s.node.ledger.balances.summary(sponsor.address).held === 0n ? true : undefined), 'the execute hold settled');
    expect(s.node.ledger.balances.summary(sponsor.address)).toEqual({ balance: 200_000n, held: 0n, available: 200_000n });
  });
  it("POST /execute: a gasless deposit that fails on chain releases the sponsor's hold; nothing is charged", async () => {
    const k = s.node.ledger.apiKeys.create('failing gasless app');
    const sponsor = privateKeyToAccount(generatePrivateKey());
    expect((await linkWallet(s.url, k.key, sponsor)).status).toBe(200);
    const w = s.wallet(0, A);
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 500_000n] });
    const fund = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: usdc(A),
      data: `${data}012345abcdef${sponsor.address.slice(2).toLowerCase()}012345abcdef` as Hex,
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: fund });
    await until(() => (s.node.ledger.balances.summary(sponsor.address).balance === 500_000n ? true : undefined), 'the app balance credit');
    const q = await api(s.url, '/quote/v2', {
      apiKey: k.key,
      body: {
        user: account(2).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '7000000',
        tradeType: 'EXACT_INPUT',
        usePermit: true,
        subsidizeFees: true,
        maxSubsidizationAmount: '300000',
      },
    });
    expect(q.status).toBe(200);
    const step = q.body.steps[0];
    const signature = await signStep(2, step);
    // Chain A's submitter held while the user moves the tokens away: the deposit then reverts.
    const release = holdSubmitter(s, A);
    try {
      expect((await api(s.url, '/execute', { apiKey: k.key, body: { ...step.items[0].data.post.body, signature } })).status).toBe(200);
      const held = s.node.ledger.balances.summary(sponsor.address);
      expect(held.held).toBeGreaterThan(0n);
      expect(held.available).toBe(500_000n - held.held);
      const user = s.wallet(2, A);
      const balance = await s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [account(2).address] });
      const away = await user.writeContract({
        account: user.account!,
        chain: user.chain,
        address: usdc(A),
        abi: erc20Abi,
        functionName: 'transfer',
        args: [account(0).address, balance],
      });
      await s.publicClient(A).waitForTransactionReceipt({ hash: away });
    } finally {
      release();
    }
    await waitForStatus(s.url, step.requestId, ['failure']);
    await until(() => (s.node.ledger.balances.summary(sponsor.address).held === 0n ? true : undefined), 'the execute hold released');
    expect(s.node.ledger.balances.summary(sponsor.address)).toEqual({ balance: 500_000n, held: 0n, available: 500_000n });
  });
});

describe('one permit, one request', () => {
  it('refuses a permit already posted for another request (409): the victim with an allowance is not deposited twice', async () => {
    const victim = 1;
    const attacker = privateKeyToAccount(generatePrivateKey()).address;
    // The victim's allowance covers the amount: the depository deposits through it and skips
    // `permit`, so the permit's nonce stays the token's current one after R1 is deposited.
    const v = s.wallet(victim, A);
    const approve = await v.writeContract({
      account: v.account!,
      chain: v.chain,
      address: usdc(A),
      abi: erc20Abi,
      functionName: 'approve',
      args: [chain(A).contracts.depository, 10n ** 30n],
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: approve });
    const permitQuote = (extra: Record<string, unknown> = {}) =>
      quote(victim, { originCurrency: usdc(A), destinationCurrency: usdc(B), usePermit: true, ...extra });
    const balance = () => s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [account(victim).address] });
    const before = await balance();
    const q1 = await permitQuote();
    expect(q1.status).toBe(200);
    const step = q1.body.steps[0];
    const r1 = step.requestId as Hex;
    const signature = await signStep(victim, step);
    expect((await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body })).status).toBe(200);
    await waitForStatus(s.url, r1, ['success']);
    expect(await balance()).toBe(before - 7_000_000n);
    // The signature is public now and its nonce still current: an attacker quotes the same user,
    // token and amount to its own wallet and posts it, without an API key.
    const q2 = await permitQuote({ recipient: attacker, refundTo: attacker });
    expect(q2.status).toBe(200);
    const r2 = q2.body.steps[0].requestId as Hex;
    expect(r2).not.toBe(r1);
    const r = await api(s.url, `/permits?signature=${signature}`, { body: { ...step.items[0].data.post.body, requestId: r2 } });
    expect(r.status).toBe(409);
    expect(r.body.errorCode).toBe('PERMIT_ALREADY_USED');
    expect(r.body.message).toMatch(/nonce/);
    expect(s.node.ledger.payouts.get(`deposit:${r2}`)).toBeUndefined();
    expect(s.node.ledger.requests.get(r2)!.status).toBe('waiting');
    expect(await balance()).toBe(before - 7_000_000n);
    // The victim's own next permit (same nonce, its quote's later deadline: another message) still works.
    // Deadlines are in seconds: the next quote is taken once a second has passed.
    const deadline = step.items[0].data.sign.value.deadline;
    const q3 = await until(async () => {
      const q = await permitQuote();
      return q.body.steps[0].items[0].data.sign.value.deadline !== deadline ? q : undefined;
    }, 'a quote with a later deadline');
    const step3 = q3.body.steps[0];
    expect(step3.items[0].data.sign.value.nonce).toBe(step.items[0].data.sign.value.nonce);
    const own = await signStep(victim, step3);
    const posted = await api(s.url, `/permits?signature=${own}`, { body: step3.items[0].data.post.body });
    expect(posted.status).toBe(200);
    await waitForStatus(s.url, step3.requestId as Hex, ['success']);
    expect(await balance()).toBe(before - 14_000_000n);
  });

  it("refuses a second permit of the same nonce while the first one's deposit is in flight: the solver paid gas for each that reverted", async () => {
    // Permits of one nonce with other deadlines are other messages, each checked against the token's current nonce
    // when posted. Posted together, all were recorded and sent: the first used the nonce, and every other deposit
    // reverted in `permit` on the solver's gas, charged to nobody (4 signatures: 3 reverts in a review's run).
    const owner = privateKeyToAccount(generatePrivateKey());
    const fund = await s.wallet(0, A).writeContract({
      account: s.wallet(0, A).account!,
      chain: s.wallet(0, A).chain,
      address: usdc(A),
      abi: erc20Abi,
      functionName: 'transfer',
      args: [owner.address, 20_000_000n],
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: fund });
    const permitQuote = () => permitQuoteFor(owner.address);
    const release = holdSubmitter(s, A);
    const q1 = await permitQuote();
    const step1 = q1.body.steps[0];
    const deadline = step1.items[0].data.sign.value.deadline;
    const q2 = await until(async () => {
      const q = await permitQuote();
      return q.body.steps[0].items[0].data.sign.value.deadline !== deadline ? q : undefined;
    }, 'a quote with a later deadline');
    const step2 = q2.body.steps[0];
    expect(step2.items[0].data.sign.value.nonce).toBe(step1.items[0].data.sign.value.nonce);
    expect((await api(s.url, `/permits?signature=${await signStep(owner, step1)}`, { body: step1.items[0].data.post.body })).status).toBe(200);
    const second = await api(s.url, `/permits?signature=${await signStep(owner, step2)}`, { body: step2.items[0].data.post.body });
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ errorCode: 'PERMIT_ALREADY_USED', message: expect.stringMatching(/in flight/) });
    expect(s.node.ledger.payouts.get(`deposit:${step2.requestId}`)).toBeUndefined();
    release();
    await waitForStatus(s.url, step1.requestId, ['success']);
  });

  it("a deposit on the wrong chain naming a permit order does not fail it while the node submits the order's own deposit", async () => {
    // The order is 'depositing': the node holds the user's permit and submits the deposit. A few wei naming
    // the order on another chain failed it (DEPOSIT_CHAIN_MISMATCH), released the sponsor's hold, and the
    // node then still paid the gas of the permit deposit, whose money came back as a DOUBLE_SPEND.
    const postponed = async (): Promise<number> => {
      const text = await (await fetch(`${s.url}/metrics`)).text();
      return Number(/relay_solver_postponed_total\{reason="ANOTHER_DEPOSIT_PAYS"\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    const release = holdSubmitter(s, A);
    let r: Hex;
    try {
      // A user of its own, holding the amount.
      const user = privateKeyToAccount(generatePrivateKey());
      const funder = s.wallet(1, A);
      const funded = await s.publicClient(A).waitForTransactionReceipt({
        hash: await funder.writeContract({
          account: funder.account!,
          chain: funder.chain,
          address: usdc(A),
          abi: erc20Abi,
          functionName: 'transfer',
          args: [user.address, 7_000_000n],
        }),
      });
      expect(funded.status).toBe('success');
      const q = await api(s.url, '/quote/v2', {
        body: {
          user: user.address,
          originChainId: A,
          destinationChainId: B,
          amount: '7000000',
          tradeType: 'EXACT_INPUT',
          originCurrency: usdc(A),
          destinationCurrency: usdc(B),
          usePermit: true,
        },
      });
      expect(q.status).toBe(200);
      const step = q.body.steps[0];
      r = step.requestId as Hex;
      const signature = await signStep(user, step);
      // Posted until the node's provider has the funding block (a refused post records nothing).
      await until(
        async () => ((await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body })).status === 200 ? true : undefined),
        'the permit taken',
      );
      expect(s.node.ledger.requests.get(r)!.status).toBe('depositing');
      const waited = await postponed();
      const w = s.wallet(3, B);
      await s.publicClient(B).waitForTransactionReceipt({
        hash: await w.sendTransaction({
          account: w.account!,
          chain: w.chain,
          to: chain(B).contracts.depository,
          data: encodeFunctionData({ abi: depositNativeAbi, functionName: 'depositNative', args: [w.account!.address, r] }),
          value: 1_000n,
        }),
      });
      // Decided (before) or waiting for the order's own deposit (now).
      await until(async () => {
        const d = s.node.ledger.deposits.byOrderRef(r).find((x) => x.chain_id === B);
        return d?.state === 'handled' || (await postponed()) > waited ? true : undefined;
      }, 'the wrong-chain deposit looked at');
      expect(s.node.ledger.requests.get(r)).toMatchObject({ status: 'depositing', fail_reason: null });
    } finally {
      release();
    }
    expect(await waitForStatus(s.url, r, ['success', 'failure', 'refund'])).toMatchObject({ status: 'success' });
    const dust = await until(() => {
      const d = s.node.ledger.deposits.byOrderRef(r).find((x) => x.chain_id === B);
      return d?.state === 'handled' ? d : undefined;
    }, 'the wrong-chain deposit decided');
    expect(dust.request_id).not.toBe(r);
    expect(s.node.ledger.requests.get(dust.request_id!)!.fail_reason).toBe('DOUBLE_SPEND');
  });
});
