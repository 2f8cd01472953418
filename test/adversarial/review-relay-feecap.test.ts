// Adversarial review: a sponsored relay (POST /execute rawCalls) is never charged past its hold.
//
// admitRelay holds the sponsor's app balance for the relay's simulated gas (max_gas) at the fee cap of the moment
// (twice the base fee plus the tip). The payout sender then signed the relay at the market's fees when it sent it,
// and bumped a stuck one at the market's too: a base fee that more than doubled between admission and inclusion made
// the relay's gas (charged to the sponsor by onRelayPaid) exceed the hold, and the sponsor's balance went below zero,
// the solver paying gas nothing covered. An app relaying when the base fee is low, just before a spike (or an
// attacker filling blocks to cause one), got its calls made at the solver's expense.
//
// Fixed: the relay's payout carries the fee cap its hold was computed at (payouts.max_fee_per_gas), and the sender
// signs and bumps it within that cap (its per-chain cap machinery, the lower of the two caps): while the market asks
// more, the relay waits unsigned, or stuck at its nonce, as under the chain's own maxFeePerGas cap ('wait').
//
// Two cases, each on the real devnet (anvil, chain 8453), each with a sponsor of its own:
//   1. the base fee jumps far above the cap after admission, before the relay is sent;
//   2. the relay is sent at the cap, the base fee then rises past it and the relay is stuck: its replacement;
//   3. a relay waiting on its cap whose call reverts meanwhile fails at once, its hold released, nothing charged.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, type Address, type Hex, type SignedAuthorizationList } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { FilledOnceArmedAbi, FilledOnceArmedBytecode } from '../../contracts-abi/index.ts';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { sponsorHeld } from '../../src/solver/appBalanceBooks.ts';
import { usdMicroCeil } from '../../src/lib/money.ts';
import { fundedSponsor } from '../helpers/appBalance.ts';
import { admitHeldRelay } from '../helpers/relays.ts';
import { startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { mineAtBaseFee } from '../helpers/baseFee.ts';

const A = 8453;
const GWEI = 1_000_000_000n;
let s: Stack;
const rpcUrl = () => s.devnet.chains.find((c) => c.id === A)!.rpcUrl;

beforeAll(async () => {
  s = await startStack();
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

// The node's head on chain A (its indexer's): heads feed the payout sender's fees and its confirm pass.
const nodeHead = () => BigInt(s.node.adapters.get(A)!.progress().head);

const mineAt = (baseFee: bigint) => mineAtBaseFee(s, A, baseFee);

async function feeCapWaits(stage: 'send' | 'replace'): Promise<number> {
  const { values } = await s.node.metrics.feeCapWaits.get();
  return values.find((v) => v.labels.chain === String(A) && v.labels.stage === stage)?.value ?? 0;
}

const sponsor = (account: number) => fundedSponsor(s, account, 'relay fee cap');

// Admits a relay of `call` (by default a plain call to a fresh wallet) while the submitter holds it back, at a base fee of 1 gwei:
// returns its request id and the fee cap the hold was computed with (the node's price of gas at admission).
async function admitLowFeeRelay(key: { key: string }, call?: { to: Address; data: Hex }) {
  await mineAt(GWEI);
  const r = await admitHeldRelay(s, A, key, call);
  // The cap the simulation read is the node's price of gas at this head: no block came between.
  expect(await s.node.chains.costs(A)!.feePerGas!()).toBe(r.cap);
  return r;
}

// What the relay's sponsor was held, what it was charged, and what the solver paid for the relay's gas, in micro-USD.
async function accounts(requestId: Hex, wallet: Address) {
  const payout = s.node.ledger.payouts.get(`relay:${requestId}`)!;
  const receipt = await s.publicClient(A).getTransactionReceipt({ hash: payout.tx_hash as Hex });
  const price = (JSON.parse(s.node.ledger.requests.get(requestId)!.money!) as { relay: { nativeUsdPrice: string } }).relay.nativeUsdPrice;
  return {
    held: BigInt(s.node.ledger.balances.get(`sponsor_hold:${requestId}`)!.amount),
    charged: -BigInt(s.node.ledger.balances.get(`sponsorship:${requestId}`)?.amount ?? 0),
    paid: usdMicroCeil(receipt.gasUsed * receipt.effectiveGasPrice, 18, price),
    effectiveGasPrice: receipt.effectiveGasPrice,
    balance: s.node.ledger.balances.summary(wallet).balance,
  };
}

const text = (x: unknown) => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

describe('a sponsored relay is never charged past its hold', () => {
  it('the base fee rising far past the admission cap before the relay is sent: it waits for fees within its cap', async () => {
    const { key, wallet } = await sponsor(3);
    const { requestId, cap, release } = await admitLowFeeRelay(key);
    // Before the relay goes out the base fee jumps to 20 times the cap its hold was computed at.
    let high: bigint;
    try {
      high = await mineAt(20n * cap).then(() => 20n * cap);
    } finally {
      release();
    }
    const payoutId = `relay:${requestId}`;
    const waitsBefore = await feeCapWaits('send');
    // The relay is sent, or waits on its cap.
    await until(
      async () => (s.node.ledger.payouts.get(payoutId)!.state !== 'queued' || (await feeCapWaits('send')) > waitsBefore ? true : undefined),
      'the relay sent or waiting on its fee cap',
    );
    // The base fee falls back: the relay (if it waited) goes out within its cap.
    await mineAt(GWEI);
    await waitForStatus(s.url, requestId, ['success', 'failure']);
    const seen = await accounts(requestId, wallet);
    const offered = s.node.ledger.payouts.txsOf(payoutId).map((t) => BigInt(t.max_fee_per_gas));
    // The solver paid no more for the relay's gas than the sponsor's hold promised, and the sponsor, funded with
    // 1 USDC, never goes below zero (before: about 3.3 USD charged against a 0.23 USD hold, the balance at -2.3 USD).
    expect(seen.paid, text({ cap, high, offered, ...seen })).toBeLessThanOrEqual(seen.held);
    expect(seen.charged).toBe(seen.paid);
    expect(seen.balance, text(seen)).toBeGreaterThanOrEqual(0n);
    // Nothing was signed for it above the cap its hold was computed with, which its payout records.
    expect(
      offered.every((f) => f <= cap),
      text({ cap, high, offered }),
    ).toBe(true);
    expect(seen.effectiveGasPrice <= cap, text({ cap, ...seen })).toBe(true);
    expect(s.node.ledger.payouts.get(payoutId)!.max_fee_per_gas).toBe(cap.toString());
  }, 120_000);

  it('a relay stuck at its nonce after the base fee rose past its cap is not bumped above the cap', async () => {
    const { key, wallet } = await sponsor(4);
    const { requestId, cap, release } = await admitLowFeeRelay(key);
    const payoutId = `relay:${requestId}`;
    const txs = () => s.node.ledger.payouts.txsOf(payoutId);
    // Blocks are mined by hand from here: the relay is signed and broadcast, and waits in the pool.
    await rpc(rpcUrl(), 'evm_setAutomine', [false]);
    try {
      release();
      await until(() => (txs()[0]?.state === 'broadcast' ? true : undefined), 'the relay broadcast');
      expect(BigInt(txs()[0]!.max_fee_per_gas)).toBeLessThanOrEqual(cap);
      // The base fee rises to 10 times the cap, block after block: the relay cannot be included, and once
      // replaceAfterBlocks have passed the sender replaces it, or holds it at its cap.
      const high = 10n * cap;
      const waitsBefore = await feeCapWaits('replace');
      let mined = await mineAt(high);
      await until(
        async () => {
          if (txs().length > 1 || (await feeCapWaits('replace')) > waitsBefore) return true;
          if (nodeHead() >= mined) mined = await mineAt(high);
          return undefined;
        },
        'the stuck relay replaced or held at its cap',
        60_000,
      );
      // One more block at the high base fee: a replacement above the cap would be included in it.
      await mineAt(high);
    } finally {
      await rpc(rpcUrl(), 'evm_setAutomine', [true]);
    }
    // The base fee falls back: the relay still pending is included within its cap.
    await mineAt(GWEI);
    await waitForStatus(s.url, requestId, ['success', 'failure']);
    const seen = await accounts(requestId, wallet);
    const offered = txs().map((t) => BigInt(t.max_fee_per_gas));
    // Before: replaced at 61 gwei and included at the 30 gwei base fee, about 2 USD charged against a 0.23 USD hold.
    expect(seen.paid, text({ cap, offered, ...seen })).toBeLessThanOrEqual(seen.held);
    expect(seen.charged).toBe(seen.paid);
    expect(seen.balance, text(seen)).toBeGreaterThanOrEqual(0n);
    expect(
      offered.every((f) => f <= cap),
      text({ cap, offered }),
    ).toBe(true);
    expect(seen.effectiveGasPrice <= cap, text({ cap, ...seen })).toBe(true);
  }, 120_000);

  it('a relay waiting on its cap whose call now reverts fails, its hold released and nothing charged', async () => {
    const { key, wallet: sponsorWallet } = await sponsor(2);
    // A wallet delegated (EIP-7702) to a delegate whose spring() passes until someone arms it.
    const funder = s.wallet(1, A);
    const deployed = await funder.deployContract({ account: funder.account!, chain: funder.chain, abi: FilledOnceArmedAbi, bytecode: FilledOnceArmedBytecode });
    const delegate = (await s.publicClient(A).waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const wallet = privateKeyToAccount(generatePrivateKey());
    const callWallet = async (functionName: 'armed' | 'arm', authorizationList?: SignedAuthorizationList) =>
      s.publicClient(A).waitForTransactionReceipt({
        hash: await funder.sendTransaction({
          account: funder.account!,
          chain: funder.chain,
          to: wallet.address,
          data: encodeFunctionData({ abi: FilledOnceArmedAbi, functionName }),
          authorizationList,
        }),
      });
    await callWallet('armed', [await funder.signAuthorization({ account: wallet, contractAddress: delegate, chainId: A, nonce: 0 })]);
    const { requestId, cap, release } = await admitLowFeeRelay(key, {
      to: wallet.address,
      data: encodeFunctionData({ abi: FilledOnceArmedAbi, functionName: 'spring' }),
    });
    const waitsBefore = await feeCapWaits('send');
    try {
      await mineAt(20n * cap);
    } finally {
      release();
    }
    await until(async () => ((await feeCapWaits('send')) > waitsBefore ? true : undefined), 'the relay waiting on its fee cap');
    expect(s.node.ledger.payouts.get(`relay:${requestId}`)!.state).toBe('queued');
    expect(sponsorHeld(s.node.ledger, requestId)).toBeGreaterThan(0n);
    // The call reverts from now on (the base fee is still above the cap): the relay fails rather than waiting for fees
    // it could never use, and its sponsor gets its hold back.
    await callWallet('arm');
    const status = await waitForStatus(s.url, requestId, ['success', 'failure']);
    expect(status.status).toBe('failure');
    expect(s.node.ledger.payouts.txsOf(`relay:${requestId}`)).toEqual([]);
    expect(sponsorHeld(s.node.ledger, requestId)).toBe(0n);
    expect(s.node.ledger.balances.get(`sponsorship:${requestId}`)).toBeUndefined();
    expect(s.node.ledger.balances.summary(sponsorWallet)).toEqual({ balance: 1_000_000n, held: 0n, available: 1_000_000n });
    await mineAt(GWEI);
  }, 120_000);
});
