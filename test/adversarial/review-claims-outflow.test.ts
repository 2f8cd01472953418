// Adversarial review of the hourly outflow budget (risk.chains[].outflowUsdPerHour). The budget caps what leaves the
// solver's inventory on a chain per hour, but it summed fills only: an app fee claim pays out of the same inventory, on
// the chain and in the currency the claimant picks, and was never counted. An app setting app fees of 80% or more turns
// most of each order's value into a claim: two 60 USD orders at 80% left 24 USD of fills in the budget and 96 USD of
// fees that one claim paid out of the chain's inventory at once, past the operator's 100 USD hour. And a fill decided
// after a claim did not see the claim's outflow either. A sponsored relay's value (POST /execute rawCalls) is native
// currency sent from the solver's key: it was not counted either.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zeroAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { fundAppBalance, linkWallet } from '../helpers/appBalance.ts';
import { pastFinality } from '../helpers/finality.ts';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

describe('on the devnet: app fee claims count in the destination chain’s hourly outflow budget', () => {
  const A = 8453;
  const B = 10;
  let s: Stack;
  let adminKey: string;
  beforeAll(async () => {
    // 100 USD an hour may leave the solver's inventory on B, and on A (ETH at 3000 USD on the devnet).
    s = await startStack({
      config: {
        admin: { port: 0 },
        risk: {
          chains: [
            { chainId: B, outflowUsdPerHour: '100' },
            { chainId: A, outflowUsdPerHour: '100' },
          ],
        },
      },
    });
    adminKey = s.node.ledger.operations.createAdminKey('ops-claims').key;
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });
  const admin = (path: string) => api(s.node.adminUrl, path, { headers: { authorization: `Bearer ${adminKey}` } });
  // What the ledger counts as owed to `wallet` in ETH on B.
  const owed = (wallet: string) => s.node.ledger.appFees.balances(wallet).find((b) => b.chainId === B && b.currency === zeroAddress)?.amount ?? 0n;
  const claimsTo = (wallet: string) => s.node.ledger.payouts.ofChain(B).filter((p) => p.kind === 'claim' && p.recipient.toLowerCase() === wallet.toLowerCase());

  // The admin listing of a deposit held back (its chainId is the deposit's, the origin).
  const waiting = (requestId: Hex) =>
    until(async () => (await admin('/admin/payouts?state=waiting')).body.payouts.find((p: any) => p.requestId === requestId), `request ${requestId} waiting`);

  // A bridge of `wei` ETH from A to B by account `account`; `feeBps` of it an app fee to `feeTo` (none when 0). Waits for the
  // request to end and returns its id.
  async function bridge(account: number, wei: string, feeTo?: string, feeBps = 0, from = A, to = B): Promise<Hex> {
    const user = s.devnet.accounts[account]!.address;
    const extra = feeTo ? { appFees: [{ recipient: feeTo, fee: feeBps }] } : {};
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, from, to, wei, extra) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, account);
    return requestId;
  }

  // The fee recipient's claim of its ETH fees on B, to itself: ask, sign, post.
  async function claim(app: PrivateKeyAccount) {
    const ask = await api(s.url, `/app-fees/${app.address}/claim`, { body: { chainId: B, currency: zeroAddress, recipient: app.address } });
    expect(ask.status, JSON.stringify(ask.body)).toBe(200);
    const item = ask.body.steps[0].items[0].data;
    const signature = await app.signMessage({ message: item.sign.message });
    return api(s.url, `${item.post.endpoint}?signature=${signature}`, { body: item.post.body });
  }

  it('refuses a claim worth more than the budget left on its chain, the fees staying owed', { timeout: 120_000 }, async () => {
    const app = privateKeyToAccount(generatePrivateKey());
    // Two 0.02 ETH (60 USD) orders with 80% app fees: about 24 USD of fills on B, about 96 USD of fees owed there.
    const fills: Hex[] = [];
    for (const account of [1, 2]) {
      const id = await bridge(account, '20000000000000000', app.address, 8000);
      expect((await waitForStatus(s.url, id, ['success', 'failure', 'refund'])).status).toBe('success');
      fills.push(id);
    }
    await pastFinality(s, A);
    const fees = owed(app.address);
    expect(fees).toBeGreaterThan(31_000_000_000_000_000n);

    const r = await claim(app);
    // Before: 200, a claim payout of the 0.032 ETH (96 USD) less its gas on B, past the 76 USD the hour had left.
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.errorCode).toBe('OUTFLOW_BUDGET');
    expect(r.body.message).toMatch(/outflowUsdPerHour: 100 USD/);
    // It fits once the second fill has left the hour (the first alone leaving is not enough: 12 + 96 > 100).
    const second = s.node.ledger.payouts.get(`fill:${fills[1]}`)!;
    expect(r.body.message).toContain(`until ${new Date(Number(second.decided_at) + 3_600_000).toISOString()}`);
    expect(claimsTo(app.address)).toEqual([]);
    expect(owed(app.address)).toBe(fees);
  });

  it('counts a claim it pays: a fill decided after it that the claim leaves no room for waits', { timeout: 120_000 }, async () => {
    // About 24 USD of fills on B so far. A 0.02 ETH order with 90% fees: 6 USD more of fill, 54 USD of fees.
    const app = privateKeyToAccount(generatePrivateKey());
    const first = await bridge(3, '20000000000000000', app.address, 9000);
    expect((await waitForStatus(s.url, first, ['success', 'failure', 'refund'])).status).toBe('success');
    await pastFinality(s, A);
    const paid = await claim(app);
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    await until(() => (s.node.ledger.payouts.get(paid.body.claimId)?.state === 'success' ? true : undefined), 'the claim paid');

    // About 84 USD left B this hour: a 0.012 ETH (36 USD) fill fits under 100 USD only if the claim is not counted.
    const second = await bridge(4, '12000000000000000');
    // Before: the fill was paid (outflow 30 USD of fills, the claim's 54 USD unseen).
    expect(await waiting(second)).toMatchObject({ reason: 'OUTFLOW_BUDGET', chainId: A });
    expect(s.node.ledger.payouts.forRequest(second)).toEqual([]);
  });

  it('counts a sponsored relay’s value: a fill decided after it that the relay leaves no room for waits', { timeout: 120_000 }, async () => {
    // An app's key, sponsored by account 2's app balance (100 USD), relays 0.015 ETH (45 USD) of the solver's ETH on A
    // to a fresh wallet.
    const key = s.node.ledger.apiKeys.create('relaying app');
    await linkWallet(s, key, 2);
    await fundAppBalance(s, 1, s.devnet.accounts[2]!.address, 100_000_000n);
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const relay = await api(s.url, '/execute', {
      apiKey: key.key,
      body: {
        executionKind: 'rawCalls',
        data: { chainId: A, to, data: '0x', value: '15000000000000000' },
        executionOptions: { referrer: 'tests', subsidizeFees: true },
      },
    });
    expect(relay.status, JSON.stringify(relay.body)).toBe(200);
    await waitForStatus(s.url, relay.body.requestId, ['success']);
    expect(await s.publicClient(A).getBalance({ address: to })).toBe(15_000_000_000_000_000n);

    // A 0.02 ETH (60 USD) fill on A fits under 100 USD only if the relay's 45 USD are not counted.
    const fill = await bridge(3, '20000000000000000', undefined, 0, B, A);
    // Before: the fill was paid (no outflow counted on A).
    expect(await waiting(fill)).toMatchObject({ reason: 'OUTFLOW_BUDGET', chainId: B });
    expect(s.node.ledger.payouts.forRequest(fill)).toEqual([]);
  });

  it('refuses a sponsored relay whose value would pass the budget left: 409 OUTFLOW_BUDGET, nothing held', { timeout: 120_000 }, async () => {
    // The same app, its balance topped up: 45 USD of A's 100 USD hour are the relay above's.
    const key = s.node.ledger.apiKeys.create('relaying app, again');
    await linkWallet(s, key, 2);
    await fundAppBalance(s, 1, s.devnet.accounts[2]!.address, 100_000_000n);
    const relay = (value: string) =>
      api(s.url, '/execute', {
        apiKey: key.key,
        body: {
          executionKind: 'rawCalls',
          data: { chainId: A, to: privateKeyToAccount(generatePrivateKey()).address, data: '0x', value },
          executionOptions: { referrer: 'tests', subsidizeFees: true },
        },
      });
    // 45 USD more fits (90 of 100)...
    const fits = await relay('15000000000000000');
    expect(fits.status, JSON.stringify(fits.body)).toBe(200);
    // Settled first: its hold gives way to its charge (less) when it lands.
    await waitForStatus(s.url, fits.body.requestId, ['success']);
    const held = s.node.ledger.balances.summary(s.devnet.accounts[2]!.address).available;
    // ... 45 USD after it does not. Before: admitted and paid (the budget never refused a relay).
    const over = await relay('15000000000000000');
    expect(over.status, JSON.stringify(over.body)).toBe(409);
    expect(over.body.errorCode).toBe('OUTFLOW_BUDGET');
    expect(over.body.message).toContain('outflowUsdPerHour: 100 USD');
    expect(s.node.ledger.balances.summary(s.devnet.accounts[2]!.address).available).toBe(held);
  });
});
