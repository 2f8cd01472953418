import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, keccak256, parseEventLogs, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { OrderFillerAbi, RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { orderId } from '../src/quote/orderId.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';
import { auditStack } from './helpers/audit.ts';

let s: Stack;
const A = 8453;
const B = 10;
const logLines: string[] = [];

beforeAll(async () => {
  s = await startStack({ logLines });
});
afterAll(async () => {
  await s?.stop();
});

const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const user = (i: number) => s.devnet.accounts[i]!.address;

async function fillsOnChain(chainId: number, id: Hex) {
  const logs = await s.publicClient(chainId).getLogs({ address: chain(chainId).contracts.filler, fromBlock: 0n, toBlock: 'latest' });
  return parseEventLogs({ abi: OrderFillerAbi, logs, eventName: 'OrderFilled' }).filter((l) => l.args.orderId === id);
}

async function tokenBalance(chainId: number, token: Address, who: Address) {
  return s.publicClient(chainId).readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [who] });
}

describe('bridges end to end', () => {
  it('bridges native currency: quote, deposit, index, fill, success', async () => {
    const recipient = '0x000000000000000000000000000000000000dEaD' as Address;
    const before = await s.publicClient(B).getBalance({ address: recipient });
    const q = await api(s.url, '/quote/v2', {
      body: nativeBridge(user(1), recipient, A, B, '100000000000000000', { protocolVersion: 'v2' }),
    });
    expect(q.status).toBe(200);
    const deposit = q.body.steps.find((x: any) => x.id === 'deposit');
    expect(q.body.steps.map((x: any) => x.id)).toEqual(['deposit']);
    const requestId = deposit.requestId as Hex;
    expect(deposit.items[0].check).toEqual({ endpoint: `/intents/status/v3?requestId=${requestId}`, method: 'GET' });
    expect(deposit.items[0].data).toMatchObject({ to: chain(A).contracts.depository, value: '100000000000000000', chainId: A });
    // The order id is the struct hash of the orderData the quote returns.
    const od = q.body.protocol.v2.orderData;
    expect(q.body.protocol.v2.orderId).toBe(requestId);
    const rebuilt = orderId({
      ...od,
      salt: BigInt(od.salt),
      inputs: od.inputs.map((i: any) => ({
        payment: { ...i.payment, amount: BigInt(i.payment.amount), weight: BigInt(i.payment.weight) },
        refunds: i.refunds.map((r: any) => ({ ...r, minimumAmount: BigInt(r.minimumAmount) })),
      })),
      output: {
        ...od.output,
        payments: od.output.payments.map((p: any) => ({ ...p, minimumAmount: BigInt(p.minimumAmount), expectedAmount: BigInt(p.expectedAmount) })),
      },
      fees: od.fees.map((f: any) => ({ ...f, amount: BigInt(f.amount) })),
    });
    expect(rebuilt).toBe(requestId);
    const expectedOut = BigInt(q.body.details.currencyOut.amount);
    expect(expectedOut).toBeGreaterThan(0n);
    expect(expectedOut).toBeLessThan(100000000000000000n);

    const waiting = await api(s.url, `/intents/status/v3?requestId=${requestId}`);
    expect(waiting.body).toMatchObject({ status: 'waiting', inTxHashes: [], txHashes: [], originChainId: A, destinationChainId: B, failReason: null });

    const [txHash] = await executeSteps(s, q.body, 1);
    const idx = await api(s.url, '/transactions/index', { body: { txHash, chainId: A } });
    expect(idx.status).toBe(200);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(Object.keys(done).sort()).toEqual(
      [
        'status',
        'details',
        'inTxHashes',
        'txHashes',
        'updatedAt',
        'originChainId',
        'destinationChainId',
        'quoteCreatedAt',
        'failReason',
        'refundFailReason',
      ].sort(),
    );
    expect(done.status).toBe('success');
    expect(done.inTxHashes).toEqual([txHash]);
    expect(done.txHashes).toHaveLength(1);
    expect(done.updatedAt).toBeGreaterThanOrEqual(done.quoteCreatedAt);
    expect(done.quoteCreatedAt).toBeGreaterThan(1_600_000_000_000); // milliseconds
    expect((await s.publicClient(B).getBalance({ address: recipient })) - before).toBe(expectedOut);
    const fills = await fillsOnChain(B, requestId);
    expect(fills).toHaveLength(1);
    expect(fills[0]!.transactionHash).toBe(done.txHashes[0]);
    // The older status path answers the same.
    expect((await api(s.url, `/intents/status?requestId=${requestId}`)).body.status).toBe('success');
  });

  it('bridges the stablecoin EXACT_OUTPUT with an approval step first', async () => {
    const recipient = user(3);
    const before = await tokenBalance(A, usdc(A), recipient);
    const q = await api(s.url, '/quote', {
      body: {
        user: user(2),
        recipient,
        originChainId: B,
        destinationChainId: A,
        originCurrency: usdc(B),
        destinationCurrency: usdc(A),
        amount: '25000000',
        tradeType: 'EXACT_OUTPUT',
      },
    });
    expect(q.status).toBe(200);
    expect(q.body.steps.map((x: any) => x.id)).toEqual(['approve', 'deposit']);
    expect(q.body.protocol).toBeUndefined();
    expect(BigInt(q.body.details.currencyIn.amount)).toBeGreaterThan(25_000_000n);
    expect(q.body.fees.relayerService.currency.symbol).toBe('USDC');
    const requestId = q.body.steps[1].requestId;
    const hashes = await executeSteps(s, q.body, 2);
    await api(s.url, '/transactions/index', { body: { txHash: hashes[1], chainId: B } });
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    const received = (await tokenBalance(A, usdc(A), recipient)) - before;
    expect(received).toBeGreaterThanOrEqual(25_000_000n);
    expect(received).toBe(BigInt(q.body.details.currencyOut.amount));
  });

  it('refunds a short deposit, less the refund gas, with DEPOSITED_AMOUNT_TOO_LOW_TO_FILL', async () => {
    const q = await api(s.url, '/quote', {
      body: {
        user: user(4),
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '10000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const w = s.wallet(4, A);
    const pc = s.publicClient(A);
    await pc.waitForTransactionReceipt({
      hash: await w.sendTransaction({
        account: w.account!,
        chain: w.chain,
        to: usdc(A),
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [chain(A).contracts.depository, 9_000_000n] }),
      }),
    });
    const before = await tokenBalance(A, usdc(A), user(4));
    const hash = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: chain(A).contracts.depository,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositErc20', args: [user(4), usdc(A), 9_000_000n, requestId] }),
    });
    await pc.waitForTransactionReceipt({ hash });
    const done = await waitForStatus(s.url, requestId, ['refund', 'success']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL', refundFailReason: null, inTxHashes: [hash] });
    expect(done.txHashes).toHaveLength(1);
    const back = (await tokenBalance(A, usdc(A), user(4))) - (before - 9_000_000n);
    expect(back).toBeLessThan(9_000_000n); // the refund's gas is deducted
    expect(back).toBeGreaterThan(8_000_000n);
    expect(await fillsOnChain(B, requestId)).toHaveLength(0);
  });

  it('refunds a deposit that matches no order (ORPHANED_DEPOSIT_REFUND)', async () => {
    const w = s.wallet(1, B);
    const pc = s.publicClient(B);
    const id = keccak256(toHex('not an order'));
    const hash = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: chain(B).contracts.depository,
      value: 10n ** 17n,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [user(1), id] }),
    });
    const receipt = await pc.waitForTransactionReceipt({ hash });
    const logIndex = receipt.logs.findIndex((l) => l.address.toLowerCase() === chain(B).contracts.depository.toLowerCase());
    const requestId = keccak256(toHex(`deposit:${B}:${hash}:${receipt.logs[logIndex]!.logIndex}`));
    const done = await waitForStatus(s.url, requestId, ['refund']);
    expect(done).toMatchObject({ failReason: 'ORPHANED_DEPOSIT_REFUND', inTxHashes: [hash] });
  });

  it('refunds a second deposit to a filled order (DOUBLE_SPEND) and never fills twice', async () => {
    const q = await api(s.url, '/quote', {
      body: {
        user: user(1),
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '50000000000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    const requestId = q.body.steps[0].requestId;
    await executeSteps(s, q.body, 1);
    await waitForStatus(s.url, requestId, ['success']);
    const [second] = await executeSteps(s, q.body, 1);
    const receipt = await s.publicClient(A).waitForTransactionReceipt({ hash: second! });
    const child = keccak256(toHex(`deposit:${A}:${second}:${receipt.logs[0]!.logIndex}`));
    const refunded = await waitForStatus(s.url, child, ['refund']);
    expect(refunded.failReason).toBe('DOUBLE_SPEND');
    expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('success');
    expect(await fillsOnChain(B, requestId)).toHaveLength(1);
  });
});

describe('deposits that do not match their order', () => {
  async function quoteA(account: number) {
    const q = await api(s.url, '/quote', {
      body: {
        user: user(account),
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '10000000000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    return q.body.steps[0].requestId as Hex;
  }
  async function depositNative(chainId: number, account: number, id: Hex, value: bigint) {
    const w = s.wallet(account, chainId);
    const hash = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: chain(chainId).contracts.depository,
      value,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [user(account), id] }),
    });
    await s.publicClient(chainId).waitForTransactionReceipt({ hash });
    return hash;
  }

  it('refunds on the chain it arrived on: DEPOSIT_CHAIN_MISMATCH', async () => {
    const requestId = await quoteA(3);
    const before = await s.publicClient(B).getBalance({ address: user(3) });
    await depositNative(B, 3, requestId, 10n ** 16n);
    const done = await waitForStatus(s.url, requestId, ['refund', 'success']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'DEPOSIT_CHAIN_MISMATCH' });
    const refundTx = await s.publicClient(B).getTransactionReceipt({ hash: done.txHashes[0] });
    expect(refundTx.to?.toLowerCase()).toBe(chain(B).contracts.depository.toLowerCase());
    // The user paid the deposit's gas; the refund brought back all but the refund's own gas.
    const after = await s.publicClient(B).getBalance({ address: user(3) });
    expect(before - after).toBeLessThan(10n ** 15n);
    expect(await fillsOnChain(B, requestId)).toHaveLength(0);
  });

  it('refunds another currency than the quoted one: INCORRECT_DEPOSIT_CURRENCY', async () => {
    const requestId = await quoteA(4);
    const w = s.wallet(4, A);
    const pc = s.publicClient(A);
    await pc.waitForTransactionReceipt({
      hash: await w.sendTransaction({
        account: w.account!,
        chain: w.chain,
        to: usdc(A),
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [chain(A).contracts.depository, 5_000_000n] }),
      }),
    });
    await pc.waitForTransactionReceipt({
      hash: await w.sendTransaction({
        account: w.account!,
        chain: w.chain,
        to: chain(A).contracts.depository,
        data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositErc20', args: [user(4), usdc(A), 5_000_000n, requestId] }),
      }),
    });
    const done = await waitForStatus(s.url, requestId, ['refund', 'success']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'INCORRECT_DEPOSIT_CURRENCY' });
  });

  it('keeps a deposit too small to pay its own refund: AMOUNT_TOO_LOW_TO_REFUND', async () => {
    const hash = await depositNative(A, 2, keccak256(toHex('dust')), 1000n);
    const receipt = await s.publicClient(A).getTransactionReceipt({ hash });
    const requestId = keccak256(toHex(`deposit:${A}:${hash}:${receipt.logs[0]!.logIndex}`));
    const done = await waitForStatus(s.url, requestId, ['failure']);
    await until(() => (s.node.ledger.requests.get(requestId)?.refund_fail_reason ? true : undefined), 'refund decision');
    const after = (await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body;
    expect(done.failReason).toBe('ORPHANED_DEPOSIT_REFUND');
    expect(after).toMatchObject({ status: 'failure', refundFailReason: 'AMOUNT_TOO_LOW_TO_REFUND', txHashes: [] });
    expect(s.node.ledger.payouts.forRequest(requestId)).toEqual([]);
  });
});

