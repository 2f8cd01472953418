import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAddress, verifyTypedData, zeroAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  DEFAULT_EXCHANGE_CHAIN,
  EXCHANGE_CHAIN_ID,
  NONCE_MAPPING_TYPES,
  PERPS_USD_CURRENCY,
  SEND_ASSET_TYPES,
  buildSendAssetAction,
  formatExchangeCurrency,
  joinSignature,
  nonceMappingTypedData,
  parseExchangeCurrency,
  recoverSendAssetSigner,
  sendAssetDexFor,
  sendAssetDomain,
  sendAssetToken,
  splitSignature,
  type SendAssetParameters,
} from '../src/chains/exchange/typedData.ts';
import {
  ExchangeActionError,
  ExchangeClient,
  ExchangeHttpError,
  parseDecimalFloor,
  signSendAsset,
  type SendLedgerDelta,
} from '../src/chains/exchange/client.ts';
import { STANDIN_TOKENS, startExchangeStandin, type ExchangeStandin } from '../src/devnet/exchange/standin.ts';
import { ExchangeAssets } from '../src/chains/exchange/assets.ts';
import type { ExchangeChainConfig } from '../src/config/schema.ts';

const USDC = STANDIN_TOKENS.find((t) => t.name === 'USDC')!;
const HYPE = STANDIN_TOKENS.find((t) => t.name === 'HYPE')!;
const USDC_TOKEN = sendAssetToken(USDC.name, USDC.tokenId);
const HYPE_TOKEN = sendAssetToken(HYPE.name, HYPE.tokenId);

let nonceCounter = 1_700_000_000_000;
const nextNonce = () => ++nonceCounter;

function newWallet() {
  const key = generatePrivateKey();
  return { key, address: privateKeyToAccount(key).address };
}

function params(over: Partial<SendAssetParameters> & { destination: string }): SendAssetParameters {
  return {
    exchangeChain: DEFAULT_EXCHANGE_CHAIN,
    sourceDex: '',
    destinationDex: '',
    token: USDC_TOKEN,
    amount: '1',
    fromSubAccount: '',
    nonce: nextNonce(),
    ...over,
  };
}

