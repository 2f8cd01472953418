// An SVM fill made by hand as the node's submitter makes it: for tests that put a payout in a state
// (recorded but not sent, sent with a blockhash about to expire, seen by only some providers) before
// the node looks at it.
import { type Connection, Keypair, type PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { expect } from 'vitest';
import { zeroAddress, type Hex } from 'viem';
import { SVM_NATIVE } from '../../src/chains/address.ts';
import { base58Decode, base58Encode, memoInstruction } from '../../src/chains/svm/transactions.ts';
import type { Ledger } from '../../src/ledger/index.ts';
import { api, type Stack } from './stack.ts';

/** A SOL transfer to a request's recipient, signed by the solver with the request id as memo; not sent. */
export interface SignedSvmFill {
  tx: Transaction;
  sig: string;
  lastValidBlockHeight: number;
  solver: PublicKey;
}

/** Signs a fill of `lamports` to `recipient` for request `id` with the solver key (base58), on the latest confirmed blockhash. */
export async function signSvmFill(conn: Connection, solverKey: string, id: Hex, recipient: PublicKey, lamports: bigint): Promise<SignedSvmFill> {
  const solver = Keypair.fromSecretKey(base58Decode(solverKey)!);
  const { blockhash, lastValidBlockHeight } = await conn.getLatestBlockhash('confirmed');
  const tx = new Transaction({ feePayer: solver.publicKey, recentBlockhash: blockhash }).add(
    SystemProgram.transfer({ fromPubkey: solver.publicKey, toPubkey: recipient, lamports }),
    memoInstruction(id),
  );
  tx.sign(solver);
  return { tx, sig: base58Encode(tx.signature!), lastValidBlockHeight, solver: solver.publicKey };
}

/**
 * Records a signed fill as the node's submitter does, in one ledger transaction: the request
 * pending, its fill payout `sent` and the fill's transaction `signed` (its nonce is the blockhash's
 * last valid height).
 */
export function recordSvmFill(ledger: Ledger, chainId: number, id: Hex, recipient: PublicKey, lamports: bigint, fill: SignedSvmFill): void {
  ledger.tx(() => {
    ledger.requests.setStatus(id, 'pending');
    ledger.payouts.insert({
      id: `fill:${id}`,
      kind: 'fill',
      request_id: id,
      deposit_id: null,
      chain_id: chainId,
      recipient: recipient.toBase58(),
      currency: SVM_NATIVE,
      amount: lamports.toString(),
      decided_at: Date.now(),
    });
    ledger.payouts.insertTx({
      hash: fill.sig as Hex,
      payout_id: `fill:${id}`,
      chain_id: chainId,
      sender: fill.solver.toBase58(),
      nonce: fill.lastValidBlockHeight,
      raw: fill.tx.serialize().toString('base64') as Hex,
      gas_limit: '0',
      max_fee_per_gas: '0',
      max_priority_fee_per_gas: '0',
      created_at: Date.now(),
    });
    ledger.payouts.setState(`fill:${id}`, 'sent', { txHash: fill.sig });
  });
}

/**
 * A quote of 0.01 ETH on chain 8453 (or `originChainId`) to SOL for a fresh recipient, asked by devnet account `user`:
 * its request id, recipient, the lamports it pays out, and the quote's body.
 */
export async function quoteEthToSol(s: Stack, user: number, originChainId = 8453): Promise<{ id: Hex; recipient: PublicKey; amount: bigint; quote: any }> {
  const recipient = Keypair.generate().publicKey;
  const q = await api(s.url, '/quote/v2', {
    body: {
      tradeType: 'EXACT_INPUT',
      user: s.devnet.accounts[user]!.address,
      recipient: recipient.toBase58(),
      originChainId,
      destinationChainId: s.devnet.svm!.id,
      originCurrency: zeroAddress,
      destinationCurrency: SVM_NATIVE,
      amount: '10000000000000000',
    },
  });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  return { id: q.body.steps.at(-1).requestId as Hex, recipient, amount: BigInt(q.body.details.currencyOut.amount), quote: q.body };
}
