// Adversarial review of the last session's newest commits (second look), as an attacker: the fill deadline in the
// submitter (d195073), the revert reading of EVM errors (87c9b61), the API's stall and pipelining bounds (02bc56f).
//
// 1. The deadline rule (a fill still unsigned past its order's deadline fails, PROTOCOL_DEADLINE_EXPIRED, and is
//    refunded) reads the request's fill_deadline, and an open deposit address's arrival has none (its request is made
//    when the payment is decided, fill_deadline null): its fill, held on the destination's fee cap for as long as the
//    spike lasts, was paid at the rate of its decision whenever it could be, the free option d195073 closed for every
//    other order. Fixed in the pipeline: an arrival is held to its template's window (the template's fill_deadline less
//    its quote time), counted from the arrival's decision.
// 2. The deadline rule fails a queued fill before its sender looks at the chain. A fill the chain already paid (by a
//    transaction of the solver's the ledger lost track of: a ledger restored from a backup, another node with the same
//    key) was found paid by the sender's simulation (OrderAlreadyFilled, then the OrderFilled event) and settled; past
//    its deadline it is now failed first and its deposit refunded: the order paid twice. Fixed in the pipeline: past the
//    deadline a fill still goes through its sender's prepare (which settles one paid already, or waits on a chain that
//    says so), and fails only where it would otherwise be signed; a batch sends such fills that way, alone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWalletClient, encodeFunctionData, http, parseGwei, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { OrderFillerAbi } from '../../contracts-abi/index.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import { mineAtBaseFee } from '../helpers/baseFee.ts';
import {
  api,
  depositAddressQuote,
  executeSteps,
  holdSubmitter,
  MovablePrices,
  payAddress,
  startStack,
  until,
  waitForStatus,
  type Stack,
} from '../helpers/stack.ts';

const A = 8453;
const B = 10;
// Chain B's fee cap: a payout the market prices above it waits unsigned.
const CAP = parseGwei('50');

const text = (x: unknown) => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

describe("an open deposit address's arrival held past its deadline", () => {
  const prices = new MovablePrices();
  let s: Stack;
  beforeAll(async () => {
    // The shortest fill deadline the config takes: 60 s after the quote (the template's window); a quote's life shorter.
    s = await startStack({
      prices,
      config: { quote: { ttlSeconds: 30, fillDeadlineSeconds: 60 } },
      chain: (c) => (c.id === B ? { ...c, maxFeePerGas: CAP.toString() } : c),
    });
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });

  it('is failed (PROTOCOL_DEADLINE_EXPIRED) and refunded, never paid at its decided rate once the spike ends after the price moved', async () => {
    const pc = s.publicClient(B);
    const usdcA = s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin;
    // USDC on A for ETH on B, to the attacker's own recipient: a swap whose rate is fixed when the arrival is decided.
    const q = await depositAddressQuote(s, { depositAddressType: 'open', destinationCurrency: zeroAddress, amount: '30000000' });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const template = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const t = s.node.ledger.requests.get(template)!;
    const window = t.fill_deadline! - t.created_at;
    const recipient = t.recipient as Address;
    try {
      // A fee spike on B (20 times the cap): the arrival's fill, once decided, waits on the cap unsigned.
      await mineAtBaseFee(s, B, 20n * CAP);
      await payAddress(s, 4, A, at, usdcA, 30_000_000n);
      const arrival = await until(
        () => (s.node.ledger.db.prepare('SELECT id FROM requests WHERE parent_id = ?').get(template) as { id: Hex } | undefined)?.id,
        'the arrival',
        60_000,
      );
      const decided = await until(
        () => {
          const p = s.node.ledger.payouts.get(`fill:${arrival}`);
          return p && p.state === 'queued' ? p : undefined;
        },
        'the arrival decided and its fill waiting on the cap',
        60_000,
      );
      const since = s.node.ledger.requests.get(arrival)!.created_at;
      // The template's window passes, counted from the arrival's decision, while the fill waits.
      await until(() => (Date.now() > since + window + 1_000 ? true : undefined), "the arrival's window passed", 90_000);
      // ETH rises 10% (the ETH the fill pays is worth more than the USDC it was decided for), and the spike ends.
      prices.set('ETH', '3300');
      s.node.solver!.invalidate();
      const before = await pc.getBalance({ address: recipient });
      await mineAtBaseFee(s, B, parseGwei('1'));
      // 'failure' passes on the way to 'refund' (the refund queued, not yet paid).
      const done = await waitForStatus(s.url, arrival, ['success', 'refund'], 90_000);
      const refund = s.node.ledger.payouts.forRequest(arrival).find((p) => p.kind === 'refund');
      const fill = s.node.ledger.payouts.get(`fill:${arrival}`)!;
      const seen = {
        status: done.status,
        fill: fill.state,
        fillReason: fill.fail_reason,
        decidedAmount: decided.amount,
        received: (await pc.getBalance({ address: recipient })) - before,
        refund: refund && { state: refund.state, to: refund.recipient.toLowerCase() },
        window,
      };
      // Before: { status: 'success', fill: 'success', fillReason: null, received: <the decided amount> }.
      expect(seen, text(seen)).toMatchObject({
        status: 'refund',
        fill: 'failed',
        fillReason: 'PROTOCOL_DEADLINE_EXPIRED',
        received: 0n,
        refund: { state: 'success', to: t.refund_to!.toLowerCase() },
      });
    } finally {
      prices.overrides.clear();
      s.node.solver!.invalidate();
    }
  }, 300_000);
});

