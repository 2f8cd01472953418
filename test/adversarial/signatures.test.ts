// Attacks on the signatures that move app balances and app fees: replayed link signatures, links
// a wallet cannot undo, and replayed claim signatures.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { api, startStack, until, type Stack } from '../helpers/stack.ts';
import { linkWallet } from '../helpers/link.ts';

let s: Stack;
const A = 8453;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
// Wallets that only sign (links, unlinks, claims need no gas): fresh keys, one per index.
const wallets = new Map<number, PrivateKeyAccount>();
const signer = (i: number) => {
  if (!wallets.has(i)) wallets.set(i, privateKeyToAccount(generatePrivateKey()));
  return wallets.get(i)!;
};

beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  await s?.stop();
});

const sponsorQuote = (apiKey: string) =>
  api(s.url, '/quote/v2', {
    apiKey,
    body: {
      user: s.devnet.accounts[1]!.address,
      originChainId: A,
      destinationChainId: 10,
      originCurrency: usdc(A),
      destinationCurrency: usdc(10),
      amount: '5000000',
      tradeType: 'EXACT_INPUT',
      subsidizeFees: true,
    },
  });

describe('app-balance links', () => {
  it("refuses wallet 1's old link signature after wallet 2 linked (the message of today, with no nonce or expiry)", async () => {
    const k = s.node.ledger.apiKeys.create('app');
    const w1 = signer(4);
    const old = await w1.signMessage({ message: `relay-node: use the app balance of ${w1.address} for API key ${k.id}` });
    expect((await linkWallet(s.url, k.key, signer(5))).status).toBe(200);
    const replay = await api(s.url, '/app-balance/link', { apiKey: k.key, body: { wallet: w1.address, signature: old } });
    expect(replay.status).toBeGreaterThanOrEqual(400);
    expect(replay.status).toBeLessThan(500);
    expect(s.node.ledger.balances.sponsorOf(k.id)).toBe(signer(5).address);
  });

  it('takes each link signature once, and only before its expiry', async () => {
    const k = s.node.ledger.apiKeys.create('app');
    const first = await linkWallet(s.url, k.key, signer(4));
    expect(first.status).toBe(200);
    expect(first.message).toMatch(/nonce/);
    expect((await linkWallet(s.url, k.key, signer(5))).status).toBe(200);
    const replay = await api(s.url, '/app-balance/link', { apiKey: k.key, body: first.posted });
    expect(replay.status).toBe(400);
    expect(replay.body.errorCode).toBe('INVALID_NONCE');
    expect(s.node.ledger.balances.sponsorOf(k.id)).toBe(signer(5).address);

    // The expiry is in the signed message: one the wallet signed in the past, or too far ahead, is refused.
    const ask = await api(s.url, '/app-balance/link', { apiKey: k.key, body: { wallet: signer(4).address } });
    const d = ask.body.steps[0].items[0].data;
    for (const expiresAt of [Date.now() - 1000, Date.now() + 365 * 24 * 3600 * 1000]) {
      const message = d.sign.message.replace(String(d.post.body.expiresAt), String(expiresAt));
      expect(message).not.toBe(d.sign.message);
      const r = await api(s.url, '/app-balance/link', {
        apiKey: k.key,
        body: { ...d.post.body, expiresAt, signature: await signer(4).signMessage({ message }) },
      });
      expect(r.status).toBe(400);
      expect(r.body.errorCode).toBe('SIGNATURE_EXPIRED');
    }
    // A signature for another key does not link this one.
    const other = s.node.ledger.apiKeys.create('other');
    const r = await api(s.url, '/app-balance/link', {
      apiKey: other.key,
      body: { ...d.post.body, signature: await signer(4).signMessage({ message: d.sign.message }) },
    });
    expect(r.status).toBe(400);
    expect(r.body.errorCode).toBe('INVALID_SIGNATURE');
    expect(s.node.ledger.balances.sponsorOf(other.id)).toBeUndefined();
  });

  it('lets a wallet unlink itself with its own signature, once', async () => {
    const k = s.node.ledger.apiKeys.create('app');
    const w = signer(6);
    expect((await linkWallet(s.url, k.key, w)).status).toBe(200);
    expect((await sponsorQuote(k.key)).body.errorCode).not.toBe('SPONSOR_NOT_LINKED');
    const ask = await api(s.url, '/app-balance/unlink', { body: { wallet: w.address, apiKeyId: k.id } });
    expect(ask.status).toBe(200);
    const d = ask.body.steps[0].items[0].data;
    expect(d.sign.message).toMatch(/nonce/);
    // Another wallet's signature unlinks nothing.
    const forged = await api(s.url, d.post.endpoint, { body: { ...d.post.body, signature: await signer(7).signMessage({ message: d.sign.message }) } });
    expect(forged.status).toBe(400);
    expect(forged.body.errorCode).toBe('INVALID_SIGNATURE');
    expect(s.node.ledger.balances.sponsorOf(k.id)).toBe(w.address);
    const body = { ...d.post.body, signature: await w.signMessage({ message: d.sign.message }) };
    const r = await api(s.url, d.post.endpoint, { body });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ wallet: w.address, unlinked: [k.id] });
    expect(s.node.ledger.balances.sponsorOf(k.id)).toBeUndefined();
    const q = await sponsorQuote(k.key);
    expect(q.status).toBe(401);
    expect(q.body.errorCode).toBe('SPONSOR_NOT_LINKED');
    // Re-linked by the key holder with a fresh signature, the unlink cannot be replayed.
    expect((await linkWallet(s.url, k.key, w)).status).toBe(200);
    const again = await api(s.url, d.post.endpoint, { body });
    expect(again.status).toBe(400);
    expect(again.body.errorCode).toBe('INVALID_NONCE');
    expect(s.node.ledger.balances.sponsorOf(k.id)).toBe(w.address);
  });
});

