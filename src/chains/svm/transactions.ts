// SVM transactions the node builds and reads, with @solana/web3.js and @solana/spl-token only:
//   - the user's deposit (a SOL or SPL transfer to the vault, with a Memo v2 carrying the order id),
//   - the node's payouts (SOL or SPL to a recipient, its token account created when missing, a memo),
//   - what a confirmed transaction deposited (read from balances before and after, never from the
//     instruction's claimed amount: a Token-2022 transfer fee leaves the vault less than it says).
import {
  ComputeBudgetProgram,
  PublicKey,
  SystemProgram,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
  type VersionedTransactionResponse,
} from '@solana/web3.js';
import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token';
import type { Hex } from 'viem';
import { SVM_NATIVE } from '../../kinds/svm.ts';
import type { ChainDeposit } from '../../ledger/deposits.ts';

export const MEMO_PROGRAM_ID = new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');
const MEMO_V1_PROGRAM = 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo';
/** The largest transaction a Solana node accepts (IPv6 MTU less headers), signatures included. */
export const PACKET_DATA_SIZE = 1232;
export const LAMPORTS_PER_SIGNATURE = 5000n;
/** The order ref of a transfer to the vault that names no order (refunded as an orphan). */
export const NO_ORDER: Hex = `0x${'0'.repeat(64)}`;

// Base58, transaction signatures and the solver's key: what an SVM chain spells (src/kinds/svm.ts).
export { base58Decode, base58Encode, parseSignature, parseSvmSecretKey, svmKeypair } from '../../kinds/svm.ts';

// ------------------------------------------------------------------------------------------ currencies

export type TokenProgramKind = 'spl-token' | 'token-2022';

export function tokenProgramId(kind: TokenProgramKind): PublicKey {
  return kind === 'token-2022' ? TOKEN_2022_PROGRAM_ID : TOKEN_PROGRAM_ID;
}

export const isSvmNative = (currency: string) => currency === SVM_NATIVE;

export function ataOf(owner: PublicKey, mint: PublicKey, programId: PublicKey): PublicKey {
  return getAssociatedTokenAddressSync(mint, owner, true, programId, ASSOCIATED_TOKEN_PROGRAM_ID);
}

// ------------------------------------------------------------------------------------------ memo

export function memoInstruction(text: string): TransactionInstruction {
  return new TransactionInstruction({ programId: MEMO_PROGRAM_ID, keys: [], data: Buffer.from(text, 'utf8') });
}

/** The memo a deposit or payout carries: the order id, 0x-prefixed lower-case hex. */
export function orderMemo(orderId: string): string {
  return orderId.toLowerCase();
}

export function parseOrderMemo(text: string): Hex | undefined {
  const m = /^(?:0x)?([0-9a-fA-F]{64})$/.exec(text.trim());
  return m ? (`0x${m[1]!.toLowerCase()}` as Hex) : undefined;
}

// ------------------------------------------------------------------------------------------ transfers

export interface MintInfo {
  mint: PublicKey;
  programId: PublicKey;
  decimals: number;
  /** Bytes of a token account for this mint (165 for SPL Token; more with Token-2022 extensions). */
  accountLen: number;
}

/**
 * The instructions that move `amount` of `currency` from `from` to `to` (an owner: SPL goes to its
 * associated token account, created first when `createAta`, paid for by `payer`).
 */
export function transferInstructions(p: {
  from: PublicKey;
  to: PublicKey;
  amount: bigint;
  mint?: MintInfo;
  createAta?: boolean;
  payer: PublicKey;
}): TransactionInstruction[] {
  if (!p.mint) return [SystemProgram.transfer({ fromPubkey: p.from, toPubkey: p.to, lamports: p.amount })];
  const { mint, programId, decimals } = p.mint;
  const source = ataOf(p.from, mint, programId);
  const dest = ataOf(p.to, mint, programId);
  const out: TransactionInstruction[] = [];
  if (p.createAta) out.push(createAssociatedTokenAccountIdempotentInstruction(p.payer, dest, p.to, mint, programId, ASSOCIATED_TOKEN_PROGRAM_ID));
  out.push(createTransferCheckedInstruction(source, mint, dest, p.from, p.amount, decimals, [], programId));
  return out;
}

/** A v0 transaction with an explicit compute budget (limit and price), unsigned. */
export function budgetedTransaction(p: {
  payer: PublicKey;
  blockhash: string;
  instructions: TransactionInstruction[];
  computeUnitLimit: number;
  microLamportsPerCu: bigint;
}): VersionedTransaction {
  const budget = [ComputeBudgetProgram.setComputeUnitLimit({ units: p.computeUnitLimit })];
  if (p.microLamportsPerCu > 0n) budget.push(ComputeBudgetProgram.setComputeUnitPrice({ microLamports: p.microLamportsPerCu }));
  const message = new TransactionMessage({
    payerKey: p.payer,
    recentBlockhash: p.blockhash,
    instructions: [...budget, ...p.instructions],
  }).compileToV0Message();
  return new VersionedTransaction(message);
}

