// Sixth money review, SVM and the exchange (chain 1337): the paths by which value leaves the solver there, and the
// evidence the node holds that value came in first. What this round found is below; the attacks that failed are in the
// review's report.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection, type Keypair, Transaction } from '@solana/web3.js';
import { zeroAddress, type Hex } from 'viem';
import { SVM_NATIVE } from '../../src/chains/address.ts';
import { JsonRpcProxy, type RpcCall, svmBehind } from '../helpers/jsonRpcProxy.ts';
import { api, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const BASE = 8453;

// A provider whose transaction-status index is behind its bank, as a validator's TransactionStatusService is when it
// falls behind replay: getSlot and minContextSlot answer at the confirmed bank, but getSignaturesForAddress and
// getTransaction (both read from that index in Agave's rpc.rs) know nothing of slots past `indexedUpTo` yet. Agave's
// own getBlock answers BlockStatusNotAvailableYet for such a slot (max_complete_transaction_status_slot);
// getSignaturesForAddress reads up to the confirmed bank's slot whatever the index holds.
class StatusIndexLagProxy extends JsonRpcProxy {
  /** The slot up to which transaction statuses are written; undefined: caught up. */
  indexedUpTo: number | undefined;

  protected async answer(c: RpcCall): Promise<unknown> {
    const head = { jsonrpc: '2.0', id: c.id };
    const a = await this.forward(c.method, c.params);
    const at = this.indexedUpTo;
    if (at === undefined || !('result' in a) || a.result === null || a.result === undefined) return { ...a, ...head };
    let result = a.result;
    if (c.method === 'getSignaturesForAddress') result = result.filter((x: { slot: number }) => x.slot <= at);
    if (c.method === 'getTransaction' && result.slot > at) result = null;
    return { ...head, result };
  }
}

let s: Stack;
let proxy: StatusIndexLagProxy;
let conn: Connection;

beforeAll(async () => {
  s = await startStack({
    svm: true,
    chains: svmBehind(async (url) => (proxy = await new StatusIndexLagProxy(url).start()).url),
  });
  conn = new Connection(s.devnet.svm!.rpcUrl, 'confirmed');
}, 120_000);
afterAll(async () => {
  await s?.stop();
  await proxy?.stop();
});

const svmId = () => s.devnet.svm!.id;

// The deposit transaction of an SVM quote's step, signed by the user and sent to the chain itself (not through the node).
async function signAndSend(step: { items: { data: { transaction: string } }[] }, signer: Keypair): Promise<string> {
  const tx = Transaction.from(Buffer.from(step.items[0]!.data.transaction, 'base64'));
  tx.partialSign(signer);
  return conn.sendRawTransaction(tx.serialize(), { skipPreflight: false, preflightCommitment: 'confirmed' });
}

describe("an SVM deposit in a slot the provider's status index had not written when the vault's signatures were listed", () => {
  it('is booked and filled once the index has it, not passed by the cursor for good', { timeout: 120_000 }, async () => {
    const svm = s.devnet.svm!;
    const user = svm.keypair(3);
    const recipient = s.devnet.accounts[4]!.address;
    const q = await api(s.url, '/quote/v2', {
      body: {
        tradeType: 'EXACT_INPUT',
        user: user.publicKey.toBase58(),
        recipient,
        originChainId: svmId(),
        destinationChainId: BASE,
        originCurrency: SVM_NATIVE,
        destinationCurrency: zeroAddress,
        amount: '1000000000',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    const requestId = step.requestId as Hex;
    const before = await s.publicClient(BASE).getBalance({ address: recipient });

    // From here on the provider's index is behind its bank: the deposit lands in a slot it has not written yet (the
    // slot being built now, or a later one).
    proxy.indexedUpTo = svm.rpc.slot() - 1;
    const sig = await signAndSend(step, user);
    const landed = await until(async () => {
      const st = (await conn.getSignatureStatuses([sig])).value[0];
      return st && st.confirmationStatus !== 'processed' ? st : undefined;
    }, 'the deposit confirmed');
    expect(landed.slot).toBeGreaterThan(proxy.indexedUpTo);
    // The node reads the vault's signatures past the deposit's slot meanwhile (its head is the confirmed bank's slot).
    await until(
      () => (s.node.adapters.get(svmId())!.progress().indexed > landed.slot + 2 ? true : undefined),
      "the node's indexer past the deposit's slot",
      30_000,
    );
    expect(s.node.ledger.deposits.get(`${svmId()}:${sig}:0`)).toBeUndefined();

    // The index catches up (seconds later on a loaded validator). Before: the cursor had passed the slot, the deposit
    // was never read again: 1 SOL in the vault, neither filled nor refunded (waitForStatus timed out at 'waiting').
    proxy.indexedUpTo = undefined;
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    expect(s.node.ledger.deposits.get(`${svmId()}:${sig}:0`)).toMatchObject({ amount: '1000000000', order_ref: requestId });
    expect((await s.publicClient(BASE).getBalance({ address: recipient })) - before).toBe(BigInt(q.body.details.currencyOut.amount));
  });
});