describe('app-fee claims', () => {
  const usdcOf = (who: Address) => s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
  // App fees owed to the wallet (booked as a fill would book them; the claim is what is attacked).
  const accrue = (wallet: Address, amount: bigint, ref: string) =>
    s.node.ledger.tx(() => s.node.ledger.appFees.post({ recipient: wallet, chain_id: A, currency: usdc(A), amount, kind: 'accrual', request_id: null, ref }));

  it('takes a claim signature once: fees accrued after it are not paid by replaying it', async () => {
    const w = signer(8);
    const to = '0x00000000000000000000000000000000000c1a13' as Address;
    accrue(w.address, 3_000_000n, 'adv-claim-1');
    const ask = await api(s.url, `/app-fees/${w.address}/claim`, { body: { chainId: A, currency: usdc(A), recipient: to } });
    const d = ask.body.steps[0].items[0].data;
    const signature = await w.signMessage({ message: d.sign.message });
    const paid = await api(s.url, `${d.post.endpoint}?signature=${signature}`, { body: d.post.body });
    expect(paid.status).toBe(200);
    // What was owed less the claim's gas.
    expect(BigInt(paid.body.amount)).toBeLessThan(3_000_000n);
    await until(async () => ((await usdcOf(to)) === BigInt(paid.body.amount) ? true : undefined), 'the claim payout');

    accrue(w.address, 2_000_000n, 'adv-claim-2');
    const replay = await api(s.url, `${d.post.endpoint}?signature=${signature}`, { body: d.post.body });
    expect(replay.status).toBe(400);
    expect(replay.body.errorCode).toBe('INVALID_NONCE');
    // Still owed, still claimable with a fresh signature.
    expect(s.node.ledger.appFees.balances(w.address).find((b) => b.chainId === A)?.amount).toBe(2_000_000n);
    const claims = s.node.ledger.db.prepare(`SELECT COUNT(*) AS n FROM payouts WHERE kind = 'claim' AND lower(recipient) = lower(?)`).get(to) as { n: number };
    expect(claims.n).toBe(1);
  });

  it('refuses a claim whose fees do not pay its own gas, and books nothing as claimed', async () => {
    // Uncharged, a claim of a few units had the solver pay a transfer's gas on any chain the claimer
    // named, as often as fee recipients could be made (ten per quote).
    const w = signer(10);
    accrue(w.address, 1_000n, 'adv-claim-4');
    const ask = await api(s.url, `/app-fees/${w.address}/claim`, { body: { chainId: A, currency: usdc(A), recipient: w.address } });
    const d = ask.body.steps[0].items[0].data;
    const r = await api(s.url, `${d.post.endpoint}?signature=${await w.signMessage({ message: d.sign.message })}`, { body: d.post.body });
    expect([r.status, r.body.errorCode]).toEqual([400, 'CLAIM_BELOW_GAS']);
    expect(r.body.message).toMatch(/does not pay the claim's gas on chain 8453/);
    expect(s.node.ledger.appFees.balances(w.address).find((b) => b.chainId === A)?.amount).toBe(1_000n);
    const claims = s.node.ledger.db.prepare(`SELECT COUNT(*) AS n FROM payouts WHERE kind = 'claim' AND lower(recipient) = lower(?)`).get(w.address) as {
      n: number;
    };
    expect(claims.n).toBe(0);
  });

  it('refuses a claim without the nonce the node issued (the message of today)', async () => {
    const w = signer(9);
    accrue(w.address, 100_000n, 'adv-claim-3');
    const issuedAt = Date.now();
    const message = `relay-node: claim the app fees of ${w.address} as ${usdc(A).toLowerCase()} on chain ${A} to ${w.address} (issued ${issuedAt})`;
    const r = await api(s.url, `/app-fees/${w.address}/claim?signature=${await w.signMessage({ message })}`, {
      body: { chainId: A, currency: usdc(A), recipient: w.address, issuedAt },
    });
    expect(r.status).toBe(400);
    expect(s.node.ledger.appFees.balances(w.address).find((b) => b.chainId === A)?.amount).toBe(100_000n);
  });
});
