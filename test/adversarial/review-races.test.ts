// Review of money races and feature combinations (twelfth round): an attacker with an API key and a funded app
// balance who sends many spends of one balance at once, over more than one connection, or names one feature's
// request to another feature; an app fee recipient claiming again and again to a recipient that refuses on chain; a
// user whose signed deposit (usePermit) waits in the node's queue while a deposit of their own decides the order.
import { Agent, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, zeroAddress, type Address, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { pastFinality } from '../helpers/finality.ts';
import { fundAppBalance, linkWallet } from '../helpers/appBalance.ts';
import { linkWallet as linkThroughNode } from '../helpers/link.ts';
import { pause, resume } from '../../src/admin/actions.ts';
import { api, executeSteps, holdSubmitter, nativeBridge, permitQuote, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;

beforeAll(async () => {
  // Orders on the route above 100,000 USD are refused by the risk limits (SOLVER_CAPACITY_EXCEEDED): a deposit that fails
  // its order with no other deposit to wait for.
  s = await startStack({
    configure: (c) => ({ ...c, risk: { ...c.risk, routes: [{ originChainId: 8453, destinationChainId: 10, maxOrderUsd: '100000' }] } }),
  });
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

// A POST over one keep-alive connection of `agent` (an Agent with one socket): the requests given to one agent queue
// on its connection, those of two agents race on two.
function post(agent: Agent, path: string, apiKey: string, body: unknown): Promise<{ status: number; body: any }> {
  const url = new URL(path, s.url);
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), 'x-api-key': apiKey } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

// `amount` USDC (smallest unit) from chain A to chain B for account 2, quoted with `apiKey`.
async function usdcRequest(apiKey: string, amount: string): Promise<Hex> {
  const q = await api(s.url, '/quote/v2', {
    apiKey,
    body: {
      user: account(2).address,
      recipient: account(2).address,
      originChainId: A,
      destinationChainId: B,
      originCurrency: usdc(A),
      destinationCurrency: usdc(B),
      amount,
      tradeType: 'EXACT_INPUT',
    },
  });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  return q.body.steps.at(-1).requestId as Hex;
}

describe('one app balance spent by many requests at once, over two connections', () => {
  it('fast fills and gasless relays sent together never hold more than the balance has: none is paid without its hold', { timeout: 120_000 }, async () => {
    const app = s.node.ledger.apiKeys.create('racer');
    await linkWallet(s, app, 3);
    const wallet = account(3).address as Address;
    // 12 USDC of balance against 20 fast fills of 5 USDC each and 20 relays.
    await fundAppBalance(s, 1, wallet, 12_000_000n);
    const funded = s.node.ledger.balances.summary(wallet);
    expect(funded.available).toBe(12_000_000n);
    const ids: Hex[] = [];
    for (let i = 0; i < 20; i++) ids.push(await usdcRequest(app.key, '5000000'));
    // Nothing is sent meanwhile: every hold stays on the balance while the spends race.
    const releaseB = holdSubmitter(s, B);
    const releaseA = holdSubmitter(s, A);
    const agents = [new Agent({ keepAlive: true, maxSockets: 1 }), new Agent({ keepAlive: true, maxSockets: 1 })];
    try {
      const spends = [
        ...ids.map((requestId, i) => post(agents[i % 2]!, '/fast-fill', app.key, { requestId })),
        ...ids.map((_, i) =>
          post(agents[(i + 1) % 2]!, '/execute', app.key, {
            executionKind: 'rawCalls',
            data: { chainId: A, to: privateKeyToAccount(generatePrivateKey()).address, data: '0x', value: '0' },
            executionOptions: { referrer: 'race', subsidizeFees: true },
          }),
        ),
      ];
      const answers = await Promise.all(spends);
      const fastFills = answers.slice(0, ids.length);
      const relays = answers.slice(ids.length);
      // Each answer is a decision, never a failure of the node.
      for (const a of answers) expect([200, 402, 409], JSON.stringify(a.body)).toContain(a.status);
      const filled = ids.filter((_, i) => fastFills[i]!.status === 200);
      const relayed = relays.filter((a) => a.status === 200).map((a) => a.body.requestId as Hex);
      expect(filled.length).toBeGreaterThan(0);
      expect(filled.length).toBeLessThan(ids.length);

      const after = s.node.ledger.balances.summary(wallet);
      // Nothing was charged yet (nothing was paid), and what is held never passes the balance.
      expect(after.balance).toBe(funded.balance);
      expect(after.available >= 0n).toBe(true);
      // What is held is exactly the holds of the spends answered 200: none held twice, none paid without a hold.
      const holds = [
        ...filled.map((id) => s.node.ledger.balances.get(`hold:${id}`)!.amount),
        ...relayed.map((id) => s.node.ledger.balances.get(`sponsor_hold:${id}`)!.amount),
      ].reduce((sum, a) => sum + BigInt(a), 0n);
      expect(after.held).toBe(holds);
      // Each fast fill refused has no fill queued, each accepted has one.
      for (const [i, id] of ids.entries()) expect(!!s.node.ledger.payouts.get(`fill:${id}`)).toBe(fastFills[i]!.status === 200);
    } finally {
      for (const a of agents) a.destroy();
      releaseA();
      releaseB();
    }
  });
});

describe('a fast fill naming a request no quote priced', () => {
  it("a gasless relay's request id is refused as no quoted request (4xx), not a 500: nothing held, nothing queued", { timeout: 60_000 }, async () => {
    const app = s.node.ledger.apiKeys.create('relay then fast fill');
    await linkWallet(s, app, 4);
    const wallet = account(4).address as Address;
    await fundAppBalance(s, 1, wallet, 5_000_000n);
    const relay = await api(s.url, '/execute', {
      apiKey: app.key,
      body: {
        executionKind: 'rawCalls',
        data: { chainId: A, to: privateKeyToAccount(generatePrivateKey()).address, data: '0x', value: '0' },
        executionOptions: { referrer: 'x', subsidizeFees: true },
      },
    });
    expect(relay.status, JSON.stringify(relay.body)).toBe(200);
    const requestId = relay.body.requestId as Hex;
    const before = s.node.ledger.balances.summary(wallet);
    const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } });
    expect(ff.status, JSON.stringify(ff.body)).toBe(404);
    expect(ff.body.errorCode).toBe('REQUEST_NOT_FOUND');
    expect(s.node.ledger.balances.get(`hold:${requestId}`)).toBeUndefined();
    expect(s.node.ledger.payouts.get(`fill:${requestId}`)).toBeUndefined();
    expect(s.node.ledger.balances.summary(wallet).held <= before.held).toBe(true);
  });
});

