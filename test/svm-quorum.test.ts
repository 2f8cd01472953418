// The reads that decide money on the SVM chain go through a quorum of providers (issue 16): the node
// speaks to the devnet's SVM RPC through two providers, one of which lies on a decision read
// (test/helpers/svmLiarProxy.ts: its answers are current, only their content is false). The liar is
// the preferred provider (weight 1000); alone it would decide: a landed payout "not found" after its
// blockhash expired (signed again: paid twice), a deposit that does not exist credited. With a
// quorum of two the node sees the disagreement, counts and logs it (naming the provider, never its
// URL) and does not act until the providers agree again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection, Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { zeroAddress, type Hex } from 'viem';
import { SVM_NATIVE } from '../src/chains/address.ts';
import { svmDepositId } from '../src/chains/svm/depositSource.ts';
import { SvmRpcPool, svmConnection } from '../src/chains/svm/rpcPool.ts';
import { base58Encode } from '../src/chains/svm/transactions.ts';
import { createMetrics } from '../src/metrics.ts';
import { SvmLagProxy } from './helpers/svmLagProxy.ts';
import { quoteEthToSol, recordSvmFill, signSvmFill } from './helpers/svmFill.ts';
import { SvmLiarProxy } from './helpers/svmLiarProxy.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

const SVM = 792703809;
const A = 8453;
let s: Stack;
let conn: Connection;
let liar: SvmLiarProxy;
const logLines: string[] = [];

beforeAll(async () => {
  s = await startStack({
    svm: true,
    logLines,
    chains: async (_devnet, chains) =>
      Promise.all(
        (chains as { id: number; rpcUrl: string; kind?: string }[]).map(async (c) => {
          if (c.kind !== 'svm') return c;
          liar = await new SvmLiarProxy(c.rpcUrl).start();
          return {
            ...c,
            rpcUrl: liar.url,
            rpc: [
              { url: liar.url, name: 'liar', weight: 1000 },
              { url: c.rpcUrl, name: 'honest' },
            ],
          };
        }),
      ),
  });
  conn = new Connection(s.devnet.svm!.rpcUrl, 'confirmed');
}, 120_000);
afterAll(async () => {
  await s?.stop();
  await liar?.stop();
});

const lamports = async (who: string) => BigInt(await conn.getBalance(new PublicKey(who), 'confirmed'));

// Disagreements counted on the SVM chain for a method.
async function disagreements(method: string): Promise<number> {
  const m = await s.node.metrics.registry.getSingleMetric('relay_rpc_quorum_disagreements_total')!.get();
  return m.values.filter((v) => v.labels.chain === String(SVM) && v.labels.method === method).reduce((a, v) => a + v.value, 0);
}

// A fill of `amount` lamports to `recipient` for request `id`, signed by the solver and recorded in
// the ledger as the node's submitter does (the payout `sent`, its transaction `signed`), not sent yet.
async function recordedFill(id: Hex, recipient: PublicKey, amount: bigint): Promise<string> {
  const fill = await signSvmFill(conn, s.devnet.keys.svmSolver!, id, recipient, amount);
  recordSvmFill(s.node.ledger, SVM, id, recipient, amount, fill);
  return fill.sig;
}

