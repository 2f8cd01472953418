// The solver's reasons for leaving a confirmed deposit undecided are typed and counted: a deposit whose
// order was fast-filled, while that payout is still in flight, waits under FAST_FILL_PENDING in
// relay_solver_postponed_total, and is settled (never paid again) once the fast fill is paid.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { linkWallet } from './helpers/link.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const account = (i: number) => s.devnet.accounts[i]!;
let app: { key: string; id: string };

beforeAll(async () => {
  s = await startStack();
  app = s.node.ledger.apiKeys.create('app');
  const sponsor = privateKeyToAccount(account(4).privateKey);
  expect((await linkWallet(s.url, app.key, sponsor)).status).toBe(200);
  // Funds the app balance: a stablecoin transfer to the solver whose calldata names the credited wallet.
  const w = s.wallet(1, A);
  const usdc = s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin;
  const marker = `012345abcdef${sponsor.address.slice(2).toLowerCase()}012345abcdef`;
  const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 100_000_000n] });
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc, data: `${data}${marker}` as Hex });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  await until(() => (s.node.ledger.balances.get(`credit:${A}:${hash}`) ? true : undefined), 'the app balance credit');
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

const postponed = async (reason: string): Promise<number> => {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  const m = new RegExp(`relay_solver_postponed_total\\{reason="${reason}"\\} (\\d+)`).exec(text);
  return m ? Number(m[1]) : 0;
};

it('counts a deposit waiting for its fast fill under FAST_FILL_PENDING, then settles it without a second fill', async () => {
  const user = account(3).address as Address;
  const q = await api(s.url, '/quote/v2', {
    apiKey: app.key,
    body: nativeBridge(user, user, A, B, '10000000000000000'),
  });
  expect(q.status).toBe(200);
  const requestId = q.body.steps[0].requestId as Hex;
  const dest = s.publicClient(B);
  // The destination chain stops mining: the fast fill is sent but not included, so it stays in flight.
  await dest.request({ method: 'evm_setAutomine' as never, params: [false] as never });
  try {
    expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } })).status).toBe(200);
    await until(() => (s.node.ledger.payouts.get(`fill:${requestId}`)?.state === 'sent' ? true : undefined), 'the fast fill sent');
    await executeSteps(s, q.body, 3);
    await until(async () => ((await postponed('FAST_FILL_PENDING')) > 0 ? true : undefined), 'the deposit counted as waiting for its fast fill');
    const [d] = s.node.ledger.deposits.byOrderRef(requestId);
    expect(d?.state).toBe('confirmed');
  } finally {
    await dest.request({ method: 'evm_setAutomine' as never, params: [true] as never });
  }
  await dest.request({ method: 'evm_mine' as never, params: [] as never });
  await waitForStatus(s.url, requestId, ['success']);
  await until(() => (s.node.ledger.deposits.byOrderRef(requestId).every((x) => x.state === 'handled') ? true : undefined), 'the deposit settled');
  expect(s.node.ledger.payouts.forRequest(requestId).filter((p) => p.kind === 'fill')).toHaveLength(1);
  expect(s.node.ledger.balances.summary(account(4).address).held).toBe(0n);
});
