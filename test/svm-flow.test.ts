// The SVM chain end to end on the devnet (litesvm behind the local JSON-RPC, the node speaking to it
// only through @solana/web3.js): SOL and SPL from SVM to EVM and back, a recipient without a token
// account (rent charged, or sponsored), a refund on SVM, a depositFeePayer deposit, the rent-too-low
// quote, the request record's SVM signatures, and a payout whose blockhash expired before it landed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ComputeBudgetProgram,
  Connection,
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  type TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createCloseAccountInstruction,
  createInitializeAccount3Instruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token';
import { encodeFunctionData, erc20Abi, zeroAddress, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { linkWallet } from './helpers/link.ts';
import { SVM_NATIVE } from '../src/chains/address.ts';
import { base58Decode, base58Encode, memoInstruction, parseDepositTransaction } from '../src/chains/svm/transactions.ts';
import { runAudit } from '../src/audit/audit.ts';
import { svmKeypair } from '../src/chains/svm/transactions.ts';
import { auditStack } from './helpers/audit.ts';
import { recordSvmFill, signSvmFill } from './helpers/svmFill.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

const SVM = 792703809;
const A = 8453;
let s: Stack;
let conn: Connection;
let apiKey: string;
const logLines: string[] = [];

const svm = () => s.devnet.svm!;
const evmUser = (i: number) => s.devnet.accounts[i]!.address;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const ata = (owner: PublicKey | string, mint = svm().mint) => getAssociatedTokenAddressSync(new PublicKey(mint), new PublicKey(owner), true, TOKEN_PROGRAM_ID);

async function lamports(who: PublicKey | string) {
  return BigInt(await conn.getBalance(new PublicKey(who), 'confirmed'));
}
async function tokens(owner: PublicKey | string, mint = svm().mint) {
  try {
    return BigInt((await conn.getTokenAccountBalance(ata(owner, mint), 'confirmed')).value.amount);
  } catch {
    return 0n;
  }
}
async function evmTokens(chainId: number, who: Address) {
  return s.publicClient(chainId).readContract({ address: usdc(chainId), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
}

// What a wallet does with the quote's SVM deposit step: sign (fee payer first) and send.
async function signAndSend(step: any, signers: Keypair[]): Promise<string> {
  const data = step.items[0].data;
  const tx = Transaction.from(Buffer.from(data.transaction, 'base64'));
  for (const k of signers) tx.partialSign(k);
  return conn.sendRawTransaction(tx.serialize(), { skipPreflight: false, preflightCommitment: 'confirmed' });
}

async function quote(body: Record<string, unknown>, key?: string) {
  return api(s.url, '/quote/v2', { body: { tradeType: 'EXACT_INPUT', ...body }, apiKey: key });
}

// A quote of `amount` wei (0.1 ETH by default) on 8453 to SOL for `recipient`.
const ethToSol = (recipient: PublicKey, amount = '100000000000000000') =>
  quote({
    user: evmUser(1),
    recipient: recipient.toBase58(),
    originChainId: A,
    destinationChainId: SVM,
    originCurrency: zeroAddress,
    destinationCurrency: SVM_NATIVE,
    amount,
  });

beforeAll(async () => {
  s = await startStack({ svm: true, logLines });
  conn = new Connection(svm().rpcUrl, 'confirmed');
  apiKey = s.node.ledger.apiKeys.create('t').key;
}, 120_000);
afterAll(async () => {
  await s?.stop();
  if (process.env.SVM_FLOW_LOG) (await import('node:fs')).writeFileSync(process.env.SVM_FLOW_LOG, logLines.join(''));
});

describe('SVM chain', () => {
  it('bridges SOL from SVM to native ETH on 8453, the deposit parsed from balances and memo', async () => {
    const user = svm().keypair(0);
    const recipient = evmUser(1);
    const q = await quote({
      user: user.publicKey.toBase58(),
      recipient,
      originChainId: SVM,
      destinationChainId: A,
      originCurrency: SVM_NATIVE,
      destinationCurrency: zeroAddress,
      amount: '1000000000',
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    expect(step.id).toBe('deposit');
    const data = step.items[0].data;
    expect(data).toMatchObject({
      chainId: SVM,
      encoding: 'base64',
      feePayer: user.publicKey.toBase58(),
      signers: [user.publicKey.toBase58()],
      depository: svm().vault,
    });
    expect(typeof data.transaction).toBe('string');
    expect(typeof data.recentBlockhash).toBe('string');
    const requestId = step.requestId as Hex;
    const out = BigInt(q.body.details.currencyOut.amount);
    expect(out).toBeGreaterThan(0n);
    expect(out).toBeLessThan(50_000_000_000_000_000n); // 1 SOL at 150 USD = 0.05 ETH at 3000, less fees

    const vaultBefore = await lamports(svm().vault);
    const before = await s.publicClient(A).getBalance({ address: recipient });
    const sig = await signAndSend(step, [user]);
    const idx = await api(s.url, '/transactions/index', { body: { txHash: sig, chainId: SVM } });
    expect(idx.status, JSON.stringify(idx.body)).toBe(200);
    expect(idx.body.deposits).toBe(1);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    expect(done.inTxHashes).toEqual([sig]);
    expect((await s.publicClient(A).getBalance({ address: recipient })) - before).toBe(out);
    expect((await lamports(svm().vault)) - vaultBefore).toBe(1_000_000_000n);
    const dep = s.node.ledger.deposits.get(`${SVM}:${sig}:0`)!;
    expect(dep).toMatchObject({ depositor: user.publicKey.toBase58(), currency: SVM_NATIVE, amount: '1000000000', order_ref: requestId });
  });

  it('bridges ETH from 8453 to SOL on SVM (a new account, left rent-exempt)', async () => {
    const recipient = Keypair.generate().publicKey;
    const q = await ethToSol(recipient);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    const out = BigInt(q.body.details.currencyOut.amount);
    expect(out).toBeGreaterThan(1_900_000_000n); // 0.1 ETH = 300 USD = 2 SOL, less fees
    const [hash] = await executeSteps(s, q.body, 1);
    await api(s.url, '/transactions/index', { body: { txHash: hash, chainId: A } });
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status, JSON.stringify(done)).toBe('success');
    expect(await lamports(recipient)).toBe(out);
    const sig = done.txHashes[0];
    const tx = await conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    expect(tx?.meta?.err).toBeNull();
    expect(tx?.meta?.logMessages?.join('\n')).toContain(requestId);
  });

  it("pays a fill at about the chain's priority fee, not one an attacker set on the recipient's account", async () => {
    // The payout's compute-unit price was the 75th percentile of recent fees of the accounts it writes,
    // the recipient among them: writing the recipient at the cap's price in a quarter of recent slots
    // (alongside ordinary cheap transactions) had the solver pay that price, where the quote charged
    // the chain's.
    const recipient = Keypair.generate().publicKey;
    const attacker = Keypair.generate();
    const bystander = Keypair.generate();
    for (const k of [attacker, bystander]) await conn.confirmTransaction(await conn.requestAirdrop(k.publicKey, 1_000_000_000), 'confirmed');
    const send = async (from: Keypair, to: PublicKey, microLamports: number) => {
      const tx = new Transaction().add(
        ComputeBudgetProgram.setComputeUnitLimit({ units: 1_000 }),
        ComputeBudgetProgram.setComputeUnitPrice({ microLamports }),
        SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to, lamports: 1_000_000 }),
      );
      tx.recentBlockhash = (await conn.getLatestBlockhash('confirmed')).blockhash;
      tx.feePayer = from.publicKey;
      tx.sign(from);
      await conn.sendRawTransaction(tx.serialize(), { skipPreflight: true });
    };
    for (let i = 0; i < 45; i++) {
      await send(attacker, recipient, 10_000_000);
      await send(bystander, Keypair.generate().publicKey, 0);
      svm().rpc.advanceSlots(1);
    }
    const q = await ethToSol(recipient);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as Hex;
    await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status, JSON.stringify(done)).toBe('success');
    const tx = await conn.getTransaction(done.txHashes[0], { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    // One signature (5000) and a priority fee near the chain's (the bystanders pay none), where the
    // recipient's price made it 23,850 lamports: up to 0.0005 SOL on a payout creating a token account.
    expect(tx!.meta!.fee).toBeLessThan(10_000);
  });

  it('bridges the SPL test token both ways', async () => {
    // SVM USDC -> 8453 USDC.
    const user = svm().keypair(1);
    const q1 = await quote({
      user: user.publicKey.toBase58(),
      recipient: evmUser(2),
      originChainId: SVM,
      destinationChainId: A,
      originCurrency: svm().mint,
      destinationCurrency: usdc(A),
      amount: '25000000',
    });
    expect(q1.status, JSON.stringify(q1.body)).toBe(200);
    const id1 = q1.body.steps[0].requestId;
    const evmBefore = await evmTokens(A, evmUser(2));
    const vaultBefore = await tokens(svm().vault);
    const sig1 = await signAndSend(q1.body.steps[0], [user]);
    await api(s.url, '/transactions/index', { body: { txHash: sig1, chainId: SVM } });
    const d1 = await waitForStatus(s.url, id1, ['success', 'failure', 'refund']);
    expect(d1.status).toBe('success');
    expect((await evmTokens(A, evmUser(2))) - evmBefore).toBe(BigInt(q1.body.details.currencyOut.amount));
    expect((await tokens(svm().vault)) - vaultBefore).toBe(25_000_000n);

    // 8453 USDC -> SVM USDC, to a recipient that has a token account.
    const to = svm().keypair(2).publicKey;
    const q2 = await quote({
      user: evmUser(2),
      recipient: to.toBase58(),
      originChainId: A,
      destinationChainId: SVM,
      originCurrency: usdc(A),
      destinationCurrency: svm().mint,
      amount: '30000000',
    });
    expect(q2.status, JSON.stringify(q2.body)).toBe(200);
    const id2 = q2.body.steps.at(-1).requestId;
    const before = await tokens(to);
    const hashes = await executeSteps(s, q2.body, 2);
    await api(s.url, '/transactions/index', { body: { txHash: hashes.at(-1), chainId: A } });
    const d2 = await waitForStatus(s.url, id2, ['success', 'failure', 'refund']);
    expect(d2.status, JSON.stringify(d2)).toBe('success');
    expect((await tokens(to)) - before).toBe(BigInt(q2.body.details.currencyOut.amount));
  });

  it('fills SPL to a recipient without a token account: the rent is charged in the quote', async () => {
    const to = Keypair.generate().publicKey;
    const existing = svm().keypair(2).publicKey;
    const body = (recipient: PublicKey) => ({
      user: evmUser(3),
      recipient: recipient.toBase58(),
      originChainId: A,
      destinationChainId: SVM,
      originCurrency: usdc(A),
      destinationCurrency: svm().mint,
      amount: '20000000',
    });
    const [qNew, qOld] = await Promise.all([quote(body(to)), quote(body(existing))]);
    expect(qNew.status).toBe(200);
    // The token account's rent (2,039,280 lamports at 150 USD/SOL = 0.306 USD) is in the relayer's gas fee.
    const gasNew = BigInt(qNew.body.fees.relayerGas.amount);
    const gasOld = BigInt(qOld.body.fees.relayerGas.amount);
    expect(gasNew - gasOld).toBeGreaterThanOrEqual(305_000n);
    expect(gasNew - gasOld).toBeLessThan(320_000n);
    const id = qNew.body.steps.at(-1).requestId;
    await executeSteps(s, qNew.body, 3);
    const d = await waitForStatus(s.url, id, ['success', 'failure', 'refund']);
    expect(d.status, JSON.stringify(d)).toBe('success');
    expect(await tokens(to)).toBe(BigInt(qNew.body.details.currencyOut.amount));
    expect(await lamports(ata(to))).toBe(2_039_280n);
  });

  it('sponsors the rent with subsidizeFees and subsidizeRent; without subsidizeRent the user pays (rule 2)', async () => {
    // An API key linked to a sponsor wallet whose app balance is funded on 8453.
    const k = s.node.ledger.apiKeys.create('sponsor');
    const wallet = privateKeyToAccount(s.devnet.accounts[4]!.privateKey);
    expect((await linkWallet(s.url, k.key, wallet)).status).toBe(200);
    const w = s.wallet(1, A);
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, 50_000_000n] });
    const marker = `012345abcdef${wallet.address.slice(2).toLowerCase()}012345abcdef`;
    const fund = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc(A), data: `${data}${marker}` as Hex });
    await s.publicClient(A).waitForTransactionReceipt({ hash: fund });
    await until(() => (s.node.ledger.balances.get(`credit:${A}:${fund}`) ? true : undefined), 'the app balance credit');

    const to = Keypair.generate().publicKey;
    const body = {
      user: evmUser(3),
      recipient: to.toBase58(),
      originChainId: A,
      destinationChainId: SVM,
      originCurrency: usdc(A),
      destinationCurrency: svm().mint,
      amount: '20000000',
      subsidizeFees: true,
    };
    const fallback = await quote(body, k.key);
    expect(fallback.status).toBe(200);
    expect(BigInt(fallback.body.fees.subsidized.amount)).toBe(0n);
    const q = await quote({ ...body, subsidizeRent: true }, k.key);
    expect(q.status).toBe(200);
    expect(BigInt(q.body.fees.subsidized.amount)).toBeGreaterThan(305_000n);
    expect(q.body.details.currencyOut.amount).toBe('20000000');
    const id = q.body.steps.at(-1).requestId;
    const before = s.node.ledger.balances.summary(wallet.address).balance;
    await executeSteps(s, q.body, 3);
    const d = await waitForStatus(s.url, id, ['success', 'failure', 'refund']);
    expect(d.status, JSON.stringify(d)).toBe('success');
    expect(await tokens(to)).toBe(20_000_000n);
    expect(before - s.node.ledger.balances.summary(wallet.address).balance).toBeGreaterThan(305_000n);
  });

  it('refunds a short SVM deposit on SVM, less the refund fee and token-account rent', async () => {
    const user = svm().keypair(3);
    const q = await quote({
      user: user.publicKey.toBase58(),
      recipient: evmUser(3),
      originChainId: SVM,
      destinationChainId: A,
      originCurrency: svm().mint,
      destinationCurrency: usdc(A),
      amount: '10000000',
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps[0].requestId as Hex;
    // The user sends less than the quote asks for, with the order id in the memo.
    const mint = new PublicKey(svm().mint);
    const { blockhash } = await conn.getLatestBlockhash('confirmed');
    const msg = new TransactionMessage({
      payerKey: user.publicKey,
      recentBlockhash: blockhash,
      instructions: [createTransferCheckedInstruction(ata(user.publicKey), mint, ata(svm().vault), user.publicKey, 9_000_000n, 6), memoInstruction(requestId)],
    }).compileToV0Message();
    const tx = new VersionedTransaction(msg);
    tx.sign([user]);
    const before = await tokens(user.publicKey);
    const sig = await conn.sendRawTransaction(tx.serialize());
    const done = await waitForStatus(s.url, requestId, ['refund', 'success'], 30_000);
    expect(done).toMatchObject({ status: 'refund', failReason: 'DEPOSITED_AMOUNT_TOO_LOW_TO_FILL', refundFailReason: null, inTxHashes: [sig] });
    expect(done.txHashes).toHaveLength(1);
    const back = (await tokens(user.publicKey)) - (before - 9_000_000n);
    // The refund's fee and the rent of a token account it may have to create (2,039,280 lamports at
    // 150 USD/SOL = 305,892 units) are deducted, whether or not the depositor has one.
    expect(9_000_000n - back).toBeGreaterThan(305_892n);
    expect(9_000_000n - back).toBeLessThan(310_000n);

    // The request record shows both SVM signatures.
    const rec = await api(s.url, `/requests/v3?id=${requestId}`, { apiKey });
    expect(rec.status).toBe(200);
    const r = rec.body.requests[0];
    expect(r.data.inTxs.map((t: any) => t.hash ?? t.txHash)).toEqual([sig]);
    expect(r.data.inTxs[0]).toMatchObject({ chainId: SVM });
    expect(r.data.outTxs.map((t: any) => t.hash ?? t.txHash)).toEqual([done.txHashes[0]]);
    expect(r.data.outTxs[0]).toMatchObject({ chainId: SVM, status: 'success' });
  });

  it('takes a deposit whose fees another account pays (depositFeePayer signs first); equal to user is refused', async () => {
    const user = svm().keypair(4);
    const payer = svm().keypair(0);
    const body = {
      user: user.publicKey.toBase58(),
      recipient: evmUser(4),
      originChainId: SVM,
      destinationChainId: A,
      originCurrency: SVM_NATIVE,
      destinationCurrency: zeroAddress,
      amount: '500000000',
    };
    const same = await quote({ ...body, depositFeePayer: user.publicKey.toBase58() });
    expect(same.status).toBe(400);
    expect(same.body.errorCode).toBe('INVALID_INPUT_PARAMETERS');
    const q = await quote({ ...body, depositFeePayer: payer.publicKey.toBase58() });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    expect(step.items[0].data).toMatchObject({ feePayer: payer.publicKey.toBase58(), signers: [payer.publicKey.toBase58(), user.publicKey.toBase58()] });
    const tx = Transaction.from(Buffer.from(step.items[0].data.transaction, 'base64'));
    expect(tx.feePayer!.toBase58()).toBe(payer.publicKey.toBase58());
    expect(tx.signatures.map((x) => x.publicKey.toBase58())).toEqual([payer.publicKey.toBase58(), user.publicKey.toBase58()]);
    const userBefore = await lamports(user.publicKey);
    const payerBefore = await lamports(payer.publicKey);
    const sig = await signAndSend(step, [payer, user]);
    await api(s.url, '/transactions/index', { body: { txHash: sig, chainId: SVM } });
    const d = await waitForStatus(s.url, step.requestId, ['success', 'failure', 'refund']);
    expect(d.status).toBe('success');
    // The user gave exactly the amount; the payer paid the fee (two signatures).
    expect(userBefore - (await lamports(user.publicKey))).toBe(500_000_000n);
    expect(payerBefore - (await lamports(payer.publicKey))).toBe(10_000n);
    expect(s.node.ledger.deposits.get(`${SVM}:${sig}:0`)!.depositor).toBe(user.publicKey.toBase58());
  });

  it('refuses at quote time a SOL payout that would leave a new account below the rent-exempt minimum', async () => {
    const to = Keypair.generate().publicKey;
    // 0.0005 ETH = 1.5 USD = 0.01 SOL: above the minimum. 0.00001 ETH = 0.0002 SOL: below 0.00089088.
    const ok = await ethToSol(to, '500000000000000');
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const low = await ethToSol(to, '10000000000000');
    expect(low.status).toBe(400);
    expect(low.body.errorCode).toBe('INSUFFICIENT_FUNDS_FOR_RENT');
    // An existing account takes any amount.
    const existing = await ethToSol(svm().keypair(2).publicKey, '10000000000000');
    expect(existing.status, JSON.stringify(existing.body)).toBe(200);
  });

  it('indexes each deposit once: re-reading the vault writes nothing twice; failed and foreign transfers are no deposits', async () => {
    const n = (s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM deposits WHERE chain_id = ?').get(SVM) as { n: number }).n;
    // A transfer out of a test account to someone else touches no vault account.
    const a = svm().keypair(0);
    const { blockhash } = await conn.getLatestBlockhash('confirmed');
    const tx = new Transaction({ feePayer: a.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: a.publicKey, toPubkey: svm().keypair(1).publicKey, lamports: 1000 }),
    );
    tx.sign(a);
    await conn.sendRawTransaction(tx.serialize());
    // A transfer to the vault that fails on chain (more than the sender has) moves nothing.
    const poor = Keypair.generate();
    await conn.requestAirdrop(poor.publicKey, 10_000_000);
    await until(async () => ((await lamports(poor.publicKey)) > 0n ? true : undefined), 'the airdrop');
    const failing = new Transaction({ feePayer: poor.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: poor.publicKey, toPubkey: new PublicKey(svm().vault), lamports: 1_000_000_000 }),
      memoInstruction(`0x${'cd'.repeat(32)}`),
    );
    failing.sign(poor);
    const failed = await conn.sendRawTransaction(failing.serialize(), { skipPreflight: true });
    await until(async () => {
      const st = (await conn.getSignatureStatuses([failed])).value[0];
      return st?.err && st.confirmationStatus !== 'processed' ? true : undefined;
    }, 'the failed transfer to be confirmed');
    // Rewind the cursors: the next passes read everything again.
    s.node.ledger.db.prepare(`UPDATE cursors SET block_number = -1 WHERE chain_id = ?`).run(SVM);
    await until(
      () => ((s.node.ledger.db.prepare('SELECT MIN(block_number) AS m FROM cursors WHERE chain_id = ?').get(SVM) as { m: number }).m > 0 ? true : undefined),
      'the indexer to read the vault again',
    );
    expect((s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM deposits WHERE chain_id = ?').get(SVM) as { n: number }).n).toBe(n);
    expect(s.node.ledger.deposits.get(`${SVM}:${failed}:0`)).toBeUndefined();
  });

  it('counts a Token-2022 transfer-fee deposit by what the vault received, not what the instruction says', async () => {
    const mint = svm().rpc.createMint(6, { transferFeeBps: 100 });
    const user = svm().keypair(1);
    svm().rpc.mintTo(mint, user.publicKey, 1_000_000_000n);
    svm().rpc.mintTo(mint, svm().vault, 0);
    const src = getAssociatedTokenAddressSync(mint, user.publicKey, true, TOKEN_2022_PROGRAM_ID);
    const dst = getAssociatedTokenAddressSync(mint, new PublicKey(svm().vault), true, TOKEN_2022_PROGRAM_ID);
    const { blockhash } = await conn.getLatestBlockhash('confirmed');
    const id = `0x${'ab'.repeat(32)}`;
    const tx = new Transaction({ feePayer: user.publicKey, recentBlockhash: blockhash }).add(
      createTransferCheckedInstruction(src, mint, dst, user.publicKey, 10_000_000n, 6, [], TOKEN_2022_PROGRAM_ID),
      memoInstruction(id),
    );
    tx.sign(user);
    const sig = await conn.sendRawTransaction(tx.serialize());
    const got = await until(
      () => conn.getTransaction(sig, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 }).then((t) => t ?? undefined),
      'the transaction',
    );
    const d = parseDepositTransaction(sig, got, svm().vault);
    expect(d).toMatchObject({ currency: mint.toBase58(), amount: '9900000', depositor: user.publicKey.toBase58(), order_ref: id });
  });

  it('after a restart, sends a recorded but unsent payout as its recorded bytes, never as a second transaction', async () => {
    const recipient = Keypair.generate().publicKey;
    const q = await ethToSol(recipient, '10000000000000000');
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const amount = BigInt(q.body.details.currencyOut.amount);
    const fill = await signSvmFill(conn, s.devnet.keys.svmSolver!, id, recipient, amount);
    const { sig } = fill;
    const ledger = s.node.ledger;
    recordSvmFill(ledger, SVM, id, recipient, amount, fill);
    await s.restartNode();
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    expect(done.txHashes).toEqual([sig]);
    expect(await lamports(recipient)).toBe(amount);
    expect(s.node.ledger.payouts.txsOf(`fill:${id}`).map((t) => [t.hash, t.state])).toEqual([[sig, 'included']]);
  });

  it('re-signs a payout whose blockhash expired without landing, and pays it once', async () => {
    // A fill the node recorded (as if signed just before a crash) but never broadcast, with a
    // blockhash that then expires: the node must find it absent and expired, and only then re-sign.
    const recipient = Keypair.generate().publicKey;
    const q = await ethToSol(recipient, '10000000000000000');
    expect(q.status).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const amount = BigInt(q.body.details.currencyOut.amount);
    const stale = await signSvmFill(conn, s.devnet.keys.svmSolver!, id, recipient, amount);
    const staleSig = stale.sig;
    const ledger = s.node.ledger;
    recordSvmFill(ledger, SVM, id, recipient, amount, stale);
    // ... but its blockhash expires before the node can send it (the rebroadcast is refused).
    svm().rpc.advanceSlots(260);
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    expect(done.txHashes[0]).not.toBe(staleSig);
    expect(await lamports(recipient)).toBe(amount);
    const txs = ledger.payouts.txsOf(`fill:${id}`);
    expect(txs.map((t) => t.state)).toEqual(['dropped', 'included']);
    expect((await conn.getSignatureStatuses([staleSig], { searchTransactionHistory: true })).value[0]).toBeNull();
  });

  it('charges the refund of an SPL deposit for the token account it may create: a depositor without one drains no rent', async () => {
    // The depositor is the owner of the token account whose balance fell: a plain (non-associated)
    // token account owned by a fresh key, so the refund must create that key's associated account.
    const funder = svm().keypair(3);
    const owner = Keypair.generate();
    const account = Keypair.generate();
    const mint = new PublicKey(svm().mint);
    const space = 165;
    const rent = await conn.getMinimumBalanceForRentExemption(space);
    await sendConfirmed(
      [
        SystemProgram.createAccount({ fromPubkey: funder.publicKey, newAccountPubkey: account.publicKey, lamports: rent, space, programId: TOKEN_PROGRAM_ID }),
        createInitializeAccount3Instruction(account.publicKey, mint, owner.publicKey),
        createTransferCheckedInstruction(ata(funder.publicKey), mint, account.publicKey, funder.publicKey, 5_000_000n, 6),
      ],
      funder,
      [account],
    );
    expect(await conn.getAccountInfo(ata(owner.publicKey), 'confirmed')).toBeNull();
    const solverBefore = await lamports(svm().solver);
    // An orphan deposit (its memo names no request): refunded to the depositor, the fresh key.
    const memo = `0x${'7e'.repeat(32)}`;
    await sendConfirmed(
      [createTransferCheckedInstruction(account.publicKey, mint, ata(svm().vault), owner.publicKey, 5_000_000n, 6), memoInstruction(memo)],
      funder,
      [owner],
    );
    const back = await until(async () => ((await tokens(owner.publicKey)) > 0n ? tokens(owner.publicKey) : undefined), 'the orphan refund');
    const deducted = 5_000_000n - back;
    // The deduction in token units (1 USD) as lamports at 150 USD/SOL: it covers what the solver spent.
    const spent = solverBefore - (await lamports(svm().solver));
    expect(spent).toBeGreaterThan(2_039_280n); // the token account was created by the refund
    expect(spent).toBeLessThanOrEqual((deducted * 10n ** 9n) / (150n * 10n ** 6n));
  });

  it('never fills SPL into a token account its quote did not charge the rent of: closed after the quote, the deposit is refunded', async () => {
    const funder = svm().keypair(3);
    const to = Keypair.generate();
    const mint = new PublicKey(svm().mint);
    await sendConfirmed([createAssociatedTokenAccountIdempotentInstruction(funder.publicKey, ata(to.publicKey), to.publicKey, mint)], funder);
    const q = await quote({
      user: evmUser(3),
      recipient: to.publicKey.toBase58(),
      originChainId: A,
      destinationChainId: SVM,
      originCurrency: usdc(A),
      destinationCurrency: svm().mint,
      amount: '20000000',
    });
    expect(q.status).toBe(200);
    // The account exists at quote time: no rent in the quote. The recipient then closes it.
    await sendConfirmed([createCloseAccountInstruction(ata(to.publicKey), funder.publicKey, to.publicKey)], funder, [to]);
    expect(await conn.getAccountInfo(ata(to.publicKey), 'confirmed')).toBeNull();
    const solverBefore = await lamports(svm().solver);
    const id = q.body.steps.at(-1).requestId;
    await executeSteps(s, q.body, 3);
    const d = await waitForStatus(s.url, id, ['success', 'refund'], 30_000);
    expect(d).toMatchObject({ status: 'refund', failReason: 'NEW_CALLDATA_INCLUDES_HIGHER_RENT_FEE' });
    expect(await conn.getAccountInfo(ata(to.publicKey), 'confirmed')).toBeNull();
    expect(await lamports(svm().solver)).toBe(solverBefore);
  });
});

