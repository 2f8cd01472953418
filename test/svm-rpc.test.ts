// The litesvm-backed local Solana JSON-RPC endpoint, driven over real HTTP (and WebSocket, for confirmations)
// through @solana/web3.js and @solana/spl-token, the way the node and wallets use a real RPC.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ComputeBudgetProgram,
  Connection,
  Keypair,
  LAMPORTS_PER_SOL,
  PublicKey,
  SendTransactionError,
  SystemProgram,
  Transaction,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
  sendAndConfirmTransaction,
  type ParsedAccountData,
} from '@solana/web3.js';
import {
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAccount,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token';
import { startSvmRpc, MEMO_V2_PROGRAM, type SvmRpc } from '../src/devnet/svm/rpc.ts';

const MEMO = new PublicKey(MEMO_V2_PROGRAM);
const memoIx = (text: string) => new TransactionInstruction({ programId: MEMO, keys: [], data: Buffer.from(text, 'utf8') });

let rpc: SvmRpc;
let conn: Connection;

/** Polls `fn` until `ok(value)`; fails after `timeoutMs`. */
async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await fn();
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(last)}`);
}

async function rawRpc(body: unknown): Promise<any> {
  const res = await fetch(rpc.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return res.json();
}

async function funded(sol = 10): Promise<Keypair> {
  const kp = Keypair.generate();
  const sig = await conn.requestAirdrop(kp.publicKey, sol * LAMPORTS_PER_SOL);
  const bh = await conn.getLatestBlockhash();
  await conn.confirmTransaction({ signature: sig, ...bh }, 'confirmed');
  return kp;
}

beforeAll(async () => {
  rpc = await startSvmRpc({ slotIntervalMs: 100 });
  conn = new Connection(rpc.url, 'confirmed');
});

afterAll(async () => {
  await rpc?.stop();
});

describe('svm rpc (litesvm behind JSON-RPC)', () => {
  it('serves the basic cluster methods', async () => {
    expect(await conn.getMinimumBalanceForRentExemption(165)).toBe(2_039_280);
    expect(await conn.getMinimumBalanceForRentExemption(82)).toBe(1_461_600);
    const v = await conn.getVersion();
    expect(typeof v['solana-core']).toBe('string');
    expect(typeof (await conn.getGenesisHash())).toBe('string');
    const s1 = await conn.getSlot('processed');
    await until(
      () => conn.getSlot('processed'),
      (s) => s > s1,
      5_000,
      'slot to advance',
    );
    const info = await conn.getEpochInfo();
    expect(info.absoluteSlot).toBeGreaterThanOrEqual(0);
    // The chain moves on between calls: the blockhash's height lies between the heights read around it.
    const h0 = await conn.getBlockHeight('processed');
    const { blockhash, lastValidBlockHeight } = await conn.getLatestBlockhash('processed');
    const h1 = await conn.getBlockHeight('processed');
    expect(lastValidBlockHeight - 150).toBeGreaterThanOrEqual(h0);
    expect(lastValidBlockHeight - 150).toBeLessThanOrEqual(h1);
    expect((await conn.isBlockhashValid(blockhash)).value).toBe(true);
    const health = await rawRpc({ jsonrpc: '2.0', id: 1, method: 'getHealth' });
    expect(health.result).toBe('ok');
  });

  it('answers batches and rejects unknown methods with -32601', async () => {
    const out = await rawRpc([
      { jsonrpc: '2.0', id: 1, method: 'getSlot' },
      { jsonrpc: '2.0', id: 2, method: 'noSuchMethod', params: [] },
      { jsonrpc: '2.0', id: 3, method: 'getBalance', params: ['not-a-key'] },
    ]);
    expect(out).toHaveLength(3);
    expect(typeof out[0].result).toBe('number');
    expect(out[1].error.code).toBe(-32601);
    expect(out[2].error.code).toBe(-32602);
  });

  it('airdrops and reports balances', async () => {
    const kp = Keypair.generate();
    expect(await conn.getBalance(kp.publicKey)).toBe(0);
    const sig = await conn.requestAirdrop(kp.publicKey, 2 * LAMPORTS_PER_SOL);
    const bh = await conn.getLatestBlockhash();
    const res = await conn.confirmTransaction({ signature: sig, ...bh }, 'confirmed');
    expect(res.value.err).toBeNull();
    expect(await conn.getBalance(kp.publicKey)).toBe(2 * LAMPORTS_PER_SOL);
    // The helper goes straight to the LiteSVM and is visible over RPC at once.
    rpc.airdrop(kp.publicKey, 1_000);
    expect(await conn.getBalance(kp.publicKey, 'processed')).toBe(2 * LAMPORTS_PER_SOL + 1_000);
  });

  it('confirms a SOL transfer with a memo and serves its history', async () => {
    const payer = await funded();
    const to = Keypair.generate().publicKey;
    const tx = new Transaction().add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: 123_456_789 }), memoIx('hello relay'));
    const sig = await sendAndConfirmTransaction(conn, tx, [payer], { commitment: 'confirmed' });

    const status = (await conn.getSignatureStatus(sig)).value!;
    expect(status.err).toBeNull();
    expect(['confirmed', 'finalized']).toContain(status.confirmationStatus);

    const sigs = await conn.getSignaturesForAddress(payer.publicKey);
    expect(sigs[0]!.signature).toBe(sig);
    expect(sigs[0]!.memo).toBe('[11] hello relay');
    expect(sigs[0]!.err).toBeNull();
    expect(sigs).toHaveLength(2); // the transfer and the airdrop that funded the payer

    const got = await conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(got).not.toBeNull();
    const meta = got!.meta!;
    expect(got!.version).toBe('legacy');
    expect(meta.err).toBeNull();
    expect(meta.fee).toBe(5000);
    const keys = got!.transaction.message.staticAccountKeys.map((k) => k.toBase58());
    const iPayer = keys.indexOf(payer.publicKey.toBase58());
    const iTo = keys.indexOf(to.toBase58());
    expect(meta.preBalances[iPayer]! - meta.postBalances[iPayer]!).toBe(123_456_789 + 5000);
    expect(meta.preBalances[iTo]).toBe(0);
    expect(meta.postBalances[iTo]).toBe(123_456_789);
    expect(meta.logMessages!.some((l) => l.includes('Memo') || l.includes(MEMO_V2_PROGRAM))).toBe(true);
    expect(typeof got!.blockTime).toBe('number');

    const parsed = await conn.getParsedTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    const ixs = parsed!.transaction.message.instructions as any[];
    expect(ixs[0].program).toBe('system');
    expect(ixs[0].parsed.type).toBe('transfer');
    expect(ixs[0].parsed.info.lamports).toBe(123_456_789);
    expect(ixs[1].program).toBe('spl-memo');
    expect(ixs[1].parsed).toBe('hello relay');

    // base64 encoding returns the wire bytes.
    const b64 = await rawRpc({ jsonrpc: '2.0', id: 1, method: 'getTransaction', params: [sig, { encoding: 'base64', commitment: 'confirmed' }] });
    const wire = Buffer.from(b64.result.transaction[0], 'base64');
    expect(Transaction.from(wire).signature && Buffer.from(Transaction.from(wire).signature!).equals(Buffer.from(tx.signature!))).toBe(true);
  });

  it('moves confirmation status from processed/confirmed to finalized after 32 slots', async () => {
    const payer = await funded();
    const tx = new Transaction().add(memoIx('status'));
    const sig = await sendAndConfirmTransaction(conn, tx, [payer], { commitment: 'confirmed' });
    const s0 = (await conn.getSignatureStatus(sig)).value!;
    expect(s0.confirmationStatus).toBe('confirmed');
    expect(s0.confirmations).toBeGreaterThanOrEqual(1);
    // Not visible at the finalized level yet.
    expect(await conn.getTransaction(sig, { commitment: 'finalized', maxSupportedTransactionVersion: 0 })).toBeNull();
    rpc.advanceSlots(32);
    const s1 = (await conn.getSignatureStatus(sig)).value!;
    expect(s1.confirmationStatus).toBe('finalized');
    expect(s1.confirmations).toBeNull();
    expect(await conn.getTransaction(sig, { commitment: 'finalized', maxSupportedTransactionVersion: 0 })).not.toBeNull();
  });

  it('creates an associated token account, transfers SPL tokens and reports token balances', async () => {
    const alice = await funded();
    const bob = Keypair.generate().publicKey;
    const mint = rpc.createMint(6);
    const aliceAta = rpc.mintTo(mint, alice.publicKey, 5_000_000n);
    expect((await getAccount(conn, aliceAta)).amount).toBe(5_000_000n);

    const bobAta = getAssociatedTokenAddressSync(mint, bob);
    const tx = new Transaction().add(
      createAssociatedTokenAccountIdempotentInstruction(alice.publicKey, bobAta, bob, mint),
      createTransferCheckedInstruction(aliceAta, mint, bobAta, alice.publicKey, 1_500_000n, 6),
    );
    const sig = await sendAndConfirmTransaction(conn, tx, [alice], { commitment: 'confirmed' });

    const byOwner = await conn.getTokenAccountsByOwner(bob, { mint });
    expect(byOwner.value.map((a) => a.pubkey.toBase58())).toEqual([bobAta.toBase58()]);
    const parsedByOwner = await conn.getParsedTokenAccountsByOwner(bob, { programId: TOKEN_PROGRAM_ID });
    expect(parsedByOwner.value).toHaveLength(1);
    const info = (parsedByOwner.value[0]!.account.data as ParsedAccountData).parsed.info;
    expect(info.mint).toBe(mint.toBase58());
    expect(info.owner).toBe(bob.toBase58());
    expect(info.tokenAmount).toEqual({ amount: '1500000', decimals: 6, uiAmount: 1.5, uiAmountString: '1.5' });
    expect((await conn.getTokenAccountBalance(bobAta)).value.uiAmountString).toBe('1.5');
    const parsedMint = await conn.getParsedAccountInfo(mint);
    expect((parsedMint.value!.data as ParsedAccountData).parsed.type).toBe('mint');
    expect((parsedMint.value!.data as ParsedAccountData).parsed.info.supply).toBe('5000000');

    const got = await conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    const meta = got!.meta!;
    const keys = got!.transaction.message.staticAccountKeys.map((k) => k.toBase58());
    const iBob = keys.indexOf(bobAta.toBase58());
    const iAlice = keys.indexOf(aliceAta.toBase58());
    expect(meta.preTokenBalances!.find((b) => b.accountIndex === iBob)).toBeUndefined();
    const bobPost = meta.postTokenBalances!.find((b) => b.accountIndex === iBob)!;
    expect(bobPost.mint).toBe(mint.toBase58());
    expect(bobPost.owner).toBe(bob.toBase58());
    expect(bobPost.programId).toBe(TOKEN_PROGRAM_ID.toBase58());
    expect(bobPost.uiTokenAmount.amount).toBe('1500000');
    expect(bobPost.uiTokenAmount.decimals).toBe(6);
    expect(meta.preTokenBalances!.find((b) => b.accountIndex === iAlice)!.uiTokenAmount.amount).toBe('5000000');
    expect(meta.postTokenBalances!.find((b) => b.accountIndex === iAlice)!.uiTokenAmount.amount).toBe('3500000');
    // Rent for the new token account shows in the SOL balances.
    expect(meta.postBalances[iBob]).toBe(2_039_280);
    expect(meta.innerInstructions!.length).toBeGreaterThan(0);
  });

  it('shows Token-2022 transfer fees in the post token balances', async () => {
    const alice = await funded();
    const bob = Keypair.generate().publicKey;
    const mint = rpc.createMint(6, { token2022: true, transferFeeBps: 100 });
    expect((await conn.getAccountInfo(mint))!.owner.toBase58()).toBe(TOKEN_2022_PROGRAM_ID.toBase58());
    const aliceAta = rpc.mintTo(mint, alice.publicKey, 1_000_000n);
    const bobAta = getAssociatedTokenAddressSync(mint, bob, false, TOKEN_2022_PROGRAM_ID);
    const tx = new Transaction().add(
      createAssociatedTokenAccountIdempotentInstruction(alice.publicKey, bobAta, bob, mint, TOKEN_2022_PROGRAM_ID),
      createTransferCheckedInstruction(aliceAta, mint, bobAta, alice.publicKey, 100_000n, 6, [], TOKEN_2022_PROGRAM_ID),
    );
    const sig = await sendAndConfirmTransaction(conn, tx, [alice], { commitment: 'confirmed' });

    const got = await conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    const meta = got!.meta!;
    const keys = got!.transaction.message.staticAccountKeys.map((k) => k.toBase58());
    const bobPost = meta.postTokenBalances!.find((b) => b.accountIndex === keys.indexOf(bobAta.toBase58()))!;
    expect(bobPost.programId).toBe(TOKEN_2022_PROGRAM_ID.toBase58());
    expect(bobPost.uiTokenAmount.amount).toBe('99000'); // 1% withheld
    const alicePost = meta.postTokenBalances!.find((b) => b.accountIndex === keys.indexOf(aliceAta.toBase58()))!;
    expect(alicePost.uiTokenAmount.amount).toBe('900000');

    const acct = await conn.getParsedAccountInfo(bobAta);
    const parsed = (acct.value!.data as ParsedAccountData).parsed;
    expect((acct.value!.data as ParsedAccountData).program).toBe('spl-token-2022');
    expect(parsed.info.tokenAmount.amount).toBe('99000');
    const withheld = parsed.info.extensions.find((e: any) => e.extension === 'transferFeeAmount');
    expect(withheld.state.withheldAmount).toBe(1000);
    const mintInfo = (await conn.getParsedAccountInfo(mint)).value!.data as ParsedAccountData;
    const feeCfg = mintInfo.parsed.info.extensions.find((e: any) => e.extension === 'transferFeeConfig');
    expect(feeCfg.state.newerTransferFee.transferFeeBasisPoints).toBe(100);
    const byOwner = await conn.getParsedTokenAccountsByOwner(bob, { programId: TOKEN_2022_PROGRAM_ID });
    expect(byOwner.value.map((a) => a.pubkey.toBase58())).toEqual([bobAta.toBase58()]);
  });

  it('returns logs and the error for a failing transaction', async () => {
    const payer = await funded(1);
    const tx = new Transaction().add(
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: Keypair.generate().publicKey, lamports: 5 * LAMPORTS_PER_SOL }),
    );
    tx.recentBlockhash = (await conn.getLatestBlockhash()).blockhash;
    tx.feePayer = payer.publicKey;
    tx.sign(payer);

    const sim = await conn.simulateTransaction(tx);
    expect(sim.value.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    expect(sim.value.logs!.some((l) => l.includes('insufficient lamports'))).toBe(true);
    expect(sim.value.unitsConsumed).toBeGreaterThan(0);

    // Preflight fails with -32002 and the simulation logs.
    const err = (await conn.sendRawTransaction(tx.serialize()).catch((e: unknown) => e)) as SendTransactionError;
    expect(err).toBeInstanceOf(SendTransactionError);
    expect(err.message).toMatch(/custom program error: 0x1/);
    expect((await err.getLogs(conn)).some((l) => l.includes('insufficient lamports'))).toBe(true);
    const raw = await rawRpc({
      jsonrpc: '2.0',
      id: 1,
      method: 'sendTransaction',
      params: [tx.serialize().toString('base64'), { encoding: 'base64' }],
    });
    expect(raw.error.code).toBe(-32002);
    expect(raw.error.data.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    expect(raw.error.data.logs.length).toBeGreaterThan(0);

    // Skipping preflight lands it on chain as failed, with the fee charged.
    const sig = await conn.sendRawTransaction(tx.serialize(), { skipPreflight: true });
    const st = await until(
      () => conn.getSignatureStatus(sig),
      (s) => s.value?.confirmationStatus === 'confirmed',
      10_000,
      'failed tx status',
    );
    expect(st.value!.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    const got = await conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(got!.meta!.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    expect(got!.meta!.preBalances[0]! - got!.meta!.postBalances[0]!).toBe(5000);
    expect(await conn.getBalance(payer.publicKey, 'processed')).toBe(LAMPORTS_PER_SOL - 5000);
    const sigs = await conn.getSignaturesForAddress(payer.publicKey, { limit: 1 });
    expect(sigs[0]!.signature).toBe(sig);
    expect(sigs[0]!.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
  });

  it('reports compute-unit prices in getRecentPrioritizationFees and charges them', async () => {
    const payer = await funded();
    const to = Keypair.generate().publicKey;
    const tx = new Transaction().add(
      ComputeBudgetProgram.setComputeUnitLimit({ units: 100_000 }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 12_345 }),
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: 1_000_000 }),
    );
    const sig = await sendAndConfirmTransaction(conn, tx, [payer], { commitment: 'confirmed' });
    const got = await conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    const fee = 5000 + Math.ceil((12_345 * 100_000) / 1_000_000);
    expect(got!.meta!.fee).toBe(fee);
    expect(got!.meta!.preBalances[0]! - got!.meta!.postBalances[0]!).toBe(fee + 1_000_000);

    const fees = await conn.getRecentPrioritizationFees({ lockedWritableAccounts: [to] });
    expect(fees.length).toBeGreaterThan(0);
    const entry = fees.find((f) => f.slot === got!.slot);
    expect(entry?.prioritizationFee).toBe(12_345);
    const all = await conn.getRecentPrioritizationFees();
    expect(all.every((f) => typeof f.slot === 'number' && typeof f.prioritizationFee === 'number')).toBe(true);
  });

  it('pages getSignaturesForAddress with before/until/limit, newest first', async () => {
    const payer = await funded();
    const sent: string[] = [];
    const { blockhash } = await conn.getLatestBlockhash();
    for (let i = 0; i < 5; i++) {
      const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(memoIx(`page ${i}`));
      tx.sign(payer);
      sent.push(await conn.sendRawTransaction(tx.serialize()));
    }
    await until(
      () => conn.getSignatureStatuses(sent),
      (r) => r.value.every((s) => s?.confirmationStatus === 'confirmed' || s?.confirmationStatus === 'finalized'),
      10_000,
      'page txs confirmed',
    );
    const all = await conn.getSignaturesForAddress(payer.publicKey);
    expect(all).toHaveLength(6); // 5 memos + the airdrop
    expect(all.slice(0, 5).map((s) => s.signature)).toEqual([...sent].reverse());
    expect(all[0]!.memo).toBe('[6] page 4');

    const pages: string[] = [];
    let before: string | undefined;
    for (;;) {
      const page = await conn.getSignaturesForAddress(payer.publicKey, { limit: 2, before });
      if (page.length === 0) break;
      expect(page.length).toBeLessThanOrEqual(2);
      pages.push(...page.map((s) => s.signature));
      before = page[page.length - 1]!.signature;
    }
    expect(pages).toEqual(all.map((s) => s.signature));
    const untilPage = await conn.getSignaturesForAddress(payer.publicKey, { until: sent[2] });
    expect(untilPage.map((s) => s.signature)).toEqual([sent[4], sent[3]]);
  });

  it('decodes v0 transactions', async () => {
    const payer = await funded();
    const to = Keypair.generate().publicKey;
    const { blockhash, lastValidBlockHeight } = await conn.getLatestBlockhash();
    const msg = new TransactionMessage({
      payerKey: payer.publicKey,
      recentBlockhash: blockhash,
      instructions: [SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: 1_000_777 }), memoIx('v0')],
    }).compileToV0Message();
    const vtx = new VersionedTransaction(msg);
    vtx.sign([payer]);
    const sig = await conn.sendTransaction(vtx);
    const res = await conn.confirmTransaction({ signature: sig, blockhash, lastValidBlockHeight }, 'confirmed');
    expect(res.value.err).toBeNull();
    const got = await conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(got!.version).toBe(0);
    expect(got!.meta!.postBalances[got!.transaction.message.staticAccountKeys.findIndex((k) => k.equals(to))]).toBe(1_000_777);
    expect(got!.meta!.loadedAddresses).toEqual({ writable: [], readonly: [] });
    // Without maxSupportedTransactionVersion a v0 transaction is refused like Solana does (-32015).
    const raw = await rawRpc({ jsonrpc: '2.0', id: 1, method: 'getTransaction', params: [sig, { commitment: 'confirmed' }] });
    expect(raw.error.code).toBe(-32015);
  });

  it('verifies signatures', async () => {
    const payer = await funded();
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: (await conn.getLatestBlockhash()).blockhash }).add(memoIx('sig'));
    tx.sign(payer);
    const wire = Buffer.from(tx.serialize());
    wire[1]! ^= 0xff; // corrupt the fee payer's signature
    const raw = await rawRpc({
      jsonrpc: '2.0',
      id: 1,
      method: 'sendTransaction',
      params: [Buffer.from(wire).toString('base64'), { encoding: 'base64', skipPreflight: true }],
    });
    expect(raw.error.code).toBe(-32003);
  });
  it('pushes slot, account and logs notifications over the WebSocket', async () => {
    const payer = await funded();
    const slots: number[] = [];
    const balances: number[] = [];
    const logs: string[] = [];
    const subSlot = conn.onSlotChange((s) => slots.push(s.slot));
    const subAcct = conn.onAccountChange(payer.publicKey, (a) => balances.push(a.lamports), { commitment: 'processed' });
    const subLogs = conn.onLogs(payer.publicKey, (l) => logs.push(l.signature), 'confirmed');
    try {
      await until(
        async () => slots.length,
        (n) => n >= 2,
        10_000,
        'slot notifications',
      );
      // Subscriptions are set up asynchronously; send only once the slot stream shows the socket is live.
      const sig = await sendAndConfirmTransaction(conn, new Transaction().add(memoIx('ws')), [payer], { commitment: 'confirmed' });
      await until(
        async () => logs,
        (l) => l.includes(sig),
        10_000,
        'logs notification',
      );
      await until(
        async () => balances,
        (b) => b.includes(10 * LAMPORTS_PER_SOL - 5000),
        10_000,
        'account notification',
      );
      expect(slots[1]! > slots[0]!).toBe(true);
    } finally {
      await conn.removeSlotChangeListener(subSlot);
      await conn.removeAccountChangeListener(subAcct);
      await conn.removeOnLogsListener(subLogs);
    }
  });

  // Runs last: jumping 151 slots also expires the blockhash web3.js caches per Connection (for 30 s).
  it('rejects a transaction whose blockhash has expired', async () => {
    const payer = await funded();
    const { blockhash } = await conn.getLatestBlockhash('processed');
    const build = (lamports: number) => {
      const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(
        SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: Keypair.generate().publicKey, lamports }),
      );
      tx.sign(payer);
      return tx.serialize();
    };
    rpc.advanceSlots(151);
    expect((await conn.isBlockhashValid(blockhash)).value).toBe(false);
    const err = await conn.sendRawTransaction(build(1_000_000)).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SendTransactionError);
    expect(String((err as Error).message)).toMatch(/Blockhash not found/);
    // With preflight skipped the cluster drops it: the signature never gets a status.
    const sig = await conn.sendRawTransaction(build(2_000_000), { skipPreflight: true });
    rpc.advanceSlots(2);
    expect((await conn.getSignatureStatus(sig)).value).toBeNull();
    expect(await conn.getBalance(payer.publicKey, 'processed')).toBe(10 * LAMPORTS_PER_SOL);
  });
});
