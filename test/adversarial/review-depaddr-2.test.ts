// Money review of deposit addresses (second round): an attacker with an API key and a funded wallet against strict
// and open deposit addresses, their sweeps and the deposits the sweeps make.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, zeroAddress, type Address, type Hex, type PublicClient } from 'viem';
import { RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { api, payAddress, depositAddressQuote, holdSubmitter, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
let attackerKey: string;
const A = 8453;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;

beforeAll(async () => {
  s = await startStack();
  attackerKey = s.node.ledger.apiKeys.create('attacker').key;
}, 120_000);

afterAll(async () => {
  await s?.stop();
});

const pay = (from: number, to: Address, currency: Address, amount: bigint) => payAddress(s, from, A, to, currency, amount);

// Deposit decisions left for another deposit of the order that would pay it.
async function postponed(): Promise<number> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  return Number(/relay_solver_postponed_total\{reason="ANOTHER_DEPOSIT_PAYS"\} (\d+)/.exec(text)?.[1] ?? 0);
}

const balance = (who: Address, currency: Address) =>
  currency === zeroAddress
    ? s.publicClient(A).getBalance({ address: who })
    : s.publicClient(A).readContract({ address: currency, abi: erc20Abi, functionName: 'balanceOf', args: [who] });

describe('a strict deposit address paid by its user, its sweep still queued', () => {
  it('is filled: 1 wei an attacker deposits into the depository naming the order (its id read by address with any API key) does not fail it', async () => {
    const q = await depositAddressQuote(s);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    // The sweep waits in the submitter's queue (a busy queue, fee-capped sends, a paused chain's backlog).
    const before = await postponed();
    const release = holdSubmitter(s, A);
    try {
      await pay(1, at, usdc(A), 10_000_000n);
      await until(() => s.node.ledger.payouts.forRequest(id).find((p) => p.kind === 'sweep'), 'the sweep queued');
      // The attacker saw the user's transfer to `at` on chain and asks the node whose address it is.
      const found = await api(s.url, `/deposit-addresses/v1?address=${at}`, { apiKey: attackerKey });
      expect(found.status).toBe(200);
      expect(found.body.requestId).toBe(id);
      // 1 wei of the native currency naming the order, straight into the depository.
      const w = s.wallet(4, A);
      const hash = await w.sendTransaction({
        account: w.account!,
        chain: w.chain,
        to: chain(A).contracts.depository,
        data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [account(4).address, found.body.requestId as Hex] }),
        value: 1n,
      });
      await s.publicClient(A).waitForTransactionReceipt({ hash });
      // The node looks at the attacker's deposit while the user's sweep is still queued: it decided it (failing the
      // order), or left it for the deposit on its way.
      const attackers = () => s.node.ledger.deposits.byOrderRef(id).find((d) => d.tx_hash.toLowerCase() === hash.toLowerCase());
      await until(
        async () => (attackers()?.state === 'handled' || (await postponed()) > before ? true : undefined),
        "the attacker's deposit decided or postponed",
      );
    } finally {
      release();
    }
    // The user's own deposit (the sweep's) is decided too: before, it came back as a DOUBLE_SPEND, less the sweep's gas
    // and the refund's, and the order was never filled.
    const sweep = await until(() => s.node.ledger.payouts.forRequest(id).find((p) => p.kind === 'sweep' && p.state === 'success'), 'the sweep paid');
    await until(
      () => s.node.ledger.deposits.byOrderRef(id).find((d) => d.tx_hash.toLowerCase() === sweep.tx_hash!.toLowerCase() && d.state === 'handled'),
      "the user's swept deposit decided",
    );
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 60_000);
    expect(done.status, JSON.stringify(done)).toBe('success');
  });
});

