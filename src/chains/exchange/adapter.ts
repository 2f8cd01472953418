import { spendable } from '../spendable.ts';
// The perpetuals exchange (chain id 1337) behind the ChainAdapter interface.
//
//   payouts   a fill to the exchange (or a refund on it) is the solver's signed sendAsset to the
//             recipient. The signed action is recorded in the ledger (tx id = keccak of the signed
//             body) before it is posted, exactly like the EVM submitter records a signed
//             transaction before broadcasting it; a recorded action whose outcome is unknown (a
//             crash, a lost answer) is reconciled by looking for its nonce in the solver's ledger
//             updates, and only re-posted (the same signed body, the same nonce: the exchange
//             applies a nonce once) when it is not there.
//   deposits  a withdrawal is the user's sendAsset to the solver. The indexer reads the solver's
//             non-funding ledger updates from a cursor kept in the ledger and associates a
//             transfer to a request only through the nonce the user authorized (exchange_nonces);
//             any other transfer is booked as an orphan deposit, which the solver refunds.
//   quotes    the exchange charges no gas: fill, refund and deposit costs are zero.

import { getAddress, hexToString, isAddress, keccak256, toHex, zeroAddress, type Address, type Hex, type LocalAccount } from 'viem';
import type { Config, Faults } from '../../config/load.ts';
import type { ExchangeChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { PayoutRow, TransactionRow } from '../../ledger/types.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { QuoteError } from '../../quote/errors.ts';
import type { ChainAdapter, ChainEvents, DepositRequest, DepositStep, FillCost, FillCostRequest, PayoutHooks } from '../adapter.ts';
import { ExchangeAssets, UnknownAssetError } from './assets.ts';
import { ExchangeActionError, ExchangeClient, parseDecimalFloor, signSendAsset, type LedgerUpdate, type SendLedgerDelta } from './client.ts';
import {
  formatUnitsDecimal,
  NONCE_MAPPING_TYPES,
  SEND_ASSET_PRIMARY_TYPE,
  SEND_ASSET_TYPES,
  type SendAssetParameters,
  type SignedSendAsset,
} from './typedData.ts';

const SOURCE = 'exchange-ledger';
// The order_ref of a transfer no authorization ties to a request: it matches no request.
const NO_REQUEST = `0x${'0'.repeat(64)}` as Hex;
// Ledger updates are read back this far before the oldest open action when reconciling.
const RECONCILE_MARGIN_MS = 10 * 60_000;
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 30_000;
const INSUFFICIENT = /insufficient/i;
const NONCE_USED = /nonce.*(used|already)/i;

class UnpayableError extends Error {}

export class ExchangeAdapter implements ChainAdapter {
  readonly chainId: number;
  readonly kind = 'exchange' as const;
  readonly solver: Address;
  readonly depositAddress: string;
  readonly confirmSeconds = 1;
  readonly client: ExchangeClient;
  readonly nonces: Ledger['exchangeNonces'];
  readonly assets: ExchangeAssets;

  readonly #signer: LocalAccount;
  readonly #faults: Faults;
  readonly #log: Logger;
  #stopped = true;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #cycleWaiters: (() => void)[] = [];
  #lastNonce = 0;
  #lastDepositNonce = 0;
  #ready = false;
  #lastPoll = 0;
  readonly #retry = new Map<string, { attempts: number; at: number }>();

  constructor(
    private chain: ExchangeChainConfig,
    config: Config,
    private ledger: Ledger,
    private hooks: PayoutHooks & ChainEvents,
    private metrics: Metrics,
    log: Logger,
  ) {
    this.chainId = chain.id;
    this.#signer = config.solverSigner;
    this.#faults = config.faults;
    this.solver = config.solverSigner.address;
    this.depositAddress = this.solver.toLowerCase();
    this.client = new ExchangeClient({ url: chain.exchangeUrl });
    this.nonces = ledger.exchangeNonces;
    this.assets = new ExchangeAssets(chain, this.client);
    this.#log = log.child({ chain: chain.id, component: 'exchange' });
  }

  // ------------------------------------------------------------------------------------ lifecycle

  async start(): Promise<void> {
    await this.assets.check();
    this.#lastNonce = this.ledger.payouts.maxNonce(this.chainId, this.solver) ?? 0;
    this.#stopped = false;
    this.#ready = true;
    this.poke();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
    for (const w of this.#cycleWaiters) w();
    this.#cycleWaiters = [];
  }

  wake(): void {
    this.poke();
  }

  // Runs a cycle (index, reconcile, pay) now, or one more after the running one.
  poke(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#running = this.#cycle().finally(() => {
      this.#running = undefined;
      if (this.#stopped) return;
      if (this.#again) {
        this.#again = false;
        this.poke();
      } else {
        this.#timer = setTimeout(() => this.poke(), this.chain.pollIntervalMs);
      }
    });
  }

  // Resolves after a full cycle that started after this call.
  #nextCycle(): Promise<void> {
    return new Promise((resolve) => {
      this.#cycleWaiters.push(resolve);
      if (this.#running) this.#again = true;
      else this.poke();
    });
  }

  async #cycle(): Promise<void> {
    const waiters = this.#cycleWaiters;
    this.#cycleWaiters = [];
    try {
      await this.#index();
      this.#lastPoll = Date.now();
    } catch (e) {
      this.metrics.rpcErrors.inc({ chain: this.chainId, method: 'ledgerUpdates' });
      this.#log.warn({ err: (e as Error).message }, 'exchange indexer pass failed; retrying');
    }
    try {
      await this.#reconcile();
    } catch (e) {
      this.#log.warn({ err: (e as Error).message }, 'exchange reconcile pass failed; retrying');
    }
    try {
      await this.#pump();
    } catch (e) {
      this.#log.warn({ err: (e as Error).message }, 'exchange payout pass failed; retrying');
    }
    for (const w of waiters) w();
  }

  progress() {
    const indexed = this.ledger.indexer.cursor(this.chainId, SOURCE) ?? 0;
    const head = this.#lastPoll || indexed;
    return { head, indexed, ready: this.#ready && Date.now() - this.#lastPoll < Math.max(10_000, this.chain.pollIntervalMs * 10) };
  }

  // ------------------------------------------------------------------------------------ quotes


  async indexTransaction(txId: string): Promise<number> {
    await this.#nextCycle();
    return this.ledger.deposits.get(depositId(this.chainId, txId as Hex)) ? 1 : 0;
  }

  async balanceOf(owner: string, currency: string): Promise<bigint> {
    const a = await this.assets.asset(currency);
    const user = getAddress(owner);
    if (a.perps) return this.client.withdrawable(user);
    const b = (await this.client.spotBalances(user, a.dex)).find((x) => x.token === a.tokenIndex);
    if (!b) return 0n;
    const total = parseDecimalFloor(b.total, a.decimals);
    const hold = parseDecimalFloor(b.hold, a.decimals);
    return total > hold ? total - hold : 0n;
  }

  async balance(currency: string): Promise<bigint> {
    return spendable(this.ledger, this.chainId, currency, () => this.balanceOf(this.solver, currency));
  }

  async fillCost(_req: FillCostRequest): Promise<FillCost> {
    return { native: 0n, rent: 0n, minimumAmount: 0n };
  }

  async refundCost(_currency: string): Promise<bigint> {
    return 0n;
  }

  async depositCost(_currency: string): Promise<bigint> {
    return 0n;
  }

  // A fresh nonce for a withdrawal: ms-timestamp based (the exchange takes nonces near its clock),
  // strictly increasing in this process.
  #depositNonce(): number {
    this.#lastDepositNonce = Math.max(Date.now(), this.#lastDepositNonce + 1);
    return this.#lastDepositNonce;
  }

  async depositSteps(req: DepositRequest): Promise<DepositStep[]> {
    if (req.protocolVersion !== 'v2') {
      throw new QuoteError(`protocolVersion: must be v2 for withdrawals from the exchange (chain ${this.chainId})`, 'INVALID_INPUT_PARAMETERS');
    }
    if (req.feePayer !== undefined) throw new QuoteError('depositFeePayer: only SVM-origin deposits can have another fee payer', 'INVALID_INPUT_PARAMETERS');
    if (req.permitDeadline !== undefined) throw new QuoteError(`usePermit: chain ${this.chainId} has no permits`, 'INVALID_INPUT_PARAMETERS');
    if (req.depositAddressFor !== undefined) throw new QuoteError(`useDepositAddress: chain ${this.chainId} offers no deposit addresses`, 'INVALID_INPUT_PARAMETERS');
    let asset;
    try {
      asset = await this.assets.asset(req.currency);
    } catch (e) {
      if (e instanceof UnknownAssetError) throw new QuoteError(`originCurrency: ${e.message}`, 'UNSUPPORTED_CURRENCY');
      throw e;
    }
    const signatureChainId = req.signatureChainId ?? this.chain.signatureChainId;
    const wallet = req.user.toLowerCase();
    const nonce = this.#depositNonce();
    const parameters: SendAssetParameters = {
      exchangeChain: this.chain.exchangeChain,
      destination: this.depositAddress,
      sourceDex: asset.dex,
      destinationDex: asset.dex,
      token: asset.token,
      amount: formatUnitsDecimal(req.amount, asset.decimals),
      fromSubAccount: '',
      nonce,
    };
    return [
      {
        id: 'authorize',
        kind: 'signature',
        action: 'Sign authorization',
        description: 'Authorize the transfer: ties its nonce to this request',
        data: {
          sign: {
            signatureKind: 'eip712',
            domain: { name: 'ServiceNonceMapping', version: '2', chainId: signatureChainId, verifyingContract: zeroAddress },
            types: NONCE_MAPPING_TYPES,
            value: { chainId: 'exchange', wallet, depositor: wallet, nonce, id: req.orderId },
            primaryType: 'NonceMapping',
          },
          post: {
            endpoint: '/authorize',
            method: 'POST',
            body: { type: 'nonce-mapping', walletChainId: this.chainId, wallet, depositor: wallet, nonce, id: req.orderId, signatureChainId },
          },
        },
      },
      {
        id: 'deposit',
        kind: 'transaction',
        action: 'Confirm transaction in your wallet',
        description: 'Send the funds to the relayer on the exchange',
        data: {
          action: { type: 'sendAsset', parameters },
          nonce,
          eip712Types: SEND_ASSET_TYPES,
          eip712PrimaryType: SEND_ASSET_PRIMARY_TYPE,
        },
        check: 'status',
      },
    ];
  }

  // ------------------------------------------------------------------------------------ deposits

  // Reads the solver's ledger updates from the cursor and books the transfers to the solver.
  async #index(): Promise<void> {
    const cursor = this.ledger.indexer.cursor(this.chainId, SOURCE) ?? 0;
    const updates = await this.client.ledgerUpdates(this.solver, cursor);
    const now = Date.now();
    let next = cursor;
    let waiting: number | undefined;
    const rows: Parameters<Ledger['deposits']['insert']>[0][] = [];
    for (const u of updates) {
      // What the exchange answers is input too: an entry the ledger cannot hold is skipped, loudly.
      if (typeof u?.time !== 'number' || !Number.isSafeInteger(u.time) || u.time < 0 || typeof u.hash !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(u.hash)) {
        this.#log.error({ update: JSON.stringify(u).slice(0, 300) }, 'unreadable ledger update from the exchange; skipped');
        continue;
      }
      if (u.time > next) next = u.time;
      const d = u.delta as SendLedgerDelta;
      if (d?.type !== 'send' || !isAddress(d.destination ?? '', { strict: false }) || !isAddress(d.user ?? '', { strict: false })) continue;
      if (getAddress(d.destination) !== this.solver || getAddress(d.user) === this.solver) continue;
      const id = depositId(this.chainId, u.hash);
      if (this.ledger.deposits.get(id)) continue;
      const sender = getAddress(d.user);
      const mapping = typeof d.nonce === 'number' ? this.nonces.get(sender, d.nonce) : undefined;
      if (!mapping && now - u.time < this.chain.orphanGraceMs) {
        // Its authorization may still be on its way: read this transfer again next time.
        waiting = Math.min(waiting ?? u.time, u.time);
        continue;
      }
      // A failing spotMeta read throws (the pass is retried, the cursor stays); an unknown token does not.
      const asset =
        typeof d.token === 'string' && typeof d.destinationDex === 'string'
          ? await this.assets.ofTransfer(d.token, d.destinationDex).catch((e) => {
              if (e instanceof UnknownAssetError) return undefined;
              throw e;
            })
          : undefined;
      if (!asset) {
        this.#log.error({ hash: u.hash, token: d.token, dex: d.destinationDex, from: sender }, 'transfer to the solver in a token the exchange does not list; manual action required');
        continue;
      }
      let amount: bigint;
      try {
        amount = parseDecimalFloor(d.amount, asset.decimals);
      } catch {
        this.#log.error({ hash: u.hash, amount: d.amount }, 'transfer to the solver with an unreadable amount; manual action required');
        continue;
      }
      if (!mapping) this.#log.warn({ hash: u.hash, from: sender, nonce: d.nonce }, 'transfer to the solver with no authorized nonce: booked as an orphan deposit');
      rows.push({
        id,
        chain_id: this.chainId,
        tx_hash: u.hash.toLowerCase() as Hex,
        log_index: 0,
        block_number: u.time,
        block_hash: u.hash.toLowerCase() as Hex,
        depositor: sender,
        currency: asset.currency,
        amount: amount.toString(),
        order_ref: (mapping?.request_id ?? NO_REQUEST) as Hex,
        seen_at: u.time,
      });
    }
    const newCursor = waiting !== undefined ? Math.min(waiting, next) : next;
    let fresh = 0;
    this.ledger.tx(() => {
      for (const r of rows) if (this.ledger.deposits.insert(r)) fresh++;
      // The exchange's ledger is final: what it lists is confirmed at once.
      if (fresh) this.ledger.deposits.confirmUpTo(this.chainId, Number.MAX_SAFE_INTEGER);
      if (newCursor !== cursor || this.ledger.indexer.cursor(this.chainId, SOURCE) === undefined) this.ledger.indexer.setCursor(this.chainId, SOURCE, newCursor);
    });
    if (fresh) {
      this.metrics.depositsIndexed.inc({ chain: this.chainId }, fresh);
      this.#log.info({ count: fresh }, 'exchange deposits indexed');
      this.hooks.wake();
    }
  }

  // ------------------------------------------------------------------------------------ payouts

  #nextNonce(): number {
    this.#lastNonce = Math.max(Date.now(), this.#lastNonce + 1);
    return this.#lastNonce;
  }

  async #pump(): Promise<void> {
    const now = Date.now();
    for (const row of this.ledger.payouts.queued(this.chainId, 100)) {
      if (this.#stopped) return;
      const retry = this.#retry.get(row.id);
      if (retry && retry.at > now) continue;
      try {
        await this.#process(row.id);
      } catch (e) {
        this.#backoff(row.id, e);
      }
    }
  }

  #backoff(payoutId: string, err: unknown): void {
    const attempts = (this.#retry.get(payoutId)?.attempts ?? 0) + 1;
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (attempts - 1));
    this.#retry.set(payoutId, { attempts, at: Date.now() + delay });
    this.#log.warn({ payout: payoutId, requestId: this.ledger.payouts.get(payoutId)?.request_id ?? undefined, err: (err as Error).message, attempts, retryInMs: delay }, 'exchange payout postponed');
  }

  #params(payout: PayoutRow, asset: { dex: string; token: string; decimals: number }, nonce: number): SendAssetParameters {
    return {
      exchangeChain: this.chain.exchangeChain,
      destination: payout.recipient.toLowerCase(),
      sourceDex: asset.dex,
      destinationDex: asset.dex,
      token: asset.token,
      amount: formatUnitsDecimal(BigInt(payout.amount), asset.decimals),
      fromSubAccount: '',
      nonce,
    };
  }

  async #process(payoutId: string): Promise<void> {
    const payout = this.ledger.payouts.get(payoutId);
    if (!payout || payout.state !== 'queued' || payout.chain_id !== this.chainId) return;
    const log = this.#log.child({ payout: payout.id, kind: payout.kind, requestId: payout.request_id });
    let params: SendAssetParameters;
    try {
      if (payout.kind === 'sweep' || payout.kind === 'deposit') throw new UnpayableError(`the exchange has no ${payout.kind} payouts`);
      if (payout.calls || payout.native_topup) throw new UnpayableError('the exchange runs no calls and has no gas to top up');
      if (!isAddress(payout.recipient, { strict: false })) throw new UnpayableError(`recipient ${payout.recipient} is not an exchange account`);
      if (!/^[0-9]+$/.test(payout.amount) || BigInt(payout.amount) <= 0n) throw new UnpayableError(`amount ${payout.amount} is not a positive integer`);
      let asset;
      try {
        asset = await this.assets.asset(payout.currency);
      } catch (e) {
        if (e instanceof UnknownAssetError) throw new UnpayableError(e.message);
        throw e;
      }
      params = this.#params(payout, asset, this.#nextNonce());
    } catch (e) {
      if (!(e instanceof UnpayableError)) throw e;
      const failed = this.ledger.tx(() => {
        const cur = this.ledger.payouts.get(payout.id);
        if (!cur || cur.state !== 'queued') return false;
        this.ledger.payouts.setState(cur.id, 'failed', { failReason: 'TRANSACTION_SUBMISSION_FAILED' });
        this.hooks.onFailed(cur, 'TRANSACTION_SUBMISSION_FAILED');
        return true;
      });
      if (failed) log.error({ err: e.message }, 'exchange payout cannot be made');
      return;
    }

    const body = await signSendAsset(this.#signer, params, { signatureChainId: this.chain.signatureChainId });
    const raw = toHex(JSON.stringify(body));
    const hash = keccak256(raw);
    // Record first, then send: a crash from here on finds the action in the ledger.
    const recorded = this.ledger.tx(() => {
      const cur = this.ledger.payouts.get(payout.id);
      if (!cur || cur.state !== 'queued') return false;
      this.ledger.payouts.insertTx({
        hash,
        payout_id: cur.id,
        chain_id: this.chainId,
        sender: this.solver,
        nonce: params.nonce,
        raw,
        gas_limit: '0',
        max_fee_per_gas: '0',
        max_priority_fee_per_gas: '0',
        created_at: Date.now(),
      });
      this.ledger.payouts.setState(cur.id, 'sent', { txHash: hash });
      this.hooks.onSigned(cur, hash);
      return true;
    });
    if (!recorded) return;
    this.#retry.delete(payout.id);
    log.info({ txHash: hash, nonce: params.nonce, amount: params.amount, token: params.token, to: params.destination }, 'exchange sendAsset signed and recorded');
    if (payout.kind === 'fill' && this.#faults.crashAfterFillRecorded) process.kill(process.pid, 'SIGKILL');
    await this.#send(this.ledger.payouts.txsOf(payout.id).find((t) => t.hash === hash)!, body, log);
  }

  // Posts a recorded action and settles what the answer decides.
  async #send(t: TransactionRow, body: SignedSendAsset, log: Logger): Promise<void> {
    try {
      await this.client.submit(body);
    } catch (e) {
      if (e instanceof ExchangeActionError) return this.#onRejected(t, e.exchangeMessage, log);
      // Unknown outcome: the action stays open and is reconciled from the exchange's ledger.
      this.ledger.payouts.setTxState(t.hash, 'broadcast', { broadcastAt: Date.now(), error: (e as Error).message.slice(0, 300) });
      log.warn({ txHash: t.hash, err: (e as Error).message }, 'exchange sendAsset outcome unknown; will reconcile');
      return;
    }
    if (this.#settlePaid(t)) log.info({ txHash: t.hash }, 'exchange payout paid');
  }

  // The exchange refused the action: it was not applied (or, for a used nonce, maybe applied before).
  async #onRejected(t: TransactionRow, message: string, log: Logger): Promise<void> {
    if (NONCE_USED.test(message)) {
      // Applied by an earlier post whose answer was lost: the ledger updates will show it.
      this.ledger.payouts.setTxState(t.hash, 'broadcast', { broadcastAt: Date.now(), error: message.slice(0, 300) });
      log.warn({ txHash: t.hash, message }, 'exchange says the nonce is used; reconciling from its ledger');
      return;
    }
    if (INSUFFICIENT.test(message)) {
      // Not applied; the payout is signed again (new nonce) once the solver holds enough.
      this.ledger.tx(() => {
        this.ledger.payouts.setTxState(t.hash, 'dropped', { error: message.slice(0, 300) });
        const cur = this.ledger.payouts.get(t.payout_id);
        if (cur?.state === 'sent') this.ledger.payouts.setState(cur.id, 'queued');
      });
      this.#backoff(t.payout_id, new Error(`exchange: ${message}`));
      return;
    }
    const failed = this.ledger.tx(() => {
      this.ledger.payouts.setTxState(t.hash, 'reverted', { error: message.slice(0, 300) });
      const cur = this.ledger.payouts.get(t.payout_id);
      if (!cur || cur.state !== 'sent') return false;
      this.ledger.payouts.setState(cur.id, 'failed', { txHash: t.hash, failReason: 'TRANSACTION_REVERTED' });
      this.hooks.onFailed(cur, 'TRANSACTION_REVERTED', t.hash);
      return true;
    });
    if (failed) log.warn({ txHash: t.hash, message }, 'exchange payout failed: the exchange rejected the action');
  }

  // Inside one ledger transaction: the action was applied. Returns whether this settled the payout now.
  #settlePaid(t: TransactionRow): boolean {
    return this.ledger.tx(() => {
      this.ledger.payouts.setTxState(t.hash, 'included', { gasUsed: 0n, fee: 0n, broadcastAt: Date.now() });
      const cur = this.ledger.payouts.get(t.payout_id);
      if (!cur || cur.state === 'success') return false;
      if (cur.state === 'failed') {
        this.#log.error({ payout: cur.id, requestId: cur.request_id ?? undefined, txHash: t.hash }, 'payout recorded failed was paid on the exchange');
        return false;
      }
      this.ledger.payouts.setState(cur.id, 'success', { txHash: t.hash });
      this.hooks.onPaid(cur, t.hash, 0n);
      return true;
    });
  }

  // Recorded actions whose outcome is unknown (a crash after recording, a lost answer): paid when
  // the solver's ledger shows their nonce; otherwise the same signed body is posted again.
  async #reconcile(): Promise<void> {
    const open = this.ledger.payouts.openTxs(this.chainId);
    if (!open.length) return;
    const since = Math.max(0, Math.min(...open.map((t) => t.created_at)) - RECONCILE_MARGIN_MS);
    const updates: LedgerUpdate[] = await this.client.ledgerUpdates(this.solver, since);
    const sent = new Set<number>();
    for (const u of updates) {
      const d = u.delta as SendLedgerDelta;
      if (d?.type === 'send' && isAddress(d.user ?? '', { strict: false }) && getAddress(d.user) === this.solver && typeof d.nonce === 'number') sent.add(d.nonce);
    }
    const now = Date.now();
    for (const t of open) {
      if (this.#stopped) return;
      const log = this.#log.child({ payout: t.payout_id, requestId: this.ledger.payouts.get(t.payout_id)?.request_id ?? undefined, txHash: t.hash });
      if (sent.has(t.nonce)) {
        if (this.#settlePaid(t)) log.info({ nonce: t.nonce }, 'exchange payout found in the solver ledger: paid');
        continue;
      }
      const retry = this.#retry.get(t.hash);
      if (retry && retry.at > now) continue;
      this.#retry.set(t.hash, { attempts: (retry?.attempts ?? 0) + 1, at: now + Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (retry?.attempts ?? 0)) });
      let body: SignedSendAsset;
      try {
        body = JSON.parse(hexToString(t.raw)) as SignedSendAsset;
      } catch {
        log.error('recorded exchange action is unreadable; manual action required');
        continue;
      }
      log.info({ nonce: t.nonce }, 'recorded exchange action not in the solver ledger; posting the same signed action again');
      await this.#send(t, body, log);
    }
  }
}

export function depositId(chainId: number, hash: Hex | string): string {
  return `${chainId}:${hash.toLowerCase()}:0`;
}