// Init code of a contract whose runtime is GASPRICE ISZERO PUSH1 8 JUMPI PUSH0 PUSH0 REVERT JUMPDEST STOP: it accepts
// anything sent at a gas price of 0 and reverts otherwise.
const SIMULATION_ONLY_BYTECODE: Hex = '0x600a600a5f39600a5ff33a156008575f5ffd5b00';

describe('an app fee claim to a recipient that takes the payment only in a simulation', () => {
  // The fee recipient's claim of its ETH fees on B to `to`: ask, sign, post.
  async function claim(app: PrivateKeyAccount, to: Address) {
    const ask = await api(s.url, `/app-fees/${app.address}/claim`, { body: { chainId: B, currency: zeroAddress, recipient: to } });
    expect(ask.status, JSON.stringify(ask.body)).toBe(200);
    const item = ask.body.steps[0].items[0].data;
    const signature = await app.signMessage({ message: item.sign.message });
    return api(s.url, `${item.post.endpoint}?signature=${signature}`, { body: item.post.body });
  }
  // What the solver's transactions on B paid in gas since block `from`.
  async function solverGasOnB(from: bigint): Promise<bigint> {
    const pc = s.publicClient(B);
    const head = await pc.getBlockNumber();
    let fee = 0n;
    for (let n = from; n <= head; n++) {
      const block = await pc.getBlock({ blockNumber: n, includeTransactions: true });
      for (const tx of block.transactions) {
        if (tx.from.toLowerCase() !== s.devnet.solver.toLowerCase()) continue;
        const r = await pc.getTransactionReceipt({ hash: tx.hash });
        fee += r.gasUsed * r.effectiveGasPrice;
      }
    }
    return fee;
  }

  it('bears the gas its reverted transaction burned: a claim failed on chain is not claimed again for free, as often as its recipient likes', {
    timeout: 120_000,
  }, async () => {
    // receive(): `require(tx.gasprice == 0)`: it takes the payment in a simulation (an estimate sent without fee fields)
    // and refuses it on chain, where its transaction pays for its gas.
    const w = s.wallet(0, B);
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, data: SIMULATION_ONLY_BYTECODE });
    const refuser = (await s.publicClient(B).waitForTransactionReceipt({ hash })).contractAddress!;
    // 5% of a 0.01 ETH bridge as the app's fee, filled, its deposit final.
    const app = privateKeyToAccount(generatePrivateKey());
    const user = account(1).address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000', { appFees: [{ recipient: app.address, fee: 500 }] }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, 1);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    await pastFinality(s, A);
    const owed = () => s.node.ledger.appFees.balances(app.address).find((b) => b.chainId === B && b.currency === zeroAddress)?.amount ?? 0n;
    const fee = owed();
    expect(fee).toBeGreaterThan(0n);

    const from = (await s.publicClient(B).getBlockNumber()) + 1n;
    const outcomes: string[] = [];
    // The recipient claims to its refuser again and again: each claim passes its estimate and reverts on chain.
    for (let i = 0; i < 3; i++) {
      const c = await claim(app, refuser);
      outcomes.push(`${c.status}:${c.body.errorCode ?? 'ok'}`);
      if (c.status !== 200) break;
      const p = await until(
        () => {
          const row = s.node.ledger.payouts.get(c.body.claimId);
          return row && (row.state === 'success' || row.state === 'failed') ? row : undefined;
        },
        'the claim settled',
        60_000,
      );
      outcomes.push(p.state);
      if (p.state === 'success') break;
    }
    const burned = await solverGasOnB(from);
    const paid = s.node.ledger.payouts
      .ofChain(B)
      .filter((p) => p.kind === 'claim' && p.recipient.toLowerCase() === refuser.toLowerCase() && p.state === 'success')
      .reduce((sum, p) => sum + BigInt(p.amount), 0n);
    // Each claim reached the chain and reverted there (before: its fees were owed again whole, and the recipient could
    // claim them again at once, the solver paying another reverted transfer each time).
    expect(outcomes.filter((o) => o === 'failed').length).toBeGreaterThan(0);
    expect(burned).toBeGreaterThan(0n);
    // What the solver spent on the fee (its claims' payouts and their transactions' gas) and what it still owes come to
    // no more than the fee: the failed claims' gas is the recipient's.
    expect(paid + burned + owed()).toBeLessThanOrEqual(fee);
  });
});

