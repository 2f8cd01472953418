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
import { GasBurnerAbi, GasBurnerBytecode, PricedGasBurnerAbi, PricedGasBurnerBytecode, RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { api, executeSteps, holdSubmitter, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const account = (i: number) => s.devnet.accounts[i]!;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
let burner: { [chainId: number]: Address };
// On B: a recipient that is cheap at the estimate (gas price 0) and burns what it is given on chain.
let pricedBurner: Address;

beforeAll(async () => {
  s = await startStack();
  burner = {};
  for (const id of [A, B]) {
    const w = s.wallet(0, id);
    const hash = await w.deployContract({ account: w.account!, chain: w.chain, abi: GasBurnerAbi, bytecode: GasBurnerBytecode });
    burner[id] = (await s.publicClient(id).waitForTransactionReceipt({ hash })).contractAddress!;
  }
  const w = s.wallet(0, B);
  const hash = await w.deployContract({ account: w.account!, chain: w.chain, abi: PricedGasBurnerAbi, bytecode: PricedGasBurnerBytecode });
  pricedBurner = (await s.publicClient(B).waitForTransactionReceipt({ hash })).contractAddress!;
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
    const requestId = q.body.steps[0].requestId as Hex;
    await executeSteps(s, q.body, 1);
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

  it("a fill its batch skipped, then refused alone, has its share of the batch's gas taken from its refund", async () => {
    // The recipient refuses native currency (a contract with no receive): the batch skips its order, which is sent
    // again alone and refused. Its refund was the whole deposit less the refund's own gas, though the batch burned
    // gas for it too. (A recipient that burns the gas a batch gives it never gets into one: a batch is sent only
    // within its fills' priced gas, evm-submitter.test.ts.)
    const payouts = s.node.ledger.payouts;
    const release = holdSubmitter(s, B);
    const rpcB = (method: string, params: unknown[] = []) => s.publicClient(B).request({ method, params } as never) as Promise<any>;
    const ids: Hex[] = [];
    try {
      for (const [from, recipient] of [
        [1, account(2).address],
        [3, chain(B).contracts.stablecoin],
      ] as const) {
        const q = await api(s.url, '/quote', {
          body: nativeBridge(account(from).address, recipient, A, B, '10000000000000000', { refundTo: account(from).address }),
        });
        expect(q.status).toBe(200);
        await executeSteps(s, q.body, from);
        ids.push(q.body.steps[0].requestId as Hex);
      }
      await until(() => (ids.every((id) => payouts.get(`fill:${id}`)?.state === 'queued') ? true : undefined), 'both fills queued');
      // Gas on the destination dear next to the origin's: what the batch burned is plainly more than a refund's gas.
      await rpcB('anvil_setNextBlockBaseFeePerGas', ['0xba43b7400']); // 50 gwei
      await rpcB('evm_mine');
      const dear = await s.publicClient(B).getBlockNumber({ cacheTime: 0 });
      await until(
        async () => ((await api(s.url, '/ready')).body.chains.find((c: any) => c.chainId === B)?.head >= Number(dear) ? true : undefined),
        'the node to price at the dear head',
      );
    } finally {
      release();
    }
    const [paid, skipped] = ids as [Hex, Hex];
    await waitForStatus(s.url, paid, ['success']);
    expect(await waitForStatus(s.url, skipped, ['refund', 'failure'], 60_000)).toMatchObject({ failReason: 'EXECUTION_REVERTED' });
    const batch = payouts.get(`fill:${paid}`)!.tx_hash as Hex;
    expect(
      payouts
        .rowsOfTx(batch)
        .map((t) => t.payout_id)
        .sort(),
    ).toEqual([`fill:${paid}`, `fill:${skipped}`].sort());
    const receipt = await s.publicClient(B).getTransactionReceipt({ hash: batch });
    const share = (receipt.gasUsed * receipt.effectiveGasPrice) / 2n;
    const refund = await until(() => {
      const p = payouts.get(`refund:${skipped}`);
      return p?.state === 'success' ? p : undefined;
    }, 'the refund paid');
    const deposit = BigInt(s.node.ledger.deposits.get(refund.deposit_id!)!.amount);
    // ETH at one price on both chains: the refund is the deposit less the batch's share and its own gas.
    expect(deposit - BigInt(refund.amount)).toBeGreaterThan(share);
  });

  it("a batch with a recipient that burns its gas only on chain lands whole: no recipient's allowance is left out of its gas limit", async () => {
    // Cheap at the estimate (sent at a gas price of 0), the recipient burns the 100,000 gas the filler gives it on
    // chain. The batch's limit was its estimate plus the margin: it ran out of gas and reverted, every honest fill's
    // share of it burned for nothing, and each fill went again alone (an order's fee against a batch's gas, as often
    // as anyone quoted one).
    const payouts = s.node.ledger.payouts;
    const from = await s.publicClient(B).getBlockNumber({ cacheTime: 0 });
    const release = holdSubmitter(s, B);
    const ids: Hex[] = [];
    try {
      for (const recipient of [account(2).address, pricedBurner, account(4).address]) {
        // 0.02 ETH: at this file's base fee, a fill to a contract is charged its recipient's allowance too.
        const q = await api(s.url, '/quote', { body: nativeBridge(account(1).address, recipient, A, B, '20000000000000000') });
        expect(q.status).toBe(200);
        await executeSteps(s, q.body, 1);
        ids.push(q.body.steps[0].requestId as Hex);
      }
      await until(() => (ids.every((id) => payouts.get(`fill:${id}`)?.state === 'queued') ? true : undefined), 'the three fills queued');
    } finally {
      release();
    }
    for (const id of ids) await waitForStatus(s.url, id, ['success']);
    const hashes = new Set(ids.map((id) => payouts.get(`fill:${id}`)!.tx_hash));
    expect(hashes.size).toBe(1);
    // Nothing of the solver's reverted on B meanwhile.
    const pc = s.publicClient(B);
    for (let n = from + 1n; n <= (await pc.getBlockNumber({ cacheTime: 0 })); n++) {
      for (const tx of (await pc.getBlock({ blockNumber: n, includeTransactions: true })).transactions) {
        if (tx.from.toLowerCase() === s.devnet.solver.toLowerCase()) expect((await pc.getTransactionReceipt({ hash: tx.hash })).status).toBe('success');
      }
    }
  });

  it("a cancel that landed at the fill's nonce is not taken from its refund: it was the solver's own doing", async () => {
    // A fee-capped fill's nonce taken by the solver's cancel (feeCapPolicy 'cancel') leaves the cancel
    // included, with its fee, among the payout's transactions, and the payout queued again. When the fill
    // then fails for its caller (here its recipient's gas), the refund bears the gas that caller made the
    // solver burn, and never the cancel's. The cancel is written as the submitter writes it, with a fee
    // a quarter of the deposit: taken from the refund, it would show plainly.
    const payouts = s.node.ledger.payouts;
    const cancelFee = 5_000_000_000_000_000n;
    const release = holdSubmitter(s, B);
    let requestId: Hex;
    try {
      const q = await api(s.url, '/quote', { body: nativeBridge(account(1).address, burner[B]!, A, B, '20000000000000000', { refundTo: account(1).address }) });
      expect(q.status).toBe(200);
      requestId = q.body.steps[0].requestId as Hex;
      await executeSteps(s, q.body, 1);
      await until(() => (payouts.get(`fill:${requestId}`)?.state === 'queued' ? true : undefined), 'the fill queued');
      const hash = keccak256(toHex(`cancel of fill:${requestId}`));
      s.node.ledger.tx(() => {
        payouts.insertTx({
          hash,
          payout_id: `fill:${requestId}`,
          chain_id: B,
          sender: s.devnet.solver,
          nonce: 1_000_000,
          raw: toHex('a cancel'),
          gas_limit: '21000',
          max_fee_per_gas: '1',
          max_priority_fee_per_gas: '1',
          created_at: Date.now(),
          cancel: 1,
        });
        payouts.setTxState(hash, 'included', { blockNumber: 1, gasUsed: 21_000n, fee: cancelFee });
      });
    } finally {
      release();
    }
    expect(await waitForStatus(s.url, requestId, ['refund', 'failure'], 60_000)).toMatchObject({ failReason: 'QUOTED_GAS_LIMIT_EXCEEDED' });
    const refund = await until(() => {
      const p = payouts.get(`refund:${requestId}`);
      return p?.state === 'success' ? p : undefined;
    }, 'the refund paid');
    const deposit = BigInt(s.node.ledger.deposits.get(refund.deposit_id!)!.amount);
    // Only the refund's own gas is kept (well under a thousandth of an ETH on the devnet).
    expect(deposit - BigInt(refund.amount)).toBeLessThan(cancelFee / 5n);
  });
});
