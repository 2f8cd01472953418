// A recorded transaction as getTransaction and getBlock answer it: its status, and the transaction in
// json, jsonParsed (with the system, token and memo programs' instructions parsed), base58 or base64.

import type { ChainState } from './chainState.ts';
import {
  ATA_PROGRAM,
  b64,
  fromB58,
  invalidParams,
  type Json,
  MEMO_V1_PROGRAM,
  MEMO_V2_PROGRAM,
  readU32,
  readU64,
  RpcError,
  SYSTEM_PROGRAM,
  toB58,
  TOKEN_PROGRAM,
  uiTokenAmount,
} from './codec.ts';
import type { DecodedTx, TxRecord } from './records.ts';
import { isTokenProgram } from './tokenState.ts';

/** Recorded transactions in the shapes getTransaction, getBlock and getSignatureStatuses answer. */
export function createTxEncoding(chain: ChainState) {
  function signatureStatus(rec: TxRecord): Json {
    const st = chain.recordStatus(rec);
    return {
      slot: rec.slot,
      confirmations: st === 'finalized' ? null : chain.slot - rec.slot,
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
              info: {
                account: acc[1],
                amount: amt(),
                mint: acc[0],
                ...(acc.length > 3 ? { multisigMintAuthority: acc[2], signers: acc.slice(3) } : { mintAuthority: acc[2] }),
              },
              type: 'mintTo',
            });
          case 8:
            return parsed(program, { info: { account: acc[0], amount: amt(), mint: acc[1], ...authKey(2) }, type: 'burn' });
          case 9:
            return parsed(program, {
              info: { account: acc[0], destination: acc[1], ...(acc.length > 3 ? { multisigOwner: acc[2], signers: acc.slice(3) } : { owner: acc[2] }) },
              type: 'closeAccount',
            });
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

  return { signatureStatus, accountKeysParsed, parseInstruction, encodeTransaction };
}

/** What createTxEncoding returns. */
export type TxEncoding = ReturnType<typeof createTxEncoding>;
