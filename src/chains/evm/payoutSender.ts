// How an EVM destination chain pays (the payout pipeline's PayoutSender, src/submitter/), in the pipeline's
// three stages (as Hyperlane's serial submitter does it):
//   prepare  build the call, estimate gas, price it (EIP-1559);
//   submit   take the next nonce, sign locally, record in the ledger (one transaction with the payout's
//            new state and the hook), and only then broadcast;
//   confirm  read receipts, settle the payout, rebroadcast what the node forgot, replace what is stuck at
//            the same nonce with higher fees, and reconcile nonces taken by something else.
//
// Fills that wait together are paid together: one OrderFiller.fillBatch transaction carries up to
// BATCH_MAX_ORDERS orders (and BATCH_MAX_GAS gas), each paid or skipped on its own. A batch is never
// waited for: a fill leaves at once when a sending slot is free, and the fills that arrive while the
// slots are busy leave together in the next one (the pipeline's batch slots). The batch transaction is
// recorded with a row per payout it carries (same hash and nonce; its signed bytes stored once, keyed by
// the hash) in the same ledger transaction, before broadcast, as a lone fill is; a change of its state is
// one statement over its rows. The confirm pass works per nonce, and reads each order's own OrderFilled
// (paid) or FillSkipped (requeued, to be sent alone, where it is paid or fails with its own reason) from
// the receipt. A batch that reverted paid nothing: its payouts settle together, each queued to go alone.
//
// Never paying twice rests on three things: every signed transaction is in the ledger before it can reach
// the chain; a payout is only signed again (at a new nonce) once its earlier nonce is provably consumed
// without any of its transactions; and the contracts themselves refuse a second payment (OrderFiller's
// filled(orderId), the depository's single-use call request, whose nonce and expiration are derived from
// the payout so that every signing of the same refund is the same request).

import {
  decodeErrorResult,
  decodeEventLog,
  encodeFunctionData,
  erc20Abi,
  getAbiItem,
  getAddress,
  isAddress,
  isHex,
  keccak256,
  maxUint256,
  parseSignature,
  parseTransaction,
  size,
  toEventSelector,
  toHex,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  zeroAddress,
  type Address,
  type Hex,
  type LocalAccount,
  type PublicClient,
  type SignedAuthorizationList,
  type TransactionReceipt,
} from 'viem';
import { DepositAddressFactoryAbi, OrderFillerAbi, RelayDepositoryAbi } from '../../../contracts-abi/index.ts';
import type { EvmChainConfig } from '../../config/schema.ts';
import type { Faults } from '../../config/load.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { TransactionRow, PayoutRow } from '../../ledger/types.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import type { PayoutHooks } from '../adapter.ts';
import type { SignedCallOutcome } from '../ports.ts';
import { RelayNodeError } from '../../lib/errors.ts';
import { UnpayableError } from '../../submitter/errors.ts';
import { PayoutPipeline, type Payouts } from '../../submitter/pipeline.ts';
import type {
  BatchResult,
  BatchSending,
  BroadcastResult,
  PayoutSender,
  PostponeReason,
  PrepareResult,
  StepContext,
  SubmitResult,
  TxStatus,
} from '../../submitter/port.ts';
import { mark } from '../../lib/benchMarks.ts';
import { callRequestId, erc20TransferCall, nativeTransferCall, signCallRequest, type CallRequest } from './callRequest.ts';
import { bumped, FeeCapError, FeeOracle, replacementWithinCap, withinCap, type Eip1559Fees, type FeeHead } from './fees.ts';
import { crashPoint } from '../../submitter/faults.ts';
import { type BroadcastGate, OPEN_GATE } from '../../submitter/gate.ts';
import { fillGas, GAS, gasLimitWithin, plainFillBound, refundGas } from './gas.ts';
import { receiptFee } from './l1DataFee.ts';
import { NonceManager } from './nonceManager.ts';
import { DEFAULT_RELAY_MAX_WAIT_MS, parseRelayTerms, RELAY_EXPIRED, relayExpiry } from './relayTerms.ts';
import { ALREADY_KNOWN, decodeRevert, errText, exceededAllowance, FEE_REFUSED, fullText, isRevert, NO_FUNDS, NONCE_TOO_LOW } from './rpcErrors.ts';

/** What an EVM chain's payouts need. */
export interface EvmPayoutOptions {
  chain: EvmChainConfig;
  ledger: Ledger;
  publicClient: PublicClient;
  /** The solver key: signs and pays for every payout transaction. */
  account: LocalAccount;
  /** Signs the depository's call requests (refunds): a local key or a remote signer. */
  allocator: LocalAccount;
  hooks: PayoutHooks;
  metrics: Metrics;
  log: Logger;
  faults: Faults;
  /** Asked right before anything is sent to the chain (active/standby: only the lease's holder, before its deadline). */
  gate?: BroadcastGate;
}

// A refund's call request stays valid this long after the payout was decided. Derived from the payout row
// (not from the clock at signing) so that re-signing the same refund yields the same, single-use request.
const REFUND_TTL_SECONDS = 7 * 24 * 3600;
const APPROVE_THRESHOLD = 2n ** 255n;
// Reverts by which the contracts say the payment exists already.
const ALREADY_PAID = /^(OrderAlreadyFilled|CallRequestAlreadyUsed)\(/;
// Tries at starting before giving up (about 16 s of backoff in all).
const START_ATTEMPTS = 6;
const PREPARE_CONCURRENCY = 16;
// How often the send and confirm passes run when no head and no queued payout woke them.
const BACKSTOP_MS = 1_000;
const QUEUED_BATCH = 500;
const OPEN_STATES = new Set(['signed', 'broadcast']);
// Bounds of a batched fill: orders per transaction, its gas, and how many batches may be in flight
// (being estimated, signed, broadcast) at once. Fills arriving while all slots are busy wait for the
// next free one, which bounds their wait by one send.
const BATCH_MAX_ORDERS = 100;
const BATCH_MAX_GAS = 8_000_000n;
// What OrderFiller.fillBatch gives each order's transfer (its BATCH_CALL_GAS).
const BATCH_CALL_GAS = 100_000n;
const BATCH_SLOTS = 2;
// A cancel of a fee-capped transaction: a zero-value transfer to the solver itself (no calldata, no code).
const CANCEL_GAS = 21_000n;
// Blocks a stuck transaction sits at the cap, past its replacement point, before feeCapPolicy 'cancel' acts (absent from the config).
const DEFAULT_CANCEL_AFTER_BLOCKS = 10;

const orderFilledEvent = getAbiItem({ abi: OrderFillerAbi, name: 'OrderFilled' });
const callExecutedEvent = getAbiItem({ abi: RelayDepositoryAbi, name: 'RelayCallExecuted' });
const fillSkippedEvent = getAbiItem({ abi: OrderFillerAbi, name: 'FillSkipped' });
// The filler's events by their first topic: a batch's receipt carries one OrderFilled per order it paid, and only its
// indexed order id (topics[1]) is read from it, so it is not decoded whole (viem's decoding checksummed its two
// addresses, a keccak each, for every order of every batch).
const ORDER_FILLED_TOPIC = toEventSelector(orderFilledEvent);
const FILL_SKIPPED_TOPIC = toEventSelector(fillSkippedEvent);

// One order of a fillBatch call.
interface BatchFill {
  orderId: Hex;
  token: Address;
  recipient: Address;
  amount: bigint;
}

interface PreparedCall {
  to: Address;
  data: Hex;
  value: bigint;
  /** The depository call request of a refund (its struct hash is the single-use key). */
  request?: CallRequest;
  /** A gasless relay's EIP-7702 authorizations: the call is sent as a type-4 transaction. */
  authorizationList?: SignedAuthorizationList;
}

// A payment found on chain: the transaction that made it.
interface PaidBy {
  txHash: Hex;
  blockNumber: bigint;
  gasUsed: bigint;
  /** What the solver paid for the transaction (0 when another sender made it). */
  fee: bigint;
  /** The payout's share of that fee when the transaction paid several orders (a batch). */
  share?: bigint;
}

/** A payout's call, its gas limit and the fees to sign it at. */
export interface EvmPrepared {
  call: PreparedCall;
  gas: bigint;
  fees: Eip1559Fees;
}

/** A recorded transaction, ready to broadcast (a batch's: recorded for each payout it carries; named by its first). */
export interface EvmSigned {
  payoutId: string;
  hash: Hex;
  raw: Hex;
}

// A gasless relay's call as POST /execute recorded it (payout.authorization: its RelayTerms).
function relayCall(payout: PayoutRow): PreparedCall {
  try {
    const t = parseRelayTerms(payout.authorization);
    return { to: t.to, data: t.data, value: t.value, authorizationList: t.authorizationList.length ? t.authorizationList : undefined };
  } catch (e) {
    throw new UnpayableError(`relay ${payout.id}: ${errText(e)}`, 'TRANSACTION_SUBMISSION_FAILED', { cause: e });
  }
}

function isOpen(t: TransactionRow): boolean {
  return OPEN_STATES.has(t.state);
}

// The gas a payout that pays a recipient was priced at (a fill's quote fee, a refund's charge; a claim as a
// refund), undefined for those whose target is the node's own (a withdrawal, a sweep, a signed deposit).
function pricedGas(payout: PayoutRow): bigint | undefined {
  const native = getAddress(payout.currency) === zeroAddress;
  if (payout.kind === 'fill') return fillGas(native, BigInt(payout.native_topup ?? 0) > 0n);
  if (payout.kind === 'refund' || payout.kind === 'excess' || payout.kind === 'claim') return refundGas(native);
  return undefined;
}

/**
 * The payout pipeline of an EVM chain over its sender, with the chain's head feeding fees and the
 * confirm pass (what the adapter holds).
 */
export class EvmPayouts implements Payouts {
  readonly chainId: number;
  readonly address: Address;
  readonly #sender: EvmPayoutSender;
  readonly #pipeline: PayoutPipeline<EvmPrepared, EvmSigned>;

  constructor(opts: EvmPayoutOptions) {
    this.#sender = new EvmPayoutSender(opts);
    this.chainId = this.#sender.chainId;
    this.address = this.#sender.address;
    this.#pipeline = new PayoutPipeline(this.#sender, {
      ledger: opts.ledger,
      hooks: opts.hooks,
      metrics: opts.metrics,
      log: this.#sender.log,
      faults: opts.faults,
      intervalMs: opts.chain.pollIntervalMs,
      // Heads (onHead) wake the confirm pass and payoutsQueued the send pass: the timers only back them up.
      backstopMs: Math.max(opts.chain.pollIntervalMs, BACKSTOP_MS),
      concurrency: PREPARE_CONCURRENCY,
      queuedBatch: QUEUED_BATCH,
      startAttempts: START_ATTEMPTS,
    });
  }

  /** Reconciles what the ledger holds against the chain, ensures ERC-20 approvals, then starts sending. */
  start(): Promise<void> {
    return this.#pipeline.start();
  }

  /** Stops taking work, waits for payouts being prepared or broadcast and for a running confirm pass. */
  stop(): Promise<void> {
    return this.#pipeline.stop();
  }

  /** New queued payouts exist in the ledger for this chain. */
  wake(): void {
    this.#pipeline.wake();
  }

  /** Asks for a confirm pass soon. */
  confirmSoon(): void {
    this.#pipeline.confirmSoon();
  }

  /** Runs a confirm and reconcile pass now (or one more after the running one) and resolves when done. */
  confirmNow(): Promise<void> {
    return this.#pipeline.confirmNow();
  }

  /** Where the payout's signed depository call stands: executed, or executable until its expiry (SignedCalls). */
  callOutcome(payout: PayoutRow): Promise<SignedCallOutcome | undefined> {
    return this.#sender.callOutcome(payout);
  }

  /**
   * A head from the chain's head tracker: drives fees, confirmation and replacement. `isNew`: a block
   * not reported before (a head read again only refreshes the fees; nothing can have been confirmed).
   */
  onHead(head: FeeHead, isNew = true): void {
    this.#sender.onHead(head);
    if (isNew) this.#pipeline.confirmSoon();
  }
}

