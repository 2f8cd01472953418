// Attacks through quote parameters that turn a sponsor's app balance (or the solver's inventory)
// into value for the caller: an unbounded gas top-up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { api, startStack, until, type Stack } from '../helpers/stack.ts';
import { linkWallet } from '../helpers/link.ts';

let s: Stack;
let key: { key: string; id: string };
const A = 8453;
const B = 10;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;

beforeAll(async () => {
  s = await startStack();
  // A key whose sponsor wallet (account 4) holds 5,000 USD of app balance.
  key = s.node.ledger.apiKeys.create('sponsored app');
  const sponsor = privateKeyToAccount(account(4).privateKey);
  expect((await linkWallet(s.url, key.key, sponsor)).status).toBe(200);
  const w = s.wallet(1, A);
  const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 5_000_000_000n] });
  const hash = await w.sendTransaction({
    account: w.account!,
    chain: w.chain,
    to: usdc(A),
    data: `${data}012345abcdef${sponsor.address.slice(2).toLowerCase()}012345abcdef` as Hex,
  });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the app balance credit');
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

// A sponsored quote of 10 USDC with a gas top-up (of `topupGasAmount`, or the default).
const quote = (topupGasAmount?: string, extra: Record<string, unknown> = {}) =>
  api(s.url, '/quote/v2', {
    apiKey: key.key,
    body: {
      user: account(2).address,
      recipient: '0x00000000000000000000000000000000000b0b01' as Address,
      originChainId: A,
      destinationChainId: B,
      originCurrency: usdc(A),
      destinationCurrency: usdc(B),
      amount: '10000000',
      tradeType: 'EXACT_INPUT',
      topupGas: true,
      ...(topupGasAmount ? { topupGasAmount } : {}),
      subsidizeFees: true,
      ...extra,
    },
  });

describe('topupGasAmount', () => {
  it("is capped per chain: a sponsored quote cannot turn the sponsor's balance into 1,000 USD of gas", async () => {
    const r = await quote('1000000000');
    expect(r.status).toBe(400);
    expect(r.body.errorCode).toBe('INVALID_INPUT_PARAMETERS');
    expect(r.body.message).toMatch(/topupGasAmount: .*cap of 50 USD.*chain 10/);
    expect(s.node.ledger.db.prepare(`SELECT COUNT(*) AS n FROM requests WHERE features LIKE '%gas_top_up%'`).get()).toEqual({ n: 0 });
  });

  it('still delivers a top-up under the cap', async () => {
    const r = await quote('3000000');
    expect(r.status).toBe(200);
  });
});

describe('an open deposit address', () => {
  it('is never sponsored: each arrival would spend the sponsor again, its top-up included, on one quote', async () => {
    // Rule 6 judged the sponsored fees once, at the quoted amount; every arrival of an open address is a fill of its
    // own, so one sponsored quote paid gas, fees and a top-up from the sponsor for as many arrivals as anyone sent
    // (three 5 USDC arrivals cost the sponsor 155 USD in a review's run).
    const r = await quote(undefined, { refundTo: account(2).address, useDepositAddress: true, depositAddressType: 'open' });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ errorCode: 'INVALID_INPUT_PARAMETERS', message: expect.stringMatching(/subsidizeFees: an open deposit address/) });
  });
});