describe('API input', () => {
  const good = () => ({
    user: user(1),
    originChainId: A,
    destinationChainId: B,
    originCurrency: zeroAddress,
    destinationCurrency: zeroAddress,
    amount: '1000000000000000',
    tradeType: 'EXACT_INPUT',
  });
  it.each([
    [{ amount: '0' }, /amount: must be greater than zero/],
    [{ amount: '1.5' }, /amount: must be a positive integer/],
    [{ amount: 5 }, /amount: must be a string of digits/],
    [{ amount: `1${'0'.repeat(80)}` }, /amount: must fit in uint256/],
    [{ user: '0x123' }, /user: must be a 0x-prefixed 20-byte hex address on chain 8453/],
    [{ originChainId: 999 }, /originChainId 999 is not a supported chain/],
    [{ destinationCurrency: '0x00000000000000000000000000000000000000ff' }, /destinationCurrency .* is not supported on chain 10/],
    [{ tradeType: 'SIDEWAYS' }, /tradeType: must be EXACT_INPUT, EXACT_OUTPUT or EXPECTED_OUTPUT/],
    [{ destinationChainId: A, recipient: undefined }, /nothing to do/],
    [{ amount: '1' }, /too low to cover the fees/],
  ])('rejects a bad quote with 400 and a message (%#)', async (over, message) => {
    const r = await api(s.url, '/quote', { body: { ...good(), ...over } });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(message);
  });

  it('rejects what the solver cannot carry', async () => {
    const r = await api(s.url, '/quote', { body: { ...good(), amount: (10n ** 30n).toString() } });
    expect(r.status).toBe(400);
    expect(r.body.errorCode).toBe('SOLVER_CAPACITY_EXCEEDED');
  });

  it('answers malformed JSON, unknown ids and unknown routes with 4xx', async () => {
    expect((await api(s.url, '/quote', { raw: '{"user": ' })).status).toBe(400);
    const unknown = await api(s.url, `/intents/status/v3?requestId=0x${'ab'.repeat(32)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.message).toMatch(/no request with id/);
    expect((await api(s.url, '/intents/status/v3?requestId=nope')).status).toBe(400);
    expect((await api(s.url, '/intents/status/v3')).status).toBe(400);
    expect((await api(s.url, '/transactions/index', { body: { txHash: '0x1', chainId: A } })).body.message).toMatch(
      /txHash: is not a transaction id on chain 8453/,
    );
    expect((await api(s.url, '/transactions/index', { body: { txHash: `0x${'00'.repeat(32)}`, chainId: A } })).status).toBe(404);
    expect((await api(s.url, '/nowhere')).status).toBe(404);
  });

  it('serves health, readiness and metrics', async () => {
    expect((await api(s.url, '/health')).body).toEqual({ status: 'ok' });
    await until(async () => ((await api(s.url, '/ready')).status === 200 ? true : undefined), 'ready');
    const m = await api(s.url, '/metrics');
    for (const name of [
      'relay_deposits_indexed_total',
      'relay_fills_total',
      'relay_deposit_to_fill_seconds',
      'relay_indexer_lag_blocks',
      'relay_solver_balance',
      'relay_rpc_errors_total',
      'relay_payout_queue_depth',
    ]) {
      expect(m.body).toContain(name);
    }
    expect(m.body).toMatch(/relay_fills_total\{chain="10",outcome="success"\} [1-9]/);
    // Each fill paid is counted once (the solver counts it; the EVM submitter counted it again, and a relay's, claim's
    // or sweep's outcome as a refund's).
    const paid = s.node.ledger.payouts.ofChain(B).filter((p) => p.kind === 'fill' && p.state === 'success').length;
    const counted = Number(/relay_fills_total\{chain="10",outcome="success"\} (\d+)/.exec(m.body)![1]);
    expect(counted).toBe(paid);
  });
});

describe('books', () => {
  // relay-node audit after every flow above: the ledger reconciles with the chains to the smallest unit.
  it('reconcile with the chains (relay-node audit: no difference)', async () => {
    const r = await auditStack(s);
    expect(r.differences).toEqual([]);
    expect(r.chains.map((c) => c.chainId).sort()).toEqual([10, 1337, 8453]);
  }, 120_000);
});

describe('secrets', () => {
  it('never writes a key to the log, even at debug level', () => {
    const log = logLines.join('').toLowerCase();
    expect(logLines.length).toBeGreaterThan(20);
    expect(log).toContain('fill queued');
    for (const key of [s.devnet.keys.solver, s.devnet.keys.allocator]) {
      expect(log).not.toContain(key.slice(2).toLowerCase());
    }
  });
});
