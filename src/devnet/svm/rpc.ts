// A local Solana JSON-RPC endpoint (HTTP + a small WebSocket pub/sub) in front of an in-process LiteSVM.
//
// The node only talks to SVM chains through @solana/web3.js `Connection`, so the devnet and tests run this
// server and hand its URL to the node. It serves the methods the node and wallets use with Solana's response
// shapes. Slots advance on a timer; each slot gets a fresh blockhash and the last 150 stay valid.
// Every executed transaction is recorded so history queries (getTransaction, getSignaturesForAddress,
// getSignatureStatuses) can be answered.
//
// WebSocket: web3.js confirms transactions through `signatureSubscribe` on the RPC port + 1, so the server
// also accepts WebSocket upgrades on its own port and (when it can bind it) on port + 1.

import http from 'node:http';
import crypto from 'node:crypto';
import type { Duplex } from 'node:stream';
import { LiteSVM, Clock, FailedTransactionMetadata } from 'litesvm';
import type { TransactionMetadata } from 'litesvm';
import {
  address as kitAddress,
  getBase58Decoder,
  getBase58Encoder,
  getTransactionDecoder,
  type Transaction as KitTransaction,
} from '@solana/kit';
import {
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  VersionedMessage,
  VersionedTransaction,
  type TransactionInstruction,
} from '@solana/web3.js';
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
import { errText, RelayNodeError } from '../../lib/errors.ts';

// ---------------------------------------------------------------------------------------------------------
// Constants

export const SYSTEM_PROGRAM = '11111111111111111111111111111111';
export const TOKEN_PROGRAM = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
export const TOKEN_2022_PROGRAM = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb';
export const ATA_PROGRAM = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL';
export const MEMO_V2_PROGRAM = 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr';
export const MEMO_V1_PROGRAM = 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo';
export const COMPUTE_BUDGET_PROGRAM = 'ComputeBudget111111111111111111111111111111';

const LAMPORTS_PER_SIGNATURE = 5000;
/** Blocks a blockhash stays valid for (Solana's MAX_PROCESSING_AGE). */
const MAX_PROCESSING_AGE = 150;
/** Slots after which a transaction counts as finalized. */
const FINALIZE_DEPTH = 32;
const SLOTS_PER_EPOCH = 432_000;
const U64_MAX_AS_NUMBER = 18446744073709551615;
const FAUCET_LAMPORTS = 1_000_000_000_000_000n; // 1M SOL, well inside Number's safe range
const SOLANA_CORE_VERSION = '2.2.7';
const FEATURE_SET = 3294202862;

/** Programs whose instructions reserve 3,000 CUs by default (the rest reserve 200,000). */
const BUILTIN_PROGRAMS = new Set([
  SYSTEM_PROGRAM,
  COMPUTE_BUDGET_PROGRAM,
  'AddressLookupTab1e1111111111111111111111111',
  'Vote111111111111111111111111111111111111111',
  'Stake11111111111111111111111111111111111111',
  'Config1111111111111111111111111111111111111',
  'BPFLoader1111111111111111111111111111111111',
  'BPFLoader2111111111111111111111111111111111',
  'BPFLoaderUpgradeab1e11111111111111111111111',
  'LoaderV411111111111111111111111111111111111',
  'Ed25519SigVerify111111111111111111111111111',
  'KeccakSecp256k11111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111',
]);

// The order of litesvm's `TransactionErrorFieldless` and `InstructionErrorFieldless` const enums.
const TX_ERROR_NAMES = [
  'AccountInUse', 'AccountLoadedTwice', 'AccountNotFound', 'ProgramAccountNotFound', 'InsufficientFundsForFee',
  'InvalidAccountForFee', 'AlreadyProcessed', 'BlockhashNotFound', 'CallChainTooDeep', 'MissingSignatureForFee',
  'InvalidAccountIndex', 'SignatureFailure', 'InvalidProgramForExecution', 'SanitizeFailure', 'ClusterMaintenance',
  'AccountBorrowOutstanding', 'WouldExceedMaxBlockCostLimit', 'UnsupportedVersion', 'InvalidWritableAccount',
  'WouldExceedMaxAccountCostLimit', 'WouldExceedAccountDataBlockLimit', 'TooManyAccountLocks',
  'AddressLookupTableNotFound', 'InvalidAddressLookupTableOwner', 'InvalidAddressLookupTableData',
  'InvalidAddressLookupTableIndex', 'InvalidRentPayingAccount', 'WouldExceedMaxVoteCostLimit',
  'WouldExceedAccountDataTotalLimit', 'MaxLoadedAccountsDataSizeExceeded', 'ResanitizationNeeded',
  'InvalidLoadedAccountsDataSizeLimit', 'UnbalancedTransaction', 'ProgramCacheHitMaxLimit', 'CommitCancelled',
];
const IX_ERROR_NAMES = [
  'GenericError', 'InvalidArgument', 'InvalidInstructionData', 'InvalidAccountData', 'AccountDataTooSmall',
  'InsufficientFunds', 'IncorrectProgramId', 'MissingRequiredSignature', 'AccountAlreadyInitialized',
  'UninitializedAccount', 'UnbalancedInstruction', 'ModifiedProgramId', 'ExternalAccountLamportSpend',
  'ExternalAccountDataModified', 'ReadonlyLamportChange', 'ReadonlyDataModified', 'DuplicateAccountIndex',
  'ExecutableModified', 'RentEpochModified', 'NotEnoughAccountKeys', 'AccountDataSizeChanged',
  'AccountNotExecutable', 'AccountBorrowFailed', 'AccountBorrowOutstanding', 'DuplicateAccountOutOfSync',
  'InvalidError', 'ExecutableDataModified', 'ExecutableLamportChange', 'ExecutableAccountNotRentExempt',
  'UnsupportedProgramId', 'CallDepth', 'MissingAccount', 'ReentrancyNotAllowed', 'MaxSeedLengthExceeded',
  'InvalidSeeds', 'InvalidRealloc', 'ComputationalBudgetExceeded', 'PrivilegeEscalation',
  'ProgramEnvironmentSetupFailure', 'ProgramFailedToComplete', 'ProgramFailedToCompile', 'Immutable',
  'IncorrectAuthority', 'AccountNotRentExempt', 'InvalidAccountOwner', 'ArithmeticOverflow', 'UnsupportedSysvar',
  'IllegalOwner', 'MaxAccountsDataAllocationsExceeded', 'MaxAccountsExceeded', 'MaxInstructionTraceLengthExceeded',
  'BuiltinProgramsMustConsumeComputeUnits', 'BorshIoError',
];
const TX_ERROR_TEXT: Record<string, string> = {
  AccountInUse: 'Account in use',
  AccountLoadedTwice: 'Account loaded twice',
  AccountNotFound: 'Attempt to debit an account but found no record of a prior credit.',
  ProgramAccountNotFound: 'Attempt to load a program that does not exist',
  InsufficientFundsForFee: 'Insufficient funds for fee',
  InvalidAccountForFee: 'This account may not be used to pay transaction fees',
  AlreadyProcessed: 'This transaction has already been processed',
  BlockhashNotFound: 'Blockhash not found',
  SignatureFailure: 'Transaction did not pass signature verification',
  InvalidProgramForExecution: 'This program may not be used for executing instructions',
  SanitizeFailure: 'Transaction failed to sanitize accounts offsets correctly',
  UnsupportedVersion: 'Transaction version is unsupported',
  AddressLookupTableNotFound: 'Transaction loads an address table account that doesn\'t exist',
};
const IX_ERROR_TEXT: Record<string, string> = {
  GenericError: 'generic instruction error',
  InvalidArgument: 'invalid program argument',
  InvalidInstructionData: 'invalid instruction data',
  InvalidAccountData: 'invalid account data for instruction',
  AccountDataTooSmall: 'account data too small for instruction',
  InsufficientFunds: 'insufficient funds for instruction',
  IncorrectProgramId: 'incorrect program id for instruction',
  MissingRequiredSignature: 'missing required signature for instruction',
  AccountAlreadyInitialized: 'instruction requires an uninitialized account',
  UninitializedAccount: 'instruction requires an initialized account',
  ComputationalBudgetExceeded: 'Computational budget exceeded',
  ProgramFailedToComplete: 'Program failed to complete',
  IllegalOwner: 'Provided owner is not allowed',
};