// Signs (fee payer first) and sends instructions, and waits for them to be confirmed without error.
async function sendConfirmed(ixs: TransactionInstruction[], payer: Keypair, others: Keypair[] = []): Promise<string> {
  const { blockhash } = await conn.getLatestBlockhash('confirmed');
  const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(...ixs);
  tx.sign(payer, ...others);
  const sig = await conn.sendRawTransaction(tx.serialize(), { preflightCommitment: 'confirmed' });
  await until(async () => {
    const st = (await conn.getSignatureStatuses([sig])).value[0];
    if (st?.err) throw new Error(`transaction failed: ${JSON.stringify(st.err)}`);
    return st && st.confirmationStatus !== 'processed' ? true : undefined;
  }, 'the transaction to be confirmed');
  return sig;
}

describe('svmSolverKey', () => {
  it('is resolved like solverKey, as a Secret: base58 or a JSON byte array; a bad key is named, never echoed', async () => {
    const { buildConfig } = await import('../src/config/load.ts');
    const raw = { ...s.devnet.nodeConfig(), solverKey: { env: 'K' }, svmSolverKey: { env: 'S' } };
    const key = s.devnet.keys.svmSolver!;
    const k = s.devnet.keys.solver;
    const b58 = buildConfig(raw, { K: k, S: key });
    expect(String(b58.svmSolverKey)).toBe('[secret]');
    expect(b58.svmSolverKey!.reveal()).toBe(key);
    const json = buildConfig(raw, { K: k, S: JSON.stringify([...base58Decode(key)!]) });
    expect(JSON.stringify(json)).not.toContain(key);
    const bad = `${'x'.repeat(20)}notakey`;
    expect(() => buildConfig(raw, { K: k, S: bad })).toThrow(/svmSolverKey: /);
    try {
      buildConfig(raw, { K: k, S: bad });
    } catch (e) {
      expect((e as Error).message).not.toContain(bad);
    }
    expect(() => buildConfig({ ...raw, svmSolverKey: undefined }, { K: k })).toThrow(/svmSolverKey: is required/);
  });
});

