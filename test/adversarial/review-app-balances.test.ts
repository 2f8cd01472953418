// Adversarial review of app balances and app fees (round 5). An app with a key of its own names a fresh fee recipient
// for every order, claims each fee as soon as the fill is paid, and a reorg then takes the order's deposit back. The fee
// is taken back (accrual_reversal), but as a debt of that recipient alone: it never earns again, so nothing ever repays
// it, and the solver paid the fee out of its own inventory for a fill whose deposit never came.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zeroAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { pastFinality } from '../helpers/finality.ts';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

describe('on the devnet: app fees claimed before the fill’s deposit is final', () => {
  const A = 8453;
  const B = 10;
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ confirmations: 3 });
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });
  const rpc = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as any, params: params as any });
  // What the ledger counts as owed to `wallet` in ETH on B (negative: a debt).
  const owed = (wallet: string) => s.node.ledger.appFees.balances(wallet).find((b) => b.chainId === B && b.currency === zeroAddress)?.amount ?? 0n;
  // What claim payouts to `wallet` paid or may still pay.
  const claimedTo = (wallet: string) =>
    s.node.ledger.payouts
      .ofChain(B)
      .filter((p) => p.kind === 'claim' && p.recipient.toLowerCase() === wallet.toLowerCase() && p.state !== 'failed')
      .reduce((sum, p) => sum + BigInt(p.amount), 0n);

  // A 0.01 ETH bridge from A to B by account 1, 5% of it as an app fee to `feeTo`, filled. Returns the request id.
  async function filledWithFee(feeTo: string): Promise<Hex> {
    const user = s.devnet.accounts[1]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000', { appFees: [{ recipient: feeTo, fee: 500 }] }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, 1);
    await rpc('anvil_mine', ['0x3']);
    expect((await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    return requestId;
  }

  // The fee recipient's claim of its ETH fees on B, to itself: ask, sign (a key that never held gas), post.
  async function claim(app: PrivateKeyAccount) {
    const ask = await api(s.url, `/app-fees/${app.address}/claim`, { body: { chainId: B, currency: zeroAddress, recipient: app.address } });
    expect(ask.status, JSON.stringify(ask.body)).toBe(200);
    const item = ask.body.steps[0].items[0].data;
    const signature = await app.signMessage({ message: item.sign.message });
    return api(s.url, `${item.post.endpoint}?signature=${signature}`, { body: item.post.body });
  }

  it('pays no fee a reorg then takes back: a fresh recipient per order leaves no debt unpaid', { timeout: 120_000 }, async () => {
    const app = privateKeyToAccount(generatePrivateKey());
    const snapshot = (await rpc('evm_snapshot')) as Hex;
    const requestId = await filledWithFee(app.address);
    const fee = owed(app.address);
    expect(fee).toBeGreaterThan(0n);

    // Claimed at once, before the deposit is past the depth at which the indexer still looks for reorgs.
    const early = await claim(app);
    await until(
      () => (s.node.ledger.payouts.ofChain(B).every((p) => p.kind !== 'claim' || p.state === 'success' || p.state === 'failed') ? true : undefined),
      'any claim settled',
    );

    await rpc('evm_revert', [snapshot]);
    await rpc('anvil_mine', ['0x8']);
    await until(() => (s.node.ledger.requests.get(requestId)?.fail_reason === 'DEPOSIT_REORGED' ? true : undefined), 'the deposit taken back', 20_000);

    // Before: the claim paid the fee less its gas (0.0005 ETH less a transfer's gas) out of the solver's ETH on B, and
    // the reversal left the recipient owing 0.0005 ETH that no later fee of that throwaway recipient would ever repay.
    expect(claimedTo(app.address)).toBe(0n);
    expect(owed(app.address)).toBe(0n);
    // The claim was refused, saying why and that the fee would be claimable later.
    expect(early.status, JSON.stringify(early.body)).toBe(400);
    expect(early.body.errorCode).toBe('NOTHING_TO_CLAIM');
    expect(early.body.message).toMatch(/not final yet/);
  });

  it('pays the fee of a fill once its deposit is past the chain’s finality depth, and only that fee', { timeout: 120_000 }, async () => {
    const app = privateKeyToAccount(generatePrivateKey());
    const requestId = await filledWithFee(app.address);
    const fee = owed(app.address);
    expect(fee).toBeGreaterThan(0n);
    expect((await claim(app)).body.errorCode).toBe('NOTHING_TO_CLAIM');

    // The deposit's block passes finalityDepth (64 on the devnet) under the indexer's last block.
    await pastFinality(s, A);
    expect(s.node.ledger.deposits.forRequest(requestId)[0]!.block_number).toBeLessThanOrEqual(s.node.ledger.indexer.tip(A)!.number - 64);

    // A second order's fee, not final yet, stays owed: the claim takes the first's alone (less its gas).
    await filledWithFee(app.address);
    const second = owed(app.address) - fee;
    expect(second).toBeGreaterThan(0n);
    const paid = await claim(app);
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    expect(BigInt(paid.body.amount)).toBeLessThan(fee);
    expect(BigInt(paid.body.amount)).toBeGreaterThan(0n);
    await until(() => (s.node.ledger.payouts.get(paid.body.claimId)?.state === 'success' ? true : undefined), 'the claim paid');
    expect(owed(app.address)).toBe(second);
  });
});