// ---------------------------------------------------------------------------------------------------------
// Small helpers

const b58enc = getBase58Encoder(); // string -> bytes
const b58dec = getBase58Decoder(); // bytes -> string
const toB58 = (bytes: Uint8Array): string => b58dec.decode(bytes);
const fromB58 = (s: string): Uint8Array => new Uint8Array(b58enc.encode(s));
const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
const txDecoder = getTransactionDecoder();

export class RpcError extends RelayNodeError {
  override name = 'RpcError';
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}
const invalidParams = (msg: string) => new RpcError(-32602, msg);

type Json = unknown;
type Commitment = 'processed' | 'confirmed' | 'finalized';
type Cfg = Record<string, unknown>;

function parsePubkey(v: unknown): string {
  if (typeof v !== 'string') throw invalidParams('Invalid param: Invalid');
  try {
    const k = fromB58(v);
    if (k.length !== 32) throw new Error('len');
  } catch {
    throw invalidParams('Invalid param: Invalid');
  }
  return v;
}

function readU64(d: Uint8Array, off: number): bigint {
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).readBigUInt64LE(off);
}
function readU32(d: Uint8Array, off: number): number {
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).readUInt32LE(off);
}
function readU16(d: Uint8Array, off: number): number {
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).readUInt16LE(off);
}
function readCOptionKey(d: Uint8Array, off: number): string | null {
  return readU32(d, off) === 1 ? toB58(d.subarray(off + 4, off + 36)) : null;
}
function isZero(d: Uint8Array): boolean {
  return d.every((b) => b === 0);
}

/** Solana's `real_number_string_trimmed`. */
function uiAmountString(amount: bigint, decimals: number): string {
  if (decimals === 0) return amount.toString();
  const s = amount.toString().padStart(decimals + 1, '0');
  const int = s.slice(0, s.length - decimals);
  const frac = s.slice(s.length - decimals).replace(/0+$/, '');
  return frac ? `${int}.${frac}` : int;
}
export interface UiTokenAmount {
  amount: string;
  decimals: number;
  uiAmount: number | null;
  uiAmountString: string;
}
function uiTokenAmount(amount: bigint, decimals: number): UiTokenAmount {
  const s = uiAmountString(amount, decimals);
  return { amount: amount.toString(), decimals, uiAmount: Number(s), uiAmountString: s };
}

