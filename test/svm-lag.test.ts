// Reads that cannot go back in time, on the SVM chain (issue 16): the node speaks to the devnet's SVM
// RPC through a provider one of whose backends lags (test/helpers/svmLagProxy.ts). A lagging answer
// must never make a landed payout look unpaid (then signed again: paid twice), nor a held balance
// look absent; it is asked again until an answer at or past the newest slot seen comes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection, Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { SVM_NATIVE } from '../src/chains/address.ts';
import type { SvmAdapter } from '../src/chains/svm/adapter.ts';
import { SvmRpcPool, svmConnection } from '../src/chains/svm/rpcPool.ts';
import { base58Decode, base58Encode } from '../src/chains/svm/transactions.ts';
import { svmBehind } from './helpers/jsonRpcProxy.ts';
import { SvmLagProxy } from './helpers/svmLagProxy.ts';
import { quoteEthToSol, recordSvmFill, signSvmFill } from './helpers/svmFill.ts';
import { startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

const SVM = 792703809;
let s: Stack;
let conn: Connection;
let proxy: SvmLagProxy;
const logLines: string[] = [];

beforeAll(async () => {
  s = await startStack({
    svm: true,
    logLines,
    chains: svmBehind(async (url) => (proxy = await new SvmLagProxy(url).start()).url),
  });
  conn = new Connection(s.devnet.svm!.rpcUrl, 'confirmed');
}, 120_000);
afterAll(async () => {
  await s?.stop();
  await proxy?.stop();
});

const lamports = async (who: PublicKey) => BigInt(await conn.getBalance(who, 'confirmed'));

describe('SVM reads pinned to the newest slot seen', () => {
  it('a lagging backend never makes a landed payout look unpaid: no second signature, paid once', async () => {
    const svm = s.devnet.svm!;
    const { id, recipient, amount } = await quoteEthToSol(s, 1);
    const fill = await signSvmFill(conn, s.devnet.keys.svmSolver!, id, recipient, amount);
    const { tx, sig } = fill;
    // One backend stops here: it will not know of the payout's landing.
    proxy.lagAt(svm.rpc.slot(), ['getSignatureStatuses', 'getTransaction']);
    svm.rpc.advanceSlots(1); // the payout lands in a slot after it
    // The node signed and recorded this fill (as its submitter does), and it lands.
    const ledger = s.node.ledger;
    recordSvmFill(ledger, SVM, id, recipient, amount, fill);
    await conn.sendRawTransaction(tx.serialize());
    await until(async () => ((await lamports(recipient)) === amount ? true : undefined), 'the payout to land');
    // Its blockhash then expires: the current backend says so, the lagging one has no status for it.
    svm.rpc.advanceSlots(260);
    const from = logLines.length;
    const lagged = () => proxy.lagged.getSignatureStatuses ?? 0;
    const before = lagged();
    // The node's confirm pass met the lagging backend after the expiry: it either took its answer
    // (the transaction dropped) or refused it (the read failed and is retried).
    await until(
      () =>
        ledger.payouts.txsOf(`fill:${id}`).some((t) => t.state === 'dropped') ||
        (lagged() > before && logLines.slice(from).some((l) => l.includes('svm confirm pass failed')))
          ? true
          : undefined,
      'a confirm pass against the lagging backend',
    );
    proxy.catchUp();
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    expect(done.txHashes).toEqual([sig]);
    expect(ledger.payouts.txsOf(`fill:${id}`).map((t) => [t.hash, t.state])).toEqual([[sig, 'included']]);
    expect(await lamports(recipient)).toBe(amount);
  });

  it("a lagging backend never shows the solver's balance from before a payment out of it", async () => {
    const svm = s.devnet.svm!;
    const adapter = s.node.adapters.get(SVM) as SvmAdapter;
    const solver = new PublicKey(adapter.solver);
    const held = await lamports(solver);
    // One backend stops here, holding what the solver had then.
    proxy.lagAt(svm.rpc.slot(), ['getBalance'], { getBalance: Number(held) });
    try {
      const key = Keypair.fromSecretKey(base58Decode(s.devnet.keys.svmSolver!)!);
      const sig = await conn.sendTransaction(
        new Transaction().add(SystemProgram.transfer({ fromPubkey: solver, toPubkey: Keypair.generate().publicKey, lamports: 1_000_000_000 })),
        [key],
      );
      await until(async () => ((await conn.getSignatureStatus(sig)).value?.confirmationStatus ? true : undefined), 'the transfer confirmed');
      svm.rpc.advanceSlots(5);
      await adapter.conn.getSlot('confirmed'); // the node has seen a slot past the transfer
      const now = await lamports(solver);
      expect(held - now).toBeGreaterThan(1_000_000_000n);
      // The lagging backend catches up a moment later; the read waits for it, never answers from before.
      const read = adapter.balanceOf(adapter.solver, SVM_NATIVE);
      const late = setTimeout(() => proxy.catchUp(), 1_000);
      const got = await read;
      clearTimeout(late);
      expect(proxy.lagged.getBalance).toBeGreaterThan(0);
      expect(got).toBe(now);
    } finally {
      proxy.catchUp();
    }
  });

  it('with several providers, a read one of them answers from behind is answered by another', async () => {
    const svm = s.devnet.svm!;
    const laggy = await new SvmLagProxy(svm.rpcUrl).start();
    try {
      const pool = new SvmRpcPool({
        chain: {
          id: SVM,
          rpcUrl: laggy.url,
          rpc: [
            { url: laggy.url, name: 'laggy', weight: 1000, maxRps: 0, maxConcurrent: 32, role: 'any' },
            { url: svm.rpcUrl, name: 'honest', weight: 1, maxRps: 0, maxConcurrent: 32, role: 'any' },
            // A decision read (getSignatureStatuses) needs two providers agreeing (svm-quorum.test.ts):
            // a third one stands in for the lagging one there.
            { url: svm.rpcUrl, name: 'honest2', weight: 1, maxRps: 0, maxConcurrent: 32, role: 'any' },
          ],
        },
        maxWaitMs: 60_000,
        maxLagSlots: 1,
      });
      const c = svmConnection(pool, 'confirmed');
      const solver = new PublicKey((s.node.adapters.get(SVM) as SvmAdapter).solver);
      const held = await lamports(solver);
      laggy.lagAt(svm.rpc.slot(), ['getBalance', 'getSignatureStatuses'], { getBalance: 1 });
      svm.rpc.advanceSlots(3);
      await c.getSlot('confirmed');
      expect(pool.floor('confirmed')).toBeGreaterThan(0);
      expect(BigInt(await c.getBalance(solver, 'confirmed'))).toBe(held);
      expect(laggy.lagged.getBalance).toBe(1);
      const sig = base58Encode(new Uint8Array(64).fill(9));
      const st = await c.getSignatureStatuses([sig]);
      expect(st.context.slot).toBeGreaterThanOrEqual(pool.floor('processed'));
      expect(laggy.lagged.getSignatureStatuses).toBe(1);
      // Readiness names the lagging provider (by name, never by URL); the honest one keeps the chain ready.
      const h = pool.health();
      expect(h.ready).toBe(true);
      expect(h.providers.find((p) => p.name === 'laggy')!.state).toMatch(/^behind by \d+ slots$/);
      expect(h.providers.find((p) => p.name === 'honest')!.state).toBe('ok');
      expect(JSON.stringify(h)).not.toContain('127.0.0.1');
    } finally {
      await laggy.stop();
    }
  });
});
