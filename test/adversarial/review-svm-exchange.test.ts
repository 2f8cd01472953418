import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toHex, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { splitSignature } from '../../src/chains/exchange/typedData.ts';
import { simpleSendTypedData, type SimpleSendAction } from '../../src/devnet/exchange/standin.ts';
import { Connection } from '@solana/web3.js';
import { auditStack } from '../helpers/audit.ts';
import { quoteEthToSol, recordSvmFill, signSvmFill } from '../helpers/svmFill.ts';
import { startStack, until, type Stack } from '../helpers/stack.ts';

// The perpetuals exchange (chain 1337) as an attacker's review of its deposits sees it: value reaches the solver's
// account through the exchange's other transfers too (usdSend, spotSend), which its ledger shows as their own update
// types (`internalTransfer`, `spotTransfer`), not as a `send`. Read as no deposit at all, such a transfer was never
// refunded: the user's money stayed with the solver, recorded nowhere (the audit named it, nothing else did).
let s: Stack;
const EX = 1337;
// What a refund on the exchange returns less: the action's cost and the activation fee (perps USD, 6 decimals).
const REFUND_COST = 100_000n + 1_000_000n;

beforeAll(async () => {
  s = await startStack({ svm: true });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const ex = () => s.devnet.exchange!;
const state = () => ex().standin.state;
// A fresh exchange account holding 20 perps USD and 20 spot USDC.
const funded = (): PrivateKeyAccount => {
  const a = privateKeyToAccount(generatePrivateKey());
  ex().standin.credit(a.address, { perpsUsd: '20' });
  ex().standin.credit(a.address, { spot: { token: 'USDC', amount: '20' } });
  return a;
};

// A usdSend or spotSend to the solver, signed by `from` and posted to the exchange as a wallet posts it.
async function simpleSend(from: PrivateKeyAccount, action: Omit<SimpleSendAction, 'signatureChainId' | 'exchangeChain' | 'destination' | 'time'>) {
  const full: SimpleSendAction = {
    ...action,
    signatureChainId: toHex(1),
    exchangeChain: 'Mainnet',
    destination: s.devnet.solver.toLowerCase(),
    time: Date.now(),
  };
  const sig = splitSignature(await from.signTypedData(simpleSendTypedData(full) as never));
  const res = await fetch(`${ex().url}/exchange`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ action: full, nonce: full.time, signature: sig }),
  });
  return (await res.json()) as { status: string; response: unknown };
}

const depositOf = (user: Address, type: string) => {
  const u = [...state().ledger(user)].reverse().find((x) => x.delta.type === type);
  return u ? s.node.ledger.deposits.get(`${EX}:${u.hash.toLowerCase()}:0`) : undefined;
};

describe('transfers to the solver on the exchange other than sendAsset', () => {
  it('a usdSend (internalTransfer) to the solver is an orphan deposit and is refunded, less the refund cost', async () => {
    const user = funded();
    const before = state().perpsUsd(user.address);
    expect(await simpleSend(user, { type: 'usdSend', amount: '5.0' })).toMatchObject({ status: 'ok' });
    expect(state().perpsUsd(user.address)).toBe(before - 5_000_000n);
    // Before: the node read only `send` updates; the 5 USDC stayed with the solver and no deposit was ever booked.
    const d = await until(() => depositOf(user.address, 'internalTransfer'), 'the usdSend booked as a deposit', 20_000);
    expect(d).toMatchObject({ depositor: user.address, currency: `0x${'0'.repeat(32)}`, amount: '5000000' });
    await until(() => (state().perpsUsd(user.address) === before - REFUND_COST ? true : undefined), 'the usdSend refunded', 20_000);
  });

  it('a spotSend (spotTransfer) to the solver is an orphan deposit in spot USDC and is refunded', async () => {
    const user = funded();
    const spotBefore = state().spotBalance(user.address, 'USDC');
    const usdcToken = state().usdc;
    expect(await simpleSend(user, { type: 'spotSend', token: `${usdcToken.name}:${usdcToken.tokenId}`, amount: '3.0' })).toMatchObject({ status: 'ok' });
    expect(state().spotBalance(user.address, 'USDC')).toBe(spotBefore - 300_000_000n);
    const d = await until(() => depositOf(user.address, 'spotTransfer'), 'the spotSend booked as a deposit', 20_000);
    expect(d).toMatchObject({ depositor: user.address, currency: ex().currencies.spotUSDC, amount: '300000000' });
    // Spot USDC has 8 decimals: the refund cost of 1.1 USDC is 110,000,000 of its units.
    await until(() => (state().spotBalance(user.address, 'USDC') === spotBefore - REFUND_COST * 100n ? true : undefined), 'the spotSend refunded', 20_000);
  });

  it('the audit reads both as deposits and their refunds: the books reconcile with the exchange', async () => {
    const r = await auditStack(s);
    expect(r.differences.filter((d) => d.includes(`chain ${EX}`))).toEqual([]);
  });
});

// The SVM chain's payouts settle at its commitment (`confirmed` by default). A payout transaction that failed on chain
// fails the payout, and a fill's deposit is then refunded. Seen failed at `confirmed` only, its block may still be
// replaced (optimistic confirmation is not finality), and while its blockhash is valid the same signed bytes (public
// once broadcast) can land again on the other fork, and succeed there: the fill would pay after its refund. The EVM
// submitter acts on a receipt that paid nothing only at the chain's confirmations, for the same reason; on SVM the
// failure must wait for the transaction's block to be finalized, or for its blockhash to expire.
describe('an SVM payout that failed on chain', () => {
  it('is failed (and its deposit refunded) only once the failure is final, not while its block is merely confirmed', async () => {
    const SVM = s.devnet.svm!.id;
    const conn = new Connection(s.devnet.svm!.rpcUrl, 'confirmed');
    // A request to a fresh SOL account, and a fill of it signed as the submitter signs one: 1,000 lamports leave the
    // new account below the rent-exempt minimum, so the transaction lands and fails.
    const { id, recipient } = await quoteEthToSol(s, 1);
    const fill = await signSvmFill(conn, s.devnet.keys.svmSolver!, id, recipient, 1_000n);
    recordSvmFill(s.node.ledger, SVM, id, recipient, 1_000n, fill);
    s.devnet.svm!.rpc.submit(fill.tx.serialize(), { skipPreflight: true });
    const payout = () => s.node.ledger.payouts.get(`fill:${id}`)!;
    await until(() => (payout().state === 'failed' ? true : undefined), 'the failed fill to be settled', 30_000);
    // When the node failed it, the failure had to be final: the block finalized, or the blockhash past the finalized height.
    const [status] = (await conn.getSignatureStatuses([fill.sig], { searchTransactionHistory: true })).value;
    const failedAt = s.node.ledger.payouts.txsOf(`fill:${id}`)[0]!;
    expect(failedAt.state).toBe('reverted');
    expect(status?.err).toBeTruthy();
    const finalizedHeight = (await conn.getEpochInfo('finalized')).blockHeight;
    expect(status?.confirmationStatus === 'finalized' || (finalizedHeight ?? 0) > fill.lastValidBlockHeight).toBe(true);
  });
});