// relay-node audit (issue 12, item 4) reads the SVM chain too: after the flows above every payout
// has exactly one successful signature and every solver transaction is a payout's; a paid payout
// with no transaction, or a transfer out of the solver the ledger does not explain, is named.
describe('relay-node audit of the SVM chain', () => {
  it('reconciles the flows above with no difference', async () => {
    const r = await auditStack(s);
    expect(r.notCovered.map((n) => n.chainId)).not.toContain(SVM);
    expect(r.chains.map((c) => c.chainId)).toContain(SVM);
    expect(r.differences).toEqual([]);
    // The balances are explained too: SOL and the SPL token, the solver's and the vault's, each moved.
    const c = r.chains.find((x) => x.chainId === SVM)!;
    const sol = c.currencies.find((x) => x.currency === SVM_NATIVE)!;
    const spl = c.currencies.find((x) => x.currency === svm().mint)!;
    for (const x of [sol, spl]) {
      expect(x.solver.actual).toBe(x.solver.expected);
      expect(x.depository.actual).toBe(x.depository.expected);
      expect(x.deposits).toBeGreaterThan(0n);
      expect(x.fills).toBeGreaterThan(0n);
      expect(x.solver.actual).not.toBe(x.solver.opening);
    }
    expect(spl.refunds).toBeGreaterThan(0n); // the short SPL deposit's refund, paid by the solver in the token
    // The two recipients' token accounts the fills created, and the fresh depositor's the orphan refund created.
    expect(sol.rent).toBe(2_039_280n * 3n);
    expect(sol.gas).toBeGreaterThan(sol.rent!);
  });

  it('names a paid payout with no transaction and a solver transfer the ledger does not explain', async () => {
    const solverKey = svmKeypair(s.devnet.keys.svmSolver!);
    const tx = new Transaction().add(SystemProgram.transfer({ fromPubkey: solverKey.publicKey, toPubkey: Keypair.generate().publicKey, lamports: 5_000_000 }));
    const sig = await conn.sendTransaction(tx, [solverKey]);
    // Confirmed, as the audit reads the chain (processed is not yet in its signature lists).
    await until(
      async () => (['confirmed', 'finalized'].includes((await conn.getSignatureStatus(sig)).value?.confirmationStatus ?? '') ? true : undefined),
      'the transfer confirmed',
    );
    const ledger = s.node.ledger;
    const forged = base58Encode(new Uint8Array(64).fill(7));
    ledger.tx(() => {
      ledger.payouts.insert({
        id: 'claim:forged-svm',
        kind: 'claim',
        request_id: null,
        deposit_id: null,
        chain_id: SVM,
        recipient: solverKey.publicKey.toBase58(),
        currency: SVM_NATIVE,
        amount: '1000',
        decided_at: Date.now(),
      });
      ledger.payouts.setState('claim:forged-svm', 'success', { txHash: forged as Hex });
    });
    const r = await runAudit(s.node.config, ledger);
    expect(r.differences).toContain(`chain ${SVM}: solver transaction ${sig} is not in the ledger`);
    expect(r.differences).toContain(
      `chain ${SVM}: payout claim:forged-svm is paid in the ledger but its transaction ${forged} is not a successful one on chain`,
    );
    // The transfer out of the solver is in no book: its amount and fee are named as unexplained.
    expect(r.differences.filter((d) => d.startsWith(`chain ${SVM}: solver SOL`))).toEqual([expect.stringMatching(/unexplained -5005000$/)]);
    expect(r.differences.filter((d) => /vault|solver USDC/.test(d))).toEqual([]);
  });
});
