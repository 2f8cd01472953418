import { type BroadcastGate, OPEN_GATE } from '../../submitter/gate.ts';
import { spendable } from '../spendable.ts';
// An SVM chain behind the node's ChainAdapter, through @solana/web3.js only (any Solana JSON-RPC).
//
// Deposits: a transfer of SOL, or of an SPL / Token-2022 token, to the vault (SPL: to the vault's
// associated token account) in one transaction with a Memo v2 instruction carrying the order id.
// The quote's deposit step hands the wallet that transaction, serialized and unsigned:
//
//   items[].data = {
//     chainId,                 // the SVM chain's id in the node's config
//     transaction,             // base64 of the legacy wire transaction, signatures zeroed
//     encoding: 'base64',
//     feePayer,                // the user, or depositFeePayer (then it signs first)
//     signers,                 // base58 public keys, in signature order: [feePayer, user] or [user]
//     recentBlockhash, lastValidBlockHeight,
//     depository,              // the vault (owner of the receiving token account for SPL)
//   }
//
// Payouts (fills, refunds) are made from the solver's own account (config.svmSolverKey); see
// payoutSender.ts for how a payout is sent once at most.
import { type Connection, PublicKey, Transaction } from '@solana/web3.js';
import {
  ExtensionType,
  TOKEN_2022_PROGRAM_ID,
  getAccountLen,
  getAccountLenForMint,
  getAccountTypeOfMintType,
  getExtensionTypes,
  unpackAccount,
  unpackMint,
} from '@solana/spl-token';
import type { Config } from '../../config/load.ts';
import type { SvmChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { ChainConfigMismatch } from '../configMismatch.ts';
import { QuoteError } from '../../lib/quoteError.ts';
import { SharedReads } from '../../lib/sharedReads.ts';
import type { ChainAdapter, ChainEvents, DepositRequest, DepositStep, FillCost, FillCostRequest, PayoutHooks } from '../adapter.ts';
import { recordSvmOpening } from './auditOpening.ts';
import { IndexerDriver } from '../../indexer/driver.ts';
import { SvmDepositSource } from './depositSource.ts';
import { recentFeePercentile, SvmRpcPool, svmConnection } from './rpcPool.ts';
import { svmPayoutPipeline } from './payoutSender.ts';
import type { Payouts } from '../../submitter/pipeline.ts';
import {
  LAMPORTS_PER_SIGNATURE,
  ataOf,
  isSvmNative,
  memoInstruction,
  orderMemo,
  priorityLamports,
  svmKeypair,
  tokenProgramId,
  transferInstructions,
  type MintInfo,
} from './transactions.ts';
import { errText, RelayNodeError } from '../../lib/errors.ts';
import type { DepositRow } from '../../ledger/types.ts';

/**
 * Compute units the quote prices a payout at (the submitter simulates each real one and adds 20% and
 * 1,000). Measured on the devnet (litesvm 1.5, compute budget and memo included): a SOL payout 587
 * units, an SPL transferChecked 542, with the recipient's token account created 14,000-18,600. Public
 * clusters run costlier token programs (a transferChecked ~6,000, an account creation ~25,000), so the
 * quote keeps a margin over both.
 */
export const CU = { sol: 5_000, spl: 15_000, createAta: 40_000 };
// Quote-time prioritization fee: cached this long.
const FEE_CACHE_MS = 2_000;
// The most the node pays per compute unit, in micro-lamports, whatever recent fees say.
const MAX_MICRO_LAMPORTS_PER_CU = 10_000_000n;
// A payout's priority price is allowed at least this much (micro-lamports per compute unit) when the
// chain's is near zero: about 0.00002 SOL on the largest payout.
const PAYOUT_FEE_FLOOR = 1_000n;
// About how long the chain's commitments take (quote timeEstimate).
const CONFIRM_SECONDS = { confirmed: 1, finalized: 13 } as const;
// The indexer's cursor: the slot up to which the vault and every token account of it are read.
const SVM_CURSOR = 'svm:vault';

export class NotFoundError extends RelayNodeError {
  /** The API answers 404 for this name (routes/transactions.ts). */
  override name = 'TransactionReceiptNotFoundError';
}

export class SvmAdapter implements ChainAdapter {
  readonly chainId: number;
  readonly kind = 'svm' as const;
  readonly solver: string;
  readonly depositAddress: string;
  readonly confirmSeconds: number;
  readonly conn: Connection;
  readonly rpc: SvmRpcPool;
  readonly #vault: PublicKey;
  readonly #indexer: IndexerDriver;
  readonly #deposits: SvmDepositSource;
  // The per-address cursors of ledgers written before the indexer driver.
  readonly #legacyCursors: string[];
  readonly #submitter: Payouts;
  readonly #mints = new Map<string, Promise<MintInfo>>();
  readonly #rent = new Map<number, Promise<bigint>>();
  // The chain's priority fee, read again every FEE_CACHE_MS; never an API's read the node waits on (lib/sharedReads.ts).
  readonly #fee = new SharedReads<'chain', bigint>(true);
  #feeAt = 0;

  constructor(
    private chain: SvmChainConfig,
    config: Config,
    private ledger: Ledger,
    hooks: PayoutHooks & ChainEvents,
    metrics: Metrics,
    log: Logger,
    gate: BroadcastGate = OPEN_GATE,
  ) {
    if (!config.svmSolverKey) throw new Error(`chain ${chain.id}: an SVM chain needs svmSolverKey`);
    this.chainId = chain.id;
    this.depositAddress = chain.vault;
    this.confirmSeconds = CONFIRM_SECONDS[chain.commitment];
    // Every call goes through the chain's providers, each read pinned to the newest slot seen (rpcPool.ts).
    this.rpc = new SvmRpcPool({ chain, metrics, log });
    this.conn = svmConnection(this.rpc, chain.commitment);
    const keypair = svmKeypair(config.svmSolverKey.reveal());
    this.solver = keypair.publicKey.toBase58();
    this.#vault = new PublicKey(chain.vault);
    const clog = log.child({ chain: chain.id });
    if (this.solver === chain.vault) clog.warn('the vault is the solver: transfers from the solver to itself are not deposits');
    const sources = [this.#vault, ...chain.currencies.map((c) => ataOf(this.#vault, new PublicKey(c.address), tokenProgramId(c.tokenProgram)))];
    this.#submitter = svmPayoutPipeline({
      chain,
      ledger,
      conn: this.conn,
      history: this.rpc,
      keypair,
      hooks,
      metrics,
      log: clog,
      faults: config.faults,
      gate,
      mintInfo: (c) => this.mintInfo(c),
      priorityFee: (w) => this.#priorityFee(w),
    });
    this.#deposits = new SvmDepositSource(chain, this.conn, sources, chain.vault, new Set([this.solver]), (id) => !!ledger.deposits.get(id));
    this.#indexer = new IndexerDriver({
      // Slots read at the commitment are final: confirmed as soon as read, no unfinalized list,
      // every read from the cursor to the head.
      config: {
        chainId: chain.id,
        cursor: SVM_CURSOR,
        startBlock: 0,
        confirmations: 1,
        finalityDepth: 0,
        maxRange: Infinity,
        final: true,
        pollIntervalMs: chain.pollIntervalMs,
      },
      source: this.#deposits,
      ledger,
      events: { onConfirmed: () => hooks.depositsConfirmed(), onHead: () => {}, onChecked: () => hooks.depositsChecked?.() },
      reorgs: hooks.reorgs,
      metrics,
      log: clog,
    });
    this.#legacyCursors = sources.map((a) => `svm:${a.toBase58()}`);
  }

  async start(): Promise<void> {
    await this.#verifyDecimals();
    // The audit's opening balances, read at the node's first start on this chain before it signs
    // anything (src/audit/svmAudit.ts): from there on, everything that moves them is in the books.
    await recordSvmOpening(this.chain, this.ledger, this.conn, new PublicKey(this.solver));
    await this.#submitter.start();
    // A ledger from before the indexer driver kept one cursor per address: the driver starts at the
    // lowest of them (reading a slot again writes nothing twice).
    if (this.ledger.indexer.cursor(this.chainId, SVM_CURSOR) === undefined) {
      const old = this.#legacyCursors.map((c) => this.ledger.indexer.cursor(this.chainId, c));
      if (old.every((c) => c !== undefined)) this.ledger.tx(() => this.ledger.indexer.setCursor(this.chainId, SVM_CURSOR, Math.min(...(old as number[]))));
    }
    this.#indexer.start();
  }

  // A configured mint whose decimals are not the mint's own prices every amount of it off by a power of ten: the node
  // does not start (as the EVM adapter refuses such a token).
  async #verifyDecimals(): Promise<void> {
    const wrong: string[] = [];
    for (const c of this.chain.currencies) {
      const { decimals } = await this.mintInfo(c.address);
      if (decimals !== c.decimals) wrong.push(`${c.symbol} (${c.address}) has ${decimals} decimals, configured ${c.decimals}`);
    }
    if (wrong.length) throw new ChainConfigMismatch(`chain ${this.chainId}: ${wrong.join('; ')}`);
  }

  async stop(): Promise<void> {
    await this.#indexer.stop();
    await this.#submitter.stop();
  }

  get depositsChecked(): boolean {
    return this.#indexer.checked;
  }

  mayPayOutOf(deposit: DepositRow): boolean {
    return this.#indexer.mayPayOutOf(deposit);
  }

  payoutsQueued(): void {
    this.#submitter.wake();
  }

  progress() {
    const head = this.#indexer.head;
    const indexed = this.#indexer.indexed();
    const providers = this.rpc.health();
    return {
      head,
      indexed,
      ready: head > 0 && indexed >= head - 1 && providers.ready,
      providers: providers.providers,
      ...(providers.heldBy ? { heldBy: `chain ${this.chainId}: ${providers.heldBy}` } : {}),
    };
  }

  async txFee(txId: string): Promise<bigint> {
    const tx = await this.conn.getTransaction(txId, { commitment: 'confirmed', maxSupportedTransactionVersion: 0 });
    if (!tx?.meta) throw new NotFoundError(`transaction ${txId} is not found on chain ${this.chainId}`);
    return BigInt(tx.meta.fee);
  }

  /** The wallet reports its deposit right after sending it: wait (briefly) for the commitment. */
  indexNow(): void {
    this.#indexer.wake();
  }

  async indexTransaction(txId: string): Promise<number> {
    const end = Date.now() + Math.max(5_000, this.confirmSeconds * 2_000);
    for (;;) {
      const n = await this.#indexNow(txId);
      if (n !== undefined) return n;
      if (Date.now() > end) throw new NotFoundError(`transaction ${txId} is not ${this.chain.commitment} on chain ${this.chainId}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  // Reads one transaction now: the deposits it holds (recorded and confirmed at once), or undefined
  // when the chain does not have it at the commitment yet.
  async #indexNow(signature: string): Promise<number | undefined> {
    const tx = await this.#deposits.fetch(signature);
    if (!tx) return undefined;
    const ds = this.#deposits.parse(signature, tx);
    if (!ds.length) return 0;
    await this.#indexer.recordConfirmed(ds);
    return ds.length;
  }

  // ---------------------------------------------------------------------------------------- currencies

  mintInfo(currency: string): Promise<MintInfo> {
    let p = this.#mints.get(currency);
    if (!p) {
      const cfg = this.chain.currencies.find((c) => c.address === currency);
      p = (async () => {
        if (!cfg) throw new Error(`currency ${currency} is not configured on chain ${this.chainId}`);
        const mint = new PublicKey(currency);
        const programId = tokenProgramId(cfg.tokenProgram);
        const info = await this.conn.getAccountInfo(mint, 'confirmed');
        const state = unpackMint(mint, info, programId);
        // The associated token account program creates a Token-2022 account with ImmutableOwner besides what the mint's
        // extensions ask: its rent is that size's (a payout creating it pays that much, and the quote must charge it).
        const accountLen = programId.equals(TOKEN_2022_PROGRAM_ID)
          ? getAccountLen([...getExtensionTypes(state.tlvData).map(getAccountTypeOfMintType), ExtensionType.ImmutableOwner])
          : getAccountLenForMint(state);
        return { mint, programId, decimals: state.decimals, accountLen };
      })();
      p.catch(() => this.#mints.delete(currency));
      this.#mints.set(currency, p);
    }
    return p;
  }

  #rentExempt(bytes: number): Promise<bigint> {
    let p = this.#rent.get(bytes);
    if (!p) {
      p = this.conn.getMinimumBalanceForRentExemption(bytes).then(BigInt);
      p.catch(() => this.#rent.delete(bytes));
      this.#rent.set(bytes, p);
    }
    return p;
  }

  // Micro-lamports per compute unit: the 75th percentile of recent prioritization fees (of the
  // accounts the transaction writes, when named), capped. A payout's, read over the accounts it writes
  // (the recipient's among them), is held to twice the chain's (at least PAYOUT_FEE_FLOOR), which its
  // quote charged: anyone can write the recipient's account at a high price in a quarter of recent slots.
  async #priorityFee(writable?: PublicKey[]): Promise<bigint> {
    if (writable?.length) {
      const [own, chain] = await Promise.all([this.#readPriorityFee(writable), this.#priorityFee()]);
      const bound = 2n * chain > PAYOUT_FEE_FLOOR ? 2n * chain : PAYOUT_FEE_FLOOR;
      return own < bound ? own : bound;
    }
    if (Date.now() - this.#feeAt > FEE_CACHE_MS) {
      this.#fee.clear();
      this.#feeAt = Date.now();
    }
    return this.#fee.get('chain', () => this.#readPriorityFee());
  }

  async #readPriorityFee(writable?: PublicKey[]): Promise<bigint> {
    const fees = await this.conn.getRecentPrioritizationFees(writable?.length ? { lockedWritableAccounts: writable } : undefined);
    // The pool answers with the providers' lower median of this percentile (rpcPool.ts #lowerMedianFees).
    const p75 = recentFeePercentile(fees.map((f) => BigInt(f.prioritizationFee)));
    return p75 > MAX_MICRO_LAMPORTS_PER_CU ? MAX_MICRO_LAMPORTS_PER_CU : p75;
  }

  async #txFee(units: number): Promise<bigint> {
    return LAMPORTS_PER_SIGNATURE + priorityLamports(units, await this.#priorityFee());
  }

  async balanceOf(owner: string, currency: string): Promise<bigint> {
    const who = new PublicKey(owner);
    if (isSvmNative(currency)) return BigInt(await this.conn.getBalance(who, 'confirmed'));
    const mint = await this.mintInfo(currency);
    // Read as an account (pinned to the newest slot seen, unlike getTokenAccountBalance, whose "no such
    // account" error carries no slot): absent at a slot at or past the newest seen is really absent.
    const ata = ataOf(who, mint.mint, mint.programId);
    const info = await this.conn.getAccountInfo(ata, 'confirmed');
    return info ? unpackAccount(ata, info, mint.programId).amount : 0n; // no token account: nothing held
  }

  async balance(currency: string): Promise<bigint> {
    return spendable(this.ledger, this.chainId, currency, async () => {
      const held = await this.balanceOf(this.solver, currency);
      // The solver's own account stays rent-exempt.
      return isSvmNative(currency) ? held - (await this.#rentExempt(0)) : held;
    });
  }

  async fillCost(req: FillCostRequest): Promise<FillCost> {
    const recipient = new PublicKey(req.recipient);
    if (isSvmNative(req.currency)) {
      const [lamports, fee] = await Promise.all([this.conn.getBalance(recipient, 'confirmed'), this.#txFee(CU.sol)]);
      // A new account must be left rent-exempt by the payout itself.
      const minimumAmount = lamports === 0 ? await this.#rentExempt(0) : 0n;
      return { native: fee, rent: 0n, minimumAmount };
    }
    const mint = await this.mintInfo(req.currency);
    const ata = ataOf(recipient, mint.mint, mint.programId);
    const exists = (await this.conn.getAccountInfo(ata, 'confirmed')) !== null;
    const rent = exists ? 0n : await this.#rentExempt(mint.accountLen);
    const fee = await this.#txFee(CU.spl + (exists ? 0 : CU.createAta));
    return { native: fee + rent, rent, minimumAmount: 0n };
  }

  async refundCost(currency: string): Promise<bigint> {
    if (isSvmNative(currency)) return this.#txFee(CU.sol);
    // An SPL refund (or excess) is paid to the depositor's associated token account, which the payout
    // creates at the solver's expense when it is missing. The depositor is whoever owned the token
    // account that paid, which may be a plain account of a fresh key with no associated one: the rent
    // is charged on every SPL refund, or anyone could have the solver create accounts and then close
    // them to take the rent.
    const mint = await this.mintInfo(currency);
    const [fee, rent] = await Promise.all([this.#txFee(CU.spl + CU.createAta), this.#rentExempt(mint.accountLen)]);
    return fee + rent;
  }

  async depositCost(): Promise<bigint> {
    return LAMPORTS_PER_SIGNATURE;
  }

  async depositSteps(req: DepositRequest): Promise<DepositStep[]> {
    if (req.depositAddressFor !== undefined)
      throw new QuoteError(`useDepositAddress: chain ${this.chainId} offers no deposit addresses`, 'INVALID_INPUT_PARAMETERS');
    if (req.permitDeadline !== undefined) throw new QuoteError('usePermit: SVM deposits are transactions the user signs', 'INVALID_INPUT_PARAMETERS');
    if (req.feePayer !== undefined && req.feePayer === req.user) throw new QuoteError('depositFeePayer: must differ from user', 'INVALID_INPUT_PARAMETERS');
    const user = new PublicKey(req.user);
    const feePayer = req.feePayer !== undefined ? new PublicKey(req.feePayer) : user;
    const { blockhash, lastValidBlockHeight } = await this.conn.getLatestBlockhash('confirmed');
    const tx = new Transaction({ feePayer, blockhash, lastValidBlockHeight });
    if (isSvmNative(req.currency)) {
      tx.add(...transferInstructions({ from: user, to: this.#vault, amount: req.amount, payer: feePayer }));
    } else {
      const mint = await this.mintInfo(req.currency);
      // The vault's token account is normally there; when it is not, the deposit creates it.
      const vaultAta = ataOf(this.#vault, mint.mint, mint.programId);
      const exists = (await this.conn.getAccountInfo(vaultAta, 'confirmed')) !== null;
      tx.add(...transferInstructions({ from: user, to: this.#vault, amount: req.amount, mint, createAta: !exists, payer: feePayer }));
    }
    tx.add(memoInstruction(orderMemo(req.orderId)));
    let wire: Buffer;
    try {
      wire = tx.serialize({ requireAllSignatures: false, verifySignatures: false });
    } catch (e) {
      throw new QuoteError(`the deposit transaction exceeds the 1,232-byte limit: ${errText(e)}`, 'TRANSACTION_TOO_LARGE');
    }
    const signers = feePayer.equals(user) ? [user.toBase58()] : [feePayer.toBase58(), user.toBase58()];
    return [
      {
        id: 'deposit',
        kind: 'transaction',
        action: 'Confirm transaction in your wallet',
        description: 'Deposit funds to the relayer',
        data: {
          chainId: this.chainId,
          transaction: wire.toString('base64'),
          encoding: 'base64',
          feePayer: feePayer.toBase58(),
          signers,
          recentBlockhash: blockhash,
          lastValidBlockHeight,
          depository: this.chain.vault,
        },
        check: 'status-v3',
      },
    ];
  }
}