function normCommitment(c: unknown): Commitment {
  if (c === undefined || c === null) return 'finalized';
  switch (c) {
    case 'processed':
    case 'recent':
      return 'processed';
    case 'confirmed':
    case 'single':
    case 'singleGossip':
      return 'confirmed';
    case 'finalized':
    case 'max':
    case 'root':
      return 'finalized';
    default:
      throw invalidParams(`Invalid commitment: ${String(c)}`);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Token account / mint parsing

interface TokenAccountState {
  mint: string;
  owner: string;
  amount: bigint;
  delegate: string | null;
  state: number; // 1 initialized, 2 frozen
  isNative: bigint | null;
  delegatedAmount: bigint;
  closeAuthority: string | null;
  extensions: Uint8Array | null;
}
interface MintState {
  mintAuthority: string | null;
  supply: bigint;
  decimals: number;
  isInitialized: boolean;
  freezeAuthority: string | null;
  extensions: Uint8Array | null;
}

function isTokenProgram(owner: string): boolean {
  return owner === TOKEN_PROGRAM || owner === TOKEN_2022_PROGRAM;
}

function parseTokenAccount(owner: string, data: Uint8Array): TokenAccountState | null {
  if (!isTokenProgram(owner) || data.length < 165) return null;
  if (data.length > 165 && (owner !== TOKEN_2022_PROGRAM || data[165] !== 2)) return null;
  const state = data[108]!;
  if (state === 0) return null;
  return {
    mint: toB58(data.subarray(0, 32)),
    owner: toB58(data.subarray(32, 64)),
    amount: readU64(data, 64),
    delegate: readCOptionKey(data, 72),
    state,
    isNative: readU32(data, 109) === 1 ? readU64(data, 113) : null,
    delegatedAmount: readU64(data, 121),
    closeAuthority: readCOptionKey(data, 129),
    extensions: data.length > 166 ? data.subarray(166) : null,
  };
}

function parseMint(owner: string, data: Uint8Array): MintState | null {
  if (!isTokenProgram(owner)) return null;
  if (data.length !== 82 && !(owner === TOKEN_2022_PROGRAM && data.length > 165 && data[165] === 1)) return null;
  return {
    mintAuthority: readCOptionKey(data, 0),
    supply: readU64(data, 36),
    decimals: data[44]!,
    isInitialized: data[45] === 1,
    freezeAuthority: readCOptionKey(data, 46),
    extensions: data.length > 166 ? data.subarray(166) : null,
  };
}

const EXTENSION_NAMES: Record<number, string> = {
  1: 'transferFeeConfig', 2: 'transferFeeAmount', 3: 'mintCloseAuthority', 4: 'confidentialTransferMint',
  5: 'confidentialTransferAccount', 6: 'defaultAccountState', 7: 'immutableOwner', 8: 'memoTransfer',
  9: 'nonTransferable', 10: 'interestBearingConfig', 11: 'cpiGuard', 12: 'permanentDelegate',
  13: 'nonTransferableAccount', 14: 'transferHook', 15: 'transferHookAccount', 18: 'metadataPointer',
  19: 'tokenMetadata', 20: 'groupPointer', 21: 'tokenGroup', 22: 'groupMemberPointer', 23: 'tokenGroupMember',
};

function optKey(d: Uint8Array): string | null {
  return isZero(d) ? null : toB58(d);
}

function parseExtensions(tlv: Uint8Array | null): Json[] | undefined {
  if (!tlv) return undefined;
  const out: Json[] = [];
  let off = 0;
  while (off + 4 <= tlv.length) {
    const type = readU16(tlv, off);
    const len = readU16(tlv, off + 2);
    const v = tlv.subarray(off + 4, off + 4 + len);
    off += 4 + len;
    if (type === 0) break;
    const name = EXTENSION_NAMES[type];
    const fee = (o: number) => ({
      epoch: Number(readU64(v, o)),
      maximumFee: Number(readU64(v, o + 8)),
      transferFeeBasisPoints: readU16(v, o + 16),
    });
    switch (type) {
      case 1:
        out.push({
          extension: name,
          state: {
            transferFeeConfigAuthority: optKey(v.subarray(0, 32)),
            withdrawWithheldAuthority: optKey(v.subarray(32, 64)),
            withheldAmount: Number(readU64(v, 64)),
            olderTransferFee: fee(72),
            newerTransferFee: fee(90),
          },
        });
        break;
      case 2:
        out.push({ extension: name, state: { withheldAmount: Number(readU64(v, 0)) } });
        break;
      case 3:
        out.push({ extension: name, state: { closeAuthority: optKey(v.subarray(0, 32)) } });
        break;
      case 7:
      case 9:
      case 13:
        out.push({ extension: name });
        break;
      case 8:
        out.push({ extension: name, state: { requireIncomingTransferMemos: v[0] === 1 } });
        break;
      case 12:
        out.push({ extension: name, state: { delegate: optKey(v.subarray(0, 32)) } });
        break;
      case 18:
        out.push({
          extension: name,
          state: { authority: optKey(v.subarray(0, 32)), metadataAddress: optKey(v.subarray(32, 64)) },
        });
        break;
      default:
        out.push({ extension: 'unparseableExtension' });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Transaction errors

type TxErrJson = string | Record<string, Json>;

function instructionErrorJson(e: unknown): Json {
  if (typeof e === 'number') return IX_ERROR_NAMES[e] ?? `InstructionError${e}`;
  const o = e as { code?: number; msg?: string };
  if (typeof o.code === 'number') return { Custom: o.code };
  if (typeof o.msg === 'string') return { BorshIoError: o.msg };
  return 'GenericError';
}

function txErrorJson(err: unknown): TxErrJson {
  if (typeof err === 'number') return TX_ERROR_NAMES[err] ?? `TransactionError${err}`;
  const o = err as { index?: number; accountIndex?: number; err?: () => unknown; constructor?: { name?: string } };
  if (typeof o.index === 'number' && typeof o.err === 'function') return { InstructionError: [o.index, instructionErrorJson(o.err())] };
  if (typeof o.index === 'number') return { DuplicateInstruction: o.index };
  if (typeof o.accountIndex === 'number') {
    const name = o.constructor?.name?.includes('Restricted') ? 'ProgramExecutionTemporarilyRestricted' : 'InsufficientFundsForRent';
    return { [name]: { account_index: o.accountIndex } };
  }
  return 'SanitizeFailure';
}

function txErrorText(err: TxErrJson): string {
  if (typeof err === 'string') return TX_ERROR_TEXT[err] ?? err;
  if ('InstructionError' in err) {
    const [i, ie] = err.InstructionError as [number, Json];
    let t: string;
    if (typeof ie === 'string') t = IX_ERROR_TEXT[ie] ?? ie;
    else if (ie && typeof ie === 'object' && 'Custom' in ie) t = `custom program error: 0x${(ie as { Custom: number }).Custom.toString(16)}`;
    else t = JSON.stringify(ie);
    return `Error processing Instruction ${i}: ${t}`;
  }
  if ('InsufficientFundsForRent' in err) {
    return `Transaction results in an account (${(err.InsufficientFundsForRent as { account_index: number }).account_index}) with insufficient funds for rent`;
  }
  return JSON.stringify(err);
}

// ---------------------------------------------------------------------------------------------------------
// Decoded transactions and records

interface DecodedTx {
  wire: Uint8Array;
  vtx: VersionedTransaction;
  kitTx: KitTransaction;
  signature: string;
  signatures: string[];
  version: 'legacy' | 0;
  staticKeys: string[];
  loaded: { writable: string[]; readonly: string[] };
  /** static keys, then loaded writable, then loaded readonly */
  keys: string[];
  writable: boolean[];
  signer: boolean[];
  recentBlockhash: string;
  instructions: { programIdIndex: number; accounts: number[]; data: Uint8Array }[];
  cuPrice: bigint;
  cuLimit: number;
  fee: number;
  memo: string | null;
}

interface TokenBalance {
  accountIndex: number;
  mint: string;
  owner: string;
  programId: string;
  uiTokenAmount: UiTokenAmount;
}

interface TxRecord {
  tx: DecodedTx;
  slot: number;
  blockTime: number;
  index: number;
  preBalances: number[];
  postBalances: number[];
  preTokenBalances: TokenBalance[];
  postTokenBalances: TokenBalance[];
  logs: string[];
  fee: number;
  err: TxErrJson | null;
  computeUnitsConsumed: number;
  innerInstructions: { index: number; instructions: { programIdIndex: number; accounts: number[]; data: string; stackHeight: number }[] }[];
  returnData: { programId: string; data: [string, 'base64'] } | null;
}

function computeBudget(programIds: string[], instructions: DecodedTx['instructions']): { price: bigint; limit: number } {
  let price = 0n;
  let limit: number | null = null;
  let defaultLimit = 0;
  instructions.forEach((ix, i) => {
    const pid = programIds[i]!;
    if (pid === COMPUTE_BUDGET_PROGRAM) {
      const d = ix.data;
      if (d[0] === 2 && d.length >= 5) limit = readU32(d, 1);
      if (d[0] === 3 && d.length >= 9) price = readU64(d, 1);
    }
    defaultLimit += BUILTIN_PROGRAMS.has(pid) ? 3_000 : 200_000;
  });
  return { price, limit: Math.min(limit ?? defaultLimit, 1_400_000) };
}

function memoOf(programIds: string[], instructions: DecodedTx['instructions']): string | null {
  const memos: string[] = [];
  instructions.forEach((ix, i) => {
    const pid = programIds[i];
    if (pid === MEMO_V2_PROGRAM || pid === MEMO_V1_PROGRAM) {
      memos.push(`[${ix.data.length}] ${Buffer.from(ix.data).toString('utf8')}`);
    }
  });
  return memos.length ? memos.join('; ') : null;
}

const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
function verifyEd25519(pubkey: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean {
  try {
    const key = crypto.createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, pubkey]), format: 'der', type: 'spki' });
    return crypto.verify(null, msg, key, sig);
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Minimal WebSocket server side (RFC 6455, text frames)

class WsConn {
  private buf = Buffer.alloc(0);
  private fragments: Buffer[] = [];
  closed = false;
  constructor(
    private readonly socket: Duplex,
    private readonly onMessage: (text: string) => void,
    private readonly onClose: () => void,
  ) {
    socket.on('data', (c: Buffer) => this.onData(c));
    socket.on('close', () => this.finish());
    socket.on('error', () => this.finish());
  }
  private finish() {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
  private onData(chunk: Buffer) {
    this.buf = Buffer.concat([this.buf, chunk]);
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0]!;
      const b1 = this.buf[1]!;
      const opcode = b0 & 0x0f;
      const fin = (b0 & 0x80) !== 0;
      const masked = (b1 & 0x80) !== 0;
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        off = 10;
      }
      const maskLen = masked ? 4 : 0;
      if (this.buf.length < off + maskLen + len) return;
      const mask = masked ? this.buf.subarray(off, off + 4) : null;
      const payload = Buffer.from(this.buf.subarray(off + maskLen, off + maskLen + len));
      if (mask) for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i & 3]!;
      this.buf = this.buf.subarray(off + maskLen + len);
      if (opcode === 0x8) {
        this.close();
        return;
      } else if (opcode === 0x9) {
        this.frame(0xa, payload);
      } else if (opcode === 0x1 || opcode === 0x2 || opcode === 0x0) {
        this.fragments.push(payload);
        if (fin) {
          const text = Buffer.concat(this.fragments).toString('utf8');
          this.fragments = [];
          this.onMessage(text);
        }
      }
    }
  }
  private frame(opcode: number, payload: Buffer) {
    if (this.closed) return;
    let header: Buffer;
    if (payload.length < 126) header = Buffer.from([0x80 | opcode, payload.length]);
    else if (payload.length < 65536) {
      header = Buffer.alloc(4);
      header[0] = 0x80 | opcode;
      header[1] = 126;
      header.writeUInt16BE(payload.length, 2);
    } else {
      header = Buffer.alloc(10);
      header[0] = 0x80 | opcode;
      header[1] = 127;
      header.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    this.socket.write(Buffer.concat([header, payload]));
  }
  send(obj: unknown) {
    this.frame(0x1, Buffer.from(JSON.stringify(obj), 'utf8'));
  }
  close() {
    if (this.closed) return;
    try {
      this.frame(0x8, Buffer.alloc(0));
      this.socket.end();
    } catch {
      /* socket already gone */
    }
    this.socket.destroy();
    this.finish();
  }
}

type Subscription =
  | { kind: 'signature'; conn: WsConn; id: number; signature: string; commitment: Commitment }
  | { kind: 'slot'; conn: WsConn; id: number }
  | { kind: 'account'; conn: WsConn; id: number; pubkey: string; encoding: string; last: string }
  | { kind: 'logs'; conn: WsConn; id: number; mentions: string | null };

// ---------------------------------------------------------------------------------------------------------
// The server

export interface StartSvmRpcOptions {
  host?: string;
  port?: number;
  slotIntervalMs?: number;
}

export interface CreateMintOptions {
  token2022?: boolean;
  /** Token-2022 only: adds a TransferFeeConfig extension with this fee. */
  transferFeeBps?: number;
  /** Maximum transfer fee in base units (default: u64 max). */
  maxFee?: bigint;
  /** Mint authority (default: the server's `authority` keypair). */
  authority?: Keypair;
}

export interface SvmRpc {
  /** HTTP JSON-RPC URL. */
  url: string;
  /** WebSocket URL (port + 1 when it could be bound, as web3.js expects; else the HTTP port). */
  wsUrl: string;
  svm: LiteSVM;
  /** Funds the faucet's transfers; the default mint authority of `createMint`. */
  authority: Keypair;
  stop(): Promise<void>;
  /** Transfers lamports from the faucet (a recorded transaction); returns the signature. */
  airdrop(pubkey: PublicKey | string, lamports: number | bigint): string;
  /** Creates a mint (SPL Token, or Token-2022 with an optional transfer fee); returns its address. */
  createMint(decimals: number, opts?: CreateMintOptions): PublicKey;
  /** Mints to `owner`'s associated token account (created if missing); returns that account. */
  mintTo(mint: PublicKey | string, owner: PublicKey | string, amount: number | bigint, authority?: Keypair): PublicKey;
  /** Current slot (= block height). */
  slot(): number;
  /** Advances `n` slots at once (expires blockhashes older than 150 blocks). */
  advanceSlots(n: number): void;
  /**
   * Submits a wire transaction like `sendTransaction` does (preflight unless `skipPreflight`).
   * Throws RpcError like the RPC method.
   */
  submit(wire: Uint8Array, opts?: { skipPreflight?: boolean }): string;
}

export async function startSvmRpc(opts: StartSvmRpcOptions = {}): Promise<SvmRpc> {
  const host = opts.host ?? '127.0.0.1';
  const slotIntervalMs = opts.slotIntervalMs ?? 400;

  // Blockhashes are checked here (150-block window), not by litesvm, which only knows its latest one.
  const svm = new LiteSVM().withSigverify(true).withBlockhashCheck(false).withTransactionHistory(0n);
  const genesisHash = toB58(crypto.randomBytes(32));

  let slot = 0;
  const slotTimes = new Map<number, number>();
  const blockhashHeight = new Map<string, number>();
  const blockhashBySlot = new Map<number, string>();
  const records = new Map<string, TxRecord>();
  const bySlot = new Map<number, TxRecord[]>();
  const byAddress = new Map<string, TxRecord[]>();
  let txCount = 0;

  const authority = Keypair.generate();
  const faucet = authority;

  function setClockForSlot() {
    const now = Math.floor(Date.now() / 1000);
    const prev = slotTimes.get(slot - 1) ?? now;
    const t = Math.max(now, prev);
    slotTimes.set(slot, t);
    const epoch = BigInt(Math.floor(slot / SLOTS_PER_EPOCH));
    svm.setClock(new Clock(BigInt(slot), BigInt(t), epoch, epoch, BigInt(t)));
  }

  function newBlockhash() {
    svm.expireBlockhash();
    const h = svm.latestBlockhash();
    blockhashHeight.set(h, slot);
    blockhashBySlot.set(slot, h);
  }

  function pruneOld() {
    const cutoff = slot - 2 * MAX_PROCESSING_AGE;
    const oldSlot = cutoff;
    const h = blockhashBySlot.get(oldSlot);
    if (h !== undefined) {
      blockhashBySlot.delete(oldSlot);
      if (blockhashHeight.get(h) === oldSlot) blockhashHeight.delete(h);
    }
  }

  // Genesis.
  setClockForSlot();
  newBlockhash();
  svm.setAccount({
    address: kitAddress(faucet.publicKey.toBase58()),
    lamports: FAUCET_LAMPORTS as never,
    programAddress: kitAddress(SYSTEM_PROGRAM),
    executable: false,
    space: 0n,
    data: new Uint8Array(0),
  });

  const slotAt = (c: Commitment): number =>
    c === 'processed' ? slot : c === 'confirmed' ? Math.max(0, slot - 1) : Math.max(0, slot - FINALIZE_DEPTH);

  function blockhashValid(hash: string): boolean {
    const h = blockhashHeight.get(hash);
    return h !== undefined && slot - h <= MAX_PROCESSING_AGE;
  }

  function recordStatus(rec: TxRecord): Commitment {
    const d = slot - rec.slot;
    return d >= FINALIZE_DEPTH ? 'finalized' : d >= 1 ? 'confirmed' : 'processed';
  }
  function visibleAt(rec: TxRecord, c: Commitment): boolean {
    const order = { processed: 0, confirmed: 1, finalized: 2 };
    return order[recordStatus(rec)] >= order[c];
  }

  // ------------------------------------------------------------------ accounts

  interface Acct {
    lamports: number;
    owner: string;
    data: Uint8Array;
    executable: boolean;
  }
  function getAcct(pubkey: string): Acct | null {
    const a = svm.getAccount(kitAddress(pubkey));
    if (!a.exists) return null;
    return { lamports: Number(a.lamports), owner: a.programAddress, data: a.data, executable: a.executable };
  }

  function encodeAccount(pubkey: string, a: Acct, encoding: string, dataSlice?: { offset?: number; length?: number }): Json {
    let data = a.data;
    if (dataSlice && encoding !== 'jsonParsed') {
      const o = dataSlice.offset ?? 0;
      data = data.subarray(o, o + (dataSlice.length ?? data.length));
    }
    let encoded: Json;
    switch (encoding) {
      case 'base64':
        encoded = [b64(data), 'base64'];
        break;
      case 'base58':
        encoded = [toB58(data), 'base58'];
        break;
      case 'binary':
        encoded = toB58(data);
        break;
      case 'jsonParsed':
        encoded = parsedAccountData(pubkey, a) ?? [b64(data), 'base64'];
        break;
      default:
        throw invalidParams(`Invalid param: unsupported encoding ${encoding}`);
    }
    return {
      data: encoded,
      executable: a.executable,
      lamports: a.lamports,
      owner: a.owner,
      rentEpoch: U64_MAX_AS_NUMBER,
      space: a.data.length,
    };
  }

  function mintDecimals(mint: string): number {
    const m = getAcct(mint);
    const ms = m && parseMint(m.owner, m.data);
    return ms ? ms.decimals : 0;
  }

  function parsedAccountData(_pubkey: string, a: Acct): Json | null {
    if (!isTokenProgram(a.owner)) return null;
    const program = a.owner === TOKEN_PROGRAM ? 'spl-token' : 'spl-token-2022';
    const ta = parseTokenAccount(a.owner, a.data);
    if (ta) {
      const decimals = mintDecimals(ta.mint);
      const info: Record<string, Json> = {
        isNative: ta.isNative !== null,
        mint: ta.mint,
        owner: ta.owner,
        state: ta.state === 2 ? 'frozen' : 'initialized',
        tokenAmount: uiTokenAmount(ta.amount, decimals),
      };
      if (ta.delegate) {
        info.delegate = ta.delegate;
        info.delegatedAmount = uiTokenAmount(ta.delegatedAmount, decimals);
      }
      if (ta.isNative !== null) info.rentExemptReserve = uiTokenAmount(ta.isNative, decimals);
      if (ta.closeAuthority) info.closeAuthority = ta.closeAuthority;
      const ext = parseExtensions(ta.extensions);
      if (ext) info.extensions = ext;
      return { program, parsed: { info, type: 'account' }, space: a.data.length };
    }
    const ms = parseMint(a.owner, a.data);
    if (ms) {
      const info: Record<string, Json> = {
        decimals: ms.decimals,
        freezeAuthority: ms.freezeAuthority,
        isInitialized: ms.isInitialized,
        mintAuthority: ms.mintAuthority,
        supply: ms.supply.toString(),
      };
      const ext = parseExtensions(ms.extensions);
      if (ext) info.extensions = ext;
      return { program, parsed: { info, type: 'mint' }, space: a.data.length };
    }
    return null;
  }

  function tokenBalanceOf(index: number, a: Acct | null): TokenBalance | null {
    if (!a) return null;
    const ta = parseTokenAccount(a.owner, a.data);
    if (!ta) return null;
    return {
      accountIndex: index,
      mint: ta.mint,
      owner: ta.owner,
      programId: a.owner,
      uiTokenAmount: uiTokenAmount(ta.amount, mintDecimals(ta.mint)),
    };
  }

  function snapshot(keys: string[]): { balances: number[]; tokens: TokenBalance[] } {
    const balances: number[] = [];
    const tokens: TokenBalance[] = [];
    keys.forEach((k, i) => {
      const a = getAcct(k);
      balances.push(a ? a.lamports : 0);
      const tb = tokenBalanceOf(i, a);
      if (tb) tokens.push(tb);
    });
    return { balances, tokens };
  }

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
      if (!alt) throw new RpcError(-32602, 'invalid transaction: Transaction loads an address table account that doesn\'t exist');
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
    const returnData: TxRecord['returnData'] =
      rdData.length > 0 || !isZero(rdProgram) ? { programId: toB58(rdProgram), data: [b64(rdData), 'base64'] } : null;
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
    if (!blockhashValid(tx.recentBlockhash) && !isDurableNonceTx(tx)) {
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
    const list = bySlot.get(slot) ?? [];
    const rec: TxRecord = {
      tx,
      slot,
      blockTime: slotTimes.get(slot) ?? Math.floor(Date.now() / 1000),
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
    bySlot.set(slot, list);
    records.set(tx.signature, rec);
    txCount++;
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
      const tx = new Transaction({ feePayer: signers[0]!.publicKey, recentBlockhash: blockhashBySlot.get(slot)! });
      tx.add(...ixs);
      tx.sign(...signers);
      const sig = toB58(tx.signature!);
      if (records.has(sig)) {
        newBlockhash(); // another blockhash for the current slot
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

  // ------------------------------------------------------------------ subscriptions

  const subs = new Map<number, Subscription>();
  let nextSubId = 1;
  const conns = new Set<WsConn>();

  function accountFingerprint(pubkey: string): string {
    const a = getAcct(pubkey);
    if (!a) return 'none';
    return `${a.lamports}:${a.owner}:${crypto.createHash('sha1').update(a.data).digest('hex')}`;
  }

  function notify(sub: Subscription, method: string, result: Json) {
    sub.conn.send({ jsonrpc: '2.0', method, params: { result, subscription: sub.id } });
  }

  function checkSignatureSubs() {
    for (const sub of subs.values()) {
      if (sub.kind !== 'signature') continue;
      const rec = records.get(sub.signature);
      if (rec && visibleAt(rec, sub.commitment)) {
        subs.delete(sub.id);
        notify(sub, 'signatureNotification', { context: { slot }, value: { err: rec.err } });
      }
    }
  }

  function checkAccountSubs() {
    for (const sub of subs.values()) {
      if (sub.kind !== 'account') continue;
      const fp = accountFingerprint(sub.pubkey);
      if (fp === sub.last) continue;
      sub.last = fp;
      const a = getAcct(sub.pubkey);
      notify(sub, 'accountNotification', {
        context: { slot },
        value: a ? encodeAccount(sub.pubkey, a, sub.encoding) : null,
      });
    }
  }

  function afterTransaction(rec: TxRecord) {
    for (const sub of subs.values()) {
      if (sub.kind !== 'logs') continue;
      if (sub.mentions && !rec.tx.keys.includes(sub.mentions)) continue;
      notify(sub, 'logsNotification', {
        context: { slot: rec.slot },
        value: { signature: rec.tx.signature, err: rec.err, logs: rec.logs },
      });
    }
    checkSignatureSubs();
    checkAccountSubs();
  }

  function advanceSlot() {
    slot++;
    setClockForSlot();
    newBlockhash();
    pruneOld();
    if (subs.size) {
      for (const sub of subs.values()) {
        if (sub.kind === 'slot') notify(sub, 'slotNotification', { parent: slot - 1, root: Math.max(0, slot - FINALIZE_DEPTH), slot });
      }
      checkSignatureSubs();
      checkAccountSubs();
    }
  }

  function handleWsRequest(conn: WsConn, req: { id?: unknown; method?: unknown; params?: unknown }): Json {
    const p = Array.isArray(req.params) ? req.params : [];
    const cfg = (p[1] ?? {}) as Cfg;
    switch (req.method) {
      case 'signatureSubscribe': {
        if (typeof p[0] !== 'string') throw invalidParams('Invalid param: signature');
        const id = nextSubId++;
        const sub: Subscription = { kind: 'signature', conn, id, signature: p[0], commitment: normCommitment(cfg.commitment) };
        subs.set(id, sub);
        setImmediate(checkSignatureSubs); // after the subscription id has been sent
        return id;
      }
      case 'slotSubscribe': {
        const id = nextSubId++;
        subs.set(id, { kind: 'slot', conn, id });
        return id;
      }
      case 'accountSubscribe': {
        const pubkey = parsePubkey(p[0]);
        const encoding = typeof cfg.encoding === 'string' ? cfg.encoding : 'binary';
        const id = nextSubId++;
        subs.set(id, { kind: 'account', conn, id, pubkey, encoding, last: accountFingerprint(pubkey) });
        return id;
      }
      case 'logsSubscribe': {
        const f = p[0];
        let mentions: string | null = null;
        if (f && typeof f === 'object' && Array.isArray((f as { mentions?: unknown }).mentions)) {
          mentions = parsePubkey((f as { mentions: unknown[] }).mentions[0]);
        } else if (f !== 'all' && f !== 'allWithVotes') throw invalidParams('Invalid param: filter');
        const id = nextSubId++;
        subs.set(id, { kind: 'logs', conn, id, mentions });
        return id;
      }
      case 'signatureUnsubscribe':
      case 'slotUnsubscribe':
      case 'accountUnsubscribe':
      case 'logsUnsubscribe': {
        const sid = Number(p[0]);
        const s = subs.get(sid);
        if (!s || s.conn !== conn) return false;
        subs.delete(sid);
        return true;
      }
      default:
        throw new RpcError(-32601, 'Method not found');
    }
  }

  function onUpgrade(req: http.IncomingMessage, socket: Duplex) {
    const key = req.headers['sec-websocket-key'];
    if (typeof key !== 'string' || String(req.headers.upgrade).toLowerCase() !== 'websocket') {
      socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' + `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    const conn: WsConn = new WsConn(
      socket,
      (text) => {
        let msg: unknown;
        try {
          msg = JSON.parse(text);
        } catch {
          conn.send({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null });
          return;
        }
        const reqs = Array.isArray(msg) ? msg : [msg];
        for (const r of reqs as { id?: unknown; method?: unknown; params?: unknown }[]) {
          if (!r || typeof r !== 'object') continue;
          if (r.id === undefined || r.id === null) continue; // notification (e.g. rpc-websockets' "ping")
          try {
            const result = handleWsRequest(conn, r);
            conn.send({ jsonrpc: '2.0', result, id: r.id });
          } catch (e) {
            const err = e instanceof RpcError ? e : new RpcError(-32603, errText(e));
            conn.send({ jsonrpc: '2.0', error: { code: err.code, message: err.message }, id: r.id });
          }
        }
      },
      () => {
        conns.delete(conn);
        for (const [id, s] of subs) if (s.conn === conn) subs.delete(id);
      },
    );
    conns.add(conn);
  }

  // ------------------------------------------------------------------ RPC methods

  const ctx = (value: Json, c: Commitment = 'processed') => ({ context: { apiVersion: SOLANA_CORE_VERSION, slot: slotAt(c) }, value });

  function checkMinContextSlot(cfg: Cfg) {
    const m = cfg.minContextSlot;
    if (typeof m === 'number' && m > slot) {
      throw new RpcError(-32016, 'Minimum context slot has not been reached', { contextSlot: slot });
    }
  }

  function decodeWireParam(s: unknown, encoding: unknown): Uint8Array {
    if (typeof s !== 'string') throw invalidParams('invalid transaction');
    const enc = encoding ?? 'base58';
    try {
      if (enc === 'base64') return new Uint8Array(Buffer.from(s, 'base64'));
      if (enc === 'base58') return fromB58(s);
    } catch {
      throw invalidParams(`invalid transaction: invalid ${String(enc)} encoding`);
    }
    throw invalidParams(`Invalid param: unsupported encoding ${String(enc)}`);
  }

  function signatureStatus(rec: TxRecord): Json {
    const st = recordStatus(rec);
    return {
      slot: rec.slot,
      confirmations: st === 'finalized' ? null : slot - rec.slot,
      err: rec.err,
      status: rec.err ? { Err: rec.err } : { Ok: null },
      confirmationStatus: st,
    };
  }

  function accountKeysParsed(tx: DecodedTx): Json[] {
    return tx.keys.map((k, i) => ({
      pubkey: k,
      signer: tx.signer[i],
      source: i < tx.staticKeys.length ? 'transaction' : 'lookupTable',
      writable: tx.writable[i],
    }));
  }

  function parseInstruction(keys: string[], programIdIndex: number, accounts: number[], data: Uint8Array, stackHeight: number | null): Json {
    const programId = keys[programIdIndex]!;
    const acc = accounts.map((a) => keys[a]!);
    const partial = { accounts: acc, data: toB58(data), programId, stackHeight };
    const parsed = (program: string, p: Json) => ({ parsed: p, program, programId, stackHeight });
    try {
      if (programId === MEMO_V2_PROGRAM || programId === MEMO_V1_PROGRAM) {
        return parsed('spl-memo', Buffer.from(data).toString('utf8'));
      }
      if (programId === SYSTEM_PROGRAM && data.length >= 4) {
        const t = readU32(data, 0);
        if (t === 0) {
          return parsed('system', {
            info: {
              lamports: Number(readU64(data, 4)),
              newAccount: acc[1],
              owner: toB58(data.subarray(20, 52)),
              source: acc[0],
              space: Number(readU64(data, 12)),
            },
            type: 'createAccount',
          });
        }
        if (t === 1) return parsed('system', { info: { account: acc[0], owner: toB58(data.subarray(4, 36)) }, type: 'assign' });
        if (t === 2) {
          return parsed('system', {
            info: { destination: acc[1], lamports: Number(readU64(data, 4)), source: acc[0] },
            type: 'transfer',
          });
        }
        if (t === 8) return parsed('system', { info: { account: acc[0], space: Number(readU64(data, 4)) }, type: 'allocate' });
      }
      if (programId === ATA_PROGRAM && (data.length === 0 || data[0] === 0 || data[0] === 1)) {
        return parsed('spl-associated-token-account', {
          info: { account: acc[1], mint: acc[3], source: acc[0], systemProgram: acc[4], tokenProgram: acc[5], wallet: acc[2] },
          type: data.length > 0 && data[0] === 1 ? 'createIdempotent' : 'create',
        });
      }
      if (isTokenProgram(programId) && data.length >= 1) {
        const program = programId === TOKEN_PROGRAM ? 'spl-token' : 'spl-token-2022';
        const t = data[0];
        const amt = () => readU64(data, 1).toString();
        const authKey = (i: number) => (acc.length > i + 1 ? { multisigAuthority: acc[i], signers: acc.slice(i + 1) } : { authority: acc[i] });
        switch (t) {
          case 0:
          case 20:
            return parsed(program, {
              info: {
                decimals: data[1],
                freezeAuthority: data[34] === 1 ? toB58(data.subarray(35, 67)) : undefined,
                mint: acc[0],
                mintAuthority: toB58(data.subarray(2, 34)),
                ...(t === 0 ? { rentSysvar: acc[1] } : {}),
              },
              type: t === 0 ? 'initializeMint' : 'initializeMint2',
            });
          case 1:
            return parsed(program, { info: { account: acc[0], mint: acc[1], owner: acc[2], rentSysvar: acc[3] }, type: 'initializeAccount' });
          case 16:
          case 18:
            return parsed(program, {
              info: { account: acc[0], mint: acc[1], owner: toB58(data.subarray(1, 33)), ...(t === 16 ? { rentSysvar: acc[2] } : {}) },
              type: t === 16 ? 'initializeAccount2' : 'initializeAccount3',
            });
          case 3:
            return parsed(program, { info: { amount: amt(), destination: acc[1], source: acc[0], ...authKey(2) }, type: 'transfer' });
          case 7:
            return parsed(program, {
              info: { account: acc[1], amount: amt(), mint: acc[0], ...(acc.length > 3 ? { multisigMintAuthority: acc[2], signers: acc.slice(3) } : { mintAuthority: acc[2] }) },
              type: 'mintTo',
            });
          case 8:
            return parsed(program, { info: { account: acc[0], amount: amt(), mint: acc[1], ...authKey(2) }, type: 'burn' });
          case 9:
            return parsed(program, { info: { account: acc[0], destination: acc[1], ...(acc.length > 3 ? { multisigOwner: acc[2], signers: acc.slice(3) } : { owner: acc[2] }) }, type: 'closeAccount' });
          case 12:
            return parsed(program, {
              info: { destination: acc[2], mint: acc[1], source: acc[0], tokenAmount: uiTokenAmount(readU64(data, 1), data[9]!), ...authKey(3) },
              type: 'transferChecked',
            });
          case 14:
            return parsed(program, {
              info: { account: acc[1], mint: acc[0], mintAuthority: acc[2], tokenAmount: uiTokenAmount(readU64(data, 1), data[9]!) },
              type: 'mintToChecked',
            });
          case 15:
            return parsed(program, {
              info: { account: acc[0], mint: acc[1], tokenAmount: uiTokenAmount(readU64(data, 1), data[9]!), ...authKey(2) },
              type: 'burnChecked',
            });
          case 17:
            return parsed(program, { info: { account: acc[0] }, type: 'syncNative' });
          case 22:
            return parsed(program, { info: { account: acc[0] }, type: 'initializeImmutableOwner' });
        }
      }
    } catch {
      /* fall through to the partially decoded form */
    }
    return partial;
  }

  function encodeTransaction(rec: TxRecord, encoding: string, maxVersion: number | undefined): Json {
    const tx = rec.tx;
    if (tx.version !== 'legacy' && (maxVersion === undefined || tx.version > maxVersion)) {
      throw new RpcError(
        -32015,
        `Transaction version (${tx.version}) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": ${tx.version}`,
      );
    }
    const msg = tx.vtx.message;
    const header = {
      numReadonlySignedAccounts: msg.header.numReadonlySignedAccounts,
      numReadonlyUnsignedAccounts: msg.header.numReadonlyUnsignedAccounts,
      numRequiredSignatures: msg.header.numRequiredSignatures,
    };
    const lookups = msg.addressTableLookups.map((l) => ({
      accountKey: l.accountKey.toBase58(),
      readonlyIndexes: [...l.readonlyIndexes],
      writableIndexes: [...l.writableIndexes],
    }));
    const parsedMode = encoding === 'jsonParsed';
    let transaction: Json;
    if (encoding === 'base64') transaction = [b64(tx.wire), 'base64'];
    else if (encoding === 'base58') transaction = [toB58(tx.wire), 'base58'];
    else if (encoding === 'json') {
      transaction = {
        message: {
          accountKeys: tx.staticKeys,
          header,
          instructions: tx.instructions.map((ix) => ({
            accounts: ix.accounts,
            data: toB58(ix.data),
            programIdIndex: ix.programIdIndex,
            stackHeight: null,
          })),
          recentBlockhash: tx.recentBlockhash,
          ...(tx.version === 'legacy' ? {} : { addressTableLookups: lookups }),
        },
        signatures: tx.signatures,
      };
    } else if (parsedMode) {
      transaction = {
        message: {
          accountKeys: accountKeysParsed(tx),
          instructions: tx.instructions.map((ix) => parseInstruction(tx.keys, ix.programIdIndex, ix.accounts, ix.data, null)),
          recentBlockhash: tx.recentBlockhash,
          ...(tx.version === 'legacy' ? {} : { addressTableLookups: lookups }),
        },
        signatures: tx.signatures,
      };
    } else throw invalidParams(`Invalid param: unsupported encoding ${encoding}`);
    const innerInstructions = parsedMode
      ? rec.innerInstructions.map((g) => ({
          index: g.index,
          instructions: g.instructions.map((ii) => parseInstruction(tx.keys, ii.programIdIndex, ii.accounts, fromB58(ii.data), ii.stackHeight)),
        }))
      : rec.innerInstructions;
    const meta: Record<string, Json> = {
      computeUnitsConsumed: rec.computeUnitsConsumed,
      err: rec.err,
      fee: rec.fee,
      innerInstructions,
      logMessages: rec.logs,
      postBalances: rec.postBalances,
      postTokenBalances: rec.postTokenBalances,
      preBalances: rec.preBalances,
      preTokenBalances: rec.preTokenBalances,
      rewards: [],
      status: rec.err ? { Err: rec.err } : { Ok: null },
    };
    if (!parsedMode) meta.loadedAddresses = tx.loaded;
    if (rec.returnData) meta.returnData = rec.returnData;
    const out: Record<string, Json> = { blockTime: rec.blockTime, meta, slot: rec.slot, transaction };
    if (maxVersion !== undefined) out.version = tx.version;
    return out;
  }

  function historyCommitment(cfg: Cfg): Commitment {
    const c = normCommitment(cfg.commitment);
    if (c === 'processed') throw invalidParams('Method does not support commitment below `confirmed`');
    return c;
  }

  function tokenAccountsByOwner(owner: string, filter: unknown): { pubkey: string; a: Acct }[] {
    if (!filter || typeof filter !== 'object') throw invalidParams('Invalid param: filter');
    const f = filter as { mint?: unknown; programId?: unknown };
    let programs: string[];
    let mint: string | null = null;
    if (f.mint !== undefined) {
      mint = parsePubkey(f.mint);
      const m = getAcct(mint);
      if (!m || !isTokenProgram(m.owner)) throw invalidParams('Invalid param: could not find mint');
      programs = [m.owner];
    } else if (f.programId !== undefined) {
      const pid = parsePubkey(f.programId);
      if (!isTokenProgram(pid)) throw invalidParams('Invalid param: unrecognized Token program id');
      programs = [pid];
    } else throw invalidParams('Invalid param: filter must be mint or programId');
    const out: { pubkey: string; a: Acct }[] = [];
    for (const pid of programs) {
      for (const ea of svm.getProgramAccounts(kitAddress(pid))) {
        const a: Acct = { lamports: Number(ea.lamports), owner: ea.programAddress, data: ea.data as Uint8Array, executable: ea.executable };
        const ta = parseTokenAccount(a.owner, a.data);
        if (!ta || ta.owner !== owner) continue;
        if (mint && ta.mint !== mint) continue;
        out.push({ pubkey: ea.address, a });
      }
    }
    return out;
  }

  const methods: Record<string, (p: unknown[]) => Json> = {
    getHealth: () => 'ok',
    getVersion: () => ({ 'feature-set': FEATURE_SET, 'solana-core': SOLANA_CORE_VERSION }),
    getGenesisHash: () => genesisHash,
    getIdentity: () => ({ identity: faucet.publicKey.toBase58() }),
    getFirstAvailableBlock: () => 0,
    minimumLedgerSlot: () => 0,
    getSlot: (p) => {
      const cfg = (p[0] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      return slotAt(normCommitment(cfg.commitment));
    },
    getBlockHeight: (p) => {
      const cfg = (p[0] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      return slotAt(normCommitment(cfg.commitment));
    },
    getTransactionCount: () => txCount,
    getBlockTime: (p) => {
      const s = Number(p[0]);
      const t = slotTimes.get(s);
      if (t === undefined) throw new RpcError(-32004, `Block not available for slot ${s}`);
      return t;
    },
    getEpochInfo: (p) => {
      const cfg = (p[0] ?? {}) as Cfg;
      const s = slotAt(normCommitment(cfg.commitment));
      return {
        absoluteSlot: s,
        blockHeight: s,
        epoch: Math.floor(s / SLOTS_PER_EPOCH),
        slotIndex: s % SLOTS_PER_EPOCH,
        slotsInEpoch: SLOTS_PER_EPOCH,
        transactionCount: txCount,
      };
    },
    getEpochSchedule: () => ({
      firstNormalEpoch: 0,
      firstNormalSlot: 0,
      leaderScheduleSlotOffset: SLOTS_PER_EPOCH,
      slotsPerEpoch: SLOTS_PER_EPOCH,
      warmup: false,
    }),
    getLatestBlockhash: (p) => {
      const cfg = (p[0] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      const c = normCommitment(cfg.commitment);
      const s = slotAt(c);
      const blockhash = blockhashBySlot.get(s) ?? blockhashBySlot.get(slot)!;
      return ctx({ blockhash, lastValidBlockHeight: (blockhashHeight.get(blockhash) ?? s) + MAX_PROCESSING_AGE }, c);
    },
    isBlockhashValid: (p) => {
      if (typeof p[0] !== 'string') throw invalidParams('Invalid param: blockhash');
      checkMinContextSlot((p[1] ?? {}) as Cfg);
      return ctx(blockhashValid(p[0]));
    },
    getFeeForMessage: (p) => {
      if (typeof p[0] !== 'string') throw invalidParams('Invalid param: message');
      let m: VersionedMessage;
      try {
        m = VersionedMessage.deserialize(Buffer.from(p[0], 'base64'));
      } catch {
        throw invalidParams('invalid message');
      }
      if (!blockhashValid(m.recentBlockhash)) return ctx(null);
      const programIds = m.compiledInstructions.map((ix) => m.staticAccountKeys[ix.programIdIndex]?.toBase58() ?? '');
      const ixs = m.compiledInstructions.map((ix) => ({ programIdIndex: ix.programIdIndex, accounts: ix.accountKeyIndexes, data: new Uint8Array(ix.data) }));
      const { price, limit } = computeBudget(programIds, ixs);
      return ctx(LAMPORTS_PER_SIGNATURE * m.header.numRequiredSignatures + Number((price * BigInt(limit) + 999_999n) / 1_000_000n));
    },
    getMinimumBalanceForRentExemption: (p) => {
      const n = Number(p[0] ?? 0);
      if (!Number.isInteger(n) || n < 0) throw invalidParams('Invalid param: data length');
      return Number(svm.minimumBalanceForRentExemption(BigInt(n)));
    },
    getBalance: (p) => {
      const k = parsePubkey(p[0]);
      checkMinContextSlot((p[1] ?? {}) as Cfg);
      return ctx(getAcct(k)?.lamports ?? 0);
    },
    getAccountInfo: (p) => {
      const k = parsePubkey(p[0]);
      const cfg = (p[1] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      const a = getAcct(k);
      return ctx(a ? encodeAccount(k, a, String(cfg.encoding ?? 'binary'), cfg.dataSlice as never) : null);
    },
    getMultipleAccounts: (p) => {
      if (!Array.isArray(p[0])) throw invalidParams('Invalid param: pubkeys');
      const cfg = (p[1] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      const enc = String(cfg.encoding ?? 'base64');
      return ctx(
        p[0].map((x) => {
          const k = parsePubkey(x);
          const a = getAcct(k);
          return a ? encodeAccount(k, a, enc, cfg.dataSlice as never) : null;
        }),
      );
    },
    getProgramAccounts: (p) => {
      const pid = parsePubkey(p[0]);
      const cfg = (p[1] ?? {}) as Cfg;
      const enc = String(cfg.encoding ?? 'binary');
      const filters = (Array.isArray(cfg.filters) ? cfg.filters : []) as { dataSize?: number; memcmp?: { offset: number; bytes: string; encoding?: string } }[];
      const out = svm
        .getProgramAccounts(kitAddress(pid))
        .filter((ea) =>
          filters.every((f) => {
            if (f.dataSize !== undefined) return ea.data.length === f.dataSize;
            if (f.memcmp) {
              const want = f.memcmp.encoding === 'base64' ? new Uint8Array(Buffer.from(f.memcmp.bytes, 'base64')) : fromB58(f.memcmp.bytes);
              const got = ea.data.subarray(f.memcmp.offset, f.memcmp.offset + want.length);
              return got.length === want.length && got.every((b, i) => b === want[i]);
            }
            return true;
          }),
        )
        .map((ea) => ({
          pubkey: ea.address,
          account: encodeAccount(ea.address, { lamports: Number(ea.lamports), owner: ea.programAddress, data: ea.data as Uint8Array, executable: ea.executable }, enc, cfg.dataSlice as never),
        }));
      return cfg.withContext ? ctx(out) : out;
    },
    getTokenAccountBalance: (p) => {
      const k = parsePubkey(p[0]);
      const a = getAcct(k);
      if (!a) throw invalidParams('Invalid param: could not find account');
      const ta = parseTokenAccount(a.owner, a.data);
      if (!ta) throw invalidParams('Invalid param: not a Token account');
      return ctx(uiTokenAmount(ta.amount, mintDecimals(ta.mint)));
    },
    getTokenSupply: (p) => {
      const k = parsePubkey(p[0]);
      const a = getAcct(k);
      const m = a && parseMint(a.owner, a.data);
      if (!m) throw invalidParams('Invalid param: not a Token mint');
      return ctx(uiTokenAmount(m.supply, m.decimals));
    },
    getTokenAccountsByOwner: (p) => {
      const owner = parsePubkey(p[0]);
      const cfg = (p[2] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      const enc = String(cfg.encoding ?? 'binary');
      return ctx(tokenAccountsByOwner(owner, p[1]).map(({ pubkey, a }) => ({ pubkey, account: encodeAccount(pubkey, a, enc, cfg.dataSlice as never) })));
    },
    getSignatureStatuses: (p) => {
      if (!Array.isArray(p[0])) throw invalidParams('Invalid param: signatures');
      if (p[0].length > 256) throw invalidParams('Too many inputs provided; max 256');
      return ctx(
        p[0].map((s) => {
          const rec = typeof s === 'string' ? records.get(s) : undefined;
          return rec ? signatureStatus(rec) : null;
        }),
      );
    },
    getSignaturesForAddress: (p) => {
      const addr = parsePubkey(p[0]);
      const cfg = (p[1] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      const c = historyCommitment(cfg);
      const limit = cfg.limit === undefined || cfg.limit === null ? 1000 : Number(cfg.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalidParams('Invalid limit; max 1000');
      const all = byAddress.get(addr) ?? [];
      let i = all.length - 1;
      if (typeof cfg.before === 'string') {
        const idx = all.findIndex((r) => r.tx.signature === cfg.before);
        if (idx < 0) return [];
        i = idx - 1;
      }
      const out: Json[] = [];
      for (; i >= 0 && out.length < limit; i--) {
        const r = all[i]!;
        if (typeof cfg.until === 'string' && r.tx.signature === cfg.until) break;
        if (!visibleAt(r, c)) continue;
        out.push({
          blockTime: r.blockTime,
          confirmationStatus: recordStatus(r),
          err: r.err,
          memo: r.tx.memo,
          signature: r.tx.signature,
          slot: r.slot,
        });
      }
      return out;
    },
    getTransaction: (p) => {
      if (typeof p[0] !== 'string') throw invalidParams('Invalid param: signature');
      const cfg: Cfg = typeof p[1] === 'string' ? { encoding: p[1] } : ((p[1] ?? {}) as Cfg);
      const c = historyCommitment(cfg);
      const rec = records.get(p[0]);
      if (!rec || !visibleAt(rec, c)) return null;
      const mv = cfg.maxSupportedTransactionVersion;
      return encodeTransaction(rec, String(cfg.encoding ?? 'json'), mv === undefined || mv === null ? undefined : Number(mv));
    },
    sendTransaction: (p) => {
      const cfg = (p[1] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      const wire = decodeWireParam(p[0], cfg.encoding);
      return submit(wire, { skipPreflight: cfg.skipPreflight === true });
    },
    simulateTransaction: (p) => {
      const cfg = (p[1] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      const wire = decodeWireParam(p[0], cfg.encoding);
      const sigVerify = cfg.sigVerify === true;
      const replace = cfg.replaceRecentBlockhash === true;
      if (sigVerify && replace) throw invalidParams('sigVerify may not be used with replaceRecentBlockhash');
      const tx = decodeTx(wire);
      if (sigVerify && !verifySignatures(tx)) throw new RpcError(-32003, 'Transaction signature verification failure');
      const latest = blockhashBySlot.get(slot)!;
      const base = {
        accounts: null as Json,
        innerInstructions: null as Json,
        loadedAccountsDataSize: 0,
        replacementBlockhash: replace ? { blockhash: latest, lastValidBlockHeight: slot + MAX_PROCESSING_AGE } : null,
        returnData: null as Json,
      };
      if (!replace && !blockhashValid(tx.recentBlockhash) && !isDurableNonceTx(tx)) {
        return ctx({ ...base, err: 'BlockhashNotFound', logs: [], unitsConsumed: 0 });
      }
      if (records.has(tx.signature) && tx.signature !== toB58(new Uint8Array(64))) {
        return ctx({ ...base, err: 'AlreadyProcessed', logs: [], unitsConsumed: 0 });
      }
      const sim = simulate(tx, sigVerify);
      let accounts: Json = null;
      const ac = cfg.accounts as { addresses?: unknown[]; encoding?: string } | undefined;
      if (ac && Array.isArray(ac.addresses)) {
        accounts = ac.addresses.map((x) => {
          const k = parsePubkey(x);
          const a = sim.postAccounts.get(k) ?? getAcct(k);
          return a ? encodeAccount(k, a, ac.encoding ?? 'base64') : null;
        });
      }
      return ctx({
        ...base,
        accounts,
        err: sim.err,
        innerInstructions: cfg.innerInstructions ? sim.innerInstructions : null,
        logs: sim.logs,
        returnData: sim.returnData,
        unitsConsumed: sim.unitsConsumed,
      });
    },
    getRecentPrioritizationFees: (p) => {
      const addrs = Array.isArray(p[0]) ? p[0].map(parsePubkey) : [];
      if (addrs.length > 128) throw invalidParams('Too many inputs provided; max 128');
      const out: { slot: number; prioritizationFee: number }[] = [];
      for (let s = Math.max(0, slot - MAX_PROCESSING_AGE + 1); s <= slot; s++) {
        const txs = bySlot.get(s) ?? [];
        let fee = txs.length ? Number(txs.reduce((m, r) => (r.tx.cuPrice < m ? r.tx.cuPrice : m), txs[0]!.tx.cuPrice)) : 0;
        for (const k of addrs) {
          const prices = txs.filter((r) => r.tx.keys.some((kk, i) => kk === k && r.tx.writable[i])).map((r) => Number(r.tx.cuPrice));
          if (prices.length) fee = Math.max(fee, Math.min(...prices));
        }
        out.push({ prioritizationFee: fee, slot: s });
      }
      return out;
    },
    requestAirdrop: (p) => {
      const k = parsePubkey(p[0]);
      const lamports = Number(p[1]);
      if (!Number.isSafeInteger(lamports) || lamports <= 0) throw invalidParams('Invalid param: lamports');
      return airdrop(k, lamports);
    },
  };

  function handleOne(req: unknown): Json | undefined {
    if (!req || typeof req !== 'object' || Array.isArray(req)) {
      return { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id: null };
    }
    const r = req as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    const id = r.id ?? null;
    if (r.jsonrpc !== '2.0' || typeof r.method !== 'string') {
      return { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id };
    }
    const fn = Object.prototype.hasOwnProperty.call(methods, r.method) ? methods[r.method] : undefined;
    let response: Json;
    if (!fn) response = { jsonrpc: '2.0', error: { code: -32601, message: 'Method not found' }, id };
    else {
      try {
        const params = r.params === undefined || r.params === null ? [] : r.params;
        if (!Array.isArray(params)) throw invalidParams('Invalid params: expected an array');
        response = { jsonrpc: '2.0', result: fn(params), id };
      } catch (e) {
        const err = e instanceof RpcError ? e : new RpcError(-32603, `Internal error: ${errText(e)}`);
        response = {
          jsonrpc: '2.0',
          error: { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) },
          id,
        };
      }
    }
    return r.id === undefined ? undefined : response;
  }

  function onRequest(req: http.IncomingMessage, res: http.ServerResponse) {
    if (req.method === 'GET' && req.url === '/health') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: unknown;
      let out: Json;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        out = { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
        return;
      }
      if (Array.isArray(body)) {
        out = body.length === 0 ? { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id: null } : body.map(handleOne).filter((x) => x !== undefined);
      } else out = handleOne(body) ?? null;
      res.writeHead(200, { 'content-type': 'application/json' }).end(out === null ? '' : JSON.stringify(out));
    });
  }

  // ------------------------------------------------------------------ listen

  const servers: http.Server[] = [];
  const mkServer = () => {
    const s = http.createServer(onRequest);
    s.on('upgrade', onUpgrade);
    s.keepAliveTimeout = 5_000;
    return s;
  };
  const listen = (s: http.Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      const onErr = (e: Error) => reject(e);
      s.once('error', onErr);
      s.listen(port, host, () => {
        s.off('error', onErr);
        resolve((s.address() as { port: number }).port);
      });
    });
  const closeServer = (s: http.Server) =>
    new Promise<void>((resolve) => {
      s.closeAllConnections();
      s.close(() => resolve());
    });

  let port = 0;
  let wsPort = 0;
  for (let attempt = 0; attempt < 20; attempt++) {
    const main = mkServer();
    port = await listen(main, opts.port ?? 0);
    const ws = mkServer();
    try {
      wsPort = await listen(ws, port + 1);
      servers.push(main, ws);
      break;
    } catch {
      if (opts.port !== undefined && opts.port !== 0) {
        servers.push(main);
        wsPort = port;
        break;
      }
      await closeServer(main);
    }
  }
  if (servers.length === 0) throw new Error('startSvmRpc: could not bind a port pair');

  const timer = setInterval(advanceSlot, slotIntervalMs);
  timer.unref();

  const hostForUrl = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${hostForUrl}:${port}`,
    wsUrl: `ws://${hostForUrl}:${wsPort}`,
    svm,
    authority,
    async stop() {
      clearInterval(timer);
      for (const c of [...conns]) c.close();
      subs.clear();
      await Promise.all(servers.map(closeServer));
    },
    airdrop,
    createMint,
    mintTo,
    slot: () => slot,
    advanceSlots(n: number) {
      for (let i = 0; i < n; i++) advanceSlot();
    },
    submit,
  };
}
