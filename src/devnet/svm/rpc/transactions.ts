// Transactions: decoded from the wire, signature-checked, simulated and executed in litesvm, recorded
// by slot and address; and the helper transactions (faucet transfers, mints) the devnet itself sends.

import { FailedTransactionMetadata } from 'litesvm';
import type { TransactionMetadata } from 'litesvm';
import { address as kitAddress, type Transaction as KitTransaction } from '@solana/kit';
import { Keypair, PublicKey, SystemProgram, Transaction, VersionedTransaction, type TransactionInstruction } from '@solana/web3.js';
import {
  ExtensionType,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  createAssociatedTokenAccountIdempotentInstruction,
  createInitializeMint2Instruction,
  createInitializeTransferFeeConfigInstruction,
  createMintToInstruction,
  getAssociatedTokenAddressSync,
  getMintLen,
} from '@solana/spl-token';
import { errText } from '../../../lib/errors.ts';
import type { Accounts, Acct } from './accounts.ts';
import type { ChainState } from './chainState.ts';
import { b64, FAUCET_LAMPORTS, fromB58, invalidParams, isZero, LAMPORTS_PER_SIGNATURE, readU32, RpcError, SYSTEM_PROGRAM, toB58, txDecoder } from './codec.ts';
import { computeBudget, type DecodedTx, memoOf, type TxRecord, verifyEd25519 } from './records.ts';
import { parseMint } from './tokenState.ts';
import { type TxErrJson, txErrorJson, txErrorText } from './txErrors.ts';

/** Options of createMint. */
export interface CreateMintOptions {
  token2022?: boolean;
  /** Token-2022 only: adds a TransferFeeConfig extension with this fee. */
  transferFeeBps?: number;
  /** Maximum transfer fee in base units (default: u64 max). */
  maxFee?: bigint;
  /** Mint authority (default: the server's `authority` keypair). */
  authority?: Keypair;
}