describe('a signed deposit (usePermit) and a deposit of its own for one order', () => {
  // Account `from`'s permit posted, the node's deposit held in its queue, and a deposit of `own(quoted)` (smallest units)
  // sent by the user for the same order, which ends in `status`. Returns the order's signed deposit payout and what the user
  // spent on A.
  async function permitAndOwnDeposit(from: number, own: (quoted: bigint) => bigint, status: string) {
    const user = account(from);
    const depository = s.devnet.chains.find((c) => c.id === A)!.contracts.depository;
    const usdcOf = (who: Address) => s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
    const q = await permitQuote(s, user.address);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    const id = step.requestId as Hex;
    const amount = BigInt(step.items[0].data.sign.value.value);
    const sent = own(amount);
    const before = await usdcOf(user.address);
    // The node's deposit waits in its queue (a busy chain, a fee cap) while the user, tired of waiting, deposits too.
    const release = holdSubmitter(s, A);
    try {
      const { domain, types, primaryType, value } = step.items[0].data.sign;
      const signature = await privateKeyToAccount(user.privateKey).signTypedData({ domain, types, primaryType, message: value });
      const posted = await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body });
      expect(posted.status, JSON.stringify(posted.body)).toBe(200);
      const w = s.wallet(from, A);
      for (const data of [
        encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [depository, sent] }),
        encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositErc20', args: [user.address, usdc(A), sent, id] }),
      ]) {
        const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: data.startsWith('0x095ea7b3') ? usdc(A) : depository, data });
        await s.publicClient(A).waitForTransactionReceipt({ hash });
      }
      await waitForStatus(s.url, id, [status], 60_000);
    } finally {
      release();
    }
    // The queue moves on: whatever the node does with the permit is done once its payouts on A are settled.
    await until(
      () => (s.node.ledger.payouts.ofChain(A).every((p) => p.state === 'success' || p.state === 'failed') ? true : undefined),
      "the node's payouts on A settled",
      60_000,
    );
    const deposit = s.node.ledger.payouts.get(`deposit:${id}`)!;
    return { id, amount, deposit, spent: before - (await usdcOf(user.address)) };
  }

  it("the node does not send the user's permit once the order is paid by the other deposit: the user's tokens are taken once, not twice and refunded less two transactions' gas", {
    timeout: 120_000,
  }, async () => {
    const { id, amount, deposit, spent } = await permitAndOwnDeposit(2, (quoted) => quoted, 'success');
    // Before: the node sent it, took another 7 USDC and refunded them less 0.997 USDC of gas (its deposit's, the refund's).
    expect(s.node.ledger.payouts.txsOf(deposit.id)).toHaveLength(0);
    expect(deposit).toMatchObject({ state: 'failed', fail_reason: 'ORDER_ALREADY_FILLED' });
    // One deposit taken, none refunded: the user paid the order once.
    expect(spent).toBe(amount);
    expect(s.node.ledger.deposits.byOrderRef(id)).toHaveLength(1);
  });

  it('nor once the other deposit failed the order (refunded): the permit is not sent into a second refund', { timeout: 120_000 }, async () => {
    // 200,000 USDC: past the route's order limit, the order fails and its deposit goes back.
    const { id, deposit } = await permitAndOwnDeposit(1, () => 200_000_000_000n, 'failure');
    expect(s.node.ledger.payouts.txsOf(deposit.id)).toHaveLength(0);
    expect(deposit.state).toBe('failed');
    expect(s.node.ledger.deposits.byOrderRef(id)).toHaveLength(1);
  });
});

