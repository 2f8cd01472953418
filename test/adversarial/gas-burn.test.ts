// Payouts to a recipient that burns the gas it is given. A plain fill, refund or excess is priced at a
// fixed gas (the quote's fees, the refund's charge), but the filler and the depository forward all of
// the transaction's gas to the recipient and the node signed whatever the estimate said: a contract
// whose receive burns 0.6M gas had the solver pay for it on every fill or refund, against the ~60-80k
// priced. An attacker's deposit naming no order, its depositor such a contract, cost the solver ten
// times what the attacker paid, again and again. A payout whose recipient would take more than
// GAS.recipient (40k) beyond its priced gas is not sent: a fill fails (QUOTED_GAS_LIMIT_EXCEEDED) and
// is refunded to refundTo, a refund is left to an operator (MANUAL_REFUND_REQUIRED).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, keccak256, toHex, type Address, type Hex } from 'viem';
import { GasBurnerAbi, GasBurnerBytecode, RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { api, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const account = (i: number) => s.devnet.accounts[i]!;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
let burner: { [chainId: number]: Address };

beforeAll(async () => {
  s = await startStack();
  burner = {};
  for (const id of [A, B]) {
    const w = s.wallet(0, id);
    const hash = await w.deployContract({ account: w.account!, chain: w.chain, abi: GasBurnerAbi, bytecode: GasBurnerBytecode });
    burner[id] = (await s.publicClient(id).waitForTransactionReceipt({ hash })).contractAddress!;
  }
}, 90_000);
afterAll(async () => {
  await s?.stop();
});

// Every transaction of the solver's that paid `to` on `chainId` since `from`: its gas used.
async function solverGasTo(chainId: number, from: bigint): Promise<bigint[]> {
  const pc = s.publicClient(chainId);
  const head = await pc.getBlockNumber();
  const used: bigint[] = [];
  for (let n = from; n <= head; n++) {
    const block = await pc.getBlock({ blockNumber: n, includeTransactions: true });
    for (const tx of block.transactions) {
      if (tx.from.toLowerCase() !== s.devnet.solver.toLowerCase()) continue;
      used.push((await pc.getTransactionReceipt({ hash: tx.hash })).gasUsed);
    }
  }
  return used;
}

describe('a payout recipient that burns gas', () => {
  it('a fill to it is not sent; the deposit is refunded to refundTo', async () => {
    const from = await s.publicClient(B).getBlockNumber();
    const q = await api(s.url, '/quote', { body: nativeBridge(account(1).address, burner[B]!, A, B, '10000000000000000', { refundTo: account(1).address }) });
    expect(q.status).toBe(200);
    const item = q.body.steps[0].items[0].data;
    const requestId = q.body.steps[0].requestId as Hex;
    const w = s.wallet(1, A);
    await s.publicClient(A).waitForTransactionReceipt({
      hash: await w.sendTransaction({ account: w.account!, chain: w.chain, to: item.to, data: item.data, value: BigInt(item.value) }),
    });
    const done = await waitForStatus(s.url, requestId, ['success', 'refund'], 60_000);
    expect(done).toMatchObject({ status: 'refund', failReason: 'QUOTED_GAS_LIMIT_EXCEEDED' });
    // Nothing of the solver's burned on the destination chain.
    for (const gas of await solverGasTo(B, from)) expect(gas).toBeLessThan(200_000n);
  });

  it('a refund to it is not sent: left to an operator', async () => {
    const from = await s.publicClient(A).getBlockNumber();
    const w = s.wallet(4, A);
    const hash = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: chain(A).contracts.depository,
      value: 10n ** 16n,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [burner[A]!, keccak256(toHex('no order'))] }),
    });
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
    const log = receipt.logs.find((l) => l.address.toLowerCase() === chain(A).contracts.depository.toLowerCase())!;
    const requestId = keccak256(toHex(`deposit:${A}:${hash}:${log.logIndex}`));
    const refund = await until(
      () => {
        const p = s.node.ledger.payouts.get(`refund:${requestId}`);
        return p?.state === 'failed' || p?.state === 'success' ? p : undefined;
      },
      'the refund settled',
      60_000,
    );
    expect(refund.state).toBe('failed');
    expect(await waitForStatus(s.url, requestId, ['failure'])).toMatchObject({
      failReason: 'ORPHANED_DEPOSIT_REFUND',
      refundFailReason: 'MANUAL_REFUND_REQUIRED',
    });
    for (const gas of await solverGasTo(A, from)) expect(gas).toBeLessThan(200_000n);
  });
});