/** Decoding, checking, simulating and executing transactions; `afterTransaction` hears of each one recorded. */
export function createTransactions(chain: ChainState, accounts: Accounts, afterTransaction: (rec: TxRecord) => void) {
  const { svm, records, bySlot, byAddress, slotTimes, blockhashBySlot, authority, faucet } = chain;
  const { getAcct, snapshot } = accounts;
  // ------------------------------------------------------------------ transactions

  function decodeTx(wire: Uint8Array): DecodedTx {
    let vtx: VersionedTransaction;
    let kitTx: KitTransaction;
    try {
      vtx = VersionedTransaction.deserialize(wire);
      kitTx = txDecoder.decode(wire) as KitTransaction;
    } catch (e) {
      throw invalidParams(`invalid transaction: failed to deserialize VersionedTransaction: ${errText(e)}`);
    }
    const msg = vtx.message;
    const staticKeys = msg.staticAccountKeys.map((k) => k.toBase58());
    const loaded = { writable: [] as string[], readonly: [] as string[] };
    for (const l of msg.addressTableLookups) {
      const alt = getAcct(l.accountKey.toBase58());
      if (!alt) throw new RpcError(-32602, "invalid transaction: Transaction loads an address table account that doesn't exist");
      const addrs: string[] = [];
      for (let o = 56; o + 32 <= alt.data.length; o += 32) addrs.push(toB58(alt.data.subarray(o, o + 32)));
      for (const i of l.writableIndexes) {
        const a = addrs[i];
        if (!a) throw invalidParams('invalid transaction: Transaction address table lookup uses an invalid index');
        loaded.writable.push(a);
      }
      for (const i of l.readonlyIndexes) {
        const a = addrs[i];
        if (!a) throw invalidParams('invalid transaction: Transaction address table lookup uses an invalid index');
        loaded.readonly.push(a);
      }
    }
    const keys = [...staticKeys, ...loaded.writable, ...loaded.readonly];
    const writable = keys.map((_, i) => msg.isAccountWritable(i));
    const signer = keys.map((_, i) => msg.isAccountSigner(i));
    const instructions = msg.compiledInstructions.map((ix) => ({
      programIdIndex: ix.programIdIndex,
      accounts: [...ix.accountKeyIndexes],
      data: new Uint8Array(ix.data),
    }));
    for (const ix of instructions) {
      if (ix.programIdIndex >= keys.length || ix.accounts.some((a) => a >= keys.length)) {
        throw invalidParams('invalid transaction: Transaction failed to sanitize accounts offsets correctly');
      }
    }
    const programIds = instructions.map((ix) => keys[ix.programIdIndex]!);
    const { price, limit } = computeBudget(programIds, instructions);
    const numSigs = msg.header.numRequiredSignatures;
    const priorityFee = (price * BigInt(limit) + 999_999n) / 1_000_000n;
    const signatures = vtx.signatures.map((s) => toB58(s));
    return {
      wire,
      vtx,
      kitTx,
      signature: signatures[0] ?? '',
      signatures,
      version: msg.version as 'legacy' | 0,
      staticKeys,
      loaded,
      keys,
      writable,
      signer,
      recentBlockhash: msg.recentBlockhash,
      instructions,
      cuPrice: price,
      cuLimit: limit,
      fee: LAMPORTS_PER_SIGNATURE * numSigs + Number(priorityFee),
      memo: memoOf(programIds, instructions),
    };
  }

  function verifySignatures(tx: DecodedTx): boolean {
    const msgBytes = tx.vtx.message.serialize();
    const n = tx.vtx.message.header.numRequiredSignatures;
    if (tx.vtx.signatures.length < n) return false;
    for (let i = 0; i < n; i++) {
      if (!verifyEd25519(fromB58(tx.staticKeys[i]!), msgBytes, tx.vtx.signatures[i]!)) return false;
    }
    return true;
  }

  function isDurableNonceTx(tx: DecodedTx): boolean {
    const ix = tx.instructions[0];
    return !!ix && tx.keys[ix.programIdIndex] === SYSTEM_PROGRAM && ix.data.length >= 4 && readU32(ix.data, 0) === 4;
  }

  interface SimResult {
    err: TxErrJson | null;
    logs: string[];
    unitsConsumed: number;
    returnData: TxRecord['returnData'];
    innerInstructions: TxRecord['innerInstructions'];
    postAccounts: Map<string, Acct>;
  }

  function metaExtras(meta: TransactionMetadata) {
    const rd = meta.returnData();
    const rdProgram = rd.programId();
    const rdData = rd.data();
    const returnData: TxRecord['returnData'] = rdData.length > 0 || !isZero(rdProgram) ? { programId: toB58(rdProgram), data: [b64(rdData), 'base64'] } : null;
    const innerInstructions: TxRecord['innerInstructions'] = [];
    meta.innerInstructions().forEach((list, index) => {
      if (list.length === 0) return;
      innerInstructions.push({
        index,
        instructions: list.map((ii) => {
          const ci = ii.instruction();
          return {
            programIdIndex: ci.programIdIndex(),
            accounts: [...ci.accounts()],
            data: toB58(ci.data()),
            stackHeight: ii.stackHeight(),
          };
        }),
      });
    });
    return { returnData, innerInstructions };
  }

  function simulate(tx: DecodedTx, sigVerify: boolean): SimResult {
    if (!sigVerify) svm.withSigverify(false);
    try {
      let r;
      try {
        r = svm.simulateTransaction(tx.kitTx);
      } catch {
        return { err: 'SignatureFailure', logs: [], unitsConsumed: 0, returnData: null, innerInstructions: [], postAccounts: new Map() };
      }
      if (r instanceof FailedTransactionMetadata) {
        const meta = r.meta();
        const ex = metaExtras(meta);
        return {
          err: txErrorJson(r.err()),
          logs: meta.logs(),
          unitsConsumed: Number(meta.computeUnitsConsumed()),
          ...ex,
          postAccounts: new Map(),
        };
      }
      const meta = r.meta();
      const postAccounts = new Map<string, Acct>();
      for (const a of r.postAccounts()) {
        postAccounts.set(a.address, { lamports: Number(a.lamports), owner: a.programAddress, data: a.data as Uint8Array, executable: a.executable });
      }
      return { err: null, logs: meta.logs(), unitsConsumed: Number(meta.computeUnitsConsumed()), ...metaExtras(meta), postAccounts };
    } finally {
      if (!sigVerify) svm.withSigverify(true);
    }
  }

  function simFailure(sim: Pick<SimResult, 'err' | 'logs' | 'unitsConsumed' | 'returnData'>): RpcError {
    return new RpcError(-32002, `Transaction simulation failed: ${txErrorText(sim.err!)}`, {
      accounts: null,
      err: sim.err,
      innerInstructions: null,
      loadedAccountsDataSize: 0,
      logs: sim.logs,
      replacementBlockhash: null,
      returnData: sim.returnData,
      unitsConsumed: sim.unitsConsumed,
    });
  }

  /** Executes a transaction; returns the signature. Throws RpcError for rejected submissions. */
  function submit(wire: Uint8Array, o: { skipPreflight?: boolean } = {}): string {
    const tx = decodeTx(wire);
    if (!verifySignatures(tx)) throw new RpcError(-32003, 'Transaction signature verification failure');
    if (records.has(tx.signature)) {
      if (!o.skipPreflight) {
        throw simFailure({ err: 'AlreadyProcessed', logs: [], unitsConsumed: 0, returnData: null });
      }
      return tx.signature;
    }
    if (!chain.blockhashValid(tx.recentBlockhash) && !isDurableNonceTx(tx)) {
      if (!o.skipPreflight) throw simFailure({ err: 'BlockhashNotFound', logs: [], unitsConsumed: 0, returnData: null });
      return tx.signature; // dropped by the cluster, like a real one would
    }
    if (!o.skipPreflight) {
      const sim = simulate(tx, true);
      if (sim.err) throw simFailure(sim);
    }
    const pre = snapshot(tx.keys);
    let res: TransactionMetadata | FailedTransactionMetadata;
    try {
      res = svm.sendTransaction(tx.kitTx);
    } catch {
      throw new RpcError(-32003, 'Transaction signature verification failure');
    }
    const post = snapshot(tx.keys);
    let err: TxErrJson | null = null;
    let meta: TransactionMetadata;
    if (res instanceof FailedTransactionMetadata) {
      err = txErrorJson(res.err());
      meta = res.meta();
      const charged = post.balances[0]! < pre.balances[0]!;
      if (!charged && typeof err === 'string') {
        // A load-time failure: the cluster drops it, nothing lands.
        if (!o.skipPreflight) throw simFailure({ err, logs: meta.logs(), unitsConsumed: 0, returnData: null });
        return tx.signature;
      }
    } else {
      meta = res;
    }
    const ex = metaExtras(meta);
    const list = bySlot.get(chain.slot) ?? [];
    const rec: TxRecord = {
      tx,
      slot: chain.slot,
      blockTime: slotTimes.get(chain.slot) ?? Math.floor(Date.now() / 1000),
      index: list.length,
      preBalances: pre.balances,
      postBalances: post.balances,
      preTokenBalances: pre.tokens,
      postTokenBalances: post.tokens,
      logs: meta.logs(),
      fee: tx.fee,
      err,
      computeUnitsConsumed: Number(meta.computeUnitsConsumed()),
      innerInstructions: ex.innerInstructions,
      returnData: ex.returnData,
    };
    list.push(rec);
    bySlot.set(chain.slot, list);
    records.set(tx.signature, rec);
    chain.txCount++;
    for (const k of new Set(tx.keys)) {
      const l = byAddress.get(k) ?? [];
      l.push(rec);
      byAddress.set(k, l);
    }
    afterTransaction(rec);
    return tx.signature;
  }

  // Builds, signs and submits a helper transaction (fresh blockhash if it would duplicate a signature).
  function runHelperTx(ixs: TransactionInstruction[], signers: Keypair[]): string {
    for (let attempt = 0; attempt < 3; attempt++) {
      const tx = new Transaction({ feePayer: signers[0]!.publicKey, recentBlockhash: blockhashBySlot.get(chain.slot)! });
      tx.add(...ixs);
      tx.sign(...signers);
      const sig = toB58(tx.signature!);
      if (records.has(sig)) {
        chain.newBlockhash(); // another blockhash for the current slot
        continue;
      }
      return submit(tx.serialize());
    }
    throw new Error('could not build a unique helper transaction');
  }

  function ensureFaucet() {
    const bal = svm.getBalance(kitAddress(faucet.publicKey.toBase58())) ?? 0n;
    if (bal < FAUCET_LAMPORTS / 10n) {
      svm.setAccount({
        address: kitAddress(faucet.publicKey.toBase58()),
        lamports: FAUCET_LAMPORTS as never,
        programAddress: kitAddress(SYSTEM_PROGRAM),
        executable: false,
        space: 0n,
        data: new Uint8Array(0),
      });
    }
  }

  function airdrop(pubkey: PublicKey | string, lamports: number | bigint): string {
    ensureFaucet();
    const to = new PublicKey(pubkey);
    return runHelperTx([SystemProgram.transfer({ fromPubkey: faucet.publicKey, toPubkey: to, lamports: BigInt(lamports) })], [faucet]);
  }

  function createMint(decimals: number, o: CreateMintOptions = {}): PublicKey {
    ensureFaucet();
    const mintAuthority = o.authority ?? authority;
    const mint = Keypair.generate();
    const programId = o.token2022 || o.transferFeeBps !== undefined ? TOKEN_2022_PROGRAM_ID : TOKEN_PROGRAM_ID;
    const exts = o.transferFeeBps !== undefined ? [ExtensionType.TransferFeeConfig] : [];
    const space = getMintLen(exts);
    const ixs: TransactionInstruction[] = [
      SystemProgram.createAccount({
        fromPubkey: faucet.publicKey,
        newAccountPubkey: mint.publicKey,
        lamports: Number(svm.minimumBalanceForRentExemption(BigInt(space))),
        space,
        programId,
      }),
    ];
    if (o.transferFeeBps !== undefined) {
      ixs.push(
        createInitializeTransferFeeConfigInstruction(
          mint.publicKey,
          mintAuthority.publicKey,
          mintAuthority.publicKey,
          o.transferFeeBps,
          o.maxFee ?? 18446744073709551615n,
          programId,
        ),
      );
    }
    ixs.push(createInitializeMint2Instruction(mint.publicKey, decimals, mintAuthority.publicKey, null, programId));
    runHelperTx(ixs, [faucet, mint]);
    return mint.publicKey;
  }

  function mintTo(mintIn: PublicKey | string, ownerIn: PublicKey | string, amount: number | bigint, auth?: Keypair): PublicKey {
    ensureFaucet();
    const mint = new PublicKey(mintIn);
    const owner = new PublicKey(ownerIn);
    const m = getAcct(mint.toBase58());
    if (!m || !parseMint(m.owner, m.data)) throw new Error(`not a mint: ${mint.toBase58()}`);
    const programId = new PublicKey(m.owner);
    const ata = getAssociatedTokenAddressSync(mint, owner, true, programId);
    const mintAuthority = auth ?? authority;
    const signers = mintAuthority.publicKey.equals(faucet.publicKey) ? [faucet] : [faucet, mintAuthority];
    runHelperTx(
      [
        createAssociatedTokenAccountIdempotentInstruction(faucet.publicKey, ata, owner, mint, programId),
        createMintToInstruction(mint, ata, mintAuthority.publicKey, BigInt(amount), [], programId),
      ],
      signers,
    );
    return ata;
  }

  return { decodeTx, verifySignatures, isDurableNonceTx, simulate, simFailure, submit, airdrop, createMint, mintTo };
}

/** What createTransactions returns. */
export type Transactions = ReturnType<typeof createTransactions>;
