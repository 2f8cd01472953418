// A wallet that unlinks from an API key while one of the key's spends of it is being priced (review-pg-money). The
// route read the key's wallet before its price, simulation and balance reads, and the ledger transaction that holds or
// charges the wallet never read the link again: the unlink answered Success, and the wallet was spent for the key after.
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PriceSource } from '../../src/quote/prices.ts';
import { fundAppBalance, linkWallet } from '../helpers/appBalance.ts';
import { api, nativeBridge, startStack, until, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;
beforeAll(async () => {
  s = await startStack();
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

// Holds the node's price reads (as the API's reads wait at a busy provider) until `release`; `entered` once one waits.
function holdPrices() {
  const prices = (s.node.desk as unknown as { prices: PriceSource }).prices;
  const usdPrice = prices.usdPrice.bind(prices);
  const state = { entered: false, release: () => {} };
  const gate = new Promise<void>((r) => (state.release = r));
  prices.usdPrice = async (c) => {
    state.entered = true;
    await gate;
    return usdPrice(c);
  };
  return { state, restore: () => ((prices.usdPrice = usdPrice), state.release()) };
}

// The wallet's own signed unlink of the key, through the API.
async function unlink(walletIndex: number, keyId: string) {
  const wallet = s.devnet.accounts[walletIndex]!;
  const ask = await api(s.url, '/app-balance/unlink', { body: { wallet: wallet.address, apiKeyId: keyId } });
  const d = ask.body.steps[0].items[0].data;
  const signature = await privateKeyToAccount(wallet.privateKey).signMessage({ message: d.sign.message });
  return api(s.url, d.post.endpoint, { body: { ...d.post.body, signature } });
}

describe('a wallet that unlinks while a spend of its key is priced', () => {
  it('is not held for a fast fill: the unlink answered Success before the fill took its balance', { timeout: 120_000 }, async () => {
    const key = s.node.ledger.apiKeys.create('unlink fast fill');
    await linkWallet(s, key, 3);
    const wallet = s.devnet.accounts[3]!.address;
    await fundAppBalance(s, 3, wallet, 100_000_000n);
    const q = await api(s.url, '/quote/v2', {
      apiKey: key.key,
      body: nativeBridge(s.devnet.accounts[1]!.address, privateKeyToAccount(generatePrivateKey()).address, A, B, '10000000000000000'),
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const before = s.node.ledger.balances.summary(wallet);
    const held = holdPrices();
    try {
      const ff = api(s.url, '/fast-fill', { apiKey: key.key, body: { requestId: q.body.steps[0].requestId } });
      await until(() => (held.state.entered ? true : undefined), 'the fast fill to read its prices');
      const un = await unlink(3, key.id);
      expect({ status: un.status, unlinked: un.body.unlinked }).toEqual({ status: 200, unlinked: [key.id] });
      held.state.release();
      const r = await ff;
      expect({ status: r.status, code: r.body.errorCode }).toEqual({ status: 403, code: 'NO_APP_BALANCE' });
      expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    } finally {
      held.restore();
    }
  });

  it('is not charged for a relay: the unlink answered Success before the relay held its balance', { timeout: 120_000 }, async () => {
    const key = s.node.ledger.apiKeys.create('unlink relay');
    await linkWallet(s, key, 4);
    const wallet = s.devnet.accounts[4]!.address;
    await fundAppBalance(s, 4, wallet, 100_000_000n);
    const before = s.node.ledger.balances.summary(wallet);
    const held = holdPrices();
    try {
      const relay = api(s.url, '/execute', {
        apiKey: key.key,
        body: {
          executionKind: 'rawCalls',
          data: { chainId: A, to: privateKeyToAccount(generatePrivateKey()).address, data: '0x', value: '0' },
          executionOptions: { referrer: 'tests', subsidizeFees: true },
        },
      });
      await until(() => (held.state.entered ? true : undefined), 'the relay to read its price');
      const un = await unlink(4, key.id);
      expect({ status: un.status, unlinked: un.body.unlinked }).toEqual({ status: 200, unlinked: [key.id] });
      held.state.release();
      const r = await relay;
      expect({ status: r.status, code: r.body.errorCode }).toEqual({ status: 403, code: 'NO_SPONSOR_WALLET' });
      expect(s.node.ledger.balances.summary(wallet)).toEqual(before);
    } finally {
      held.restore();
    }
  });

  it('is not named the sponsor of a quote recorded after its unlink answered (review-today-5)', { timeout: 120_000 }, async () => {
    const key = s.node.ledger.apiKeys.create('unlink sponsored quote');
    await linkWallet(s, key, 3);
    const wallet = s.devnet.accounts[3]!.address;
    await fundAppBalance(s, 3, wallet, 100_000_000n);
    const held = holdPrices();
    try {
      const quote = api(s.url, '/quote/v2', {
        apiKey: key.key,
        body: {
          ...nativeBridge(s.devnet.accounts[1]!.address, privateKeyToAccount(generatePrivateKey()).address, A, B, '10000000000000000'),
          subsidizeFees: true,
        },
      });
      await until(() => (held.state.entered ? true : undefined), 'the quote to read its prices');
      const un = await unlink(3, key.id);
      expect({ status: un.status, unlinked: un.body.unlinked }).toEqual({ status: 200, unlinked: [key.id] });
      held.state.release();
      const q = await quote;
      expect({ status: q.status, code: q.body.errorCode }).toEqual({ status: 403, code: 'NO_APP_BALANCE' });
    } finally {
      held.restore();
    }
  });
});