async function postRaw(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${url}/exchange`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

describe('typed data (spec: Exchange deposit and withdrawal through the quote)', () => {
  it('sendAsset types: eight fields, seven strings then nonce uint64, in order', () => {
    expect(Object.keys(SEND_ASSET_TYPES)).toEqual(['ExchangeTransaction:SendAsset']);
    expect(SEND_ASSET_TYPES['ExchangeTransaction:SendAsset']).toEqual([
      { name: 'exchangeChain', type: 'string' },
      { name: 'destination', type: 'string' },
      { name: 'sourceDex', type: 'string' },
      { name: 'destinationDex', type: 'string' },
      { name: 'token', type: 'string' },
      { name: 'amount', type: 'string' },
      { name: 'fromSubAccount', type: 'string' },
      { name: 'nonce', type: 'uint64' },
    ]);
  });

  it('sendAsset domain', () => {
    expect(sendAssetDomain(42161)).toEqual({
      name: 'ExchangeSignTransaction',
      version: '1',
      chainId: 42161,
      verifyingContract: zeroAddress,
    });
  });

  it('the posted action is the parameters plus type and signatureChainId (hex)', () => {
    const p = params({ destination: zeroAddress });
    const action = buildSendAssetAction(p, 0xa4b1);
    expect(action).toEqual({ ...p, type: 'sendAsset', signatureChainId: '0xa4b1' });
  });

  it('nonce mapping typed data matches the spec', () => {
    const wallet = getAddress('0x1111111111111111111111111111111111111111');
    const depositor = getAddress('0x2222222222222222222222222222222222222222');
    const id = `0x${'ab'.repeat(32)}` as Hex;
    const td = nonceMappingTypedData({ chainId: 10, wallet, depositor, id, nonce: 77 });
    expect(td.domain).toEqual({ name: 'ServiceNonceMapping', version: '2', chainId: 10, verifyingContract: zeroAddress });
    expect(td.primaryType).toBe('NonceMapping');
    expect(NONCE_MAPPING_TYPES.NonceMapping.map((f) => [f.name, f.type])).toEqual([
      ['chainId', 'string'],
      ['wallet', 'address'],
      ['depositor', 'address'],
      ['id', 'bytes32'],
      ['nonce', 'uint256'],
    ]);
    expect(td.types).toBe(NONCE_MAPPING_TYPES);
    expect(td.message).toEqual({ chainId: 'exchange', wallet, depositor, nonce: 77n, id });
  });

  it('a wallet signature over the NonceMapping typed data verifies', async () => {
    const signer = privateKeyToAccount(generatePrivateKey());
    const other = privateKeyToAccount(generatePrivateKey());
    const td = nonceMappingTypedData({
      chainId: 8453,
      wallet: signer.address,
      depositor: other.address,
      id: `0x${'01'.repeat(32)}`,
      nonce: 1234,
    });
    const signature = await signer.signTypedData(td);
    expect(await verifyTypedData({ ...td, address: signer.address, signature })).toBe(true);
    expect(await verifyTypedData({ ...td, address: other.address, signature })).toBe(false);
    const otherChain = nonceMappingTypedData({ ...td.message, chainId: 1, nonce: 1234 });
    expect(await verifyTypedData({ ...otherChain, address: signer.address, signature })).toBe(false);
  });

  it('splits a signature into r, s and a numeric v, and joins it back', async () => {
    const { key, address } = newWallet();
    const action = buildSendAssetAction(params({ destination: zeroAddress }), 1);
    const body = await signSendAsset(key, action, { signatureChainId: 1 });
    expect(typeof body.signature.v).toBe('number');
    expect([27, 28]).toContain(body.signature.v);
    expect(body.signature.r).toMatch(/^0x[0-9a-f]{64}$/);
    expect(body.signature.s).toMatch(/^0x[0-9a-f]{64}$/);
    expect(splitSignature(joinSignature(body.signature))).toEqual(body.signature);
    expect(await recoverSendAssetSigner(body.action, body.signature)).toBe(address);
    expect(body.nonce).toBe(body.action.nonce);
  });

  it('currency addresses on chain 1337 round-trip', () => {
    expect(EXCHANGE_CHAIN_ID).toBe(1337);
    expect(PERPS_USD_CURRENCY).toBe(`0x${'0'.repeat(32)}`);
    expect(parseExchangeCurrency(PERPS_USD_CURRENCY)).toEqual({ kind: 'perps' });
    expect(parseExchangeCurrency(USDC.tokenId)).toEqual({ kind: 'spot', tokenId: USDC.tokenId, dex: '' });
    const onXyz = `${HYPE.tokenId}${Buffer.from('xyz').toString('hex')}`;
    expect(parseExchangeCurrency(onXyz)).toEqual({ kind: 'spot', tokenId: HYPE.tokenId, dex: 'xyz' });
    expect(parseExchangeCurrency(onXyz.toUpperCase().replace('0X', '0x'))).toEqual({ kind: 'spot', tokenId: HYPE.tokenId, dex: 'xyz' });
    for (const c of [PERPS_USD_CURRENCY, USDC.tokenId, onXyz]) {
      expect(formatExchangeCurrency(parseExchangeCurrency(c))).toBe(c);
    }
    expect(formatExchangeCurrency({ kind: 'spot', tokenId: HYPE.tokenId, dex: 'xyz' })).toBe(onXyz);
    expect(sendAssetDexFor({ kind: 'perps' })).toBe('');
    expect(sendAssetDexFor({ kind: 'spot', tokenId: USDC.tokenId, dex: '' })).toBe('spot');
    expect(sendAssetDexFor({ kind: 'spot', tokenId: USDC.tokenId, dex: 'xyz' })).toBe('xyz');
    expect(() => parseExchangeCurrency('0x1234')).toThrow();
    expect(() => parseExchangeCurrency('0xzz')).toThrow();
    expect(() => parseExchangeCurrency(`${PERPS_USD_CURRENCY}78797a`)).toThrow();
  });

  it('parses decimal balances without floats', () => {
    expect(parseDecimalFloor('13104.514502', 6)).toBe(13_104_514_502n);
    expect(parseDecimalFloor('0.1234567', 6)).toBe(123_456n);
    expect(parseDecimalFloor('5', 6)).toBe(5_000_000n);
    expect(parseDecimalFloor('9007199254740993.000001', 6)).toBe(9_007_199_254_740_993_000_001n);
    expect(() => parseDecimalFloor('1e3', 6)).toThrow();
    expect(() => parseDecimalFloor('-1', 6)).toThrow();
  });
});

describe('exchange stand-in over HTTP', () => {
  let ex: ExchangeStandin;
  let client: ExchangeClient;
  const t0 = Date.now();

  beforeAll(async () => {
    // Transfers here go to fresh accounts: with no activation fee (its own tests are below), each test's amounts are
    // what moved.
    ex = await startExchangeStandin({ dexes: ['xyz'], activationFee: '0' });
    client = new ExchangeClient({ url: ex.url });
  });
  afterAll(async () => {
    await ex?.stop();
  });

  // The start check of the configured tokens (a new leader's, or a node's start): a transient answer of the exchange
  // is asked again; before, one injected HTTP 500 made a new leader give up its lease (chaos seed 22 on PostgreSQL).
  it("start check: asks the exchange's spotMeta again after a transient failure, and fails at once on a refusal", async () => {
    const answering = (statuses: number[]) => {
      const calls: number[] = [];
      const fetchImpl: typeof fetch = async (input, init) => {
        const status = statuses[calls.length];
        calls.push(status ?? 200);
        return status ? new Response('injected', { status }) : fetch(input, init);
      };
      const assets = new ExchangeAssets({ id: 1337, currencies: [] } as unknown as ExchangeChainConfig, new ExchangeClient({ url: ex.url, fetch: fetchImpl }));
      return { assets, calls };
    };
    const flaky = answering([500, 502]);
    await flaky.assets.check();
    expect(flaky.calls).toEqual([500, 502, 200]);
    const refused = answering([403]);
    await expect(refused.assets.check()).rejects.toThrow(/HTTP 403/);
    expect(refused.calls).toEqual([403]);
    const down = answering([500, 500, 500, 500, 500]);
    await expect(down.assets.check()).rejects.toThrow(/HTTP 500/);
    expect(down.calls).toHaveLength(4);
  });

  it('spotMeta answers in Hyperliquid shape', async () => {
    const meta = await client.spotMeta();
    const usdc = meta.tokens.find((t) => t.name === 'USDC')!;
    expect(usdc).toMatchObject({ name: 'USDC', szDecimals: 8, weiDecimals: 8, index: 0, tokenId: USDC.tokenId });
    expect(meta.tokens.find((t) => t.name === 'HYPE')).toMatchObject({ index: HYPE.index, tokenId: HYPE.tokenId });
    expect(meta.universe[0]).toMatchObject({ tokens: [HYPE.index, 0], name: 'HYPE/USDC' });
  });

  it('a signed sendAsset moves perps USD from A to B and both ledgers show it with its nonce', async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '100.5' });
    expect(await client.withdrawable(a.address)).toBe(100_500_000n);
    const state = await client.clearinghouseState(a.address);
    expect(state.withdrawable).toBe('100.5');
    expect(state.marginSummary.accountValue).toBe('100.5');

    const nonce = nextNonce();
    const p = params({ destination: b.address, amount: '12.345678', nonce });
    await expect(client.sendAsset(a.key, p, { signatureChainId: 0xa4b1 })).resolves.toEqual({ ok: true });

    expect(await client.withdrawable(a.address)).toBe(88_154_322n);
    expect(await client.withdrawable(b.address)).toBe(12_345_678n);

    for (const who of [a.address, b.address]) {
      const updates = await client.ledgerUpdates(who, t0);
      expect(updates).toHaveLength(1);
      expect(updates[0]!.hash).toMatch(/^0x[0-9a-f]{64}$/);
      expect(updates[0]!.time).toBeGreaterThanOrEqual(t0);
      expect(updates[0]!.delta).toMatchObject({
        type: 'send',
        user: a.address,
        destination: b.address,
        sourceDex: '',
        destinationDex: '',
        token: 'USDC',
        amount: '12.345678',
        usdcValue: '12.345678',
        fee: '0.0',
        nonce,
      });
    }
    // Time filter excludes older-than-startTime updates.
    expect(await client.ledgerUpdates(b.address, Date.now() + 60_000)).toEqual([]);
  });

  it('reads a ledger longer than one answer: the exchange answers a time range with at most 500 updates, the client pages', async () => {
    // One unpaged read saw the first 500 only: a deposit past them was never indexed, and a payout's
    // action past them was never found applied (and, refused when posted again, was failed and refunded).
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '1000' });
    const from = Date.now();
    const nonces: number[] = [];
    for (let i = 0; i < 520; i++) {
      const nonce = nextNonce();
      nonces.push(nonce);
      await client.sendAsset(a.key, params({ destination: b.address, amount: '0.01', nonce }), { signatureChainId: 0xa4b1 });
    }
    const raw = (await (
      await fetch(`${ex.url}/info`, { method: 'POST', body: JSON.stringify({ type: 'userNonFundingLedgerUpdates', user: b.address, startTime: from }) })
    ).json()) as unknown[];
    expect(raw).toHaveLength(500);
    const updates = await client.ledgerUpdates(b.address, from);
    expect(updates.map((u) => (u.delta as SendLedgerDelta).nonce)).toEqual(nonces);
  });

  it('spot token transfer on a named DEX', async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { spot: { token: 'HYPE', dex: 'xyz', amount: '10' } });
    ex.credit(a.address, { spot: { token: 'HYPE', amount: '3' } });
    const nonce = nextNonce();
    await client.sendAsset(a.key, params({ destination: b.address, sourceDex: 'xyz', destinationDex: 'xyz', token: HYPE_TOKEN, amount: '2.5', nonce }), {
      signatureChainId: 1,
    });
    expect(ex.state.spotBalance(a.address, 'HYPE', 'xyz')).toBe(750_000_000n);
    expect(ex.state.spotBalance(b.address, 'HYPE', 'xyz')).toBe(250_000_000n);
    // the plain spot balance is untouched
    expect(await client.spotBalances(a.address)).toEqual([{ coin: 'HYPE', token: HYPE.index, total: '3.0', hold: '0.0', entryNtl: '0.0' }]);
    expect(await client.spotBalances(b.address)).toEqual([]);
    const [u] = await client.ledgerUpdates(b.address, t0);
    expect(u!.delta).toMatchObject({ type: 'send', sourceDex: 'xyz', destinationDex: 'xyz', token: 'HYPE', amount: '2.5', usdcValue: '62.5', nonce });
  });

  it('perps USD to spot USDC of another user (dex "" to "spot")', async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '5' });
    await client.sendAsset(a.key, params({ destination: b.address, destinationDex: 'spot', amount: '1.25' }), { signatureChainId: 1 });
    expect(await client.withdrawable(a.address)).toBe(3_750_000n);
    expect(await client.spotBalances(b.address)).toEqual([{ coin: 'USDC', token: 0, total: '1.25', hold: '0.0', entryNtl: '0.0' }]);
  });

  it('a reused nonce is rejected', async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '10' });
    const nonce = nextNonce();
    await client.sendAsset(a.key, params({ destination: b.address, amount: '1', nonce }), { signatureChainId: 1 });
    const err = await client.sendAsset(a.key, params({ destination: b.address, amount: '2', nonce }), { signatureChainId: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExchangeActionError);
    expect((err as Error).message).toMatch(/Invalid nonce: duplicate nonce \d+$/);
    expect(await client.withdrawable(a.address)).toBe(9_000_000n);
    expect(await client.withdrawable(b.address)).toBe(1_000_000n);
    // replaying the very same signed body is rejected too
    const body = await signSendAsset(a.key, params({ destination: b.address, amount: '1' }), { signatureChainId: 1 });
    await client.submit(body);
    await expect(client.submit(body)).rejects.toThrow(/duplicate nonce/);
    expect(await client.withdrawable(a.address)).toBe(8_000_000n);
    // the same nonce by a different signer is fine (per-signer nonce set)
    ex.credit(b.address, { perpsUsd: '1' });
    await expect(client.sendAsset(b.key, params({ destination: a.address, amount: '1', nonce }), { signatureChainId: 1 })).resolves.toEqual({ ok: true });
  });

  it('a tampered amount or destination is not paid from the funded account', async () => {
    const a = newWallet();
    const b = newWallet();
    const mallory = newWallet();
    ex.credit(a.address, { perpsUsd: '50' });
    const body = await signSendAsset(a.key, params({ destination: b.address, amount: '1' }), { signatureChainId: 1 });
    // tampered amount: recovers some other address, which has no funds
    const r1 = await postRaw(ex.url, { ...body, action: { ...body.action, amount: '50' } });
    expect(r1.status).toBe(200);
    expect(r1.json.status).toBe('err');
    expect(r1.json.response).toMatch(/insufficient balance/i);
    expect(r1.json.response).not.toContain(a.address);
    // tampered destination
    const r2 = await postRaw(ex.url, { ...body, action: { ...body.action, destination: mallory.address } });
    expect(r2.json.status).toBe('err');
    // signature from another key over a body claiming to pay out of A's account: the signer is the
    // other key (nothing trusted from the body), so A's balance is untouched.
    const forged = await signSendAsset(mallory.key, params({ destination: mallory.address, amount: '5' }), { signatureChainId: 1 });
    const r3 = await postRaw(ex.url, { ...forged, user: a.address });
    expect(r3.json.status).toBe('err');
    expect(r3.json.response).toContain(mallory.address);
    // garbage signature
    const r4 = await postRaw(ex.url, { ...body, signature: { r: `0x${'11'.repeat(32)}`, s: `0x${'22'.repeat(32)}`, v: 5 } });
    expect(r4.json.status).toBe('err');
    expect(await client.withdrawable(a.address)).toBe(50_000_000n);
    expect(await client.withdrawable(b.address)).toBe(0n);
    expect(await client.withdrawable(mallory.address)).toBe(0n);
    expect(await client.ledgerUpdates(a.address, 0)).toEqual([]);
    // the untampered body still goes through
    await client.submit(body);
    expect(await client.withdrawable(b.address)).toBe(1_000_000n);
  });

  it('a wallet signing the spec message (action incl. type and signatureChainId) is accepted', async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '3' });
    const action = buildSendAssetAction(params({ destination: b.address, amount: '2' }), 10);
    // As a wallet does it from the quote step: domain + eip712Types, message = the whole action.
    const signature = await privateKeyToAccount(a.key).signTypedData({
      domain: sendAssetDomain(10),
      types: SEND_ASSET_TYPES,
      primaryType: 'ExchangeTransaction:SendAsset',
      message: action as unknown as Record<string, unknown>,
    } as never);
    const r = await postRaw(ex.url, { signature: splitSignature(signature), nonce: action.nonce, action });
    expect(r.json).toEqual({ status: 'ok', response: { type: 'default' } });
    expect(await client.withdrawable(b.address)).toBe(2_000_000n);
  });

  it('insufficient balance is rejected with no balance change', async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '1' });
    await expect(client.sendAsset(a.key, params({ destination: b.address, amount: '1.000001' }), { signatureChainId: 1 })).rejects.toThrow(
      /Insufficient balance/,
    );
    expect(await client.withdrawable(a.address)).toBe(1_000_000n);
    expect(await client.withdrawable(b.address)).toBe(0n);
  });

  it('malformed actions are rejected with a clear message; malformed JSON is a 400', async () => {
    const a = newWallet();
    ex.credit(a.address, { perpsUsd: '10', spot: { token: 'HYPE', amount: '1' } });
    const bad = [
      [params({ destination: a.address, amount: '1.0000001' }), /more than 6 decimals/],
      [params({ destination: a.address, amount: '-1' }), /invalid decimal/],
      [params({ destination: a.address, token: 'USDC' }), /Unknown token/],
      [params({ destination: a.address, sourceDex: 'nope' }), /Unknown sourceDex/],
      [params({ destination: a.address, sourceDex: 'spot', token: HYPE_TOKEN, destinationDex: '' }), /only USDC/],
      [params({ destination: a.address, exchangeChain: 'Testnet' }), /exchangeChain/],
      [params({ destination: a.address, fromSubAccount: a.address }), /Sub-accounts/],
    ] as const;
    for (const [p, re] of bad) {
      await expect(client.sendAsset(a.key, p, { signatureChainId: 1 })).rejects.toThrow(re);
    }
    const body = await signSendAsset(a.key, params({ destination: a.address }), { signatureChainId: 1 });
    const mismatched = await postRaw(ex.url, { ...body, nonce: body.nonce + 1 });
    expect(mismatched.json).toEqual({ status: 'err', response: expect.stringMatching(/does not match action nonce/) });
    const extra = await postRaw(ex.url, { ...body, action: { ...body.action, time: 1 } });
    expect(extra.json.response).toMatch(/Unexpected field/);
    const noSig = await postRaw(ex.url, { action: body.action, nonce: body.nonce });
    expect(noSig.json.response).toMatch(/signature/i);
    const other = await postRaw(ex.url, { ...body, action: { ...body.action, type: 'withdraw3' } });
    expect(other.json.response).toMatch(/Unsupported action type/);
    const junk = await postRaw(ex.url, '{not json');
    expect(junk.status).toBe(400);
    expect(await client.withdrawable(a.address)).toBe(10_000_000n);
  });

  it('signatureChainId 0xa4b1 and 0x1 both verify when used consistently, not when mixed', async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '10' });
    await client.sendAsset(a.key, params({ destination: b.address, amount: '1' }), { signatureChainId: 0xa4b1 });
    await client.sendAsset(a.key, params({ destination: b.address, amount: '2' }), { signatureChainId: 1 });
    expect(await client.withdrawable(b.address)).toBe(3_000_000n);
    // signed for 0xa4b1, posted claiming 0x1: recovers a different (unfunded) signer
    const body = await signSendAsset(a.key, params({ destination: b.address, amount: '1' }), { signatureChainId: 0xa4b1 });
    const r = await postRaw(ex.url, { ...body, action: { ...body.action, signatureChainId: '0x1' } });
    expect(r.json.status).toBe('err');
    expect(await client.withdrawable(a.address)).toBe(7_000_000n);
  });

  it('restricts signature chain ids when configured', async () => {
    const only = await startExchangeStandin({ signatureChainIds: [0xa4b1], activationFee: '0' });
    try {
      const c = new ExchangeClient({ url: only.url });
      const a = newWallet();
      only.credit(a.address, { perpsUsd: '1' });
      await expect(c.sendAsset(a.key, params({ destination: zeroAddress, amount: '1' }), { signatureChainId: 1 })).rejects.toThrow(/not accepted/);
      await expect(c.sendAsset(a.key, params({ destination: zeroAddress, amount: '1' }), { signatureChainId: 0xa4b1 })).resolves.toEqual({ ok: true });
    } finally {
      await only.stop();
    }
  });

  it('info errors: unknown type is a 400 surfaced naming the endpoint', async () => {
    const res = await fetch(`${ex.url}/info`, { method: 'POST', body: JSON.stringify({ type: 'nope' }) });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatch(/Unknown info request type/);
    const bad = await fetch(`${ex.url}/info`, { method: 'POST', body: JSON.stringify({ type: 'clearinghouseState', user: 'x' }) });
    expect(bad.status).toBe(400);
  });

  it('client HTTP failures name the endpoint and never leak the private key', async () => {
    const down = await startExchangeStandin();
    const url = down.url;
    await down.stop();
    const c = new ExchangeClient({ url, timeoutMs: 2_000 });
    const { key, address } = newWallet();
    const err = await c.withdrawable(address).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExchangeHttpError);
    expect((err as Error).message).toContain(`${url}/info`);
    const err2 = await c.sendAsset(key, params({ destination: address }), { signatureChainId: 1 }).catch((e: unknown) => e);
    expect(err2).toBeInstanceOf(ExchangeHttpError);
    expect((err2 as Error).message).toContain(`${url}/exchange`);
    expect((err2 as Error).message).not.toContain(key.slice(2));
    const err3 = await c.sendAsset('0x1234' as Hex, params({ destination: address }), { signatureChainId: 1 }).catch((e: unknown) => e);
    expect((err3 as Error).message).toBe('signSendAsset: invalid private key');
  });

  it('client times out against a server that never answers', async () => {
    const { createServer } = await import('node:http');
    const hang = createServer(() => {});
    await new Promise<void>((r) => hang.listen(0, '127.0.0.1', () => r()));
    const port = (hang.address() as { port: number }).port;
    try {
      const c = new ExchangeClient({ url: `http://127.0.0.1:${port}`, timeoutMs: 200 });
      await expect(c.spotMeta()).rejects.toThrow(new RegExp(`127\\.0\\.0\\.1:${port}/info .*timed out after 200 ms`));
    } finally {
      hang.closeAllConnections();
      await new Promise<void>((r) => hang.close(() => r()));
    }
  });
});