/** Builds, signs, records, broadcasts, confirms and replaces EVM payout transactions (the chain-specific half of the payout pipeline). */
export class EvmPayoutSender implements PayoutSender<EvmPrepared, EvmSigned> {
  readonly chainId: number;
  readonly address: Address;
  readonly label = 'evm';
  readonly log: Logger;

  readonly #chain: EvmChainConfig;
  readonly #ledger: Ledger;
  readonly #client: PublicClient;
  readonly #account: LocalAccount;
  readonly #allocator: LocalAccount;
  readonly #hooks: PayoutHooks;
  readonly #metrics: Metrics;
  readonly #log: Logger;
  readonly #fees: FeeOracle;
  readonly #nonces: NonceManager;
  readonly #chainLabel: { chain: string };
  readonly #feeCap: bigint | undefined;
  // How long a capped transaction waits before a cancel takes its nonce, and the most a cancel pays per gas (none: the
  // market's replacement fees). Acted on for any transaction under feeCapPolicy 'cancel' (#cancelPolicy), and for a
  // relay held at its own cap whatever the policy.
  readonly #cancel: { afterBlocks: bigint; maxFeePerGas: bigint | undefined };
  readonly #cancelPolicy: boolean;
  // How long a sponsored relay may wait unsigned after its admission before it fails (relayMaxWaitMs).
  readonly #relayMaxWaitMs: number;
  readonly #faults: Faults;
  readonly #gate: BroadcastGate;

  // Transactions whose broadcast is under way (the confirm pass leaves them alone).
  readonly #broadcasting = new Set<Hex>();
  // Fills a batch skipped (or a batch that reverted): sent alone from now on, so each meets its own fate.
  readonly #alone = new Set<string>();
  // Nonces seen used with no receipt served for any transaction at them: acted on at a later look only.
  readonly #noReceipt = new Set<number>();
  // A batch's receipt is read once per fill it carries: its filler events are parsed once.
  readonly #parsedReceipts = new WeakMap<TransactionReceipt, { filled: Map<string, number>; skipped: Map<string, Hex> }>();
  // What the confirm pass under way requeued (it runs one at a time).
  #requeued: TxStatus[] = [];

  constructor(opts: EvmPayoutOptions) {
    this.#chain = opts.chain;
    this.chainId = opts.chain.id;
    this.#ledger = opts.ledger;
    this.#client = opts.publicClient;
    this.#account = opts.account;
    this.address = getAddress(opts.account.address);
    this.#allocator = opts.allocator;
    this.#hooks = opts.hooks;
    this.#metrics = opts.metrics;
    this.#chainLabel = { chain: String(opts.chain.id) };
    this.#feeCap = opts.chain.maxFeePerGas === undefined ? undefined : BigInt(opts.chain.maxFeePerGas);
    const cancelCap = opts.chain.cancelMaxFeePerGas ?? (this.#feeCap === undefined ? undefined : bumped(this.#feeCap));
    this.#cancel = {
      afterBlocks: BigInt(opts.chain.feeCapCancelAfterBlocks ?? DEFAULT_CANCEL_AFTER_BLOCKS),
      maxFeePerGas: cancelCap === undefined ? undefined : BigInt(cancelCap),
    };
    this.#cancelPolicy = opts.chain.feeCapPolicy === 'cancel';
    this.#relayMaxWaitMs = opts.chain.relayMaxWaitMs ?? DEFAULT_RELAY_MAX_WAIT_MS;
    this.#faults = opts.faults;
    this.#gate = opts.gate ?? OPEN_GATE;
    this.#log = this.log = opts.log.child({ component: 'evm-submitter', chainId: opts.chain.id, solver: this.address });
    // The confirm timer refreshes the head every poll interval; pricing only reads it itself when that lags.
    this.#fees = new FeeOracle(opts.publicClient, 2 * opts.chain.pollIntervalMs);
    this.#nonces = new NonceManager({ client: opts.publicClient, ledger: opts.ledger, chainId: opts.chain.id, address: this.address });
  }

  // ------------------------------------------------------------------------------------------ lifecycle

  /** The head and the next nonce, before the first confirm pass. */
  async init(): Promise<void> {
    await this.#fees.refreshHead();
    const next = await this.#nonces.init();
    this.#log.info({ nextNonce: next }, 'submitter starting: reconciling ledger with chain');
  }

  /** ERC-20 approvals of the filler, once the ledger is reconciled. */
  async ready(): Promise<void> {
    await this.#ensureAllowances();
    this.#log.info({ nextNonce: this.#nonces.peek() }, 'submitter started');
  }

  /** A new head: fees follow it. */
  onHead(head: FeeHead): void {
    this.#fees.onHead(head);
  }

  /** Fee-cap waits, the solver lacking native funds, or an RPC error. */
  classify(err: unknown): PostponeReason {
    if (err instanceof FeeCapError) return 'fee-cap';
    return NO_FUNDS.test(fullText(err)) ? 'no-funds' : 'rpc';
  }

  // ------------------------------------------------------------------------------------------ prepare + submit

  // A payout's lines carry its id and its request's (requestId), whatever the caller's logger.
  #payoutLog(payout: string | Pick<PayoutRow, 'id' | 'request_id'>, base: Logger = this.#log): Logger {
    const p = typeof payout === 'string' ? (this.#ledger.payouts.get(payout) ?? { id: payout, request_id: null }) : payout;
    return base.child({ payout: p.id, ...(p.request_id ? { requestId: p.request_id } : {}) });
  }

  /** The call, its gas (estimate plus the chain's margin) and fees within the cap; or why not now, or never. */
  async prepare(payout: PayoutRow, { log }: StepContext): Promise<PrepareResult<EvmPrepared>> {
    // A sponsored relay not signed by its deadline fails first, whatever the market says now (a relay sent after it is
    // not what its caller asked for), and before any RPC read (one waiting on a provider has a deadline too).
    const expired = this.#relayExpiry(payout);
    if (expired) return { kind: 'unpayable', reason: RELAY_EXPIRED, detail: expired, stillHolds: (cur) => this.#relayExpiry(cur) !== undefined };
    const call = await this.#buildCall(payout);
    mark(payout.request_id, 'evm:built');
    const blockNumber = this.#simulationFloor(payout);
    const [estimate, market] = await Promise.all([
      this.#client
        .estimateGas({
          account: this.address,
          to: call.to,
          data: call.data,
          value: call.value,
          authorizationList: call.authorizationList,
          ...(blockNumber !== undefined ? { blockNumber } : {}),
        })
        .then(
          (gas) => ({ gas }),
          (error: unknown) => ({ error }),
        )
        .finally(() => mark(payout.request_id, 'evm:estimated')),
      this.#fees.current().finally(() => mark(payout.request_id, 'evm:fees')),
    ]);
    // Over the chain's fee cap, or a relay's own, the payout waits unsigned (no nonce is held behind it).
    const cap = this.#capOf(payout);
    const fees = withinCap(market, cap);
    const capWait = (): PrepareResult<EvmPrepared> => ({
      kind: 'retry',
      why: 'fee-cap',
      cause: new FeeCapError(`the base fee asks ${market.maxFeePerGas - market.maxPriorityFeePerGas} wei x2; the cap is ${cap} wei per gas`),
    });
    // A relay whose call reverts now is judged before it waits: failed, its sponsor's hold is released (onRelayFailed),
    // rather than held for as long as the market stays above the relay's cap.
    if (!fees && !(payout.kind === 'relay' && 'error' in estimate && isRevert(estimate.error))) return capWait();
    if ('error' in estimate) {
      // Out of gas at the chain's own limit (or above what one transaction may carry): no gas the node would sign makes
      // it run. Taken for want of funds, it was postponed for ever, and paid once whoever made it so (a recipient or a
      // refund target returning a megabyte) chose: a fill priced at its decision's rate, paid once the market moved.
      if (this.#outOfGasAtCap(estimate.error))
        return { kind: 'unpayable', reason: 'QUOTED_GAS_LIMIT_EXCEEDED', detail: 'runs out of gas at any limit one transaction may carry' };
      if (!isRevert(estimate.error)) throw estimate.error;
      return await this.#onSimulationRevert(payout, call, estimate.error, log);
    }
    // Calls were priced at the gas the quote simulated them at; costlier now, they are not made.
    if (payout.max_gas !== null && estimate.gas > BigInt(payout.max_gas)) {
      return { kind: 'unpayable', reason: 'QUOTED_GAS_LIMIT_EXCEEDED', detail: `needs ${estimate.gas} gas, quoted ${payout.max_gas}` };
    }
    // The filler and the depository give a plain payout's recipient all of the transaction's gas: a
    // recipient that would take more than GAS.recipient beyond what the payout was priced at is not paid
    // (the solver would bear the rest, as often as anyone names such a contract).
    const priced = payout.max_gas === null ? pricedGas(payout) : undefined;
    if (priced !== undefined && estimate.gas > priced + GAS.recipient) {
      return {
        kind: 'unpayable',
        reason: 'QUOTED_GAS_LIMIT_EXCEEDED',
        detail: `needs ${estimate.gas} gas; a ${payout.kind} is priced at ${priced} and its recipient may take ${GAS.recipient} more`,
      };
    }
    const margined = gasLimitWithin(estimate.gas, this.#chain.gasMarginBps, this.#fees.txGasCap());
    if (margined === undefined) {
      return {
        kind: 'unpayable',
        reason: 'QUOTED_GAS_LIMIT_EXCEEDED',
        detail: `needs ${estimate.gas} gas, more than one transaction may carry (${this.#fees.txGasCap()})`,
      };
    }
    // The margin stops at that bound too: a recipient estimated just under it burned the margin as well. Likewise a call
    // order's or a relay's stops at the gas it was priced and held at (max_gas, its quote's estimate with the margin):
    // code whose estimate grew since to just under it burned the margin on top, unpriced.
    const bound = priced !== undefined ? priced + GAS.recipient : payout.max_gas !== null ? BigInt(payout.max_gas) : undefined;
    const gas = bound !== undefined && margined > bound ? bound : margined;
    if (!fees) return capWait();
    return { kind: 'ready', prepared: { call, gas, fees } };
  }

  // Whether an estimate ran out of gas at the chain's own limit, or above what one transaction may carry
  // (rpcErrors.exceededAllowance): not for want of funds.
  #outOfGasAtCap(err: unknown): boolean {
    const allowance = exceededAllowance(err);
    return allowance !== undefined && allowance >= this.#fees.txGasCap();
  }

  // The most a payout is signed or bumped at per gas: the chain's cap (maxFeePerGas), and a sponsored relay's own, the
  // fee cap its sponsor's hold was computed with (max_fee_per_gas), the lower of the two. Past the relay's, its gas
  // would cost more than the hold covers: the sponsor charged past what it had available, the rest the solver's.
  #capOf(payout: Pick<PayoutRow, 'max_fee_per_gas'> | undefined): bigint | undefined {
    const own = payout?.max_fee_per_gas == null ? undefined : BigInt(payout.max_fee_per_gas);
    if (own === undefined) return this.#feeCap;
    return this.#feeCap !== undefined && this.#feeCap < own ? this.#feeCap : own;
  }

  // Whether a relay's payout has waited unsigned past its chain's relayMaxWaitMs (relayExpiry: never one with a
  // transaction that may still land). Read from the ledger when preparing, and again in the transaction that fails it.
  #relayExpiry(payout: PayoutRow): string | undefined {
    if (payout.kind !== 'relay') return undefined;
    return relayExpiry(payout, this.#ledger.payouts.txsOf(payout.id).filter(isOpen).length, this.#relayMaxWaitMs, Date.now());
  }

  // Whether the cap that holds this payout is a sponsored relay's own (below the chain's): a relay stuck there is the
  // sponsor's doing, not the operator's, and is cancelled whatever feeCapPolicy says (#replace), then failed once its
  // cancel lands (#settleLandedUnpaid). Derived from the payout and the config alone, so a restarted node decides alike.
  #heldAtOwnCap(payout: Pick<PayoutRow, 'kind' | 'max_fee_per_gas'> | undefined): boolean {
    if (payout?.kind !== 'relay' || payout.max_fee_per_gas == null) return false;
    return this.#feeCap === undefined || BigInt(payout.max_fee_per_gas) < this.#feeCap;
  }

