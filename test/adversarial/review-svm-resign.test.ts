// An SVM payout is signed again only on proof that it never landed (src/chains/svm/payoutSender.ts, confirm).
//
// A signature without a status, its blockhash expired at the finalized height, was taken as proof the payout never
// landed: it was queued again, signed anew and paid a second time (a plain transfer with a memo: nothing on chain
// refuses it). A missing status proves nothing when the provider cannot see that far back or that recently. The
// provider here (a JSON-RPC proxy in front of the devnet's SVM RPC) answers as Agave does when:
// - its ledger is pruned (--limit-ledger-size) past the payout's slot, after the node was down for days:
//   getFirstAvailableBlock / minimumLedgerSlot above it, getBlock below it -32001 "Block … cleaned up";
// - its transaction-status index (TransactionStatusService, behind replay under load) has not written the payout's
//   slot, once the ~300-slot status cache has forgotten it: getBlock there -32014 BlockStatusNotAvailableYet;
// - its transaction history is disabled: only the status cache answers, getBlock -32004 "Block not available".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection, Keypair, type PublicKey, VersionedTransaction } from '@solana/web3.js';
import { SvmRpcPool } from '../../src/chains/svm/rpcPool.ts';
import { base58Encode } from '../../src/chains/svm/transactions.ts';
import { JsonRpcProxy, type RpcCall, svmBehind } from '../helpers/jsonRpcProxy.ts';
import { quoteEthToSol, recordSvmFill, signSvmFill } from '../helpers/svmFill.ts';
import { executeSteps, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const SVM = 792703809;
// Agave's status cache: the signatures of about the last 300 slots are answered from the bank, whatever the ledger holds.
const STATUS_CACHE_SLOTS = 300;

type Status = { slot: number } | null;

// The devnet's SVM RPC as a provider whose history is short, behind or off.
class HistoryProxy extends JsonRpcProxy {
  /** Signatures the node cannot see yet (it is down, or partitioned from the provider): no status, no transaction. */
  hidden = new Set<string>();
  /** The ledger is pruned below this slot. */
  firstAvailable: number | undefined;
  /** The transaction-status index has written slots up to this one. */
  indexedUpTo: number | undefined;
  /** Transaction history off (--enable-rpc-transaction-history not set). */
  historyOff = false;
  /** Sends taken and never passed on (a leader dropping them); their signatures. */
  swallow = false;
  readonly swallowed: string[] = [];

  reset(): void {
    this.hidden.clear();
    this.firstAvailable = undefined;
    this.indexedUpTo = undefined;
    this.historyOff = false;
    this.swallow = false;
  }

  // Whether the provider's history (not its status cache) holds a slot.
  #holds(slot: number): boolean {
    if (this.historyOff) return false;
    if (this.firstAvailable !== undefined && slot < this.firstAvailable) return false;
    if (this.indexedUpTo !== undefined && slot > this.indexedUpTo) return false;
    return true;
  }

  protected async answer(c: RpcCall): Promise<unknown> {
    const head = { jsonrpc: '2.0', id: c.id };
    const p = c.params ?? [];
    if ((c.method === 'getFirstAvailableBlock' || c.method === 'minimumLedgerSlot') && this.firstAvailable !== undefined) {
      return { ...head, result: this.firstAvailable };
    }
    if (c.method === 'sendTransaction' && this.swallow) {
      // The node sends base64 (web3.js's sendRawTransaction).
      const sig = VersionedTransaction.deserialize(Buffer.from(String(p[0]), 'base64')).signatures[0]!;
      this.swallowed.push(base58Encode(sig));
      return { ...head, result: base58Encode(sig) };
    }
    if (c.method === 'getBlock') {
      const slot = Number(p[0]);
      if (this.historyOff) return { ...head, error: { code: -32004, message: `Block not available for slot ${slot}` } };
      if (this.firstAvailable !== undefined && slot < this.firstAvailable) {
        return { ...head, error: { code: -32001, message: `Block ${slot} cleaned up, does not exist on node. First available block: ${this.firstAvailable}` } };
      }
      if (this.indexedUpTo !== undefined && slot > this.indexedUpTo) {
        return { ...head, error: { code: -32014, message: `Block status not yet available for slot ${slot}` } };
      }
    }
    if (c.method === 'getTransaction') {
      if (this.historyOff) return { ...head, error: { code: -32011, message: 'Transaction history is not available from this node' } };
      if (this.hidden.has(String(p[0]))) return { ...head, result: null };
    }
    const a = await this.forward(c.method, p);
    if (!('result' in a) || a.result === null || a.result === undefined) return { ...a, ...head };
    if (c.method === 'getTransaction' && !this.#holds(a.result.slot)) return { ...head, result: null };
    if (c.method === 'getSignatureStatuses') {
      const at = a.result.context.slot as number;
      const sigs = p[0] as string[];
      const value = (a.result.value as Status[]).map((st, i) => {
        if (!st || this.hidden.has(sigs[i]!)) return null;
        // In the status cache: answered whatever the ledger holds.
        if (at - st.slot <= STATUS_CACHE_SLOTS) return st;
        return this.#holds(st.slot) ? st : null;
      });
      return { ...head, result: { ...a.result, value } };
    }
    return { ...head, result: a.result };
  }
}

let s: Stack;
let proxy: HistoryProxy;
let conn: Connection;
const logLines: string[] = [];

beforeAll(async () => {
  s = await startStack({
    svm: true,
    logLines,
    chains: svmBehind(async (url) => (proxy = await new HistoryProxy(url).start()).url),
  });
  conn = new Connection(s.devnet.svm!.rpcUrl, 'confirmed');
}, 120_000);
afterAll(async () => {
  await s?.stop();
  await proxy?.stop();
});

const lamports = async (who: PublicKey) => BigInt(await conn.getBalance(who, 'confirmed'));

// A fill of a fresh quote (8453 ETH to SOL) the node signed and recorded, sent and landed while the node could not see
// it; then the chain moves `slots` on (its blockhash expires) and `history` is what the provider keeps of it.
async function landedUnseen(slots: number, history: (txSlot: number) => void) {
  const svm = s.devnet.svm!;
  const { id, recipient, amount } = await quoteEthToSol(s, 1);
  const fill = await signSvmFill(conn, s.devnet.keys.svmSolver!, id, recipient, amount);
  proxy.hidden.add(fill.sig);
  recordSvmFill(s.node.ledger, SVM, id, recipient, amount, fill);
  await conn.sendRawTransaction(fill.tx.serialize());
  const landed = await until(async () => {
    const st = (await conn.getSignatureStatuses([fill.sig])).value[0];
    return st && st.confirmationStatus !== 'processed' ? st : undefined;
  }, 'the payout to land');
  expect(await lamports(recipient)).toBe(amount);
  // One step (nothing answers the node in between): the chain moves on, the provider keeps what it keeps, and the node
  // sees the provider again.
  svm.rpc.advanceSlots(slots);
  history(landed.slot);
  proxy.hidden.delete(fill.sig);
  return { id, sig: fill.sig, amount, recipient };
}

describe('an SVM payout whose status the provider cannot show, its blockhash expired', () => {
  // The status cache past the payout in each: its blockhash long expired.
  const cases: [string, (txSlot: number) => void][] = [
    ['its ledger pruned past the payout (the node down for days)', () => (proxy.firstAvailable = s.devnet.svm!.rpc.slot() - 100)],
    ['its status index behind the payout (the node down for minutes)', (txSlot) => (proxy.indexedUpTo = txSlot - 1)],
    ['its transaction history off', () => (proxy.historyOff = true)],
  ];
  it.each(cases)('%s: not signed again; paid once when the provider shows it', { timeout: 120_000 }, async (_name, history) => {
    const ledger = s.node.ledger;
    const from = logLines.length;
    try {
      const { id, sig, amount, recipient } = await landedUnseen(STATUS_CACHE_SLOTS + 20, history);
      const payout = `fill:${id}`;
      const held = () => logLines.slice(from).find((l) => l.includes('svm payout not signed again') && l.includes(payout));
      // The node's confirm pass meets the expired, status-less payout: it either queues it again (before: signed anew,
      // paid twice) or holds it, saying why.
      await until(() => (ledger.payouts.txsOf(payout).some((t) => t.state === 'dropped') || held() ? true : undefined), 'a decision on the payout', 30_000);
      // Before: queued again, signed anew and paid a second time (the recipient held twice the amount).
      if (!held()) await until(() => (ledger.payouts.get(payout)?.state === 'success' ? true : undefined), 'the payout signed again to land', 30_000);
      expect(await lamports(recipient)).toBe(amount);
      expect(ledger.payouts.txsOf(payout).map((t) => [t.hash, t.state])).toEqual([[sig, expect.stringMatching(/^(signed|broadcast)$/)]]);
      expect(ledger.payouts.get(payout)?.state).toBe('sent');
      expect(held()).not.toMatch(/https?:\/\//);
      // The provider shows the payout again (its history restored, its index caught up, another provider): paid, once.
      proxy.reset();
      const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 30_000);
      expect(done.status).toBe('success');
      expect(done.txHashes).toEqual([sig]);
      expect(ledger.payouts.txsOf(payout).map((t) => [t.hash, t.state])).toEqual([[sig, 'included']]);
      expect(await lamports(recipient)).toBe(amount);
    } finally {
      proxy.reset();
    }
  });
});

describe('an SVM payout that never landed, its blockhash expired', () => {
  it("is signed again once the provider's history covers it from the slot it was signed at", { timeout: 120_000 }, async () => {
    const ledger = s.node.ledger;
    const { id, recipient, amount, quote } = await quoteEthToSol(s, 2);
    const payout = `fill:${id}`;
    try {
      // The node signs the fill (recording the slot it read its blockhash at); the provider drops every send of it.
      proxy.swallow = true;
      await executeSteps(s, quote, 2);
      const first = await until(() => ledger.payouts.txsOf(payout)[0], 'the fill signed');
      await until(() => (proxy.swallowed.includes(first.hash) ? true : undefined), 'the fill sent');
      expect(first.sent_block).toBeGreaterThan(0);
      // Long after (its blockhash expired, the status cache past it), the ledger is pruned up to exactly that slot.
      s.devnet.svm!.rpc.advanceSlots(STATUS_CACHE_SLOTS + 20);
      proxy.firstAvailable = first.sent_block!;
      proxy.swallow = false;
      const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 30_000);
      expect(done.status).toBe('success');
      expect(ledger.payouts.txsOf(payout).map((t) => [t.hash, t.state])).toEqual([
        [first.hash, 'dropped'],
        [done.txHashes[0], 'included'],
      ]);
      expect(await lamports(recipient)).toBe(amount);
    } finally {
      proxy.reset();
    }
  });
});

