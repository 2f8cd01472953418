import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ExchangeClient, ExchangeHttpError } from '../../src/chains/exchange/client.ts';
import type { SignedSendAsset } from '../../src/chains/exchange/typedData.ts';
import { dustSender } from '../helpers/exchangeSteps.ts';
import { api, executeSteps, startStack, until, type Stack } from '../helpers/stack.ts';

// Review of the last commits (ba41475: an exchange action that can never be applied is failed and refunded).
//
// The confirm pass fails an open action once the exchange can never take its nonce, after reading the solver's ledger
// "again from where the exchange could have applied it". That read pages by time: the exchange answers at most 500
// updates of a time range, and a full page within one millisecond cannot move on from it, so ExchangeClient.ledgerUpdates
// starts the next page a millisecond later: every update past the 500th of one millisecond is never read. The exchange
// stamps updates with its block time, and anyone can put updates in the solver's ledger (a usdSend of 0.01 USD to it is
// one). An attacker who fills the millisecond (block) the solver's action lands in makes an applied action invisible:
// before ba41475 it stayed open for good (reposted, refused as a used nonce): safe. Now, once the exchange's clock is 2
// days past its nonce (or 100 later nonces of the solver are seen), it is taken for dead, its payout failed and the
// deposit refunded, while the recipient was paid: paid twice.
let s: Stack;
const BASE = 8453;
const EX = 1337;
const PERPS = `0x${'0'.repeat(32)}`;
const FLOOD = 500;

beforeAll(async () => {
  s = await startStack();
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const ex = () => s.devnet.exchange!;
const state = () => ex().standin.state;
const account = (i: number) => privateKeyToAccount(s.devnet.accounts[i]!.privateKey);
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const usdcBalance = (who: Address) => s.publicClient(BASE).readContract({ address: usdc(BASE), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

describe('an exchange fill applied in a millisecond an attacker filled with 500 updates of the solver ledger', () => {
  it('is never failed and refunded once its nonce is old: the recipient was paid', async () => {
    const st = state() as unknown as { now: () => number };
    const clock = st.now;
    const usdSend = dustSender(s);

    const user = account(1);
    const recipient = account(2).address;
    const q = await api(s.url, '/quote/v2', {
      body: {
        user: user.address,
        recipient,
        originChainId: BASE,
        destinationChainId: EX,
        originCurrency: usdc(BASE),
        destinationCurrency: PERPS,
        amount: '5000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as string;
    const payoutId = `fill:${requestId}`;
    const recipientBefore = state().perpsUsd(recipient);
    const userBefore = await usdcBalance(user.address);

    // One block of the exchange: its clock stands still while the attacker's 500 transfers to the solver land, then the
    // fill. The fill's answer is lost (a timeout after the exchange applied it): its outcome is for the ledger to say.
    const T = Date.now();
    st.now = () => T;
    const submit = ExchangeClient.prototype.submit;
    let fillPosts = 0;
    let fillBody: SignedSendAsset | undefined;
    ExchangeClient.prototype.submit = async function (this: ExchangeClient, body: SignedSendAsset) {
      if (body.action?.destination?.toLowerCase() !== recipient.toLowerCase()) return submit.call(this, body);
      if (fillPosts++ > 0) return submit.call(this, body);
      await submit.call(this, body);
      // Noted once applied: the test reads the recipient's balance as soon as it is set.
      fillBody = body;
      throw new ExchangeHttpError(`POST ${this.url}/exchange (sendAsset) failed: timed out after 10000 ms`, `${this.url}/exchange`);
    };
    try {
      for (let i = 0; i < FLOOD; i++) await usdSend();
      await executeSteps(s, q.body, 1);
      await until(() => (fillBody ? true : undefined), 'the fill posted', 60_000);
      // Applied: the recipient holds the 5 USD.
      expect(state().perpsUsd(recipient)).toBeGreaterThan(recipientBefore);
      // The node reposts it and the exchange refuses the used nonce: left open, as before ba41475.
      await until(() => (fillPosts >= 2 ? true : undefined), 'the fill posted again', 30_000);
      expect(s.node.ledger.payouts.get(payoutId)!.state).toBe('sent');

      // Two days and more later on the exchange's clock (or 100 later nonces of the solver): the attacker's next
      // transfer shows the solver the exchange's time.
      st.now = () => Date.now() + 3 * 24 * 60 * 60_000;
      await usdSend();
      const posts = fillPosts;
      // Two more confirm passes read the ledger after that transfer: each either fails the payout or posts it again.
      await until(() => (s.node.ledger.payouts.get(payoutId)!.state !== 'sent' || fillPosts >= posts + 2 ? true : undefined), 'two confirm passes', 90_000);
    } finally {
      ExchangeClient.prototype.submit = submit;
      st.now = clock;
    }
    // Before: the applied fill was taken for dead, failed (TRANSACTION_REVERTED) and its 5 USDC deposit refunded on 8453,
    // the recipient keeping the 5 USD it was paid.
    expect(state().perpsUsd(recipient)).toBeGreaterThan(recipientBefore);
    expect(s.node.ledger.payouts.get(payoutId)!.state).not.toBe('failed');
    expect(s.node.ledger.payouts.forRequest(requestId).filter((p) => p.kind === 'refund')).toEqual([]);
    expect(await usdcBalance(user.address)).toBe(userBefore - 5_000_000n);
  }, 240_000);
});