  // A payout of a deposit's own money (its refund, its excess) is simulated at the deposit's block or later
  // (the newest head this chain's fees have seen): a provider behind the deposit answers that it lacks the
  // block, an error the payout waits out. At that provider's `latest` the depository lacked the deposit,
  // the simulation reverted, and the refund was failed for an operator (chaos seed 121).
  #simulationFloor(payout: PayoutRow): bigint | undefined {
    if ((payout.kind !== 'refund' && payout.kind !== 'excess') || !payout.deposit_id) return undefined;
    const deposit = this.#ledger.deposits.get(payout.deposit_id);
    if (!deposit || deposit.chain_id !== this.chainId) return undefined;
    const head = this.#fees.headNumber() ?? 0n;
    const at = BigInt(deposit.block_number);
    return head > at ? head : at;
  }

  /** Takes the next nonce, signs, and records the transaction with the payout's `sent` state and `onSigned` in one ledger transaction. */
  async submit(payout: PayoutRow, { call, gas, fees }: EvmPrepared, { log }: StepContext): Promise<SubmitResult<EvmSigned>> {
    mark(payout.request_id, 'evm:submit');
    const recorded = await this.#nonces.withNonce(async (nonce) => {
      mark(payout.request_id, 'evm:nonce');
      const raw = await this.#account.signTransaction({
        ...(call.authorizationList ? { type: 'eip7702' as const, authorizationList: call.authorizationList } : { type: 'eip1559' as const }),
        chainId: this.chainId,
        nonce,
        to: call.to,
        data: call.data,
        value: call.value,
        gas,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      });
      const hash = keccak256(raw);
      mark(payout.request_id, 'evm:signed');
      const ok = this.#recordSigned([payout.id], { hash, raw, nonce, gas, fees });
      mark(payout.request_id, 'evm:recorded');
      if (ok) this.#broadcasting.add(hash);
      return { consumed: ok, value: ok ? { hash, raw, nonce } : undefined };
    });
    mark(payout.request_id, 'evm:unlocked');
    if (!recorded) return { kind: 'stale' };
    log.info({ txHash: recorded.hash, nonce: recorded.nonce, gas: gas.toString(), maxFeePerGas: fees.maxFeePerGas.toString() }, 'payout signed and recorded');
    return { kind: 'recorded', txHash: recorded.hash, signed: { payoutId: payout.id, hash: recorded.hash, raw: recorded.raw } };
  }

  /**
   * Records a signed transaction for its payouts in one ledger transaction, before it is broadcast: the
   * transaction row of each, the payout sent, `onSigned`. All or none: a payout that moved on since it
   * was read (no longer queued) sends the transaction back unrecorded (a batch goes back to the queue).
   */
  #recordSigned(
    payoutIds: string[],
    tx: { hash: Hex; raw: Hex; nonce: number; gas: bigint; fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } },
  ): boolean {
    return this.#ledger.tx(() => {
      // A batch's payouts in one read (one statement, one round trip on PostgreSQL), in the batch's order.
      const byId = new Map(this.#ledger.payouts.getMany(payoutIds).map((p) => [p.id, p]));
      const current = payoutIds.map((id) => byId.get(id));
      if (current.some((cur) => !cur || cur.state !== 'queued')) return false;
      for (const [i, cur] of (current as PayoutRow[]).entries()) {
        this.#ledger.payouts.insertTx({
          hash: tx.hash,
          payout_id: cur.id,
          chain_id: this.chainId,
          sender: this.address,
          nonce: tx.nonce,
          // The bytes once, with the first row (a batch's other rows reference them).
          raw: i === 0 ? tx.raw : undefined,
          gas_limit: tx.gas.toString(),
          max_fee_per_gas: tx.fees.maxFeePerGas.toString(),
          max_priority_fee_per_gas: tx.fees.maxPriorityFeePerGas.toString(),
          created_at: Date.now(),
        });
      }
      // Every payout the transaction carries marked sent in one statement, then each one's hook.
      this.#ledger.payouts.setStateMany(payoutIds, 'sent', { txHash: tx.hash });
      for (const cur of current as PayoutRow[]) this.#hooks.onSigned(cur, tx.hash);
      return true;
    });
  }

  /** Broadcasts a recorded transaction; a refusal is left to the confirm pass. */
  async broadcast(s: EvmSigned, { log }: StepContext): Promise<BroadcastResult> {
    await this.#broadcast(s.payoutId, s.hash, s.raw, log);
    return { kind: 'sent' };
  }

  /** Plain fills (native or ERC-20, no calls, no gas top-up) ride in OrderFiller.fillBatch transactions. */
  readonly batch: BatchSending<EvmSigned> = {
    maxPayouts: BATCH_MAX_ORDERS,
    slots: BATCH_SLOTS,
    batchable: (row) => row.kind === 'fill' && !row.calls && !(row.native_topup && BigInt(row.native_topup) > 0n) && !this.#alone.has(row.id),
    check: (payout) => void this.#batchFill(payout),
    submitBatch: (payouts, ctx) => this.#submitBatch(payouts, ctx.log),
  };

  #markId(payoutId: string): string | undefined {
    return process.env.BENCH_MARKS === '1' ? (this.#ledger.payouts.get(payoutId)?.request_id ?? undefined) : undefined;
  }

  // Several fills in one fillBatch transaction, recorded for every payout it carries before broadcast.
  async #submitBatch(payouts: PayoutRow[], log: Logger): Promise<BatchResult<EvmSigned>> {
    const fills = payouts.map((payout) => ({ payout, fill: this.#batchFill(payout) }));
    const value = fills.reduce((sum, f) => (f.fill.token === zeroAddress ? sum + f.fill.amount : sum), 0n);
    const data = encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillBatch', args: [fills.map((f) => f.fill)] });
    const [estimate, market, coded] = await Promise.all([
      this.#client.estimateGas({ account: this.address, to: this.#chain.filler, data, value }).then(
        (gas) => ({ gas }),
        (error: unknown) => ({ error }),
      ),
      this.#fees.current(),
      this.#recipientsWithCode(fills),
    ]);
    // The filler gives each recipient of a batch BATCH_CALL_GAS, whatever its fill was priced at, and code that burns
    // only on chain (not in an estimate, sent at a gas price of 0) takes all of it: a native fill quoted to a recipient
    // without code, which has code now (given it after its quote), goes alone, where its gas is bounded by the plain
    // fill it was priced as (prepare, its maxGas); the others stay together.
    if (coded.size > 0) {
      for (const id of coded) this.#alone.add(id);
      const rest = payouts.filter((p) => !coded.has(p.id));
      return { kind: 'split', parts: [...(rest.length ? [rest] : []), ...payouts.filter((p) => coded.has(p.id)).map((p) => [p])] };
    }
    const fees = withinCap(market, this.#feeCap);
    if (!fees) {
      // Above the chain's fee cap: each fill goes the lone path, which waits on the cap unsigned.
      for (const f of fills) this.#alone.add(f.payout.id);
      return { kind: 'alone' };
    }
    if ('error' in estimate) {
      if (!isRevert(estimate.error) && !this.#outOfGasAtCap(estimate.error)) throw estimate.error;
      // The batch skips bad orders rather than reverting; if it reverts (or runs out of gas at the cap) anyway, each goes alone.
      log.warn({ err: errText(estimate.error) }, 'batch simulation reverted; sending its fills one by one');
      for (const f of fills) this.#alone.add(f.payout.id);
      return { kind: 'alone' };
    }
    // Over the batch bound, over what one transaction may carry even before the margin, or over the gas its fills
    // were priced at (the filler gives each recipient of a batch 100,000 gas: one whose receive burns what it is
    // given would have its fill paid at a loss, as often as anyone quotes orders to it): halves, down to fills sent
    // alone, where a recipient's gas is bounded by its own price.
    const priced = fills.reduce((sum, f) => sum + (pricedGas(f.payout) ?? 0n), 0n);
    // The limit leaves room for every order's transfer to take its whole BATCH_CALL_GAS: a recipient may take far more
    // on chain than in the estimate (sent at a gas price of 0, at another block), and a limit of the estimate plus the
    // margin then ran out of gas and reverted the batch whole, every honest fill's share burned. So one such recipient
    // costs its own allowance (as a lone fill's is bounded), never the batch.
    const room = estimate.gas + BigInt(fills.length) * BATCH_CALL_GAS;
    const margined = gasLimitWithin(estimate.gas, this.#chain.gasMarginBps, this.#fees.txGasCap());
    const gas =
      estimate.gas > BATCH_MAX_GAS || estimate.gas > priced || margined === undefined || room > this.#fees.txGasCap()
        ? undefined
        : margined > room
          ? margined
          : room;
    if (gas === undefined) {
      const half = Math.ceil(payouts.length / 2);
      return { kind: 'split', parts: [payouts.slice(0, half), payouts.slice(half)] };
    }
    const recorded = await this.#nonces.withNonce(async (nonce) => {
      const raw = await this.#account.signTransaction({
        type: 'eip1559',
        chainId: this.chainId,
        nonce,
        to: this.#chain.filler,
        data,
        value,
        gas,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      });
      const hash = keccak256(raw);
      const ok = this.#recordSigned(
        fills.map((f) => f.payout.id),
        { hash, raw, nonce, gas, fees },
      );
      if (ok) this.#broadcasting.add(hash);
      return { consumed: ok, value: ok ? { hash, raw, nonce } : undefined };
    });
    if (!recorded) return { kind: 'stale' };
    log.info({ txHash: recorded.hash, nonce: recorded.nonce, fills: fills.length, gas: gas.toString() }, 'batch of fills signed and recorded');
    return { kind: 'recorded', txHash: recorded.hash, signed: { payoutId: fills[0]!.payout.id, hash: recorded.hash, raw: recorded.raw } };
  }

  // The payout ids of a batch's native fills quoted without their recipients' code (their maxGas the plain fill's
  // bound, plainFillBound: no more than its price plus a small allowance) whose recipients run code now (given it
  // since, as a contract or an EIP-7702 delegation).
  async #recipientsWithCode(fills: { payout: PayoutRow; fill: BatchFill }[]): Promise<Set<string>> {
    const noCodeBound = plainFillBound(fillGas(true, false));
    const native = fills.filter((f) => f.fill.token === zeroAddress && f.payout.max_gas !== null && BigInt(f.payout.max_gas) <= noCodeBound);
    // One read per recipient, however many of the batch's fills pay it.
    const recipients = [...new Set(native.map((f) => f.fill.recipient))];
    const codes = await Promise.all(recipients.map((address) => this.#client.getCode({ address })));
    const coded = new Set(recipients.filter((_, i) => codes[i] !== undefined && codes[i] !== '0x'));
    return new Set(native.filter((f) => coded.has(f.fill.recipient)).map((f) => f.payout.id));
  }

  // The terms of a plain fill as one order of a batch (checked as #buildCall checks them).
  #batchFill(payout: PayoutRow): BatchFill {
    const { recipient, currency, amount } = this.#terms(payout);
    const orderId = payout.request_id as Hex;
    if (!isHex(orderId, { strict: true }) || size(orderId) !== 32) throw new UnpayableError(`order id ${orderId} is not 32 bytes`);
    return { orderId, token: currency, recipient, amount };
  }

  // Recipient, currency and amount of a payout, or why it can never be sent.
  #terms(payout: PayoutRow): { recipient: Address; currency: Address; amount: bigint } {
    if (!isAddress(payout.recipient, { strict: false })) throw new UnpayableError(`recipient ${payout.recipient} is not an EVM address`);
    if (!isAddress(payout.currency, { strict: false })) throw new UnpayableError(`currency ${payout.currency} is not an EVM address`);
    let amount: bigint;
    try {
      amount = BigInt(payout.amount);
    } catch {
      throw new UnpayableError(`amount ${payout.amount} is not an integer`);
    }
    if (amount <= 0n) throw new UnpayableError(`amount ${payout.amount} is not positive`);
    return { recipient: getAddress(payout.recipient), currency: getAddress(payout.currency), amount };
  }

  async #buildCall(payout: PayoutRow): Promise<PreparedCall> {
    if (payout.kind === 'relay') return relayCall(payout);
    const { recipient, currency, amount } = this.#terms(payout);
    const native = currency === zeroAddress;

    if (payout.kind === 'fill') {
      const orderId = payout.request_id as Hex;
      if (!isHex(orderId, { strict: true }) || size(orderId) !== 32) throw new UnpayableError(`order id ${orderId} is not 32 bytes`);
      if (payout.calls) {
        // The order's output is contract calls: the filler runs them (through its executor) with the payout as value.
        const parsed = JSON.parse(payout.calls) as { to: Address; value: string; data: Hex }[];
        const calls = parsed.map((c) => ({ to: c.to, value: BigInt(c.value), data: c.data }));
        return {
          to: this.#chain.filler,
          data: encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillCalls', args: [orderId, recipient, calls] }),
          value: amount,
        };
      }
      return native
        ? {
            to: this.#chain.filler,
            data: encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillNative', args: [orderId, recipient] }),
            value: amount,
          }
        : {
            to: this.#chain.filler,
            data: encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillErc20', args: [orderId, currency, recipient, amount] }),
            // A gas top-up rides along as the call's value; the filler forwards it to the recipient.
            value: BigInt(payout.native_topup ?? 0),
          };
    }
    if (payout.kind === 'deposit') {
      // A depositor's permit deposit: the depository pulls from the depositor, never from us.
      const auth = JSON.parse(payout.authorization ?? '{}') as { deadline?: string; signature?: Hex };
      if (!auth.deadline || !auth.signature) throw new UnpayableError(`deposit ${payout.id} has no permit`);
      const { r, s, v, yParity } = parseSignature(auth.signature);
      return {
        to: this.#chain.depository,
        data: encodeFunctionData({
          abi: RelayDepositoryAbi,
          functionName: 'depositErc20WithPermit',
          args: [recipient, currency, amount, payout.request_id as Hex, BigInt(auth.deadline), Number(v ?? BigInt(yParity + 27)), r, s],
        }),
        value: 0n,
      };
    }
    if (payout.kind === 'sweep') {
      // What reached a deposit address, moved into the depository as the recipient's deposit.
      const factory = this.#chain.depositAddressFactory;
      if (!factory) throw new UnpayableError(`chain ${this.chainId} has no deposit address factory`);
      return {
        to: factory,
        data: encodeFunctionData({ abi: DepositAddressFactoryAbi, functionName: 'sweep', args: [recipient, payout.request_id as Hex, currency] }),
        value: 0n,
      };
    }
    if (payout.kind === 'claim') {
      // App fees paid out of the solver's inventory: a plain transfer.
      return native
        ? { to: recipient, data: '0x', value: amount }
        : { to: currency, data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [recipient, amount] }), value: 0n };
    }
    const request = this.#refundRequest(payout, recipient, currency, amount);
    const signature = await signCallRequest({
      chainId: this.chainId,
      depository: this.#chain.depository,
      request,
      account: this.#allocator,
    });
    return {
      to: this.#chain.depository,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'execute', args: [request, signature] }),
      value: 0n,
      request,
    };
  }

  // The same payout always gives the same call request, so it can execute once at most.
  #refundRequest(payout: PayoutRow, recipient: Address, currency: Address, amount: bigint): CallRequest {
    return {
      calls: [currency === zeroAddress ? nativeTransferCall(recipient, amount) : erc20TransferCall(currency, recipient, amount)],
      nonce: BigInt(keccak256(toHex(payout.id))),
      expiration: BigInt(Math.floor(payout.decided_at / 1000) + REFUND_TTL_SECONDS),
    };
  }

  async #onSimulationRevert(payout: PayoutRow, call: PreparedCall, err: unknown, log: Logger): Promise<PrepareResult<EvmPrepared>> {
    const revert = decodeRevert(err);
    // Paid already (by an earlier transaction of ours that the ledger lost track of, or by another node
    // with the same key): report it paid and never pay again.
    const paid = await this.#findPaid(payout, call.request);
    if (paid) {
      const done = this.#ledger.tx(() => this.#settlePaid(payout.id, paid));
      if (done) log.info({ txHash: paid.txHash, revert }, 'payout already paid on chain; reported paid without sending');
      return { kind: 'settled' };
    }
    // A signed deposit that cannot go through names why, in the interface's words.
    const deposit = () =>
      /InvalidSignature/.test(revert ?? '') ? 'INVALID_SIGNATURE' : /TransferFromFailed/.test(revert ?? '') ? 'TRANSFER_FROM_FAILED' : 'TRANSACTION_REVERTED';
    // The contract itself says the payment was made: a view that cannot find it is behind (a
    // lagging RPC). Failing here would refund a paid order; look again later instead.
    // (Not a relay's: its call runs the caller's wallet code, which can revert with any selector.)
    if (payout.kind !== 'relay' && ALREADY_PAID.test(revert ?? '')) {
      log.warn({ revert }, 'the chain reports this payout made but its transaction is not found yet; looking again later');
      return { kind: 'retry', why: 'unconfirmed', cause: new Error(`simulation says ${revert}`) };
    }
    const reason = payout.kind === 'fill' ? 'EXECUTION_REVERTED' : payout.kind === 'deposit' ? deposit() : 'TRANSACTION_REVERTED';
    return { kind: 'unpayable', reason, detail: revert ?? errText(err), callData: call.data };
  }

  // Broadcasts a recorded transaction. Returns whether the node has it now.
  async #broadcast(payoutId: string, hash: Hex, raw: Hex, log: Logger): Promise<boolean> {
    this.#gate.check();
    this.#broadcasting.add(hash);
    let accepted = false;
    let error: string | undefined;
    try {
      mark(this.#markId(payoutId), 'evm:send');
      await this.#client.sendRawTransaction({ serializedTransaction: raw });
      mark(this.#markId(payoutId), 'evm:sent');
      accepted = true;
    } catch (err) {
      const text = fullText(err);
      if (ALREADY_KNOWN.test(text)) accepted = true;
      else error = errText(err);
    } finally {
      this.#broadcasting.delete(hash);
    }
    const head = this.#fees.headNumber();
    const sentBlock = head === undefined ? undefined : Number(head);
    // Lazy (no disk flush): what the node accepted is read again from the chain. Lost in a power
    // failure, the transaction is still recorded 'signed' and the confirm pass sends its bytes again.
    this.#ledger.tx(
      () => {
        const t = this.#ledger.payouts.txsOf(payoutId).find((x) => x.hash === hash);
        if (!t || t.state !== 'signed') return;
        if (accepted) this.#ledger.payouts.setTxState(hash, 'broadcast', { broadcastAt: Date.now(), sentBlock });
        // An underpriced transaction starts its replacement countdown even though the node refused it.
        else if (error && FEE_REFUSED.test(error)) this.#ledger.payouts.setTxState(hash, 'signed', { sentBlock, error });
      },
      { lazy: true },
    );
    mark(this.#markId(payoutId), 'evm:lazy');
    if (accepted) {
      log.debug({ txHash: hash }, 'transaction broadcast');
    } else {
      this.#metrics.rpcErrors.inc({ ...this.#chainLabel, method: 'eth_sendRawTransaction' });
      // Nonce too low: one of the same-nonce transactions (or something else) took the nonce; the
      // confirm pass reconciles it. Anything else: rebroadcast by the confirm pass.
      const level = this.#firstTime(`refused:${hash}:${error}`) ? 'warn' : 'debug';
      log[level]({ txHash: hash, err: error, nonceTooLow: NONCE_TOO_LOW.test(error ?? '') }, 'broadcast refused; left to reconciliation');
    }
    return accepted;
  }

  // ------------------------------------------------------------------------------------------ confirm

  /** One pass over the solver's open transactions on this chain, nonce by nonce, then over payouts none of whose transactions is open. */
  async confirm(): Promise<TxStatus[]> {
    this.#requeued = [];
    await this.#confirmOpen();
    await this.#settleStranded();
    return this.#requeued;
  }

  async #confirmOpen(): Promise<void> {
    const open = this.#ledger.payouts.openTxs(this.chainId).filter((t) => t.sender === this.address);
    // Nothing open: no head to read (a pass runs on every head, and on the backstop timer when idle).
    if (open.length === 0) return;
    const head = await this.#fees.head(this.#chain.pollIntervalMs / 2);
    // The chain's nonce is read before any receipt: a nonce past a transaction with no receipt then
    // really was taken by something else.
    const latestNonce = await this.#client.getTransactionCount({ address: this.address, blockTag: 'latest' });
    // One group per nonce: the transactions at one nonce (a payout's replacements; a batch's payouts).
    const groups = new Map<number, TransactionRow[]>();
    for (const t of open) groups.set(t.nonce, [...(groups.get(t.nonce) ?? []), t]);
    await Promise.all(
      [...groups].map(async ([nonce, rows]) => {
        try {
          await this.#confirmGroup(nonce, rows, head, latestNonce);
        } catch (err) {
          this.#metrics.rpcErrors.inc({ ...this.#chainLabel, method: 'confirm' });
          for (const id of new Set(rows.map((t) => t.payout_id))) {
            this.#payoutLog(id).warn({ nonce, err: errText(err) }, 'confirm of a transaction failed; retrying on the next pass');
          }
        }
      }),
    );
  }

  // A payout marked sent with none of its transactions open can land no more, and the pass over open
  // transactions never sees it: a settlement interrupted between the payouts one transaction carries (a
  // crash, a failed read) leaves one, which would stay 'sent' for good. Its outcome is read from the chain:
  // paid, it is settled; not paid, it is sent again (the contracts refuse a second payment of one order).
  async #settleStranded(): Promise<void> {
    const stranded = this.#ledger.payouts.stranded(this.chainId);
    if (!stranded.length) return;
    const head = await this.#fees.head(this.#chain.pollIntervalMs / 2);
    for (const payout of stranded) {
      const log = this.#payoutLog(payout);
      // A fill its batch skipped while paying the others (their settling closed its row: they share the transaction)
      // paid nothing there: acted on only at the chain's confirmations, as #confirmGroup acts on such receipts, and
      // then sent alone.
      const landed = this.#ledger.payouts.txsOf(payout.id).reduce((m, t) => Math.max(m, t.block_number ?? -1), -1);
      if (landed >= 0 && head - BigInt(landed) + 1n < BigInt(this.#chain.confirmations)) continue;
      try {
        const paid = await this.#findPaid(payout, await this.#requestOf(payout));
        const outcome = this.#ledger.tx(() => this.#settleOrRequeue(payout.id, paid));
        log.warn({ outcome, paidBy: paid?.txHash }, 'payout sent with no transaction open: settled from the chain');
        if (outcome === 'requeued') {
          this.#alone.add(payout.id);
          this.#requeue(payout.id, payout.tx_hash ?? 'none open');
        }
      } catch (err) {
        log.warn({ err: errText(err) }, 'reading the outcome of a payout with no transaction open failed; retrying on the next pass');
      }
    }
  }

  // Inside the caller's ledger transaction, once no transaction of the payout can land: settled when `paid`
  // names the payment, else (still sent, nothing open) queued again.
  #settleOrRequeue(payoutId: string, paid: PaidBy | null): 'paid' | 'none' | 'requeued' {
    if (paid) return this.#settlePaid(payoutId, paid) ? 'paid' : 'none';
    const cur = this.#ledger.payouts.get(payoutId);
    if (!cur || cur.state !== 'sent' || this.#hasOpen(cur.id)) return 'none';
    this.#ledger.payouts.setState(cur.id, 'queued');
    return 'requeued';
  }

  // A payout can never land as it was sent and is queued again: the pipeline sends it.
  #requeue(payoutId: string, txHash: string): void {
    this.#requeued.push({ kind: 'requeued', payoutId, txHash });
  }

  async #confirmGroup(nonce: number, open: TransactionRow[], head: bigint, latestNonce: number): Promise<void> {
    const payoutIds = [...new Set(open.map((t) => t.payout_id))];
    const payoutId = payoutIds[0]!;
    // The log lines name the group's requests: its payouts are read for them (one statement) only when
    // the pass has something to do, not on every pass over a transaction still pending.
    let read: Map<string, PayoutRow> | undefined;
    const rowOf = (id: string) => (read ??= new Map(this.#ledger.payouts.getMany(payoutIds).map((p) => [p.id, p]))).get(id);
    const payoutOf = (id: string) => rowOf(id) ?? id;
    let groupLog: Logger | undefined;
    const log = () =>
      (groupLog ??=
        payoutIds.length === 1
          ? this.#payoutLog(payoutOf(payoutId)).child({ nonce })
          : this.#log.child({ payouts: payoutIds.length, nonce, requestIds: payoutIds.flatMap((id) => rowOf(id)?.request_id ?? []) }));

    // Only a nonce the account has used can have a receipt: pending ones cost no lookups (this
    // pass runs every block, over every open transaction).
    if (nonce < latestNonce) {
      for (const hash of new Set(open.map((t) => t.hash))) {
        const receipt = await this.#receipt(hash);
        if (!receipt) continue;
        this.#noReceipt.delete(nonce);
        // Each payout the transaction carries settles from its own row (and, in a batch, its own event).
        const rows = open.filter((t) => t.hash === hash);
        // A receipt that paid nothing (a revert, a cancel, a batch's skipped fill) sends the payout again or fails
        // it, and a failed fill is refunded: it is acted on only at the chain's confirmations. Before, a reorg could
        // land the same signed bytes again, and pay (anyone may send them), after the refund.
        const deep = head - receipt.blockNumber + 1n >= BigInt(this.#chain.confirmations);
        const wait = () => void log()[this.#firstTime(`deep:${hash}`) ? 'info' : 'debug']({ txHash: hash }, 'paid nothing; waiting for confirmations');
        // The cancel took the nonce: nothing it carries was paid by it.
        if (rows.some((t) => t.cancel)) return deep ? await this.#onCancelLanded(rows, receipt, log()) : wait();
        const logOf = (t: TransactionRow) => (payoutIds.length === 1 ? log() : this.#payoutLog(payoutOf(t.payout_id)).child({ nonce }));
        if (receipt.status === 'success' && rows.length > 1) {
          // A batch that landed: every fill it carries settles in one commit (one disk flush, not one per fill).
          // Its payouts read in one statement, in that transaction (settling one fill changes no other's row).
          this.#ledger.tx(() => {
            const byId = new Map(this.#ledger.payouts.getMany([...new Set(rows.map((t) => t.payout_id))]).map((p) => [p.id, p]));
            // Each fill's logger is made only for a line it writes (two child loggers per fill of every batch otherwise).
            // Each fill settles in the batch's transaction itself, not in a savepoint of its own: a fill that throws rolls
            // the whole batch back anyway, and a savepoint journals every page the fill touches again (SQLite copies
            // each such page before changing it, in case the savepoint alone is rolled back).
            for (const t of rows) this.#onIncluded(t, receipt, () => logOf(t), deep, byId.get(t.payout_id) ?? null, true);
          });
        } else if (receipt.status === 'success') {
          this.#onIncluded(rows[0]!, receipt, () => logOf(rows[0]!), deep);
        } else if (!deep) {
          wait();
        } else if (rows.length > 1) {
          await this.#onBatchReverted(rows, receipt, log());
        } else {
          await this.#onReverted(rows[0]!, receipt, logOf(rows[0]!));
        }
        return;
      }
      // Used, with no receipt for any of the group's transactions: something else took the nonce, or a provider has
      // not served the receipt yet, which reads the same. Acted on at a later look only: sent again, a payout nothing
      // on chain refuses to pay twice (a claim: a plain transfer) would be paid twice.
      if (!this.#noReceipt.has(nonce)) {
        this.#noReceipt.add(nonce);
        return;
      }
      this.#noReceipt.delete(nonce);
      return await this.#onNonceTaken(payoutIds, nonce, head, (id) => (payoutIds.length === 1 ? log() : this.#payoutLog(payoutOf(id)).child({ nonce })));
    }

    // Still pending: make sure the node has the newest (highest-fee) one, and replace it when stuck.
    const newest = open.reduce((a, b) => (BigInt(b.max_fee_per_gas) > BigInt(a.max_fee_per_gas) ? b : a));
    if (this.#broadcasting.has(newest.hash)) return;
    // Just sent: give the node a block to take it before asking whether it has it.
    if (newest.state === 'broadcast' && newest.sent_block !== null && head - BigInt(newest.sent_block) < 2n) return;
    const known = newest.state === 'broadcast' && (await this.#knownToNode(newest.hash));
    if (!known) {
      const level = this.#firstTime(`rebroadcast:${newest.hash}`) ? 'info' : 'debug';
      log()[level]({ txHash: newest.hash, state: newest.state }, 'node does not hold our transaction; rebroadcasting the recorded bytes');
      // The bytes recorded before the first broadcast, read only now (the pass reads its rows without them).
      if (await this.#broadcast(newest.payout_id, newest.hash, this.#ledger.payouts.rawOf(newest.hash), log())) return;
    }
    const fresh = this.#ledger.payouts.txsOf(newest.payout_id).find((t) => t.hash === newest.hash);
    const sentBlock = fresh?.sent_block;
    if (fresh && isOpen(fresh) && sentBlock !== null && sentBlock !== undefined && head - BigInt(sentBlock) >= BigInt(this.#chain.replaceAfterBlocks)) {
      await this.#replace(fresh, head, log(), nonce === latestNonce);
    }
  }

  async #receipt(hash: Hex): Promise<TransactionReceipt | null> {
    try {
      return await this.#client.getTransactionReceipt({ hash });
    } catch (err) {
      if (err instanceof TransactionReceiptNotFoundError) return null;
      throw err;
    }
  }

  async #knownToNode(hash: Hex): Promise<boolean> {
    try {
      await this.#client.getTransaction({ hash });
      return true;
    } catch (err) {
      if (err instanceof TransactionNotFoundError) return false;
      throw err;
    }
  }

  // A successful transaction carrying this payout: paid, or (a batch's fill) skipped, which is acted on only once
  // `deep` (at the chain's confirmations). `read`: the payout as read in the caller's ledger transaction (null:
  // not found), if it has it.
  // `inTx`: called inside the caller's ledger transaction (a batch's), which it joins.
  #onIncluded(t: TransactionRow, receipt: TransactionReceipt, log: () => Logger, deep: boolean, read?: PayoutRow | null, inTx = false): void {
    const fee = receiptFee(receipt);
    const own: PaidBy = { txHash: t.hash, blockNumber: receipt.blockNumber, gasUsed: receipt.gasUsed, fee };
    // The payout read and settled in one ledger transaction (a batch's: the one of all its fills), so
    // the settling reads it once.
    const settle = () => {
      const payout = read === undefined ? this.#ledger.payouts.get(t.payout_id) : read;
      const fill = payout?.kind === 'fill' ? this.#fillOutcome(payout, receipt, fee) : undefined;
      if (fill && !fill.paid) return { skipped: fill.reason };
      const paid = fill?.paid ? { ...own, share: fill.fee } : own;
      return { paid, settled: this.#settlePaid(t.payout_id, paid, payout ?? null) };
    };
    const out = inTx ? settle() : this.#ledger.tx(settle);
    if (out.skipped !== undefined) return deep ? this.#onSkipped(t, receipt, out.skipped, log()) : undefined;
    const { paid } = out;
    if (out.settled && this.#log.isLevelEnabled('info'))
      log().info({ txHash: t.hash, block: Number(receipt.blockNumber), fee: (paid.share ?? paid.fee).toString() }, 'payout paid');
  }

  // The reverted receipt of a transaction carrying one payout (a batch's: #onBatchReverted).
  async #onReverted(t: TransactionRow, receipt: TransactionReceipt, log: Logger): Promise<void> {
    const fee = receiptFee(receipt);

    // Reverted. If the payment was made anyway (by another transaction), that one settles the payout.
    const payout = this.#ledger.payouts.get(t.payout_id);
    if (!payout) return;
    let paid: PaidBy | null = null;
    if (payout.state === 'sent' || payout.state === 'queued') {
      // Read as of the receipt's block: a node that served the receipt has that state, where a
      // lagging one would answer 'not paid' from the past and turn a paid order into a refund.
      paid = await this.#findPaid(payout, await this.#requestOf(payout), receipt.blockNumber);
      if (paid?.txHash === t.hash) paid = null;
    }
    const outcome = this.#ledger.tx(() => {
      this.#ledger.payouts.setTxState(t.hash, 'reverted', { blockNumber: Number(receipt.blockNumber), gasUsed: receipt.gasUsed, fee, error: 'reverted' });
      this.#closeSiblings(t.payout_id, t.nonce, t.hash, 'replaced');
      if (paid) return this.#settlePaid(t.payout_id, paid) ? 'paid' : 'none';
      const cur = this.#ledger.payouts.get(t.payout_id);
      if (!cur || cur.state !== 'sent' || this.#hasOpen(cur.id)) return 'none';
      this.#ledger.payouts.setState(cur.id, 'failed', { txHash: t.hash, failReason: 'TRANSACTION_REVERTED' });
      this.#hooks.onFailed(cur, 'TRANSACTION_REVERTED', t.hash);
      return 'failed';
    });
    if (outcome === 'failed') {
      log.warn({ txHash: t.hash, fee: fee.toString() }, 'payout failed: transaction reverted');
    } else if (outcome === 'paid') {
      log.info({ txHash: t.hash, paidBy: paid!.txHash }, 'our transaction reverted but the payout was already made; reported paid');
    } else {
      log.info({ txHash: t.hash }, 'transaction reverted after its payout was settled');
    }
  }

  // What a successful transaction did for this fill, from the filler's events in its receipt: paid (with
  // its share of the fee when the transaction paid several orders), or skipped (with the contract's reason).
  #fillOutcome(payout: PayoutRow, receipt: TransactionReceipt, fee: bigint): { paid: true; fee: bigint } | { paid: false; reason: string } {
    const orderId = payout.request_id?.toLowerCase() ?? '';
    const { filled, skipped } = this.#fillerEvents(receipt);
    const k = filled.get(orderId);
    if (k !== undefined) {
      const n = BigInt(filled.size);
      return { paid: true, fee: fee / n + (k === 0 ? fee % n : 0n) };
    }
    const why = skipped.get(orderId);
    let reason = 'no OrderFilled event for the order';
    if (why !== undefined) {
      try {
        reason = decodeErrorResult({ abi: OrderFillerAbi, data: why }).errorName;
      } catch {
        reason = why;
      }
    }
    return { paid: false, reason };
  }

  // The filler's events in a receipt, by order id: parsed once per receipt, however many fills it carries.
  #fillerEvents(receipt: TransactionReceipt): { filled: Map<string, number>; skipped: Map<string, Hex> } {
    const cached = this.#parsedReceipts.get(receipt);
    if (cached) return cached;
    const filler = this.#chain.filler.toLowerCase();
    const filled = new Map<string, number>();
    const skipped = new Map<string, Hex>();
    for (const l of receipt.logs) {
      if (l.address.toLowerCase() !== filler) continue;
      const [topic, orderId] = l.topics;
      // OrderFilled has four topics (its id, the order, the solver, the recipient): anything else is not one (as a log
      // viem's strict decoding refuses is skipped).
      if (topic === ORDER_FILLED_TOPIC && l.topics.length === 4 && orderId) filled.set(orderId.toLowerCase(), filled.size);
      else if (topic === FILL_SKIPPED_TOPIC) {
        try {
          const e = decodeEventLog({ abi: [fillSkippedEvent], data: l.data, topics: l.topics });
          skipped.set(e.args.orderId.toLowerCase(), e.args.reason);
        } catch {
          // not the filler's FillSkipped after all: read as nothing, as before
        }
      }
    }
    const parsed = { filled, skipped };
    this.#parsedReceipts.set(receipt, parsed);
    return parsed;
  }

  // A batch included without paying this order: its nonce is spent and nothing was paid, so the order
  // goes back to the queue, to be sent alone, where it is paid or fails with its own reason.
  #onSkipped(t: TransactionRow, receipt: TransactionReceipt, reason: string, log: Logger): void {
    const fee = receiptFee(receipt);
    const requeued = this.#ledger.tx(() => {
      const mine = this.#ledger.payouts.txsOf(t.payout_id).find((x) => x.hash === t.hash);
      if (mine && isOpen(mine)) {
        this.#ledger.payouts.setTxState(t.hash, 'included', { blockNumber: Number(receipt.blockNumber), gasUsed: receipt.gasUsed, fee });
      }
      this.#closeSiblings(t.payout_id, t.nonce, t.hash, 'replaced');
      const cur = this.#ledger.payouts.get(t.payout_id);
      if (!cur || cur.state !== 'sent' || this.#hasOpen(cur.id)) return false;
      this.#ledger.payouts.setState(cur.id, 'queued');
      return true;
    });
    if (!requeued) return;
    this.#alone.add(t.payout_id);
    log.warn({ txHash: t.hash, reason }, 'fill skipped by its batch; sent again alone');
    this.#requeue(t.payout_id, t.hash);
  }

  // The nonce is past this group and none of its transactions has a receipt: something else took it (or
  // the group's own transaction, its receipt not yet served). Every payout's evidence is read first, then
  // the group is settled in one ledger transaction: a batch's payouts share their transaction rows, so
  // settling one closes the rows of all. Settled one by one, a crash or a failed read between two left the
  // second 'sent' with no open transaction, never looked at again (chaos seed 231).
  async #onNonceTaken(payoutIds: string[], nonce: number, head: bigint, logOf: (payoutId: string) => Logger): Promise<void> {
    // A receipt not served proves nothing: a provider whose receipts come from a backend behind the head (a load
    // balancer's indexing cluster) answers null for every look, and a claim (a plain transfer: nothing on chain
    // refuses a second one) was sent again and paid twice. The block in which the nonce was used says which
    // transaction used it: one of the group's own is left for its receipt to be served.
    const atNonce = payoutIds.flatMap((id) => this.#ledger.payouts.txsOf(id)).filter((t) => t.nonce === nonce);
    // The nonce was free when the first of them was signed: the head then (its sent block) bounds the search below.
    const sent = atNonce.reduce<number | undefined>(
      (m, t) => (t.sent_block === null ? m : m === undefined ? t.sent_block : Math.min(m, t.sent_block)),
      undefined,
    );
    const used = await this.#nonceUsedBy(nonce, sent === undefined ? undefined : BigInt(Math.max(0, sent - 1)));
    const taker = used.hash.toLowerCase();
    const own = atNonce.find((t) => t.hash.toLowerCase() === taker);
    if (own) {
      const level = this.#firstTime(`own-nonce:${taker}`) ? 'warn' : 'debug';
      logOf(own.payout_id)[level]({ txHash: own.hash, nonce }, 'our transaction used the nonce but its receipt is not served yet; looking again later');
      return;
    }
    // Another transaction took the nonce: acted on at the chain's confirmations only, as a receipt that paid nothing is.
    // Queued again at the head, a payout was signed again, or failed (past its deadline) and refunded; a reorg that took
    // the taker away let the payout's first bytes, which anyone may send, land too: paid twice.
    if (head - used.block + 1n < BigInt(this.#chain.confirmations)) {
      this.#noReceipt.add(nonce);
      const level = this.#firstTime(`taken:${taker}`) ? 'info' : 'debug';
      logOf(payoutIds[0]!)[level]({ takenBy: used.hash, nonce }, 'another transaction used the nonce; waiting for its confirmations');
      return;
    }
    const found: { id: string; paid: PaidBy | null }[] = [];
    for (const id of payoutIds) {
      const payout = this.#ledger.payouts.get(id);
      found.push({ id, paid: payout?.state === 'sent' ? await this.#findPaid(payout, await this.#requestOf(payout)) : null });
    }
    const outcomes = this.#ledger.tx(() =>
      found.map(({ id, paid }) => {
        for (const t of this.#ledger.payouts.txsOf(id)) {
          if (t.nonce === nonce && isOpen(t)) this.#ledger.payouts.setTxState(t.hash, 'dropped', { error: 'nonce taken by another transaction' });
        }
        return this.#settleOrRequeue(id, paid);
      }),
    );
    for (const [i, { id, paid }] of found.entries()) {
      logOf(id).warn({ outcome: outcomes[i], paidBy: paid?.txHash }, 'nonce taken by another transaction; transactions marked dropped');
      if (outcomes[i] === 'requeued') this.#requeue(id, `nonce ${nonce}`);
    }
    await this.#nonces.resync();
  }

  // The hash of the solver's transaction that used `nonce`: from the block in which the account's nonce passed it,
  // found by stepping down from the head by doubling steps, then bisecting (the nonce was used recently: the state read
  // stays within what a pruned node keeps), or from `since`, a block where it was not used yet. The count at a block
  // is a decision read and a block is read at its number: a provider behind it refuses (asked elsewhere), and a block
  // it serves holds all its transactions.
  async #nonceUsedBy(nonce: number, since?: bigint): Promise<{ hash: Hex; block: bigint }> {
    const count = (blockNumber: bigint) => this.#client.getTransactionCount({ address: this.address, blockNumber });
    let hi = await this.#client.getBlockNumber({ cacheTime: 0 });
    if ((await count(hi)) <= nonce) throw new Error(`nonce ${nonce} is not used at block ${hi}`);
    let lo = hi;
    if (since !== undefined && since < hi && (await count(since)) <= nonce) {
      lo = since;
    } else {
      for (let step = 1n; ; step *= 2n) {
        lo = hi > step ? hi - step : 0n;
        if ((await count(lo)) <= nonce) break;
        if (lo === 0n) throw new Error(`nonce ${nonce} is used at block 0`);
        hi = lo;
      }
    }
    while (hi - lo > 1n) {
      const mid = (lo + hi) / 2n;
      if ((await count(mid)) > nonce) hi = mid;
      else lo = mid;
    }
    const block = await this.#client.getBlock({ blockNumber: hi, includeTransactions: true });
    const tx = block.transactions.find((t) => getAddress(t.from) === this.address && t.nonce === nonce);
    if (!tx) throw new Error(`block ${hi} holds no transaction of nonce ${nonce} though the nonce was used there`);
    return { hash: tx.hash, block: hi };
  }

  // `first`: the transaction is at the nonce the chain expects next (the one holding the nonces after it).
  async #replace(t: TransactionRow, head: bigint, log: Logger, first: boolean): Promise<void> {
    const parsed = parseTransaction(this.#ledger.payouts.rawOf(t.hash));
    const old: Eip1559Fees = { maxFeePerGas: BigInt(t.max_fee_per_gas), maxPriorityFeePerGas: BigInt(t.max_priority_fee_per_gas) };
    const market = await this.#fees.current();
    // A stuck cancel is bumped like any transaction, within the cancel's own cap.
    if (t.cancel) return this.#sendCancel(t, old, market, head, log);
    // A relay is bumped within its own cap too (a batch carries fills only: its first payout's cap is the chain's).
    const payout = this.#ledger.payouts.get(t.payout_id);
    const cap = this.#capOf(payout);
    const fees = replacementWithinCap(old, market, cap);
    const bumps = this.#ledger.payouts.txsOf(t.payout_id).filter((x) => x.nonce === t.nonce).length - 1;
    if (!fees || (this.#chain.maxReplacements !== undefined && bumps >= this.#chain.maxReplacements)) {
      // Held at the cap (or out of bumps), and with it every nonce after it. feeCapPolicy 'wait': it stays
      // as it is and lands when the base fee falls; 'cancel': after its bound, a cancel takes the nonce. Only
      // the first pending nonce is cancelled: one after it may be stuck only behind it, and goes once it goes.
      // A relay held at its own cap is cancelled so whatever the policy: under 'wait' any app relaying just before a
      // fee spike held every fill and refund of the chain behind it until the base fee fell below its cap.
      this.#metrics.feeCapWaits.inc({ ...this.#chainLabel, stage: 'replace' });
      const atCap = head - BigInt(t.sent_block ?? 0) - BigInt(this.#chain.replaceAfterBlocks);
      const cancels = this.#cancelPolicy || (!fees && this.#heldAtOwnCap(payout));
      if (cancels && first && atCap >= this.#cancel.afterBlocks) return this.#sendCancel(t, old, market, head, log);
      const level = this.#firstTime(`capped:${t.hash}`) ? 'warn' : 'debug';
      log[level](
        { txHash: t.hash, maxFeePerGas: t.max_fee_per_gas, cap: cap?.toString(), bumps, policy: cancels ? 'cancel' : 'wait' },
        'stuck transaction not replaced: fee cap or replacement limit reached; the nonces after it wait',
      );
      return;
    }
    const gas = parsed.gas ?? BigInt(t.gas_limit);
    const raw = await this.#account.signTransaction({
      // A gasless relay's replacement carries the same authorizations (type 4).
      ...(parsed.authorizationList?.length ? { type: 'eip7702' as const, authorizationList: parsed.authorizationList } : { type: 'eip1559' as const }),
      chainId: this.chainId,
      nonce: t.nonce,
      to: parsed.to ?? undefined,
      data: parsed.data,
      value: parsed.value ?? 0n,
      gas,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const hash = keccak256(raw);
    if (this.#recordSameNonce(t, { hash, raw, gas, fees }, false).length === 0) return;
    this.#metrics.replacements.inc(this.#chainLabel);
    log.info(
      {
        replaced: t.hash,
        txHash: hash,
        blocksWaited: Number(head - BigInt(t.sent_block ?? 0)),
        maxFeePerGas: fees.maxFeePerGas.toString(),
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas.toString(),
      },
      'stuck transaction replaced at the same nonce with higher fees',
    );
    await this.#broadcast(t.payout_id, hash, raw, log);
  }

  /**
   * Records, for every payout the replaced transaction still carries (a batch: all its fills), a
   * transaction at its nonce, in one ledger transaction, before it is broadcast. A fee replacement becomes
   * the payout's transaction; a cancel does not (it never pays). Returns the payouts it was recorded for.
   */
  #recordSameNonce(t: TransactionRow, tx: { hash: Hex; raw: Hex; gas: bigint; fees: Eip1559Fees }, cancel: boolean): string[] {
    return this.#ledger.tx(() => {
      const still = this.#ledger.payouts.rowsOfTx(t.hash).filter(isOpen);
      still.forEach((row, i) => {
        this.#ledger.payouts.insertTx({
          hash: tx.hash,
          payout_id: row.payout_id,
          chain_id: this.chainId,
          sender: this.address,
          nonce: t.nonce,
          // The bytes once, with the first row (the others' key finds them).
          raw: i === 0 ? tx.raw : undefined,
          gas_limit: tx.gas.toString(),
          max_fee_per_gas: tx.fees.maxFeePerGas.toString(),
          max_priority_fee_per_gas: tx.fees.maxPriorityFeePerGas.toString(),
          created_at: Date.now(),
          cancel: cancel ? 1 : 0,
        });
        if (!cancel && this.#ledger.payouts.get(row.payout_id)?.state === 'sent') this.#ledger.payouts.setState(row.payout_id, 'sent', { txHash: tx.hash });
      });
      return still.map((row) => row.payout_id);
    });
  }

  // feeCapPolicy 'cancel': a zero-value transfer to the solver itself takes the capped transaction's nonce
  // (or bumps a stuck cancel), priced as a replacement within the cancel's cap. Recorded before broadcast;
  // whichever transaction of the nonce lands decides (#onCancelLanded, or the payout's own settles it).
  async #sendCancel(t: TransactionRow, old: Eip1559Fees, market: Eip1559Fees, head: bigint, log: Logger): Promise<void> {
    const cap = this.#cancel.maxFeePerGas;
    const fees = replacementWithinCap(old, market, cap);
    if (!fees) {
      this.#metrics.feeCapWaits.inc({ ...this.#chainLabel, stage: 'cancel' });
      const level = this.#firstTime(`cancel-capped:${t.hash}`) ? 'warn' : 'debug';
      log[level](
        { txHash: t.hash, maxFeePerGas: t.max_fee_per_gas, cancelMaxFeePerGas: cap?.toString() },
        'fee-capped transaction not cancelled: a cancel would pass cancelMaxFeePerGas',
      );
      return;
    }
    const raw = await this.#account.signTransaction({
      type: 'eip1559',
      chainId: this.chainId,
      nonce: t.nonce,
      to: this.address,
      data: '0x',
      value: 0n,
      gas: CANCEL_GAS,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const hash = keccak256(raw);
    const payoutIds = this.#recordSameNonce(t, { hash, raw, gas: CANCEL_GAS, fees }, true);
    if (payoutIds.length === 0) return;
    this.#metrics.feeCapCancels.inc({ ...this.#chainLabel, outcome: 'sent' });
    log.warn(
      {
        capped: t.hash,
        txHash: hash,
        payouts: payoutIds,
        blocksWaited: Number(head - BigInt(t.sent_block ?? 0)),
        maxFeePerGas: fees.maxFeePerGas.toString(),
        maxCostWei: (CANCEL_GAS * fees.maxFeePerGas).toString(),
      },
      t.cancel
        ? 'stuck cancel replaced at the same nonce with higher fees'
        : 'fee-capped transaction cancelled at its nonce: the payouts behind it go out; its payout is sent again when fees allow',
    );
    crashPoint(
      this.#faults,
      'afterCancelRecorded',
      payoutIds.flatMap((id) => this.#ledger.payouts.get(id) ?? []),
    );
    await this.#broadcast(t.payout_id, hash, raw, log);
  }

  // A cancel landed at its nonce: no transaction of its payouts at that nonce can land any more, and the
  // cancel paid nothing. Each payout goes back to the queue (sent again at a new nonce), unless the chain
  // says another transaction paid it (another node with the key; never the cancel); the cancel's fee is
  // booked on its rows as spent. A relay held at its own cap fails instead (#settleLandedUnpaid).
  async #onCancelLanded(rows: TransactionRow[], receipt: TransactionReceipt, log: Logger): Promise<void> {
    const { fee, outcomes } = await this.#settleLandedUnpaid(rows, receipt, 'included');
    this.#metrics.feeCapCancels.inc({ ...this.#chainLabel, outcome: 'landed' });
    log.warn(
      { txHash: rows[0]!.hash, fee: fee.toString(), block: Number(receipt.blockNumber), outcomes },
      outcomes.some((o) => o.outcome === 'failed')
        ? 'cancel landed at the nonce of a relay held at its own fee cap; the relay failed'
        : 'cancel landed at the fee-capped nonce; its payouts are queued again',
    );
  }

  // A batch reverted (out of gas, say): nothing in it was paid, and each order goes again, alone, where it is
  // paid or fails with its own reason.
  async #onBatchReverted(rows: TransactionRow[], receipt: TransactionReceipt, log: Logger): Promise<void> {
    for (const t of rows) this.#alone.add(t.payout_id);
    const { fee, outcomes } = await this.#settleLandedUnpaid(rows, receipt, 'reverted');
    log.warn({ txHash: rows[0]!.hash, fee: fee.toString(), outcomes }, 'batch transaction reverted; its fills are sent again, alone');
  }

  // A transaction carrying `rows` landed without paying any of them (a cancel, a batch that reverted): none of
  // their transactions at its nonce can land any more. Every payout's outcome is read from the chain first
  // (as of the receipt's block), then the group settles in one ledger transaction: one paid by another
  // transaction is settled, the rest are queued again. A failed read leaves the whole
  // group open for the next pass; a crash cannot leave part of it settled. The fee is booked on its rows.
  // A relay whose cancel landed while its own fee cap held it fails rather than going again: its hold was computed for
  // one transaction at that cap, and the cancel's gas is charged against it (onRelayFailed, at most the hold).
  async #settleLandedUnpaid(
    rows: TransactionRow[],
    receipt: TransactionReceipt,
    state: 'included' | 'reverted',
  ): Promise<{ fee: bigint; outcomes: { payoutId: string; outcome: 'paid' | 'none' | 'requeued' | 'failed' }[] }> {
    const hash = rows[0]!.hash;
    const fee = receiptFee(receipt);
    const paidBy = new Map<string, PaidBy>();
    for (const t of rows) {
      const payout = this.#ledger.payouts.get(t.payout_id);
      if (payout?.state !== 'sent') continue;
      const paid = await this.#findPaid(payout, await this.#requestOf(payout), receipt.blockNumber);
      if (paid && paid.txHash.toLowerCase() !== hash.toLowerCase()) paidBy.set(payout.id, paid);
    }
    const outcomes = this.#ledger.tx(() => {
      const landed = { blockNumber: Number(receipt.blockNumber), gasUsed: receipt.gasUsed, fee, ...(state === 'reverted' ? { error: 'reverted' } : {}) };
      this.#ledger.payouts.setTxState(hash, state, landed);
      return rows.map((t) => {
        this.#closeSiblings(t.payout_id, t.nonce, hash, 'replaced');
        const paid = paidBy.get(t.payout_id) ?? null;
        if (t.cancel && !paid) {
          const cur = this.#ledger.payouts.get(t.payout_id);
          if (cur?.state === 'sent' && this.#heldAtOwnCap(cur) && !this.#hasOpen(cur.id)) {
            this.#ledger.payouts.setState(cur.id, 'failed', { txHash: hash, failReason: 'TRANSACTION_NOT_INCLUDED' });
            this.#hooks.onFailed(cur, 'TRANSACTION_NOT_INCLUDED', hash);
            return { payoutId: t.payout_id, outcome: 'failed' as const };
          }
        }
        return { payoutId: t.payout_id, outcome: this.#settleOrRequeue(t.payout_id, paid) };
      });
    });
    for (const o of outcomes) if (o.outcome === 'requeued') this.#requeue(o.payoutId, hash);
    return { fee, outcomes };
  }

  // ------------------------------------------------------------------------------------------ settling

  // Inside a ledger transaction: the payout was paid by `paid`. Returns whether this settled it now
  // (false when it was settled before: the hook never fires twice). `read`: the payout as read in this
  // same ledger transaction (null: not found), if the caller has it (settling changes no payout row
  // before it reads it).
  #settlePaid(payoutId: string, paid: PaidBy, read?: PayoutRow | null): boolean {
    const txs = this.#ledger.payouts.txsOf(payoutId);
    const mine = txs.find((x) => x.hash === paid.txHash);
    if (mine && mine.state !== 'included') {
      this.#ledger.payouts.setTxState(mine.hash, 'included', { blockNumber: Number(paid.blockNumber), gasUsed: paid.gasUsed, fee: paid.fee });
    }
    // The siblings from the rows read above: only `mine` changed since, and it is not its own sibling.
    if (mine) this.#closeSiblings(payoutId, mine.nonce, mine.hash, 'replaced', txs);
    const cur = read === undefined ? this.#ledger.payouts.get(payoutId) : read;
    if (!cur) return false;
    if (cur.state === 'success') {
      if (cur.tx_hash?.toLowerCase() !== paid.txHash.toLowerCase()) {
        this.#payoutLog(cur).error({ recorded: cur.tx_hash, other: paid.txHash }, 'a second transaction reports paying a settled payout');
      }
      return false;
    }
    if (cur.state === 'failed') {
      this.#payoutLog(cur).error({ txHash: paid.txHash }, 'payout recorded failed was paid on chain');
      return false;
    }
    this.#ledger.payouts.setState(payoutId, 'success', { txHash: paid.txHash });
    this.#hooks.onPaid(cur, paid.txHash, paid.share ?? paid.fee);
    return true;
  }

  // Same-nonce transactions can never land once one of them did.
  #closeSiblings(payoutId: string, nonce: number, except: Hex, state: 'replaced', txs = this.#ledger.payouts.txsOf(payoutId)): void {
    for (const x of txs) {
      if (x.nonce === nonce && x.hash !== except && isOpen(x)) this.#ledger.payouts.setTxState(x.hash, state);
    }
  }

  #hasOpen(payoutId: string): boolean {
    return this.#ledger.payouts.txsOf(payoutId).some(isOpen);
  }

  async #requestOf(payout: PayoutRow): Promise<CallRequest | undefined> {
    if (payout.kind !== 'refund' && payout.kind !== 'excess' && payout.kind !== 'withdrawal') return undefined;
    try {
      return (await this.#buildCall(payout)).request;
    } catch (err) {
      if (err instanceof UnpayableError) return undefined;
      throw err;
    }
  }

  /**
   * Where a refund's (or excess's, or withdrawal's) signed depository call stands; undefined for any other payout.
   * Expired is the chain's word, never the node's clock (which may run ahead of the chain's block timestamps): not
   * executed at the head, and a block the chain's confirmations deep carries a timestamp past the expiration, so no
   * later block can execute it (timestamps only grow along a chain; the depth guards against the head reorged back).
   */
  async callOutcome(payout: PayoutRow): Promise<SignedCallOutcome | undefined> {
    const request = await this.#requestOf(payout);
    if (!request) return undefined;
    const executableUntil = Number(request.expiration) * 1000;
    const head = await this.#client.getBlockNumber({ cacheTime: 0 });
    const executed = await this.#client.readContract({
      address: this.#chain.depository,
      abi: RelayDepositoryAbi,
      functionName: 'callRequests',
      args: [callRequestId(request)],
      blockNumber: head,
    });
    const deep = head - BigInt(this.#chain.confirmations) + 1n;
    if (executed || deep < 0n) return { executed, expired: false, executableUntil };
    const { timestamp } = await this.#client.getBlock({ blockNumber: deep });
    return { executed, expired: timestamp > request.expiration, executableUntil };
  }

  // Whether the payment was made on chain, and by which transaction.
  async #findPaid(payout: PayoutRow, request: CallRequest | undefined, atBlock?: bigint): Promise<PaidBy | null> {
    let txHash: Hex | undefined;
    const at = atBlock === undefined ? {} : { blockNumber: atBlock };
    if (payout.kind === 'fill') {
      const orderId = payout.request_id!;
      const filled = await this.#client.readContract({ address: this.#chain.filler, abi: OrderFillerAbi, functionName: 'filled', args: [orderId], ...at });
      if (!filled) return null;
      txHash = await this.#findLog(async (fromBlock, toBlock) => {
        const logs = await this.#client.getLogs({ address: this.#chain.filler, event: orderFilledEvent, args: { orderId }, fromBlock, toBlock });
        return logs.at(-1)?.transactionHash ?? undefined;
      });
      if (!txHash) throw new Error(`order ${orderId} is filled but its OrderFilled event was not found`);
    } else {
      if (!request) return null;
      const id = callRequestId(request);
      const depository = this.#chain.depository;
      const used = await this.#client.readContract({ address: depository, abi: RelayDepositoryAbi, functionName: 'callRequests', args: [id], ...at });
      if (!used) return null;
      txHash = await this.#findLog(async (fromBlock, toBlock) => {
        const logs = await this.#client.getLogs({ address: this.#chain.depository, event: callExecutedEvent, fromBlock, toBlock });
        return logs.filter((l) => l.args.id === id).at(-1)?.transactionHash ?? undefined;
      });
      if (!txHash) throw new Error(`call request ${id} is used but its RelayCallExecuted event was not found`);
    }
    const receipt = await this.#client.getTransactionReceipt({ hash: txHash });
    const ours = getAddress(receipt.from) === this.address;
    return {
      txHash,
      blockNumber: receipt.blockNumber,
      gasUsed: receipt.gasUsed,
      fee: ours ? receiptFee(receipt) : 0n,
    };
  }

  // Scans back from the head in chain.maxLogRange windows down to chain.startBlock.
  async #findLog(scan: (from: bigint, to: bigint) => Promise<Hex | undefined>): Promise<Hex | undefined> {
    const floor = BigInt(this.#chain.startBlock);
    const range = BigInt(this.#chain.maxLogRange);
    let to = await this.#client.getBlockNumber({ cacheTime: 0 });
    while (to >= floor) {
      const from = to - range + 1n > floor ? to - range + 1n : floor;
      const found = await scan(from, to);
      if (found) return found;
      if (from === floor) break;
      to = from - 1n;
    }
    return undefined;
  }

  // ------------------------------------------------------------------------------------------ housekeeping

  // The filler pulls ERC-20 fills from the solver: approve it once per token (not a payout; not in the ledger).
  async #ensureAllowances(): Promise<void> {
    for (const c of this.#chain.currencies) {
      const token = getAddress(c.address);
      if (token === zeroAddress) continue;
      const allowance = await this.#client.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [this.address, this.#chain.filler] });
      if (allowance >= APPROVE_THRESHOLD) continue;
      const data = encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [this.#chain.filler, maxUint256] });
      const [estimate, fees] = await Promise.all([this.#client.estimateGas({ account: this.address, to: token, data }), this.#fees.current()]);
      const gas = gasLimitWithin(estimate, this.#chain.gasMarginBps, this.#fees.txGasCap());
      if (gas === undefined) throw new RelayNodeError(`approving ${token} needs ${estimate} gas, more than one transaction may carry`);
      const { hash, nonce } = await this.#nonces.withNonce(async (nonce) => {
        const raw = await this.#account.signTransaction({
          type: 'eip1559',
          chainId: this.chainId,
          nonce,
          to: token,
          data,
          value: 0n,
          gas,
          maxFeePerGas: fees.maxFeePerGas,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        });
        try {
          this.#gate.check();
          await this.#client.sendRawTransaction({ serializedTransaction: raw });
        } catch (err) {
          if (!ALREADY_KNOWN.test(fullText(err))) throw err;
        }
        return { consumed: true, value: { hash: keccak256(raw), nonce } };
      });
      this.#log.info({ token, symbol: c.symbol, spender: this.#chain.filler, txHash: hash, nonce }, 'approving the filler for an ERC-20');
      const receipt = await this.#client.waitForTransactionReceipt({
        hash,
        pollingInterval: Math.min(this.#chain.pollIntervalMs, 1_000),
        timeout: Math.max(120_000, this.#chain.pollIntervalMs * 20),
      });
      if (receipt.status !== 'success') throw new Error(`approval of ${c.symbol} (${token}) for the filler reverted (tx ${hash})`);
    }
  }

  // Repeated decisions (a rebroadcast on every head) are logged once at their level, then at debug.
  readonly #noted = new Set<string>();
  #firstTime(key: string): boolean {
    if (this.#noted.has(key)) return false;
    if (this.#noted.size > 10_000) this.#noted.clear();
    this.#noted.add(key);
    return true;
  }
}