describe("the providers' proof of a missing status", () => {
  it('holds only when every reading provider gives it, naming the one that does not (never its URL)', async () => {
    const svm = s.devnet.svm!;
    const short = await new HistoryProxy(svm.rpcUrl).start();
    try {
      const spec = { weight: 1, maxRps: 0, maxConcurrent: 32 } as const;
      const pool = new SvmRpcPool({
        chain: {
          id: SVM,
          rpcUrl: svm.rpcUrl,
          quorum: 1,
          rpc: [
            { ...spec, url: svm.rpcUrl, name: 'full', role: 'any' },
            { ...spec, url: short.url, name: 'short', role: 'fallback' },
            // A send-only provider reads nothing: its history is not asked.
            { ...spec, url: 'http://127.0.0.1:9', name: 'sender', role: 'send' },
          ],
        },
      });
      const finalized = (await pool.request({ method: 'getEpochInfo', params: [{ commitment: 'finalized' }] })) as { result: { absoluteSlot: number } };
      const slot = finalized.result.absoluteSlot;
      expect(await pool.statusIndexComplete(slot)).toBeUndefined();
      expect(await pool.historyReaches(0)).toBeUndefined();
      short.indexedUpTo = slot - 1;
      expect(await pool.statusIndexComplete(slot)).toBe(`provider short: getBlock answered error -32014`);
      short.reset();
      short.firstAvailable = 5;
      expect(await pool.historyReaches(4)).toBe('provider short: its first available block 5 is past slot 4');
      expect(await pool.historyReaches(5)).toBeUndefined();
      short.historyOff = true;
      const why = await pool.statusIndexComplete(slot);
      expect(why).toBe('provider short: getBlock answered error -32004');
      expect(why).not.toContain(short.url);
    } finally {
      await short.stop();
    }
  });
});