describe("a watcher pass that outlasts a sweep's landing", () => {
  it("queues no second sweep from the balance it read before the sweep landed: the solver paid an empty sweep's gas", async () => {
    // A pass reads every live address (thousands: the caps allow 2,000 anonymous ones, each an attacker's free quote),
    // 50 at a time, and queues sweeps only once all are read. A sweep that landed while the pass read the others found
    // no sweep open, and the address's balance from before it was queued again: an empty sweep, paid by the solver.
    const q = await depositAddressQuote(s);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const sweeps = () => s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'sweep');
    const release = holdSubmitter(s, A);
    const client = (s.node.adapters.get(A) as unknown as { decisionClient: PublicClient }).decisionClient;
    const readContract = client.readContract;
    let armed = false;
    let slowReadDone = false;
    let readsAfter = 0;
    try {
      await pay(1, at, usdc(A), 10_000_000n);
      await until(() => (sweeps().length === 1 ? true : undefined), 'the first sweep queued');
      armed = true;
      // The address's next balance read is one of a long pass: read while the sweep is still queued, it returns only
      // once the sweep has landed and is settled.
      client.readContract = (async (args: { functionName: string; args?: readonly unknown[] }) => {
        const read = await (readContract as (a: unknown) => Promise<unknown>)(args);
        if (args.functionName !== 'balanceOf' || (args.args?.[0] as string | undefined)?.toLowerCase() !== at.toLowerCase()) return read;
        if (slowReadDone) {
          readsAfter++;
          return read;
        }
        if (!armed) return read;
        armed = false;
        expect(read).toBe(10_000_000n);
        release();
        await until(() => (sweeps()[0]?.state === 'success' ? true : undefined), 'the first sweep settled');
        slowReadDone = true;
        return read;
      }) as typeof client.readContract;
      // A new head starts the pass.
      await pay(4, account(4).address, zeroAddress, 1n);
      await waitForStatus(s.url, id, ['success']);
      // Two passes after the slow one: that pass has queued whatever it queued.
      await until(async () => {
        if (readsAfter >= 2) return true;
        await pay(4, account(4).address, zeroAddress, 1n);
        return undefined;
      }, 'two more passes over the address');
    } finally {
      release();
      client.readContract = readContract;
    }
    expect(await balance(at, usdc(A))).toBe(0n);
    expect(sweeps().map((p) => p.id)).toEqual([`sweep:${id}:${usdc(A)}:0`]);
  });
});

describe('a strict deposit address paid twice', () => {
  it('after its fill: the second payment is swept and goes back to refundTo less its sweep and refund, and nothing is paid twice', async () => {
    const q = await depositAddressQuote(s);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    await pay(1, at, usdc(A), 10_000_000n);
    await waitForStatus(s.url, id, ['success']);
    const refundTo = account(3).address;
    const before = await balance(refundTo, usdc(A));
    await pay(1, at, usdc(A), 10_000_000n);
    const second = await until(
      () => s.node.ledger.deposits.byOrderRef(id).find((d) => d.state === 'handled' && s.node.ledger.payouts.forDeposit(d.id).some((p) => p.kind === 'refund')),
      'the second payment decided',
    );
    const refund = await until(
      () => s.node.ledger.payouts.forDeposit(second.id).find((p) => p.kind === 'refund' && p.state === 'success'),
      'the second payment refunded',
    );
    expect(refund.recipient).toBe(refundTo);
    // Less the gas of its sweep and of the refund: the solver pays neither.
    expect(BigInt(refund.amount)).toBeLessThan(10_000_000n);
    expect(BigInt(refund.amount)).toBeGreaterThan(0n);
    expect(await balance(refundTo, usdc(A))).toBe(before + BigInt(refund.amount));
    expect(s.node.ledger.requests.get(refund.request_id!)).toMatchObject({ parent_id: id, fail_reason: 'DOUBLE_SPEND' });
    expect(s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'fill')).toHaveLength(1);
    expect(await balance(at, usdc(A))).toBe(0n);
  });
});

