// usePermit: the user signs an EIP-2612 permit instead of sending approve and deposit
// transactions; the node submits the deposit, pays its gas, and fills.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, zeroAddress, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { linkWallet } from './helpers/link.ts';
import { api, permitQuote, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;
const signer = (i: number) => privateKeyToAccount(account(i).privateKey);

beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  await s?.stop();
});

const quote = (from: number, extra: Record<string, unknown> = {}) =>
  api(s.url, '/quote/v2', {
    body: {
      user: account(from).address,
      originChainId: A,
      destinationChainId: B,
      originCurrency: usdc(A),
      destinationCurrency: usdc(B),
      amount: '7000000',
      tradeType: 'EXACT_INPUT',
      usePermit: true,
      ...extra,
    },
  });

async function sign(from: number, step: any): Promise<Hex> {
  const { domain, types, primaryType, value } = step.items[0].data.sign;
  return signer(from).signTypedData({ domain, types, primaryType, message: value });
}

const usdcOf = (chainId: number, who: Address) =>
  s.publicClient(chainId).readContract({ address: usdc(chainId), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

describe('usePermit', () => {
  it('fills from a signed permit: no approval, no deposit transaction, no gas for the user', async () => {
    const q = await quote(2);
    expect(q.status).toBe(200);
    expect(q.body.steps.map((x: any) => x.id)).toEqual(['authorize']);
    const step = q.body.steps[0];
    expect(step.kind).toBe('signature');
    expect(step.items[0].data.sign).toMatchObject({
      signatureKind: 'eip712',
      primaryType: 'Permit',
      domain: { name: 'Test USD Coin', version: '1', chainId: A, verifyingContract: usdc(A) },
    });
    expect(step.items[0].data.sign.value).toMatchObject({ owner: account(2).address, spender: chain(A).contracts.depository, value: '7000000' });
    expect(step.items[0].data.post).toMatchObject({ endpoint: '/execute/permits', method: 'POST' });
    expect(q.body.fees.gas.amount).toBe('0');
    const id = step.requestId as Hex;
    const ethBefore = await s.publicClient(A).getBalance({ address: account(2).address });
    const usdcBefore = await usdcOf(A, account(2).address);
    const outBefore = await usdcOf(B, account(2).address);
    const signature = await sign(2, step);
    const posted = await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body });
    expect(posted.status).toBe(200);
    await waitForStatus(s.url, id, ['success']);
    // The request showed depositing while the node's deposit was on its way (the status events
    // the outbox recorded, in order).
    const statuses = (s.node.ledger.db.prepare('SELECT status FROM events WHERE request_id = ? ORDER BY seq').all(id) as { status: string }[]).map(
      (e) => e.status,
    );
    expect(statuses.slice(0, 3)).toEqual(['waiting', 'depositing', 'pending']);
    expect(statuses.at(-1)).toBe('success');
    expect(await usdcOf(A, account(2).address)).toBe(usdcBefore - 7_000_000n);
    expect(await usdcOf(B, account(2).address)).toBe(outBefore + BigInt(q.body.details.currencyOut.amount));
    // The user spent no gas: the node submitted the deposit.
    expect(await s.publicClient(A).getBalance({ address: account(2).address })).toBe(ethBefore);
    const again = await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body });
    expect(again.status).toBe(409);
  });

  it('refuses a permit signed by someone else, expired, or with a stale nonce, and changes nothing', async () => {
    const q = await quote(3);
    const step = q.body.steps[0];
    const body = step.items[0].data.post.body;
    const id = step.requestId as Hex;
    const wrong = await api(s.url, `/permits?signature=${await sign(4, step)}`, { body });
    expect(wrong.status).toBe(400);
    expect(wrong.body.errorCode).toBe('INVALID_SIGNATURE');
    const staleNonce = {
      ...step,
      items: [
        { ...step.items[0], data: { ...step.items[0].data, sign: { ...step.items[0].data.sign, value: { ...step.items[0].data.sign.value, nonce: '99' } } } },
      ],
    };
    const nonce = await api(s.url, `/permits?signature=${await sign(3, staleNonce)}`, { body: { ...body, nonce: '99' } });
    expect(nonce.status).toBe(400);
    expect(nonce.body.errorCode).toBe('INVALID_NONCE');
    const expired = await api(s.url, `/permits?signature=${await sign(3, step)}`, { body: { ...body, deadline: '1000' } });
    expect(expired.status).toBe(400);
    expect(expired.body.errorCode).toBe('SIGNATURE_EXPIRED');
    const other = await api(s.url, `/permits?signature=${await sign(3, step)}`, { body: { ...body, value: '1' } });
    expect(other.status).toBe(400);
    expect((await api(s.url, `/permits?signature=${await sign(3, step)}`, { body: { ...body, requestId: `0x${'12'.repeat(32)}` } })).status).toBe(404);
    expect((await api(s.url, '/permits', { body })).status).toBe(400);
    expect(s.node.ledger.requests.get(id)!.status).toBe('waiting');
    expect(s.node.ledger.payouts.get(`deposit:${id}`)).toBeUndefined();
  });

  it('is only for permit tokens, and not with a deposit address', async () => {
    const native = await quote(2, { originCurrency: zeroAddress, destinationCurrency: zeroAddress, amount: '1000000000000000' });
    expect(native.status).toBe(400);
    expect(native.body.message).toMatch(/usePermit/);
    const addr = await quote(2, { useDepositAddress: true, refundTo: account(2).address });
    expect(addr.status).toBe(400);
    expect(addr.body.message).toMatch(/usePermit/);
  });

  it("POST /execute: the gasless flow, paid from the sponsoring key's app balance", async () => {
    const k = s.node.ledger.apiKeys.create('gasless app');
    const other = s.node.ledger.apiKeys.create('other app');
    const sponsor = signer(4);
    const link = await linkWallet(s.url, k.key, sponsor);
    expect(link.status).toBe(200);
    const w = s.wallet(0, A);
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 50_000_000n] });
    const fundTx = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: usdc(A),
      data: `${data}012345abcdef${sponsor.address.slice(2).toLowerCase()}012345abcdef` as Hex,
    });
    await s.publicClient(A).waitForTransactionReceipt({ hash: fundTx });
    await until(() => (s.node.ledger.balances.summary(sponsor.address).balance > 0n ? true : undefined), 'the app balance credit');

    const q = await permitQuote(s, account(1).address, { subsidizeFees: true }, k.key);
    expect(q.status).toBe(200);
    expect(q.body.details.currencyOut.amount).toBe('7000000');
    const step = q.body.steps[0];
    const signature = await sign(1, step);
    const body = { ...step.items[0].data.post.body, signature };
    expect((await api(s.url, '/execute', { body })).status).toBe(401);
    expect((await api(s.url, '/execute', { apiKey: other.key, body })).status).toBe(403);
    const ethBefore = await s.publicClient(A).getBalance({ address: account(1).address });
    const balanceBefore = s.node.ledger.balances.summary(sponsor.address).balance;
    const outBefore = await usdcOf(B, account(1).address);
    const r = await api(s.url, '/execute', { apiKey: k.key, body });
    expect(r.status).toBe(200);
    await waitForStatus(s.url, step.requestId, ['success']);
    expect((await usdcOf(B, account(1).address)) - outBefore).toBe(7_000_000n);
    expect(await s.publicClient(A).getBalance({ address: account(1).address })).toBe(ethBefore);
    expect(s.node.ledger.balances.summary(sponsor.address).balance).toBeLessThan(balanceBefore);
    expect(JSON.parse(s.node.ledger.requests.get(step.requestId)!.features)).toContain('gasless_execution');
  });
});
