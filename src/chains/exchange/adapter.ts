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
//   deposits  a withdrawal is the user's sendAsset to the solver, read by the indexer driver
//             (src/indexer) from the solver's ledger updates (depositSource.ts).
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
import { ExchangeNonces } from './nonces.ts';
import { depositId, ExchangeDepositSource } from './depositSource.ts';
import { IndexerDriver } from '../../indexer/driver.ts';
import {
  formatUnitsDecimal,
  NONCE_MAPPING_TYPES,
  SEND_ASSET_PRIMARY_TYPE,
  SEND_ASSET_TYPES,
  type SendAssetParameters,
  type SignedSendAsset,
} from './typedData.ts';

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
  readonly nonces: ExchangeNonces;
  readonly assets: ExchangeAssets;

  readonly #signer: LocalAccount;
  readonly #faults: Faults;
  readonly #log: Logger;
  #stopped = true;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #lastNonce = 0;
  #lastDepositNonce = 0;
  #ready = false;
  readonly #indexer: IndexerDriver;
  readonly #retry = new Map<string, { attempts: number; at: number }>();

  constructor(
    private chain: ExchangeChainConfig,
    config: Config,
    private ledger: Ledger,
    private hooks: PayoutHooks & ChainEvents,
    metrics: Metrics,
    log: Logger,
  ) {
    this.chainId = chain.id;
    this.#signer = config.solverSigner;
    this.#faults = config.faults;
    this.solver = config.solverSigner.address;
    this.depositAddress = this.solver.toLowerCase();
    this.client = new ExchangeClient({ url: chain.exchangeUrl });
    this.nonces = new ExchangeNonces(ledger.db);
    this.assets = new ExchangeAssets(chain, this.client);
    this.#log = log.child({ chain: chain.id, component: 'exchange' });
    this.#indexer = new IndexerDriver({
      // The exchange's ledger is final: what it lists is confirmed at once; its cursor is exchange time.
      config: {
        chainId: chain.id,
        cursor: 'exchange-ledger',
        startBlock: 1,
        confirmations: 1,
        finalityDepth: 0,
        maxRange: Infinity,
        final: true,
        pollIntervalMs: chain.pollIntervalMs,
      },
      source: new ExchangeDepositSource(chain, this.client, this.assets, this.nonces, this.solver, (id) => !!ledger.deposits.get(id), this.#log),
      ledger,
      events: { onConfirmed: () => hooks.wake(), onHead: () => {} },
      reorgs: hooks.reorgs,
      metrics,
      log: this.#log,
    });
  }

  // ------------------------------------------------------------------------------------ lifecycle

  async start(): Promise<void> {
    await this.assets.check();
    this.#lastNonce = this.ledger.payouts.maxNonce(this.chainId, this.solver) ?? 0;
    this.#stopped = false;
    this.#ready = true;
    this.#indexer.start();
    this.poke();
  }

  async stop(): Promise<void> {
    await this.#indexer.stop();
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
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

  async #cycle(): Promise<void> {
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
  }

  progress() {
    const indexed = this.#indexer.indexed();
    const lastRead = this.#indexer.lastReadAt;
    const head = lastRead || indexed;
    return { head, indexed, ready: this.#ready && Date.now() - lastRead < Math.max(10_000, this.chain.pollIntervalMs * 10) };
  }

  // ------------------------------------------------------------------------------------ quotes

  parseTxId(s: string): string | undefined {
    return /^0x[0-9a-fA-F]{64}$/.test(s) ? s.toLowerCase() : undefined;
  }

  async indexTransaction(txId: string): Promise<number> {
    await this.#indexer.nextPass();
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

export { depositId };
