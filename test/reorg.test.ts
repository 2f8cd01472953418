import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, keccak256, toHex, zeroAddress, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { api, executeSteps, holdSubmitter, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

// Instant mining and three confirmations: blocks appear only when the test mines them, so the
// deposit sits unconfirmed while the test rewinds the chain under it.
let s: Stack;
beforeAll(async () => {
  s = await startStack({ confirmations: 3 });
});
afterAll(async () => {
  await s?.stop();
});

const rpc = (chainId: number, method: string, params: unknown[] = []) => s.publicClient(chainId).request({ method: method as any, params: params as any });

async function quote(account: number) {
  const q = await api(s.url, '/quote', {
    body: {
      user: s.devnet.accounts[account]!.address,
      originChainId: 8453,
      destinationChainId: 10,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: '10000000000000000',
      tradeType: 'EXACT_INPUT',
    },
  });
  expect(q.status).toBe(200);
  return q.body;
}

describe('reorgs', () => {
  it('never fills a deposit that a reorg removes before its confirmations', async () => {
    const q = await quote(1);
    const requestId = q.steps[0].requestId as Hex;
    const snapshot = (await rpc(8453, 'evm_snapshot')) as Hex;
    const [deposit] = await executeSteps(s, q, 1);
    const depositId = await until(
      () => (s.node.ledger.deposits.byOrderRef(requestId)[0]?.state === 'unconfirmed' ? s.node.ledger.deposits.byOrderRef(requestId)[0]!.id : undefined),
      'the deposit to be indexed unconfirmed',
    );
    expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body).toMatchObject({ status: 'waiting', inTxHashes: [deposit] });

    // Rewind past the deposit and grow a longer chain without it.
    await rpc(8453, 'evm_revert', [snapshot]);
    await rpc(8453, 'anvil_mine', ['0x5']);
    await until(() => (s.node.ledger.deposits.get(depositId)?.state === 'reorged' ? true : undefined), 'the deposit to be marked reorged');
    await until(() => (s.node.adapters.get(8453)!.progress().ready ? true : undefined), 'the indexer to catch up');

    const status = (await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body;
    expect(status).toMatchObject({ status: 'waiting', inTxHashes: [], txHashes: [] });
    expect(s.node.ledger.payouts.forRequest(requestId)).toEqual([]);
    await expect(s.node.metrics.reorgs.get()).resolves.toMatchObject({ values: [expect.objectContaining({ value: 1 })] });

    // The same quote still works when the user deposits again on the new chain.
    await executeSteps(s, q, 1);
    await rpc(8453, 'anvil_mine', ['0x3']);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
  });

  it('refunds a deposit of its own request that a reorg took back before its refund was sent, and that came back at the same place', async () => {
    // Decided again, the deposit's request (derived from the deposit, so the same id) was inserted again
    // and refused: the decision failed on every pass and the deposit was never refunded.
    const A = 8453;
    const release = holdSubmitter(s, A);
    let requestId: Hex;
    try {
      const w = s.wallet(2, A);
      const depository = s.devnet.chains.find((c) => c.id === A)!.contracts.depository;
      const data = encodeFunctionData({
        abi: RelayDepositoryAbi,
        functionName: 'depositNative',
        args: [w.account!.address, keccak256(toHex('no such order'))],
      });
      const raw = await w.signTransaction(
        (await w.prepareTransactionRequest({ account: w.account!, chain: w.chain, to: depository, value: 10n ** 16n, data })) as never,
      );
      const snapshot = (await rpc(A, 'evm_snapshot')) as Hex;
      const hash = (await rpc(A, 'eth_sendRawTransaction', [raw])) as Hex;
      const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
      const logIndex = receipt.logs.find((l) => l.address.toLowerCase() === depository.toLowerCase())!.logIndex;
      requestId = keccak256(toHex(`deposit:${A}:${hash}:${logIndex}`));
      await rpc(A, 'anvil_mine', ['0x3']);
      await until(() => (s.node.ledger.payouts.get(`refund:${requestId}`)?.state === 'queued' ? true : undefined), 'the refund decided, not sent');
      // Rewound past the deposit, on a longer chain without it: the refund, never signed, is cancelled.
      await rpc(A, 'evm_revert', [snapshot]);
      await rpc(A, 'anvil_mine', ['0x6']);
      await until(() => (s.node.ledger.requests.get(requestId)?.fail_reason === 'DEPOSIT_REORGED' ? true : undefined), 'the deposit taken back', 20_000);
      // The same signed transaction again, alone in its block: the same deposit, at the same log index.
      await rpc(A, 'eth_sendRawTransaction', [raw]);
      await rpc(A, 'anvil_mine', ['0x4']);
    } finally {
      release();
    }
    const refund = await until(
      () => s.node.ledger.payouts.forRequest(requestId).find((p) => p.kind === 'refund' && p.state === 'success'),
      'the deposit refunded',
    );
    expect(BigInt(refund.amount)).toBeLessThan(10n ** 16n);
    expect(await waitForStatus(s.url, requestId, ['refund'])).toMatchObject({ status: 'refund', failReason: 'ORPHANED_DEPOSIT_REFUND' });
    // Refunded once: the cancelled refund and the one paid.
    expect(
      s.node.ledger.payouts
        .forRequest(requestId)
        .map((p) => `${p.kind}:${p.state}`)
        .sort(),
    ).toEqual(['refund:failed', 'refund:success']);
  });

  it('re-indexing a range writes nothing twice', async () => {
    const q = await quote(2);
    const requestId = q.steps[0].requestId as Hex;
    await executeSteps(s, q, 2);
    await rpc(8453, 'anvil_mine', ['0x3']);
    await waitForStatus(s.url, requestId, ['success']);
    const ledger = s.node.ledger;
    const count = () => (ledger.db.prepare('SELECT COUNT(*) AS n FROM deposits').get() as { n: number }).n;
    const before = count();
    // Move the cursor back to the start and let the indexer read everything again.
    ledger.indexer.setCursor(8453, 'depository', 0);
    ledger.indexer.dropAbove(8453, 0);
    await rpc(8453, 'anvil_mine', ['0x1']);
    await until(() => (s.node.adapters.get(8453)!.progress().ready && s.node.adapters.get(8453)!.progress().indexed > 1 ? true : undefined), 're-index');
    expect(count()).toBe(before);
    expect(ledger.payouts.forRequest(requestId)).toHaveLength(1);
    expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('success');
  });
});