describe('a signed deposit (usePermit) still queued when its order is settled another way: a fast fill, its failure, an operator', () => {
  // A key quoting a usePermit order for account `from` (7 USDC from A; `extra` overrides the quote's fields), its own app
  // balance wallet funded with 20 USDC, the permit posted while chain A's submitter is held: the node's deposit waits.
  async function fastFilledPermit(from: number | { address: Address; privateKey: Hex }, label: string, extra: Record<string, unknown> = {}) {
    const app = s.node.ledger.apiKeys.create(label);
    const wallet = privateKeyToAccount(generatePrivateKey());
    const linked = await linkThroughNode(s.url, app.key, wallet);
    expect(linked.status, JSON.stringify(linked.body)).toBe(200);
    await fundAppBalance(s, 1, wallet.address, 20_000_000n);
    const user = typeof from === 'number' ? account(from) : from;
    const q = await permitQuote(s, user.address, extra, app.key);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    const id = step.requestId as Hex;
    const amount = BigInt(step.items[0].data.sign.value.value);
    const release = holdSubmitter(s, A);
    const { domain, types, primaryType, value } = step.items[0].data.sign;
    const signature = await privateKeyToAccount(user.privateKey).signTypedData({ domain, types, primaryType, message: value });
    const posted = await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body });
    expect(posted.status, JSON.stringify(posted.body)).toBe(200);
    const ff = await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId: id } });
    expect(ff.status, JSON.stringify(ff.body)).toBe(200);
    return { app, wallet: wallet.address, user, id, amount, release };
  }
  const usdcOf = (who: Address) => s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
  const settledOnA = () =>
    until(
      () => (s.node.ledger.payouts.ofChain(A).every((p) => p.state === 'success' || p.state === 'failed') ? true : undefined),
      "the node's payouts on A settled",
      60_000,
    );

  it("a fast fill settled by the user's own deposit: the queued permit is not sent (it took the tokens again, refunded as DOUBLE_SPEND less two transactions' gas)", {
    timeout: 120_000,
  }, async () => {
    const f = await fastFilledPermit(3, 'permit fast fill settled');
    const before = await usdcOf(f.user.address);
    try {
      await waitForStatus(s.url, f.id, ['success'], 60_000);
      // The user, tired of waiting for the node's deposit, deposits the order's input themselves: it settles the fast fill.
      const depository = s.devnet.chains.find((c) => c.id === A)!.contracts.depository;
      const w = s.wallet(3, A);
      for (const [to, data] of [
        [usdc(A), encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [depository, f.amount] })],
        [depository, encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositErc20', args: [f.user.address, usdc(A), f.amount, f.id] })],
      ] as const) {
        const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to, data });
        await s.publicClient(A).waitForTransactionReceipt({ hash });
      }
      await until(() => (s.node.ledger.balances.summary(f.wallet).held === 0n ? true : undefined), 'the hold settled by the deposit', 60_000);
    } finally {
      f.release();
    }
    await settledOnA();
    const deposit = s.node.ledger.payouts.get(`deposit:${f.id}`)!;
    // Before: the node sent it, took another 7 USDC and refunded them as a DOUBLE_SPEND less two transactions' gas.
    expect(s.node.ledger.payouts.txsOf(deposit.id)).toHaveLength(0);
    expect(deposit.state).toBe('failed');
    expect(before - (await usdcOf(f.user.address))).toBe(f.amount);
    expect(s.node.ledger.deposits.byOrderRef(f.id)).toHaveLength(1);
    // The app's hold was settled by the user's deposit: nothing held, nothing debited.
    expect(s.node.ledger.balances.summary(f.wallet).held).toBe(0n);
    expect(s.node.ledger.balances.get(`permanent_debit:${f.id}`)).toBeUndefined();
  });

  it('a fast fill whose payout failed: the queued permit is not sent only to be refunded less its gas', { timeout: 120_000 }, async () => {
    // Native ETH on B to the stablecoin contract, which has no receive function: the fast fill's payout reverts.
    const f = await fastFilledPermit(4, 'permit fast fill failed', { destinationCurrency: zeroAddress, recipient: usdc(B) });
    const before = await usdcOf(f.user.address);
    try {
      await waitForStatus(s.url, f.id, ['failure'], 60_000);
      await until(() => (s.node.ledger.payouts.get(`fill:${f.id}`)?.state === 'failed' ? true : undefined), 'the fast fill failed', 60_000);
    } finally {
      f.release();
    }
    await settledOnA();
    const deposit = s.node.ledger.payouts.get(`deposit:${f.id}`)!;
    // Before: the node sent it once A moved on, and the deposit came back as a refund less its gas.
    expect(s.node.ledger.payouts.txsOf(deposit.id)).toHaveLength(0);
    expect(deposit.state).toBe('failed');
    expect(await usdcOf(f.user.address)).toBe(before);
    expect(s.node.ledger.deposits.byOrderRef(f.id)).toHaveLength(0);
  });
  it("an operator's refund of the user's own deposit held back: the queued permit is not sent after it (a second deposit, refunded as DOUBLE_SPEND less two transactions' gas)", {
    timeout: 120_000,
  }, async () => {
    const user = account(0);
    const depository = s.devnet.chains.find((c) => c.id === A)!.contracts.depository;
    const q = await permitQuote(s, user.address);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    const id = step.requestId as Hex;
    const amount = BigInt(step.items[0].data.sign.value.value);
    const before = await usdcOf(user.address);
    const route = { scope: 'route', originChainId: A, destinationChainId: B } as const;
    const who = { actor: 'review', reason: 'races' };
    const release = holdSubmitter(s, A);
    try {
      const { domain, types, primaryType, value } = step.items[0].data.sign;
      const signature = await privateKeyToAccount(user.privateKey).signTypedData({ domain, types, primaryType, message: value });
      const posted = await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body });
      expect(posted.status, JSON.stringify(posted.body)).toBe(200);
      // The route paused: the user's own deposit is held back, and the operator refunds it by hand.
      expect(pause(s.node.ledger, route, who)).toBe(true);
      const w = s.wallet(0, A);
      for (const [to, data] of [
        [usdc(A), encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [depository, amount] })],
        [depository, encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositErc20', args: [user.address, usdc(A), amount, id] })],
      ] as const) {
        const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to, data });
        await s.publicClient(A).waitForTransactionReceipt({ hash });
      }
      await until(
        () => {
          const d = s.node.ledger.deposits.byOrderRef(id)[0];
          return d && d.state === 'confirmed' && s.node.ledger.operations.postponement(d.id) ? true : undefined;
        },
        'the deposit held back',
        60_000,
      );
      const refund = await s.node.solver!.manualRefund(id, who);
      expect(refund.kind).toBe('refund');
    } finally {
      resume(s.node.ledger, route, who);
      release();
    }
    await settledOnA();
    const deposit = s.node.ledger.payouts.get(`deposit:${id}`)!;
    const refunds = s.node.ledger.payouts
      .ofChain(A)
      .filter((p) => p.kind === 'refund' && p.recipient.toLowerCase() === user.address.toLowerCase() && p.decided_at >= deposit.decided_at);
    // Before: the node sent it once A moved on, took the tokens a second time, and refunded them less two transactions' gas.
    expect(s.node.ledger.payouts.txsOf(deposit.id)).toHaveLength(0);
    expect(deposit.state).toBe('failed');
    expect(s.node.ledger.deposits.byOrderRef(id)).toHaveLength(1);
    expect(refunds).toHaveLength(1);
    expect(before - (await usdcOf(user.address))).toBe(amount - BigInt(refunds[0]!.amount));
  });
  it("the permit that is the fast fill's own cover is still sent, and its deposit settles the fast fill: the app is held nothing, the user pays once", {
    timeout: 120_000,
  }, async () => {
    // A user of their own (a permit nonce no other test used), given the order's 7 USDC on A.
    const key = generatePrivateKey();
    const user = { address: privateKeyToAccount(key).address, privateKey: key };
    const w1 = s.wallet(1, A);
    const funded = await w1.sendTransaction({
      account: w1.account!,
      chain: w1.chain,
      to: usdc(A),
      data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [user.address, 7_000_000n] }),
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: funded });
    const f = await fastFilledPermit(user, 'permit fast fill covered');
    try {
      await waitForStatus(s.url, f.id, ['success'], 60_000);
    } finally {
      f.release();
    }
    await settledOnA();
    await until(() => (s.node.ledger.balances.summary(f.wallet).held === 0n ? true : undefined), 'the hold settled by the permit', 60_000);
    const deposit = s.node.ledger.payouts.get(`deposit:${f.id}`)!;
    expect(deposit.state).toBe('success');
    expect(s.node.ledger.deposits.byOrderRef(f.id)).toHaveLength(1);
    expect(await usdcOf(user.address)).toBe(7_000_000n - f.amount);
    expect(s.node.ledger.balances.get(`permanent_debit:${f.id}`)).toBeUndefined();
    expect(s.node.ledger.payouts.forRequest(f.id).filter((p) => p.kind === 'refund' || p.kind === 'excess')).toHaveLength(0);
  });
});
