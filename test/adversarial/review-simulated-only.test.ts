// Review of payouts that pass their estimate and revert on chain (the node's eth_estimateGas runs without a gas price,
// so a contract that takes a payment at a gas price of 0 and refuses it at a real one passes every simulation): who
// bears the gas each reverted transaction burned, and whether one attacker action burns it again and again. Fills
// (the refund bears it), claims (the recipient's fees), fast fills and relays (the app balance), sponsored signed
// deposits (the sponsor) were covered; here: a request whose fill and refund both reverted on chain, refunded by an
// operator's hand.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEther, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { daysLater } from '../helpers/daysLater.ts';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
let adminKey: string;
const A = 8453;
const B = 10;
const account = (i: number) => s.devnet.accounts[i]!;

beforeAll(async () => {
  s = await startStack({ config: { admin: { port: 0 } } });
  adminKey = s.node.ledger.operations.createAdminKey('ops-sim').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

// Runtime `GASPRICE ISZERO PUSH1 8 JUMPI PUSH0 PUSH0 REVERT JUMPDEST STOP`: anything sent at a gas price of 0 passes,
// anything else reverts (the deploy code copies those 10 bytes).
const SIMULATION_ONLY_BYTECODE: Hex = '0x600a600a5f39600a5ff33a156008575f5ffd5b00';

async function simulationOnly(chainId: number): Promise<Address> {
  const w = s.wallet(0, chainId);
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, data: SIMULATION_ONLY_BYTECODE });
  return (await s.publicClient(chainId).waitForTransactionReceipt({ hash })).contractAddress!;
}

const admin = (path: string, body?: unknown) =>
  api(s.node.adminUrl, path, { method: body === undefined ? 'GET' : 'POST', body, headers: { authorization: `Bearer ${adminKey}` } });

// What a payout's transactions that landed paid in gas (its chain's native smallest unit).
const burnedBy = (payoutId: string) => s.node.ledger.payouts.txsOf(payoutId).reduce((sum, t) => (t.fee !== null && !t.cancel ? sum + BigInt(t.fee) : sum), 0n);

describe("a fill and its refund that both passed their estimates and reverted on chain, refunded by an operator's hand", () => {
  it("the operator's refund bears the gas both reverted transactions burned, as the automatic refund bore the fill's", { timeout: 180_000 }, async () => {
    // The recipient on B and refundTo on A take ether only in a simulation.
    const [recipient, refundTo] = [await simulationOnly(B), await simulationOnly(A)];
    const amount = parseEther('0.01');
    const q = await api(s.url, '/quote', { body: nativeBridge(account(1).address, recipient, A, B, amount.toString(), { refundTo }) });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
    await executeSteps(s, q.body, 1);

    const failed = (kind: string) => () => s.node.ledger.payouts.forRequest(id).find((p) => p.kind === kind && p.state === 'failed');
    const fill = await until(failed('fill'), 'the fill reverted on chain', 60_000);
    const refund = await until(failed('refund'), 'its refund reverted on chain', 60_000);
    expect([fill.fail_reason, refund.fail_reason]).toEqual(['TRANSACTION_REVERTED', 'TRANSACTION_REVERTED']);
    expect(await waitForStatus(s.url, id, ['failure'])).toMatchObject({ refundFailReason: 'MANUAL_REFUND_REQUIRED' });
    // Both reached the chain: each burned the solver's gas (ETH on both chains, at one price).
    const burned = burnedBy(fill.id) + burnedBy(refund.id);
    expect(burnedBy(fill.id)).toBeGreaterThan(0n);
    expect(burnedBy(refund.id)).toBeGreaterThan(0n);
    // The automatic refund bore the fill's gas.
    expect(BigInt(refund.amount) + burnedBy(fill.id)).toBeLessThanOrEqual(amount);

    // Past the failed refund's expiry, the operator refunds to an address the user names.
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const r = await daysLater(s.devnet.chains.find((c) => c.id === A)!.rpcUrl, 8, () =>
      admin(`/admin/requests/${id}/refund`, { reason: 'refundTo refuses ether', to }),
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // Before: the whole deposit less one refund's cost, the fill's gas (the automatic refund had borne it) and the failed
    // refund's given back: each such order cost the solver two reverted transactions, as often as anyone sent one.
    expect(BigInt(r.body.refund.amount) + burned).toBeLessThan(amount);
  });
});

describe("a deposit address's excess that passed its estimate and reverted on chain, returned by an operator's hand", () => {
  it('the return bears the gas the reverted excess burned', { timeout: 180_000 }, async () => {
    const refundTo = await simulationOnly(A);
    // A strict deposit address quote of 0.01 ETH A→B, paid 0.013 ETH by a plain transfer: the fill pays, the 0.003
    // overpaid goes back to refundTo, which takes it only in a simulation.
    const q = await api(s.url, '/quote/v2', {
      body: { ...nativeBridge(account(1).address, account(1).address, A, B, parseEther('0.01').toString(), { refundTo }), useDepositAddress: true },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps.at(-1);
    const id = step.requestId as Hex;
    const w = s.wallet(1, A);
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: step.depositAddress, value: parseEther('0.013') });
    await s.publicClient(A).waitForTransactionReceipt({ hash });
    expect((await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 60_000)).status).toBe('success');
    const excess = await until(
      () => s.node.ledger.payouts.forRequest(id).find((p) => p.kind === 'excess' && p.state === 'failed'),
      'the excess reverted on chain',
      60_000,
    );
    expect(excess.fail_reason).toBe('TRANSACTION_REVERTED');
    const burned = burnedBy(excess.id);
    expect(burned).toBeGreaterThan(0n);

    const to = privateKeyToAccount(generatePrivateKey()).address;
    const r = await daysLater(s.devnet.chains.find((c) => c.id === A)!.rpcUrl, 8, () =>
      admin(`/admin/requests/${id}/refund`, { reason: 'refundTo refuses ether', to }),
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.refund.kind).toBe('excess');
    // Before: the excess less one return's gas, the reverted one's given back.
    expect(BigInt(r.body.refund.amount) + burned).toBeLessThanOrEqual(BigInt(excess.amount));
  });
});