describe("the devnet's getBlock, as Agave answers it", () => {
  it('answers a finalized block with its transactions, and -32004 for a slot not finalized yet', async () => {
    const svm = s.devnet.svm!;
    const rpc = async (method: string, params: unknown[]) =>
      (await (
        await fetch(svm.rpcUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
        })
      ).json()) as {
        result?: any;
        error?: { code: number; message: string };
      };
    const recipient = Keypair.generate().publicKey;
    // A user's transfer (not the solver's: its unexplained outflow would trip the loss breaker).
    const fill = await signSvmFill(conn, base58Encode(svm.keypair(3).secretKey), `0x${'ab'.repeat(32)}`, recipient, 1_000_000n);
    await conn.sendRawTransaction(fill.tx.serialize());
    const st = await until(async () => (await conn.getSignatureStatuses([fill.sig])).value[0] ?? undefined, 'the transfer to land');
    // A slot well past the finalized one: the devnet's slots move on their own, and one slot past it could be finalized
    // between the two reads (seen once in a full run).
    const ahead = ((await rpc('getSlot', [{ commitment: 'finalized' }])).result as number) + 1_000;
    expect((await rpc('getBlock', [ahead, { commitment: 'finalized' }])).error).toEqual({
      code: -32004,
      message: `Block not available for slot ${ahead}`,
    });
    expect((await rpc('getBlock', [st.slot, { commitment: 'processed' }])).error?.code).toBe(-32602);
    svm.rpc.advanceSlots(40);
    const none = (await rpc('getBlock', [st.slot, { transactionDetails: 'none', rewards: false }])).result;
    expect(Object.keys(none).sort()).toEqual(['blockHeight', 'blockTime', 'blockhash', 'parentSlot', 'previousBlockhash']);
    expect(none.parentSlot).toBe(st.slot - 1);
    expect((await rpc('getBlock', [st.slot - 1, { transactionDetails: 'none', rewards: false }])).result.blockhash).toBe(none.previousBlockhash);
    const sigs = (await rpc('getBlock', [st.slot, { transactionDetails: 'signatures' }])).result;
    expect(sigs.signatures).toContain(fill.sig);
    expect(sigs.rewards).toEqual([]);
    const full = (await rpc('getBlock', [st.slot, { encoding: 'json', maxSupportedTransactionVersion: 0 }])).result;
    const tx = full.transactions.find((t: { transaction: { signatures: string[] } }) => t.transaction.signatures[0] === fill.sig);
    expect(tx).toMatchObject({ version: 'legacy', meta: { err: null } });
  });
});