/** The wire bytes of a signed transaction, or undefined when it exceeds the packet size. */
export function wireBytes(tx: VersionedTransaction): Uint8Array | undefined {
  let wire: Uint8Array;
  try {
    wire = tx.serialize();
  } catch {
    return undefined;
  }
  return wire.length > PACKET_DATA_SIZE ? undefined : wire;
}

/** What the priority part of a transaction's fee is: limit × price, in lamports (rounded up). */
export function priorityLamports(computeUnitLimit: number, microLamportsPerCu: bigint): bigint {
  return (BigInt(computeUnitLimit) * microLamportsPerCu + 999_999n) / 1_000_000n;
}

// ------------------------------------------------------------------------------------------ deposits

export type ParsedDeposit = ChainDeposit;

/**
 * What a confirmed transaction deposited to the vault, or undefined when it deposited nothing: the first of
 * parseDepositTransactions.
 */
export function parseDepositTransaction(
  signature: string,
  tx: VersionedTransactionResponse,
  vault: string,
  ignoreFrom: Set<string> = new Set(),
): ParsedDeposit | undefined {
  return parseDepositTransactions(signature, tx, vault, ignoreFrom)[0];
}

/**
 * What a confirmed transaction deposited to the vault, one deposit per currency (log_index 0, 1, ...: the SPL
 * currencies in the order of their balances, then SOL); none for a failed transaction, a transfer out of the vault, or
 * one from `ignoreFrom`. SPL: the increase of the token accounts the vault owns, from the token balances before and
 * after; SOL: the increase of the vault's lamports. The depositor is whoever's balance of that currency fell the most
 * (the fee payer's fee left out, so a depositFeePayer is never taken for the depositor). One transaction may move
 * several currencies to the vault: each is a deposit (read as one, the others stayed in the vault with none).
 */
export function parseDepositTransactions(
  signature: string,
  tx: VersionedTransactionResponse,
  vault: string,
  ignoreFrom: Set<string> = new Set(),
): ParsedDeposit[] {
  const meta = tx.meta;
  if (!meta || meta.err) return [];
  const message = tx.transaction.message;
  const keys = message.getAccountKeys({ accountKeysFromLookups: meta.loadedAddresses ?? undefined });
  const key = (i: number) => keys.get(i)?.toBase58();

  let order: Hex | undefined;
  for (const ix of message.compiledInstructions) {
    const program = key(ix.programIdIndex);
    if (program !== MEMO_PROGRAM_ID.toBase58() && program !== MEMO_V1_PROGRAM) continue;
    order = parseOrderMemo(Buffer.from(ix.data).toString('utf8'));
    if (order) break;
  }

  const found: { currency: string; amount: bigint; depositor: string | undefined }[] = [];
  const pre = meta.preTokenBalances ?? [];
  const post = meta.postTokenBalances ?? [];
  const tokenAmount = (list: typeof pre, i: number) => BigInt(list.find((b) => b.accountIndex === i)?.uiTokenAmount.amount ?? '0');
  for (const b of post) {
    if (b.owner !== vault) continue;
    const delta = BigInt(b.uiTokenAmount.amount) - tokenAmount(pre, b.accountIndex);
    if (delta <= 0n) continue;
    // Several token accounts of the vault of one mint: one deposit of what they received together.
    const same = found.find((f) => f.currency === b.mint);
    if (same) {
      same.amount += delta;
      continue;
    }
    // The sender: the other holder of the mint whose balance fell the most.
    let depositor: string | undefined;
    let most = 0n;
    const indexes = new Set([...pre, ...post].filter((x) => x.mint === b.mint && x.owner !== vault).map((x) => x.accountIndex));
    for (const i of indexes) {
      const fell = tokenAmount(pre, i) - tokenAmount(post, i);
      const owner = pre.find((x) => x.accountIndex === i)?.owner ?? post.find((x) => x.accountIndex === i)?.owner;
      if (fell > most && owner) {
        most = fell;
        depositor = owner;
      }
    }
    found.push({ currency: b.mint, amount: delta, depositor });
  }
  let v = -1;
  for (let i = 0; i < keys.length; i++) if (key(i) === vault) v = i;
  const lamports = v < 0 ? 0n : BigInt(meta.postBalances[v]! - meta.preBalances[v]!);
  if (lamports > 0n) {
    let depositor: string | undefined;
    let most = 0n;
    for (let i = 0; i < keys.length; i++) {
      if (i === v) continue;
      const fell = BigInt(meta.preBalances[i]! - meta.postBalances[i]!) - (i === 0 ? BigInt(meta.fee) : 0n);
      if (fell > most) {
        most = fell;
        depositor = key(i);
      }
    }
    found.push({ currency: SVM_NATIVE, amount: lamports, depositor });
  }
  const out: ParsedDeposit[] = [];
  for (const f of found) {
    const depositor = f.depositor ?? key(0);
    if (!depositor || ignoreFrom.has(depositor)) continue;
    out.push({
      tx_hash: signature as Hex,
      log_index: out.length,
      block_number: tx.slot,
      // getTransaction does not name the block's hash; the signature identifies the transaction.
      block_hash: signature as Hex,
      depositor,
      currency: f.currency,
      amount: f.amount.toString(),
      order_ref: order ?? NO_ORDER,
    });
  }
  return out;
}