describe('a fill the chain already paid, past its deadline', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ config: { quote: { ttlSeconds: 10, fillDeadlineSeconds: 60 } } });
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });

  it('is settled as paid, never failed and refunded as well', async () => {
    const usdcA = s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin;
    const chainB = s.devnet.chains.find((c) => c.id === B)!;
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const q = await api(s.url, '/quote', {
      body: {
        user: s.devnet.accounts[4]!.address,
        recipient,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdcA,
        destinationCurrency: zeroAddress,
        amount: '30000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const fillId = `fill:${requestId}`;
    const deadline = s.node.ledger.requests.get(requestId)!.fill_deadline!;
    // B's submitter is handed nothing: the fill, once decided, stays queued.
    const release = holdSubmitter(s, B);
    let released = false;
    try {
      await executeSteps(s, q.body, 4);
      const fill = await until(() => {
        const p = s.node.ledger.payouts.get(fillId);
        return p && p.state === 'queued' ? p : undefined;
      }, 'the fill decided and queued');
      // The solver's key pays the order on B in a transaction the ledger has no record of (what a ledger restored from
      // a backup taken before it was sent, or another node with the key, leaves).
      const solver = createWalletClient({
        account: privateKeyToAccount(s.devnet.keys.solver),
        chain: devnetChain(B, chainB.rpcUrl),
        transport: http(chainB.rpcUrl),
      });
      const paidBy = await solver.sendTransaction({
        account: solver.account,
        chain: solver.chain,
        to: chainB.contracts.filler,
        data: encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillNative', args: [requestId, recipient] }),
        value: BigInt(fill.amount),
      });
      await s.publicClient(B).waitForTransactionReceipt({ hash: paidBy });
      // The order's deadline passes before the node looks at the fill again.
      await until(() => (Date.now() > deadline + 1_000 ? true : undefined), "the order's fill deadline passed", 90_000);
      release();
      released = true;
      const done = await waitForStatus(s.url, requestId, ['success', 'refund'], 60_000);
      const after = s.node.ledger.payouts.get(fillId)!;
      const seen = {
        status: done.status,
        fill: after.state,
        fillReason: after.fail_reason,
        fillTx: after.tx_hash,
        refunds: s.node.ledger.payouts.forRequest(requestId).filter((p) => p.kind === 'refund').length,
      };
      // Before: { status: 'refund', fill: 'failed', fillReason: 'PROTOCOL_DEADLINE_EXPIRED', refunds: 1 }: paid twice.
      expect(seen, text(seen)).toMatchObject({ status: 'success', fill: 'success', fillTx: paidBy, refunds: 0 });
    } finally {
      if (!released) release();
    }
  }, 240_000);
});