describe('a strict deposit address paid again in the block of its sweep', () => {
  it('fills once; the second payment goes back to refundTo (an excess, or a second sweep refunded), nothing stays at the address', async () => {
    const q = await depositAddressQuote(s);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const rpcUrl = chain(A).rpcUrl;
    const refundTo = account(3).address;
    const before = await balance(refundTo, usdc(A));
    const release = holdSubmitter(s, A);
    try {
      await pay(1, at, usdc(A), 10_000_000n);
      await until(() => s.node.ledger.payouts.forRequest(id).find((p) => p.kind === 'sweep'), 'the sweep queued');
      await rpc(rpcUrl, 'evm_setAutomine', [false]);
      release();
      await until(() => s.node.ledger.payouts.forRequest(id).find((p) => p.kind === 'sweep' && p.state === 'sent'), 'the sweep sent');
      const w = s.wallet(1, A);
      await w.sendTransaction({
        account: w.account!,
        chain: w.chain,
        to: usdc(A),
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [at, 10_000_000n] }),
      });
      await rpc(rpcUrl, 'evm_mine', []);
    } finally {
      release();
      await rpc(rpcUrl, 'evm_setAutomine', [true]);
    }
    await waitForStatus(s.url, id, ['success']);
    // Whichever came first in the block, the second 10 USDC goes back to refundTo, less the gas it bore.
    const back = await until(async () => {
      const returned = s.node.ledger.deposits
        .byOrderRef(id)
        .flatMap((d) => s.node.ledger.payouts.forDeposit(d.id))
        .filter((p) => (p.kind === 'refund' || p.kind === 'excess') && p.state === 'success');
      if (returned.length === 1 && (await balance(at, usdc(A))) === 0n) return returned[0];
      // A new head: the watcher looks at the address again on each (the devnet makes blocks only for transactions).
      await rpc(rpcUrl, 'evm_mine', []);
      return undefined;
    }, 'the second payment returned');
    expect(back.recipient).toBe(refundTo);
    expect(BigInt(back.amount)).toBeGreaterThan(0n);
    expect(BigInt(back.amount)).toBeLessThan(10_000_000n);
    expect(await balance(refundTo, usdc(A))).toBe(before + BigInt(back.amount));
    expect(s.node.ledger.payouts.forRequest(id).filter((p) => p.kind === 'fill')).toHaveLength(1);
  });
});

describe('an open deposit address paid far above what the solver holds', () => {
  it('pays nothing it does not hold: the arrival goes back to refundTo, less its sweep and refund', async () => {
    const q = await depositAddressQuote(s, { depositAddressType: 'open' });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const template = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const held = await s.publicClient(10).readContract({ address: usdc(10), abi: erc20Abi, functionName: 'balanceOf', args: [s.devnet.solver] });
    // Two wallets' worth, in before the sweep (it moves the whole balance).
    const each = 900_000n * 10n ** 6n;
    expect(2n * each > held).toBe(true);
    const release = holdSubmitter(s, A);
    try {
      await pay(4, at, usdc(A), each);
      await pay(0, at, usdc(A), each);
    } finally {
      release();
    }
    const arrival = await until(
      () => (s.node.ledger.db.prepare('SELECT id FROM requests WHERE parent_id = ?').get(template) as { id: Hex } | undefined)?.id,
      'the arrival',
    );
    const done = await waitForStatus(s.url, arrival, ['success', 'failure', 'refund'], 60_000);
    expect(done.failReason, JSON.stringify(done)).toBe('SOLVER_BALANCE_TOO_LOW');
    const refund = await until(
      () => s.node.ledger.payouts.forRequest(arrival).find((p) => p.kind === 'refund' && p.state === 'success'),
      'the arrival refunded',
    );
    expect(refund.recipient).toBe(account(3).address);
    expect(BigInt(refund.amount)).toBeLessThan(2n * each);
    expect(BigInt(refund.amount)).toBeGreaterThan(0n);
    expect(s.node.ledger.payouts.forRequest(arrival).filter((p) => p.kind === 'fill')).toEqual([]);
    expect(await balance(at, usdc(A))).toBe(0n);
  });
});