describe('the exchange stand-in charges the activation fee', () => {
  let ex: ExchangeStandin;
  let client: ExchangeClient;
  beforeAll(async () => {
    ex = await startExchangeStandin({ dexes: ['xyz'] });
    client = new ExchangeClient({ url: ex.url });
  });
  afterAll(async () => {
    await ex?.stop();
  });

  it("to the sender of the first transfer to an account it does not know, in perps USD, shown as the update's fee", async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '10' });
    expect(await client.activationFee(b.address, a.address)).toBe(1_000_000n);
    await client.sendAsset(a.key, params({ destination: b.address, amount: '2' }), { signatureChainId: 1 });
    expect(await client.withdrawable(a.address)).toBe(7_000_000n);
    expect(await client.withdrawable(b.address)).toBe(2_000_000n);
    expect((await client.ledgerUpdates(b.address, 0))[0]!.delta).toMatchObject({ amount: '2', fee: '1.0', feeToken: 'USDC' });
    // Known now: the next transfer is free.
    expect(await client.activationFee(b.address, a.address)).toBe(0n);
    await client.sendAsset(a.key, params({ destination: b.address, amount: '1' }), { signatureChainId: 1 });
    expect(await client.withdrawable(a.address)).toBe(6_000_000n);
    expect((await client.ledgerUpdates(b.address, 0))[1]!.delta).toMatchObject({ fee: '0.0', feeToken: '' });
  });

  it('again once the account was emptied (purged); a spot transfer pays it from perps USD; a sender short of it is refused', async () => {
    const a = newWallet();
    const b = newWallet();
    ex.credit(a.address, { perpsUsd: '1.5', spot: { token: 'HYPE', amount: '2' } });
    ex.credit(b.address, { perpsUsd: '1' });
    expect(await client.activationFee(b.address, a.address)).toBe(0n);
    await client.sendAsset(b.key, params({ destination: a.address, amount: '1' }), { signatureChainId: 1 });
    expect(ex.state.exists(b.address)).toBe(false);
    expect(await client.activationFee(b.address, a.address)).toBe(1_000_000n);
    await client.sendAsset(a.key, params({ destination: b.address, sourceDex: 'spot', destinationDex: 'spot', token: HYPE_TOKEN, amount: '1' }), {
      signatureChainId: 1,
    });
    expect(await client.withdrawable(a.address)).toBe(1_500_000n);
    expect(ex.state.spotBalance(b.address, 'HYPE')).toBe(100_000_000n);
    // 1.5 USD left: a transfer of 1 to a new account needs 2.
    const c = newWallet();
    await expect(client.sendAsset(a.key, params({ destination: c.address, amount: '1' }), { signatureChainId: 1 })).rejects.toThrow(
      /Insufficient USDC balance for token transfer gas/,
    );
    expect(await client.withdrawable(a.address)).toBe(1_500_000n);
    expect(ex.state.exists(c.address)).toBe(false);
  });
});