describe('SVM decision reads by a quorum of providers', () => {
  it('a provider saying a landed payout is not found cannot make the node sign it again: paid once', async () => {
    const svm = s.devnet.svm!;
    const { id, recipient, amount } = await quoteEthToSol(s, 1);
    let sig = '';
    // The liar denies the payout ever landed: no status, no transaction.
    liar.lying(({ method, params }, result) => {
      if (method === 'getSignatureStatuses') {
        const sigs = params[0] as string[];
        return { ...result, value: result.value.map((st: unknown, i: number) => (sigs[i] === sig ? null : st)) };
      }
      if (method === 'getTransaction' && params[0] === sig) return null;
      return result;
    });
    sig = await recordedFill(id, recipient, amount);
    const ledger = s.node.ledger;
    const from = logLines.length;
    await conn.sendRawTransaction(Buffer.from(s.node.ledger.payouts.rawOf(s.node.ledger.payouts.txsOf(`fill:${id}`)[0]!.hash), 'base64'));
    await until(async () => ((await lamports(recipient.toBase58())) === amount ? true : undefined), 'the payout to land');
    // Its blockhash then expires: only the liar's word stands between the node and a second signature.
    const before = await disagreements('getSignatureStatuses');
    svm.rpc.advanceSlots(260);
    await until(
      async () =>
        ledger.payouts.txsOf(`fill:${id}`).some((t) => t.state === 'dropped') || (await disagreements('getSignatureStatuses')) > before ? true : undefined,
      'a confirm pass after the expiry',
    );
    expect(liar.lied.getSignatureStatuses).toBeGreaterThan(0);
    const txs = ledger.payouts.txsOf(`fill:${id}`);
    expect(txs.map((t) => t.hash)).toEqual([sig]);
    expect(txs[0]!.state).toMatch(/^(signed|broadcast)$/); // not dropped: never signed again
    expect(ledger.payouts.get(`fill:${id}`)!.state).toBe('sent');
    // The warn log names the provider, never its URL.
    const warned = logLines.slice(from).filter((l) => l.includes('providers disagree on a decision read'));
    expect(warned.length).toBeGreaterThan(0);
    expect(warned.join('')).toContain('liar');
    expect(warned.join('')).not.toContain(liar.url.replace('http://', ''));
    expect(warned.join('')).not.toContain('127.0.0.1');
    // The liar stops lying: the payout settles as the one transaction that landed.
    liar.lying(undefined);
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    expect(done.txHashes).toEqual([sig]);
    expect(ledger.payouts.txsOf(`fill:${id}`).map((t) => [t.hash, t.state])).toEqual([[sig, 'included']]);
    expect(await lamports(recipient.toBase58())).toBe(amount);
  });

  it('a provider inventing a deposit transaction to the vault cannot have it credited', async () => {
    const svm = s.devnet.svm!;
    const user = svm.keypair(0);
    const q = await api(s.url, '/quote/v2', {
      body: {
        tradeType: 'EXACT_INPUT',
        user: user.publicKey.toBase58(),
        recipient: s.devnet.accounts[1]!.address,
        originChainId: SVM,
        destinationChainId: A,
        originCurrency: SVM_NATIVE,
        destinationCurrency: zeroAddress,
        amount: '1000000000',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    const requestId = step.requestId as Hex;
    // A signature that exists nowhere; the liar lists it beside the real deposit and serves the
    // real deposit's transaction for it (a replay: the same order paid for twice).
    const fake = base58Encode(new Uint8Array(64).fill(7));
    let real: string | undefined;
    liar.lying(async ({ method, params }, result, honest) => {
      if (method === 'getSignaturesForAddress' && real && params[0] === svm.vault) {
        const entry = (result as { signature: string }[]).find((x) => x.signature === real);
        return entry ? [{ ...entry, signature: fake }, ...result] : result;
      }
      if (method === 'getTransaction' && real && params[0] === fake) return honest('getTransaction', [real, ...params.slice(1)]);
      return result;
    });
    const before = await disagreements('getSignaturesForAddress');
    const tx = Transaction.from(Buffer.from(step.items[0].data.transaction, 'base64'));
    tx.partialSign(user);
    real = await conn.sendRawTransaction(tx.serialize(), { skipPreflight: false, preflightCommitment: 'confirmed' });
    // The wallet reports its deposit: both providers agree on that transaction, it is credited.
    const idx = await api(s.url, '/transactions/index', { body: { txHash: real, chainId: SVM } });
    expect(idx.status, JSON.stringify(idx.body)).toBe(200);
    expect(idx.body.deposits).toBe(1);
    // The wallet (or anyone) reports the invented signature: the providers disagree on its transaction, nothing is credited.
    const forged = await api(s.url, '/transactions/index', { body: { txHash: fake, chainId: SVM } });
    expect(forged.status, JSON.stringify(forged.body)).toBe(503);
    expect(forged.body.errorCode).toBe('CHAIN_UNAVAILABLE');
    expect(JSON.stringify(forged.body)).not.toContain('127.0.0.1');
    expect(s.node.ledger.deposits.get(svmDepositId(SVM, fake))).toBeUndefined();
    // The indexer reads the vault's signatures: the liar's list differs from the honest one.
    await until(
      async () => (s.node.ledger.deposits.get(svmDepositId(SVM, fake)) || (await disagreements('getSignaturesForAddress')) > before ? true : undefined),
      'the indexer to read the vault',
    );
    expect(liar.lied.getSignaturesForAddress).toBeGreaterThan(0);
    expect(s.node.ledger.deposits.get(svmDepositId(SVM, fake))).toBeUndefined();
    // The liar stops: the indexer goes on, the order is filled once from the one real deposit.
    liar.lying(undefined);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    expect(done.inTxHashes).toEqual([real]);
    const indexedPast = async () => {
      svm.rpc.advanceSlots(2);
      const head = await conn.getSlot('confirmed');
      await until(() => (s.node.ledger.indexer.cursor(SVM, 'svm:vault')! >= head ? true : undefined), 'the indexer past the head');
    };
    // (A pass in flight when the liar stopped may still count one disagreement: compare after a pass that went through.)
    await indexedPast();
    const after = await disagreements('getSignaturesForAddress');
    await indexedPast();
    expect(await disagreements('getSignaturesForAddress')).toBe(after);
    expect(s.node.ledger.deposits.get(svmDepositId(SVM, fake))).toBeUndefined();
  });

  it('a provider saying a landed payout failed on chain cannot have it marked failed', async () => {
    const { id, recipient, amount } = await quoteEthToSol(s, 1);
    let sig = '';
    const err = { InstructionError: [0, { Custom: 1 }] };
    // The liar says the payout's transaction failed: its status and its transaction carry an error.
    liar.lying(({ method, params }, result) => {
      if (method === 'getSignatureStatuses') {
        const sigs = params[0] as string[];
        return { ...result, value: result.value.map((st: { err: unknown } | null, i: number) => (sigs[i] === sig && st ? { ...st, err } : st)) };
      }
      if (method === 'getTransaction' && params[0] === sig && result) return { ...result, meta: { ...result.meta, err } };
      return result;
    });
    sig = await recordedFill(id, recipient, amount);
    const before = await disagreements('getSignatureStatuses');
    await conn.sendRawTransaction(Buffer.from(s.node.ledger.payouts.rawOf(s.node.ledger.payouts.txsOf(`fill:${id}`)[0]!.hash), 'base64'));
    await until(async () => ((await lamports(recipient.toBase58())) === amount ? true : undefined), 'the payout to land');
    await until(
      async () => (s.node.ledger.payouts.get(`fill:${id}`)!.state !== 'sent' || (await disagreements('getSignatureStatuses')) > before + 1 ? true : undefined),
      'confirm passes after the landing',
    );
    expect(liar.lied.getSignatureStatuses).toBeGreaterThan(0);
    expect(s.node.ledger.payouts.get(`fill:${id}`)!.state).toBe('sent');
    liar.lying(undefined);
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    expect(done.txHashes).toEqual([sig]);
  });
  it("a provider claiming a finalized height past a pending payout's expiry cannot have it dropped and signed again", async () => {
    const { id, recipient, amount } = await quoteEthToSol(s, 1);
    // The liar swallows the node's broadcasts (the payout stays in flight, not landed) and claims
    // the chain has finalized far past its blockhash: alone, it would have the payout re-signed
    // while the first transaction can still land.
    liar.lying(
      ({ method }, result) => (method === 'getEpochInfo' ? { ...result, blockHeight: result.blockHeight + 10_000, absoluteSlot: result.absoluteSlot } : result),
      ['sendTransaction'],
    );
    const sig = await recordedFill(id, recipient, amount);
    const ledger = s.node.ledger;
    const asked = liar.lied.getEpochInfo ?? 0;
    await until(
      () => (ledger.payouts.txsOf(`fill:${id}`).some((t) => t.state === 'dropped') || (liar.lied.getEpochInfo ?? 0) >= asked + 3 ? true : undefined),
      'confirm passes reading the lie',
    );
    expect(ledger.payouts.txsOf(`fill:${id}`).map((t) => [t.hash, t.state])).toEqual([[sig, 'signed']]);
    expect(ledger.payouts.get(`fill:${id}`)!.state).toBe('sent');
    // The liar stops: the node's resend of the same bytes lands, paid once.
    liar.lying(undefined);
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    expect(done.txHashes).toEqual([sig]);
    expect(await lamports(recipient.toBase58())).toBe(amount);
  });

  it("a provider saying a payout's simulation fails cannot have the payout failed and the order refunded", async () => {
    const { id, recipient, quote } = await quoteEthToSol(s, 2);
    // The liar says every simulation fails (not for lack of funds: a failure the payout cannot get past).
    liar.lying(({ method }, result) =>
      method === 'simulateTransaction' ? { ...result, value: { ...result.value, err: { InstructionError: [2, { Custom: 6 }] } } } : result,
    );
    const before = await disagreements('simulateTransaction');
    const [hash] = await executeSteps(s, quote, 2);
    await api(s.url, '/transactions/index', { body: { txHash: hash, chainId: A } });
    await until(
      async () => (s.node.ledger.payouts.get(`fill:${id}`)?.state === 'failed' || (await disagreements('simulateTransaction')) > before ? true : undefined),
      'the fill prepared',
    );
    expect(liar.lied.simulateTransaction).toBeGreaterThan(0);
    expect(s.node.ledger.payouts.get(`fill:${id}`)?.state).toBe('queued');
    liar.lying(undefined);
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 60_000);
    expect(done.status).toBe('success');
    expect(await lamports(recipient.toBase58())).toBe(BigInt(quote.details.currencyOut.amount));
  });

  it('an honest provider behind another is asked again, never counted as disagreeing', async () => {
    const svm = s.devnet.svm!;
    const laggy = await new SvmLagProxy(svm.rpcUrl).start();
    const metrics = createMetrics();
    try {
      const pool = new SvmRpcPool({
        chain: {
          id: SVM,
          rpcUrl: laggy.url,
          rpc: [
            { url: laggy.url, name: 'laggy', weight: 1000, maxRps: 0, maxConcurrent: 32, role: 'any' },
            { url: svm.rpcUrl, name: 'honest', weight: 1, maxRps: 0, maxConcurrent: 32, role: 'any' },
          ],
        },
        metrics,
        maxWaitMs: 1_500,
        maxLagSlots: 2,
      });
      expect(pool.quorumSize).toBe(2);
      const c = svmConnection(pool, 'confirmed');
      await c.getSlot('confirmed');
      // The laggy provider stops at the current slot (at or past every slot the pool has seen: its
      // answers pass the pin), and a transfer lands in a slot after it.
      laggy.lagAt(svm.rpc.slot(), ['getSignatureStatuses', 'getTransaction', 'getSignaturesForAddress', 'getSlot']);
      svm.rpc.advanceSlots(1);
      const payer = svm.keypair(1);
      const to = Keypair.generate().publicKey;
      const sig = await conn.sendTransaction(
        new Transaction().add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: 1_000_000 })),
        [payer],
      );
      await until(async () => ((await conn.getSignatureStatus(sig)).value?.confirmationStatus ? true : undefined), 'the transfer confirmed');
      // It has no status and no transaction for the signature the honest one has: behind, asked
      // again until the wait runs out; the read fails for the caller to retry, no disagreement.
      await expect(c.getSignatureStatuses([sig], { searchTransactionHistory: true })).rejects.toThrow(/svm chain unavailable: .*no quorum of 2.*laggy/);
      await expect(c.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 })).rejects.toThrow(
        /svm chain unavailable: .*no quorum of 2/,
      );
      expect(laggy.lagged.getSignatureStatuses).toBeGreaterThan(0);
      expect(laggy.lagged.getTransaction).toBeGreaterThan(0);
      // A signature list is compared up to the slot the read was pinned at: one provider's newer
      // entries past it are not a disagreement.
      const listed = await c.getSignaturesForAddress(payer.publicKey, { limit: 1000 }, 'confirmed');
      expect(laggy.lagged.getSignaturesForAddress).toBeGreaterThan(0);
      expect(listed.length).toBeGreaterThan(0);
      expect(await metrics.registry.getSingleMetricAsString('relay_rpc_quorum_disagreements_total')).not.toMatch(/} [1-9]/);
      // Readiness: with one of two providers behind, no quorum can be had; the lagging one is named.
      svm.rpc.advanceSlots(5);
      // A quorum read asks both: each one's answer tells the slot it is at (this one fails: no quorum).
      await c.getSignatureStatuses([sig]).catch(() => undefined);
      const h = pool.health();
      expect(h.ready).toBe(false);
      expect(h.heldBy).toMatch(/^laggy \(behind by \d+ slots\)$/);
      // Caught up: both agree and the read goes through.
      laggy.catchUp();
      const st = await c.getSignatureStatuses([sig], { searchTransactionHistory: true });
      expect(st.value[0]?.err).toBeNull();
      expect((await c.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 }))?.slot).toBe(st.value[0]!.slot);
      expect(await metrics.registry.getSingleMetricAsString('relay_rpc_quorum_disagreements_total')).not.toMatch(/} [1-9]/);
    } finally {
      await laggy.stop();
    }
  });
});
