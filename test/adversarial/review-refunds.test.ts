// Refunds and the races between a fill and a refund (EVM). A refund or an excess is a depository call the
// allocator signed, single use, valid 7 days, and anyone holding it may submit it: it is public as soon as the
// payout fails (a reverted transaction's input, or a request's failedCallData in the API). A payout that failed
// here can still pay there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEther, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { api, executeSteps, holdSubmitter, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
let key: string;
const A = 8453;
const B = 10;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const account = (i: number) => s.devnet.accounts[i]!;
// refundTo: code that refuses less than 0.005 ETH (PUSH8 T CALLVALUE LT PUSH1 15 JUMPI STOP JUMPDEST PUSH1 0 PUSH1 0
// REVERT): it takes a refund and refuses an excess. The attacker's own contract would set its bound with a call.
const REFUSE_BELOW_5_MILLI = '0x670011c37937e080003410600f57005b60006000fd';
// A recipient whose code takes ether only at a zero gas price (GASPRICE ISZERO PUSH1 10 JUMPI PUSH1 0 PUSH1 0 REVERT
// JUMPDEST STOP): the node's estimate (eth_estimateGas without fee fields) passes, the fill reverts on chain.
const ONLY_ESTIMATES = '0x3a15600a5760006000fd5b00';

beforeAll(async () => {
  s = await startStack();
  key = s.node.ledger.apiKeys.create('attacker').key;
  // Someone else's order, filled: its 0.05 ETH stays in the depository (owed to the solver) until withdrawn.
  const other = await api(s.url, '/quote', { body: nativeBridge(account(2).address, account(2).address, A, B, parseEther('0.05').toString()) });
  expect(other.status).toBe(200);
  await executeSteps(s, other.body, 2);
  await waitForStatus(s.url, other.body.steps[0].requestId, ['success'], 60_000);
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const balance = (chainId: number, who: Address) => s.publicClient(chainId).getBalance({ address: who });
const fresh = () => privateKeyToAccount(generatePrivateKey()).address;

// 0.013 ETH paid to the deposit address of a 0.01 ETH order whose fill fails (`recipient`), refundTo refusing the 0.003
// excess and taking the refund; then the attacker submits the failed excess's signed call, read from the request's
// record. `holdDestination`: the destination's payouts wait until the excess has failed.
async function overpayFailAndReplay(recipient: Address, holdDestination: boolean) {
  const depositoryBefore = await balance(A, chain(A).contracts.depository);
  const refundTo = fresh();
  await rpc(chain(A).rpcUrl, 'anvil_setCode', [refundTo, REFUSE_BELOW_5_MILLI]);
  const q = await api(s.url, '/quote/v2', {
    apiKey: key,
    body: {
      user: account(1).address,
      recipient,
      refundTo,
      originChainId: A,
      destinationChainId: B,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      tradeType: 'EXACT_INPUT',
      useDepositAddress: true,
      amount: parseEther('0.01').toString(),
    },
  });
  expect(q.status).toBe(200);
  const id = q.body.steps.at(-1).requestId as Hex;
  const release = holdDestination ? holdSubmitter(s, B) : () => {};
  const w = s.wallet(1, A);
  await s.publicClient(A).waitForTransactionReceipt({
    hash: await w.sendTransaction({ account: w.account!, chain: w.chain, to: q.body.steps.at(-1).depositAddress, value: parseEther('0.013') }),
  });
  // The excess fails (refundTo refuses it), and its signed call is in the request's record for its quoting key to read.
  await until(() => (s.node.ledger.payouts.get(`excess:${id}`)?.state === 'failed' ? true : undefined), 'the excess failed', 60_000);
  const signedExcess = (await api(s.url, `/requests/v3?id=${id}`, { apiKey: key })).body.requests[0].data.failedCallData as Hex;
  expect(signedExcess).toMatch(/^0x/);
  release();
  // The fill fails on the destination and the deposit is refunded to refundTo, which takes it.
  await until(() => (s.node.ledger.payouts.get(`refund:${id}`)?.state === 'success' ? true : undefined), 'the refund paid', 60_000);

  // refundTo now takes anything (the attacker lowers its bound), and the attacker submits the excess's signed call.
  await rpc(chain(A).rpcUrl, 'anvil_setCode', [refundTo, '0x']);
  const attacker = s.wallet(4, A);
  const hash = await attacker.sendTransaction({ account: attacker.account!, chain: attacker.chain, to: chain(A).contracts.depository, data: signedExcess });
  expect((await s.publicClient(A).waitForTransactionReceipt({ hash })).status).toBe('success');

  // refundTo never gets more than the 0.013 the deposit brought, and the depository keeps the other order's money.
  // Before: the refund was the whole deposit (0.013 less its gas and the sweep's) although the excess's signed call was
  // live, so the excess (0.003 less its gas) paid too, out of the other order's deposit.
  const got = await balance(A, refundTo);
  const depositoryAfter = await balance(A, chain(A).contracts.depository);
  expect(got, `refundTo got ${got} wei of a 0.013 ETH deposit`).toBeLessThanOrEqual(parseEther('0.013'));
  expect(depositoryAfter, `the depository went from ${depositoryBefore} to ${depositoryAfter} wei`).toBeGreaterThanOrEqual(depositoryBefore);
  return s.node.ledger.requests.get(id)!;
}

describe('a failed excess whose signed call is still executable is never refunded again', () => {
  it('a fill refused at its estimate (a token contract as recipient), the destination slower than the origin', async () => {
    const r = await overpayFailAndReplay(chain(B).contracts.stablecoin, true);
    expect(r.fail_reason).toBe('EXECUTION_REVERTED');
  });

  it('a fill that passes its estimate and reverts on chain: no race to win, it is failed only after its receipt', async () => {
    const recipient = fresh();
    await rpc(chain(B).rpcUrl, 'anvil_setCode', [recipient, ONLY_ESTIMATES]);
    const r = await overpayFailAndReplay(recipient, false);
    expect(r.fail_reason).toBe('TRANSACTION_REVERTED');
  });
});
