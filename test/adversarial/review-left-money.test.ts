// Adversarial review: the money items the last closing notes left open.
//
// 1. A recipient that gains code after its quote. The quote charges a native fill (or a gas top-up) GAS.recipient
//    (40,000) more gas when its recipient runs code, and the payout sender let every such fill's recipient take that
//    much beyond the plain fill's price, charged or not. A recipient that was an EOA when quoted, given code before
//    the fill (deployed, or an EIP-7702 delegation), had the solver pay up to 40,000 gas per fill that no quote
//    charged, for code its owner chose (its own work, done on the solver's gas). Fixed: the quote records the gas a
//    native fill was priced at (the money's maxGas, the plain fill's, plus GAS.recipient only where it charged it),
//    and the fill is sent within it, or refused (QUOTED_GAS_LIMIT_EXCEEDED) and refunded. Batched, such a fill's
//    recipient took the filler's whole BATCH_CALL_GAS (100,000) with code that burns only on chain (two fills priced at
//    170,000 used 297,000): a native fill quoted without code whose recipient has code now goes alone.
// 2. A signed (usePermit) deposit is priced at the origin's gas price of its quote (twice the base fee plus the tip),
//    and the node submits it when the permit is posted, at the market's fees of that moment: a base fee that more
//    than doubled in between (or a poster that waits for such a spike before posting) had the solver pay the rest.
//    Fixed: the quote records that price (money.permitFeePerGas) and the deposit's payout carries it as its fee cap
//    (max_fee_per_gas), as a sponsored relay's does: while the market asks more, the deposit waits unsigned.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, keccak256, pad, parseEther, size, slice, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { GrowingBurnerBytecode, OrderFillerAbi } from '../../contracts-abi/index.ts';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { fillGas, GAS } from '../../src/chains/evm/gas.ts';
import { mineAtBaseFee } from '../helpers/baseFee.ts';
import { api, executeSteps, holdSubmitter, nativeBridge, permitQuote, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const GWEI = 1_000_000_000n;
const account = (i: number) => s.devnet.accounts[i]!;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const text = (x: unknown) => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

let adminKey: string;

beforeAll(async () => {
  s = await startStack({ config: { admin: { port: 0 } } });
  adminKey = s.node.ledger.operations.createAdminKey('ops-left-money').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

// GrowingBurner's runtime code: its creation code copies 0x149 bytes from offset 0x1c.
const burnerRuntime = (): Hex => slice(GrowingBurnerBytecode, 0x1c, 0x1c + 0x149);

// What the node's fill of a native order to `recipient` is estimated at now (as the payout sender estimates it).
const fillEstimate = (recipient: Address, value: bigint) =>
  s.publicClient(B).estimateGas({
    account: s.devnet.solver as Address,
    to: chain(B).contracts.filler,
    value,
    data: encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillNative', args: [keccak256(toHex(generatePrivateKey())), recipient] }),
  });

describe('a recipient that gains code after its quote', () => {
  it('a native fill quoted to an EOA, its recipient given gas-burning code before the fill, costs the solver no more gas than its quote priced', async () => {
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const amount = 10n ** 16n;
    const q = await api(s.url, '/quote', { body: nativeBridge(account(1).address, recipient, A, B, amount.toString(), { refundTo: account(1).address }) });
    expect(q.status).toBe(200);
    const requestId = q.body.steps[0].requestId as Hex;
    // Quoted to an account with no code: priced as a plain native fill.
    expect(await s.publicClient(B).getCode({ address: recipient })).toBeUndefined();
    // Then the recipient gets code (as a contract deployed there, or an EIP-7702 delegation, would give it): estimated
    // (at a gas price of 0) it burns `rounds` hashes, on chain all the gas it is given.
    const urlB = chain(B).rpcUrl;
    const runtime = burnerRuntime();
    expect(size(runtime)).toBe(0x149);
    await rpc(urlB, 'anvil_setCode', [recipient, runtime]);
    const setRounds = (n: bigint) => rpc(urlB, 'anvil_setStorageAt', [recipient, pad('0x0', { size: 32 }), pad(toHex(n), { size: 32 })]);
    // Rounds that have the fill estimated at about 110,000 gas: above the plain fill's price, within its price plus GAS.recipient.
    await setRounds(0n);
    const base = await fillEstimate(recipient, amount);
    await setRounds(200n);
    const per = ((await fillEstimate(recipient, amount)) - base) / 200n;
    const rounds = (110_000n - base) / per;
    await setRounds(rounds);
    const estimate = await fillEstimate(recipient, amount);
    const priced = fillGas(true, false);
    expect(estimate, text({ base, per, rounds, estimate })).toBeGreaterThan(priced);
    expect(estimate).toBeLessThan(priced + GAS.recipient);

    await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'refund'], 60_000);
    const fill = s.node.ledger.payouts.get(`fill:${requestId}`);
    const txs = fill ? s.node.ledger.payouts.txsOf(fill.id).filter((t) => t.gas_used !== null) : [];
    const used = txs.map((t) => BigInt(t.gas_used!));
    // Before: paid, the fill signed at 125,000 gas and all of it burned (about 40,000 over its price, the solver's).
    expect(
      used.every((g) => g <= priced),
      text({ done, priced, used }),
    ).toBe(true);
    // Refused rather than paid at a loss: the deposit goes back to refundTo.
    expect(done).toMatchObject({ status: 'refund', failReason: 'QUOTED_GAS_LIMIT_EXCEEDED' });
  }, 120_000);
});

describe('recipients that gain code after their quotes, their fills batched', () => {
  it('a batch of native fills quoted to EOAs, given code that burns on chain only, costs the solver no more gas than its fills were priced at', async () => {
    const amount = 10n ** 16n;
    const urlB = chain(B).rpcUrl;
    const release = holdSubmitter(s, B);
    const ids: Hex[] = [];
    const recipients: Address[] = [];
    try {
      for (const from of [2, 4]) {
        const recipient = privateKeyToAccount(generatePrivateKey()).address;
        const q = await api(s.url, '/quote', {
          body: nativeBridge(account(from).address, recipient, A, B, amount.toString(), { refundTo: account(from).address }),
        });
        expect(q.status).toBe(200);
        await executeSteps(s, q.body, from);
        ids.push(q.body.steps[0].requestId as Hex);
        recipients.push(recipient);
      }
      await until(() => (ids.every((id) => s.node.ledger.payouts.get(`fill:${id}`)?.state === 'queued') ? true : undefined), 'both fills queued');
      // Both recipients, EOAs when quoted, get code that is cheap in an estimate (gas price 0: rounds 0) and burns all
      // the gas it is given on chain.
      for (const r of recipients) await rpc(urlB, 'anvil_setCode', [r, burnerRuntime()]);
    } finally {
      release();
    }
    const done = await Promise.all(ids.map((id) => waitForStatus(s.url, id, ['success', 'refund'], 60_000)));
    const priced = fillGas(true, false) * BigInt(ids.length);
    const hashes = [...new Set(ids.map((id) => s.node.ledger.payouts.get(`fill:${id}`)!.tx_hash).filter((h): h is Hex => !!h))];
    let used = 0n;
    for (const hash of hashes) used += (await s.publicClient(B).getTransactionReceipt({ hash })).gasUsed;
    // Before: one fillBatch of the two, signed with 100,000 gas of room per fill and all of it burned.
    expect(used, text({ done: done.map((d) => d.status), hashes, used, priced })).toBeLessThanOrEqual(priced);
  }, 120_000);
});

describe('a signed (usePermit) deposit is never submitted above the gas price its quote priced', () => {
  it('the base fee rising far above the quote before the permit is posted: the deposit waits for fees within it', async () => {
    await mineAtBaseFee(s, A, GWEI);
    const user = privateKeyToAccount(account(3).privateKey);
    const q = await permitQuote(s, user.address);
    expect(q.status).toBe(200);
    // The price of gas the quote charged the deposit at: the node's at this head (no block came between).
    const cap = await s.node.chains.costs(A)!.feePerGas!();
    const step = q.body.steps[0];
    const requestId = step.requestId as Hex;
    const { domain, types, primaryType, value } = step.items[0].data.sign;
    const signature = await user.signTypedData({ domain, types, primaryType, message: value });
    // The poster waits for a spike: the base fee at 20 times the quote's price of gas.
    await mineAtBaseFee(s, A, 20n * cap);
    const posted = await api(s.url, `/permits?signature=${signature}`, { body: step.items[0].data.post.body });
    expect(posted.status, text(posted.body)).toBe(200);
    const payoutId = `deposit:${requestId}`;
    const waits = async () => {
      const { values } = await s.node.metrics.feeCapWaits.get();
      return values.find((v) => v.labels.chain === String(A) && v.labels.stage === 'send')?.value ?? 0;
    };
    const waitsBefore = await waits();
    await until(
      async () => (s.node.ledger.payouts.get(payoutId)!.state !== 'queued' || (await waits()) > waitsBefore ? true : undefined),
      'the deposit sent or waiting on its fee cap',
    );
    // The base fee falls back: a deposit that waited goes out within its cap.
    await mineAtBaseFee(s, A, GWEI);
    await waitForStatus(s.url, requestId, ['success', 'refund', 'failure'], 60_000);
    const offered = s.node.ledger.payouts.txsOf(payoutId).map((t) => BigInt(t.max_fee_per_gas));
    const hash = s.node.ledger.payouts.get(payoutId)!.tx_hash as Hex;
    const receipt = await s.publicClient(A).getTransactionReceipt({ hash });
    const paid = receipt.gasUsed * receipt.effectiveGasPrice;
    // Before: signed at the spike's fees, about 20 times what the quote charged for the deposit's gas.
    expect(
      offered.every((f) => f <= cap),
      text({ cap, offered }),
    ).toBe(true);
    expect(paid, text({ cap, paid, gasUsed: receipt.gasUsed })).toBeLessThanOrEqual(GAS.permitDeposit * cap);
    expect(await waitForStatus(s.url, requestId, ['success'], 60_000)).toMatchObject({ status: 'success' });
  }, 120_000);
});

// 3. Held, not lost: a failed excess (what a deposit paid beyond its quote, whose return failed) stays in the depository
//    out of what it owes the solver (withdrawals.owedByCurrency) and is listed for the operator with its amount.
describe('an excess whose return failed', () => {
  it('is listed for the operator (GET /admin/payouts?state=failed) with its amount, and never counted as owed to the solver', async () => {
    const owedBefore = s.node.ledger.withdrawals.owedByCurrency(A).get(zeroAddress) ?? 0n;
    const q = await api(s.url, '/quote/v2', {
      body: {
        user: account(1).address,
        recipient: account(2).address,
        // A token contract: it refuses ether, so the excess's return fails.
        refundTo: chain(A).contracts.stablecoin,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        tradeType: 'EXACT_INPUT',
        useDepositAddress: true,
        amount: parseEther('0.01').toString(),
      },
    });
    expect(q.status, text(q.body)).toBe(200);
    const step = q.body.steps.at(-1);
    const id = step.requestId as Hex;
    const w = s.wallet(1, A);
    const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: step.depositAddress, value: parseEther('0.013') });
    await s.publicClient(A).waitForTransactionReceipt({ hash });
    expect((await waitForStatus(s.url, id, ['success', 'refund', 'failure'], 60_000)).status).toBe('success');
    const excess = await until(() => {
      const p = s.node.ledger.payouts.get(`excess:${id}`);
      return p?.state === 'failed' || p?.state === 'success' ? p : undefined;
    }, 'the excess settled');
    expect(excess.state).toBe('failed');
    const listed = await api(s.node.adminUrl, '/admin/payouts?state=failed', { headers: { authorization: `Bearer ${adminKey}` } });
    expect(listed.status).toBe(200);
    expect(listed.body.payouts).toContainEqual(expect.objectContaining({ payoutId: excess.id, requestId: id, amount: excess.amount, chainId: A }));
    // And counted for the operator's alerts: relay_payouts_failed_total{chain,kind} (before, only the log said so).
    const metrics = await fetch(`${s.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(new RegExp(`relay_payouts_failed_total\\{chain="${A}",kind="excess"\\} [1-9]`));
    // The depository owes the solver none of the overpaid 0.003: a deposit whose excess is owed to its user is held
    // whole (depository_owed lists it not), or owed less its excess.
    const owed = s.node.ledger.db
      .prepare('SELECT o.amount, o.excess FROM depository_owed o JOIN deposits d ON d.id = o.deposit_id WHERE d.request_id = ?')
      .all(id) as { amount: string; excess: string | null }[];
    for (const o of owed) expect(BigInt(o.amount) - BigInt(o.excess ?? 0), text(owed)).toBeLessThanOrEqual(parseEther('0.01'));
    expect(s.node.ledger.withdrawals.owedByCurrency(A).get(zeroAddress) ?? 0n).toBeLessThanOrEqual(owedBefore + parseEther('0.01'));
  }, 120_000);
});
