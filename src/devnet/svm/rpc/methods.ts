// The JSON-RPC methods the stand-in serves, by name, with Solana's response shapes.

import { address as kitAddress } from '@solana/kit';
import { VersionedMessage } from '@solana/web3.js';
import type { Accounts, Acct } from './accounts.ts';
import type { ChainState } from './chainState.ts';
import {
  type Cfg,
  type Commitment,
  FEATURE_SET,
  fromB58,
  invalidParams,
  type Json,
  LAMPORTS_PER_SIGNATURE,
  MAX_PROCESSING_AGE,
  normCommitment,
  parsePubkey,
  RpcError,
  SLOTS_PER_EPOCH,
  SOLANA_CORE_VERSION,
  toB58,
  uiTokenAmount,
} from './codec.ts';
import { computeBudget } from './records.ts';
import { isTokenProgram, parseMint, parseTokenAccount } from './tokenState.ts';
import type { Transactions } from './transactions.ts';
import type { TxEncoding } from './txEncoding.ts';

/** The JSON-RPC method table, by method name. */
export function createMethods(chain: ChainState, accounts: Accounts, transactions: Transactions, encoding: TxEncoding) {
  const { svm, records, bySlot, byAddress, slotTimes, blockhashBySlot, blockhashHeight, genesisHash, faucet } = chain;
  const { getAcct, encodeAccount, mintDecimals } = accounts;
  const { submit, decodeTx, verifySignatures, isDurableNonceTx, simulate, airdrop } = transactions;
  const { signatureStatus, encodeTransaction } = encoding;
  // ------------------------------------------------------------------ RPC methods

  const ctx = (value: Json, c: Commitment = 'processed') => ({ context: { apiVersion: SOLANA_CORE_VERSION, slot: chain.slotAt(c) }, value });

  function checkMinContextSlot(cfg: Cfg) {
    const m = cfg.minContextSlot;
    if (typeof m === 'number' && m > chain.slot) {
      throw new RpcError(-32016, 'Minimum context slot has not been reached', { contextSlot: chain.slot });
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
    // The stand-in's ledger is never pruned: every block from genesis on is available.
    getFirstAvailableBlock: () => 0,
    minimumLedgerSlot: () => 0,
    getBlock: (p) => {
      const slot = p[0];
      if (typeof slot !== 'number' || !Number.isSafeInteger(slot) || slot < 0) throw invalidParams('Invalid param: slot');
      const cfg: Cfg = typeof p[1] === 'string' ? { encoding: p[1] } : ((p[1] ?? {}) as Cfg);
      const c = historyCommitment(cfg);
      // Agave: a slot past the commitment's (not rooted, not confirmed yet) is BlockNotAvailable (-32004).
      if (slot > chain.slotAt(c)) throw new RpcError(-32004, `Block not available for slot ${slot}`);
      const blockhash = chain.blockhashes[slot]!;
      const details = String(cfg.transactionDetails ?? 'full');
      const enc = String(cfg.encoding ?? 'json');
      const mv = cfg.maxSupportedTransactionVersion;
      const maxVersion = mv === undefined || mv === null ? undefined : Number(mv);
      const txs = bySlot.get(slot) ?? [];
      const out: Record<string, Json> = {
        blockHeight: slot,
        blockTime: slotTimes.get(slot) ?? null,
        blockhash,
        parentSlot: Math.max(0, slot - 1),
        previousBlockhash: slot > 0 ? chain.blockhashes[slot - 1]! : blockhash,
      };
      if (details === 'full') {
        out.transactions = txs.map((rec) => {
          const { meta, transaction, version } = encodeTransaction(rec, enc, maxVersion) as Record<string, Json>;
          return version === undefined ? { meta, transaction } : { meta, transaction, version };
        });
      } else if (details === 'signatures') {
        out.signatures = txs.map((rec) => rec.tx.signature);
      } else if (details !== 'none') {
        throw invalidParams(`Invalid param: transactionDetails ${details} is not supported by the devnet`);
      }
      if (cfg.rewards !== false) out.rewards = [];
      return out;
    },
    getSlot: (p) => {
      const cfg = (p[0] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      return chain.slotAt(normCommitment(cfg.commitment));
    },
    getBlockHeight: (p) => {
      const cfg = (p[0] ?? {}) as Cfg;
      checkMinContextSlot(cfg);
      return chain.slotAt(normCommitment(cfg.commitment));
    },
    getTransactionCount: () => chain.txCount,
    getBlockTime: (p) => {
      const s = Number(p[0]);
      const t = slotTimes.get(s);
      if (t === undefined) throw new RpcError(-32004, `Block not available for slot ${s}`);
      return t;
    },
    getEpochInfo: (p) => {
      const cfg = (p[0] ?? {}) as Cfg;
      const s = chain.slotAt(normCommitment(cfg.commitment));
      return {
        absoluteSlot: s,
        blockHeight: s,
        epoch: Math.floor(s / SLOTS_PER_EPOCH),
        slotIndex: s % SLOTS_PER_EPOCH,
        slotsInEpoch: SLOTS_PER_EPOCH,
        transactionCount: chain.txCount,
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
      const s = chain.slotAt(c);
      const blockhash = blockhashBySlot.get(s) ?? blockhashBySlot.get(chain.slot)!;
      return ctx({ blockhash, lastValidBlockHeight: (blockhashHeight.get(blockhash) ?? s) + MAX_PROCESSING_AGE }, c);
    },
    isBlockhashValid: (p) => {
      if (typeof p[0] !== 'string') throw invalidParams('Invalid param: blockhash');
      checkMinContextSlot((p[1] ?? {}) as Cfg);
      return ctx(chain.blockhashValid(p[0]));
    },
    getFeeForMessage: (p) => {
      if (typeof p[0] !== 'string') throw invalidParams('Invalid param: message');
      let m: VersionedMessage;
      try {
        m = VersionedMessage.deserialize(Buffer.from(p[0], 'base64'));
      } catch {
        throw invalidParams('invalid message');
      }
      if (!chain.blockhashValid(m.recentBlockhash)) return ctx(null);
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
          account: encodeAccount(
            ea.address,
            { lamports: Number(ea.lamports), owner: ea.programAddress, data: ea.data as Uint8Array, executable: ea.executable },
            enc,
            cfg.dataSlice as never,
          ),
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
        if (!chain.visibleAt(r, c)) continue;
        out.push({
          blockTime: r.blockTime,
          confirmationStatus: chain.recordStatus(r),
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
      if (!rec || !chain.visibleAt(rec, c)) return null;
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
      const latest = blockhashBySlot.get(chain.slot)!;
      const base = {
        accounts: null as Json,
        innerInstructions: null as Json,
        loadedAccountsDataSize: 0,
        replacementBlockhash: replace ? { blockhash: latest, lastValidBlockHeight: chain.slot + MAX_PROCESSING_AGE } : null,
        returnData: null as Json,
      };
      if (!replace && !chain.blockhashValid(tx.recentBlockhash) && !isDurableNonceTx(tx)) {
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
      for (let s = Math.max(0, chain.slot - MAX_PROCESSING_AGE + 1); s <= chain.slot; s++) {
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
  return { methods };
}

/** What createMethods returns. */
export type Methods = ReturnType<typeof createMethods>;
