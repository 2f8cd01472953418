// How the perpetuals exchange pays (the payout pipeline's PayoutSender, src/submitter/): a fill to the
// exchange (or a refund on it) is the solver's signed sendAsset to the recipient.
//
//   prepare  check the payout can be made on the exchange and find its asset (and that a fill activates no account
//            its quote charged no fee for);
//   submit   sign the sendAsset (nonce: ms-timestamp based, strictly increasing), record it in the ledger
//            (tx id = keccak of the signed body) with the payout's new state, exactly like the EVM records a
//            signed transaction before broadcasting it;
//   send     post it: applied → paid; refused otherwise than for funds → failed; no answer, "nonce used"
//            or refused for funds → left open for the confirm pass;
//   confirm  a recorded action whose outcome is unknown (a crash, a lost answer) or that was refused for
//            funds is paid when a send of the solver at its nonce to its recipient is in the solver's
//            ledger updates; otherwise the same signed body is posted again (the same nonce: the exchange
//            applies a nonce once), except a fill whose quote charged no activation fee while the exchange
//            would charge one now (its recipient emptied meanwhile): held until the recipient is known again
//            or the action is dead. Only the running key's actions are looked at (each is judged by its own
//            signer's ledger). The key's nonce set is read from the account's sends to other accounts only:
//            an API wallet of the account signs sends to the account itself (or its sub-accounts) with nonces
//            of its own, and the ledger names no signer. A payout is signed a second time only once its
//            first action is proven dead (a refund or excess; a fill then fails).
//
// The pipeline runs it serially (confirm, then send, in one loop): a recorded action is never posted by
// the confirm pass while its first post is under way.
import { type BroadcastGate, OPEN_GATE } from '../../submitter/gate.ts';
import { getAddress, hexToString, isAddress, keccak256, toHex, type Address, type Hex, type LocalAccount } from 'viem';
import type { Faults } from '../../config/load.ts';
import type { ExchangeChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { PayoutRow, TransactionRow } from '../../ledger/types.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { backoffMs } from '../../lib/backoff.ts';
import { errText } from '../../lib/errors.ts';
import { UnpayableError } from '../../submitter/errors.ts';
import { PAYOUT_BACKOFF, PayoutPipeline } from '../../submitter/pipeline.ts';
import { quotedNoRent } from '../../submitter/quotedRent.ts';
import type { BroadcastResult, PayoutSender, PrepareResult, StepContext, SubmitResult, TxStatus } from '../../submitter/port.ts';
import type { PayoutHooks } from '../adapter.ts';
import { UnknownAssetError, type ExchangeAssets } from './assets.ts';
import { ExchangeActionError, parseDecimalCeil, signSendAsset, type ExchangeClient, type SendLedgerDelta } from './client.ts';
import { formatUnitsDecimal, type SendAssetParameters, type SignedSendAsset } from './typedData.ts';
import { NONCE_AHEAD_MS, NONCE_BEHIND_MS } from './nonceWindow.ts';

// Ledger updates are read back this far before the oldest open action when reconciling.
const RECONCILE_MARGIN_MS = 10 * 60_000;
const INSUFFICIENT = /insufficient/i;
// Any answer about the nonce ("Invalid nonce: duplicate nonce N" for one used): the action may have been
// applied by an earlier post, and only the solver's ledger says.
const NONCE = /nonce/i;
const QUEUED_BATCH = 100;
// The exchange keeps each signer's 100 highest nonces; a nonce must be above the smallest of them (Hyperliquid's rule).
const NONCE_SET = 100;
// ... and takes no nonce more than a day ahead of its own clock, nor more than 2 days behind it (with a margin here).
const NONCE_MAX_AGE_MS = NONCE_BEHIND_MS + RECONCILE_MARGIN_MS;

/** What the exchange's payouts need. */
export interface ExchangePayoutOptions {
  chain: ExchangeChainConfig;
  ledger: Ledger;
  client: ExchangeClient;
  assets: ExchangeAssets;
  /** The solver's key: signs every sendAsset. */
  signer: LocalAccount;
  hooks: PayoutHooks;
  metrics: Metrics;
  log: Logger;
  faults: Faults;
  /** Asked right before anything is sent to the chain (active/standby: only the lease's holder, before its deadline). */
  gate?: BroadcastGate;
}

/** An asset of the exchange, as a payout names it. */
type Asset = { dex: string; token: string; decimals: number };
/** A payout ready to sign: its asset, and the activation fee the exchange said it would charge (perps USD units). */
type Prepared = Asset & { activationFee: bigint };

/** A recorded sendAsset, ready to post. */
export interface ExchangeSigned {
  tx: TransactionRow;
  body: SignedSendAsset;
}

/** The payout pipeline of the exchange, over its sender (serial: see above). */
export function exchangePayoutPipeline(o: ExchangePayoutOptions): PayoutPipeline<Prepared, ExchangeSigned> {
  return new PayoutPipeline(new ExchangePayoutSender(o), {
    ledger: o.ledger,
    hooks: o.hooks,
    metrics: o.metrics,
    log: o.log,
    faults: o.faults,
    intervalMs: o.chain.pollIntervalMs,
    concurrency: 1,
    queuedBatch: QUEUED_BATCH,
    serial: true,
  });
}

/** Signs, records, posts and reconciles the exchange's sendAsset payouts (the chain-specific half of the payout pipeline). */
export class ExchangePayoutSender implements PayoutSender<Prepared, ExchangeSigned> {
  readonly chainId: number;
  readonly address: Address;
  readonly label = 'exchange';
  readonly #o: ExchangePayoutOptions;
  readonly #log: Logger;
  // Reposts of a recorded action, by its hash: spaced by the payout backoff.
  readonly #reposts = new Map<string, { attempts: number; at: number }>();
  // The activation fee each action posted from this process was expected to be charged (the exchange's ledger
  // update says what it was, and the confirm pass reads it there).
  readonly #expectedFee = new Map<string, bigint>();
  #lastNonce = 0;
  // Whether the open actions of another key (see confirm) were named in the log.
  #othersWarned = false;

  constructor(o: ExchangePayoutOptions) {
    this.#o = o;
    this.chainId = o.chain.id;
    this.address = o.signer.address;
    this.#log = o.log;
  }

  /** Nonces continue after the last one recorded. */
  async init(): Promise<void> {
    this.#lastNonce = this.#o.ledger.payouts.maxNonce(this.chainId, this.address) ?? 0;
  }

  #nextNonce(): number {
    this.#lastNonce = Math.max(Date.now(), this.#lastNonce + 1);
    return this.#lastNonce;
  }

  /** Checks the payout can be made on the exchange and finds its asset. */
  async prepare(payout: PayoutRow): Promise<PrepareResult<Prepared>> {
    if (payout.kind === 'sweep' || payout.kind === 'deposit') throw new UnpayableError(`the exchange has no ${payout.kind} payouts`);
    if (payout.calls || payout.native_topup) throw new UnpayableError('the exchange runs no calls and has no gas to top up');
    if (!isAddress(payout.recipient, { strict: false })) throw new UnpayableError(`recipient ${payout.recipient} is not an exchange account`);
    if (!/^[0-9]+$/.test(payout.amount) || BigInt(payout.amount) <= 0n) throw new UnpayableError(`amount ${payout.amount} is not a positive integer`);
    let asset: Asset;
    try {
      asset = await this.#o.assets.asset(payout.currency);
    } catch (e) {
      if (e instanceof UnknownAssetError) throw new UnpayableError(e.message, 'TRANSACTION_SUBMISSION_FAILED', { cause: e });
      throw e;
    }
    // A fill activates its recipient only when its quote charged the fee: an account emptied after the quote is
    // purged, and the exchange would charge the solver to activate it again. Refunds bear the fee whenever
    // (ExchangeAdapter.refundCost).
    const activationFee = await this.#o.client.activationFee(getAddress(payout.recipient), this.address);
    if (activationFee > 0n && payout.kind === 'fill' && quotedNoRent(this.#o.ledger, payout)) {
      throw new UnpayableError(
        `the exchange does not know the recipient ${payout.recipient} (its account is new or was emptied) and the quote charged no activation fee`,
        'NEW_CALLDATA_INCLUDES_HIGHER_RENT_FEE',
      );
    }
    return { kind: 'ready', prepared: { ...asset, activationFee } };
  }

  #params(payout: PayoutRow, asset: Asset, nonce: number): SendAssetParameters {
    return {
      exchangeChain: this.#o.chain.exchangeChain,
      destination: payout.recipient.toLowerCase(),
      sourceDex: asset.dex,
      destinationDex: asset.dex,
      token: asset.token,
      amount: formatUnitsDecimal(BigInt(payout.amount), asset.decimals),
      fromSubAccount: '',
      nonce,
    };
  }

  /** Signs the sendAsset and records it with the payout's `sent` state and `onSigned` in one ledger transaction. */
  async submit(payout: PayoutRow, asset: Prepared, { log }: StepContext): Promise<SubmitResult<ExchangeSigned>> {
    const { ledger, hooks } = this.#o;
    const params = this.#params(payout, asset, this.#nextNonce());
    const body = await signSendAsset(this.#o.signer, params, { signatureChainId: this.#o.chain.signatureChainId });
    const raw = toHex(JSON.stringify(body));
    const hash = keccak256(raw);
    // Record first, then send: a crash from here on finds the action in the ledger.
    const recorded = ledger.tx(() => {
      const cur = ledger.payouts.get(payout.id);
      if (!cur || cur.state !== 'queued') return false;
      ledger.payouts.insertTx({
        hash,
        payout_id: cur.id,
        chain_id: this.chainId,
        sender: this.address,
        nonce: params.nonce,
        raw,
        gas_limit: '0',
        max_fee_per_gas: '0',
        max_priority_fee_per_gas: '0',
        created_at: Date.now(),
      });
      ledger.payouts.setState(cur.id, 'sent', { txHash: hash });
      hooks.onSigned(cur, hash);
      return true;
    });
    if (!recorded) return { kind: 'stale' };
    this.#expectedFee.set(hash, asset.activationFee);
    log.info(
      { txHash: hash, nonce: params.nonce, amount: params.amount, token: params.token, to: params.destination },
      'exchange sendAsset signed and recorded',
    );
    return { kind: 'recorded', txHash: hash, signed: { tx: ledger.payouts.txsOf(payout.id).find((t) => t.hash === hash)!, body } };
  }

  /** Posts a recorded action and settles what the answer decides. */
  async broadcast(s: ExchangeSigned, { log }: StepContext): Promise<BroadcastResult> {
    await this.#send(s.tx, s.body, log);
    return { kind: 'sent' };
  }

  async #send(t: TransactionRow, body: SignedSendAsset, log: Logger): Promise<{ kind: TxStatus['kind'] }> {
    // Outside the try: a node that must not post leaves the action open (its outcome is not unknown).
    (this.#o.gate ?? OPEN_GATE).check();
    try {
      await this.#o.client.submit(body);
    } catch (e) {
      if (e instanceof ExchangeActionError) return this.#onRejected(t, e.exchangeMessage, log);
      // Unknown outcome: the action stays open and is reconciled from the exchange's ledger.
      this.#o.ledger.payouts.setTxState(t.hash, 'broadcast', { broadcastAt: Date.now(), error: errText(e).slice(0, 300) });
      log.warn({ txHash: t.hash, err: errText(e) }, 'exchange sendAsset outcome unknown; will reconcile');
      return { kind: 'pending' };
    }
    const fee = this.#expectedFee.get(t.hash);
    if (fee === undefined) {
      // Signed before a restart: what the exchange charged for it is read from its ledger update (the confirm pass).
      this.#o.ledger.payouts.setTxState(t.hash, 'broadcast', { broadcastAt: Date.now() });
      return { kind: 'pending' };
    }
    if (this.#settlePaid(t, fee)) log.info({ txHash: t.hash }, 'exchange payout paid');
    return { kind: 'paid' };
  }

  // The exchange refused the action: it was not applied (or, for a used nonce, maybe applied before).
  // Once any post of it had an unknown outcome or was held for funds (the row is 'broadcast'), no answer
  // to a later post proves it was never applied: it stays open until the solver's ledger shows it.
  #onRejected(t: TransactionRow, message: string, log: Logger): { kind: TxStatus['kind'] } {
    const { ledger, hooks } = this.#o;
    if (NONCE.test(message) || (t.state === 'broadcast' && !INSUFFICIENT.test(message))) {
      // Maybe applied by an earlier post whose answer was lost: the ledger updates will show it.
      ledger.payouts.setTxState(t.hash, 'broadcast', { broadcastAt: Date.now(), error: message.slice(0, 300) });
      log.warn({ txHash: t.hash, message }, 'exchange refused an action that may have been applied already; reconciling from its ledger');
      return { kind: 'pending' };
    }
    if (INSUFFICIENT.test(message)) {
      // Not applied now, but not dead: the signed action stays valid (an earlier post whose answer was
      // lost may still land; anyone holding the body may post it). Signing the payout again with a new
      // nonce would let both pay. The action stays open and the confirm pass posts the same body until
      // the solver holds enough, or fails it once the exchange can never take its nonce (whyDead in confirm).
      ledger.payouts.setTxState(t.hash, 'broadcast', { broadcastAt: Date.now(), error: message.slice(0, 300) });
      log.warn({ txHash: t.hash, message }, 'exchange sendAsset refused for funds; the same signed action will be posted again');
      return { kind: 'pending' };
    }
    const failed = ledger.tx(() => {
      ledger.payouts.setTxState(t.hash, 'reverted', { error: message.slice(0, 300) });
      const cur = ledger.payouts.get(t.payout_id);
      if (!cur || cur.state !== 'sent') return false;
      ledger.payouts.setState(cur.id, 'failed', { txHash: t.hash, failReason: 'TRANSACTION_REVERTED' });
      hooks.onFailed(cur, 'TRANSACTION_REVERTED', t.hash);
      return true;
    });
    if (failed) log.warn({ txHash: t.hash, message }, 'exchange payout failed: the exchange rejected the action');
    return { kind: 'reverted' };
  }

  // Inside one ledger transaction: the action was applied, and the exchange charged `fee` (its activation fee, perps
  // USD) for it: booked as the action's fee, or the solver's balance would read as having lost it. Returns whether
  // this settled the payout now.
  #settlePaid(t: TransactionRow, fee: bigint): boolean {
    const { ledger, hooks } = this.#o;
    this.#expectedFee.delete(t.hash);
    return ledger.tx(() => {
      ledger.payouts.setTxState(t.hash, 'included', { gasUsed: 0n, fee, broadcastAt: Date.now() });
      const cur = ledger.payouts.get(t.payout_id);
      if (!cur || cur.state === 'success') return false;
      if (cur.state === 'failed') {
        this.#log.error({ payout: cur.id, requestId: cur.request_id ?? undefined, txHash: t.hash }, 'payout recorded failed was paid on the exchange');
        return false;
      }
      ledger.payouts.setState(cur.id, 'success', { txHash: t.hash });
      hooks.onPaid(cur, t.hash, fee);
      return true;
    });
  }

  // Inside one ledger transaction: an action the exchange can no longer apply is dropped and its payout failed.
  // A refund (or excess) has nothing to fall back on: failed, its deposit was left to an operator, though the old action
  // can never be applied and a new one pays it once. It is queued again, signed with a fresh nonce, when one is in the
  // exchange's window (`resignable`: the node's clock not days behind the exchange's, where every new action would die
  // too). A fill fails (and its deposit is refunded): signed again, it would wait for funds as long as the solver lacks them.
  #settleDead(t: TransactionRow, why: string, resignable: boolean): 'failed' | 'requeued' | undefined {
    const { ledger, hooks } = this.#o;
    this.#expectedFee.delete(t.hash);
    this.#reposts.delete(t.hash);
    return ledger.tx(() => {
      ledger.payouts.setTxState(t.hash, 'dropped', { error: why });
      const cur = ledger.payouts.get(t.payout_id);
      if (!cur || cur.state !== 'sent' || ledger.payouts.txsOf(cur.id).some((x) => x.state === 'signed' || x.state === 'broadcast')) return undefined;
      if (resignable && (cur.kind === 'refund' || cur.kind === 'excess')) {
        ledger.payouts.setState(cur.id, 'queued');
        return 'requeued';
      }
      ledger.payouts.setState(cur.id, 'failed', { txHash: t.hash, failReason: 'TRANSACTION_REVERTED' });
      hooks.onFailed(cur, 'TRANSACTION_REVERTED', t.hash);
      return 'failed';
    });
  }

  // Why a recorded fill must not be posted again now, or undefined. The exchange decides the activation fee when it
  // applies an action, not when it was signed: a fill whose quote charged none, held (for funds, or across a restart)
  // while its recipient emptied its account, would have the solver pay to activate it again, uncovered. prepare()
  // refuses such a fill before signing; a signed one can only wait (it is not dead: an earlier post may still land) until
  // the recipient is known again, or until the exchange can never apply it (whyDead: the fill fails and is refunded).
  async #activatesUncharged(t: TransactionRow): Promise<string | undefined> {
    const p = this.#o.ledger.payouts.get(t.payout_id);
    if (p?.kind !== 'fill' || !quotedNoRent(this.#o.ledger, p)) return undefined;
    let fee: bigint;
    try {
      fee = await this.#o.client.activationFee(getAddress(p.recipient), this.address);
    } catch (e) {
      return `the activation fee could not be read: ${errText(e)}`;
    }
    return fee > 0n ? `the exchange does not know the recipient ${p.recipient} and the quote charged no activation fee` : undefined;
  }

  /**
   * Recorded actions whose outcome is unknown (a crash after recording, a lost answer): paid when the
   * solver's ledger shows their nonce; otherwise the same signed body is posted again.
   */
  async confirm({ stopped }: StepContext): Promise<TxStatus[]> {
    const { ledger, client } = this.#o;
    // Only this key's actions: whether one was applied, or can never be, is read from its signer's ledger and nonce set.
    // Judged by another key's (the solver key rotated across a restart with actions open), an action the old key signed
    // was posted again, applied from the old account, never seen there, and failed as dead once the new key had used 100
    // nonces: the fill refunded though paid. Those are left open, for an operator (as the EVM and SVM senders leave them).
    const all = ledger.payouts.openTxs(this.chainId);
    const open = all.filter((t) => isAddress(t.sender, { strict: false }) && getAddress(t.sender) === this.address);
    if (open.length < all.length && !this.#othersWarned) {
      this.#othersWarned = true;
      this.#log.error(
        { solver: this.address, actions: all.filter((t) => !open.includes(t)).map((t) => ({ txHash: t.hash, sender: t.sender, payout: t.payout_id })) },
        'open exchange actions signed by another solver key are not reconciled by this one; manual action required',
      );
    }
    if (!open.length) return [];
    const since = Math.max(0, Math.min(...open.map((t) => t.created_at)) - RECONCILE_MARGIN_MS);
    // The solver account's sends by nonce (where each went, and the fee the exchange charged for it); the newest update's
    // time (the exchange's clock). A `send` names the account, not its signer: an API wallet (agent) the account approved
    // signs sends of it too (Hyperliquid's agentSendAsset, between the account's own balances), with nonces of its own.
    const sent = new Map<number, { destination: Address; fee: bigint }[]>();
    let newest = 0;
    const read = async (from: number) => {
      const truncated: number[] = [];
      for (const u of await client.ledgerUpdates(this.address, from, undefined, truncated)) {
        if (typeof u?.time === 'number' && u.time > newest) newest = u.time;
        const d = u.delta as SendLedgerDelta;
        const bySolver = d?.type === 'send' && isAddress(d.user ?? '', { strict: false }) && getAddress(d.user) === this.address;
        if (!bySolver || typeof d.nonce !== 'number' || !isAddress(d.destination ?? '', { strict: false })) continue;
        const list = sent.get(d.nonce) ?? [];
        if (!list.length) sent.set(d.nonce, list);
        list.push({ destination: getAddress(d.destination), fee: feeOf(d) });
      }
      return truncated;
    };
    await read(since);
    // The next action is signed above every nonce the solver's ledger shows applied (one the operator's own use of the key
    // took too): below the 100 highest, an action queued again would be refused for its nonce, and again.
    for (const n of sent.keys()) if (n > this.#lastNonce) this.#lastNonce = n;
    // Where each open action pays: it was applied only when a send of the solver at its nonce went there (an agent's send
    // may carry the same nonce, a millisecond timestamp too). An action whose body is unreadable is taken as applied by
    // any send at its nonce: never proven dead on a guess (its repost below asks for manual action).
    const destinations = new Map(open.map((t) => [t.hash, destinationOf(() => ledger.payouts.rawOf(t.hash))] as const));
    const appliedFee = (t: TransactionRow): bigint | undefined => {
      const to = destinations.get(t.hash);
      const at = sent.get(t.nonce);
      return to === undefined ? at?.[0]?.fee : at?.find((x) => x.destination === to)?.fee;
    };
    // The nonces of the solver's own key, sorted down: those of its sends to another account. An agent moves value only
    // to the account itself or its sub-accounts (`own`), so a send there may be an agent's, in a nonce set apart from the
    // key's: counted as the key's, 100 of them made an action the exchange still takes look dead (a refund signed again
    // and both paid). Left out, they only make the proof wait (the nonce's age proves it dead within days).
    const own = new Set<Address>([this.address]);
    const keyNonces = () =>
      [...sent.entries()]
        .filter(([, list]) => list.some((x) => !own.has(x.destination)))
        .map(([n]) => n)
        .sort((a, b) => b - a);
    let applied = keyNonces();
    // Why an action not applied can never be: the exchange keeps the signer's NONCE_SET highest nonces and applies no
    // nonce below the smallest of them (NONCE_SET of the solver key's applied nonces above it), and none older than
    // NONCE_MAX_AGE_MS on its clock. Both only tighten: such an action is dead for good.
    const whyDead = (t: TransactionRow): string | undefined => {
      if (appliedFee(t) !== undefined) return undefined;
      if (applied.length >= NONCE_SET && t.nonce < applied[NONCE_SET - 1]!)
        return `nonce ${t.nonce} is below the solver key's ${NONCE_SET} highest applied nonces (from ${applied[NONCE_SET - 1]})`;
      if (newest > t.nonce + NONCE_MAX_AGE_MS) return `nonce ${t.nonce} is older than the exchange takes at its time ${newest}`;
      return undefined;
    };
    // Whether the ledger read proves an action absent: a millisecond with more updates than the exchange answers in one
    // page is read only in part (anyone can fill one with transfers to the solver), and an action applied in it is unseen.
    let proven = true;
    if (open.some((t) => whyDead(t))) {
      // Before any is failed, the solver's ledger is read again from where the exchange could have applied it: it takes
      // no nonce more than a day ahead of its clock, so an action applied at all is listed after its nonce less a day
      // (whatever the node's clock said when it was recorded).
      const truncated = await read(Math.max(0, Math.min(...open.filter((t) => whyDead(t)).map((t) => t.nonce)) - NONCE_AHEAD_MS));
      if (truncated.length) {
        proven = false;
        this.#log.error(
          { truncated },
          'the exchange ledger holds more updates in one millisecond than it answers: an open action may have been applied unseen, none is failed; manual action required',
        );
      }
      // ... and the sends an agent could have made (to the solver's sub-accounts) are told apart from the key's.
      try {
        for (const a of await client.subAccounts(this.address)) own.add(a);
      } catch (e) {
        proven = false;
        this.#log.warn({ err: errText(e) }, "the solver's sub-accounts could not be read: no exchange action is proven dead this pass");
      }
      applied = keyNonces();
    }
    const now = Date.now();
    const out: TxStatus[] = [];
    for (const t of open) {
      if (stopped()) break;
      const log = this.#log.child({ payout: t.payout_id, requestId: ledger.payouts.get(t.payout_id)?.request_id ?? undefined, txHash: t.hash });
      const status = { payoutId: t.payout_id, txHash: t.hash };
      const fee = appliedFee(t);
      if (fee !== undefined) {
        if (this.#settlePaid(t, fee)) log.info({ nonce: t.nonce }, 'exchange payout found in the solver ledger: paid');
        out.push({ kind: 'paid', ...status });
        continue;
      }
      const dead = proven ? whyDead(t) : undefined;
      if (dead) {
        // Never applied (its nonce is not in the ledger read above) and never applicable: the payout fails, and what it
        // was for (a fill's deposit) is refunded. Left open, it was posted and refused for good on every pass.
        const settled = this.#settleDead(t, dead, now > newest - NONCE_MAX_AGE_MS);
        if (settled)
          log.warn({ nonce: t.nonce, why: dead }, `exchange action can never be applied: payout ${settled === 'failed' ? 'failed' : 'queued to sign again'}`);
        out.push({ kind: settled === 'requeued' ? 'requeued' : 'reverted', ...status });
        continue;
      }
      const repost = this.#reposts.get(t.hash);
      if (repost && repost.at > now) {
        out.push({ kind: 'pending', ...status });
        continue;
      }
      const attempts = (repost?.attempts ?? 0) + 1;
      // No jitter: one action's reposts, spaced by the ceiling of the payout backoff.
      this.#reposts.set(t.hash, { attempts, at: now + backoffMs(attempts, PAYOUT_BACKOFF, () => 1) });
      const unknown = await this.#activatesUncharged(t);
      if (unknown) {
        log.warn({ nonce: t.nonce, why: unknown }, "recorded exchange fill not posted again: it would activate its recipient at the solver's expense");
        out.push({ kind: 'pending', ...status });
        continue;
      }
      let body: SignedSendAsset;
      try {
        body = JSON.parse(hexToString(ledger.payouts.rawOf(t.hash))) as SignedSendAsset;
      } catch {
        log.error('recorded exchange action is unreadable; manual action required');
        continue;
      }
      log.info({ nonce: t.nonce }, 'recorded exchange action not in the solver ledger; posting the same signed action again');
      const outcome = await this.#send(t, body, log);
      out.push({ kind: outcome.kind, ...status });
    }
    return out;
  }
}

// Where a recorded sendAsset pays (its signed body's destination), or undefined when the body is unreadable.
function destinationOf(raw: () => Hex): Address | undefined {
  try {
    const to = (JSON.parse(hexToString(raw())) as SignedSendAsset).action?.destination;
    return typeof to === 'string' && isAddress(to, { strict: false }) ? getAddress(to) : undefined;
  } catch {
    return undefined;
  }
}

// The fee a send's ledger update reports (perps USD units, rounded up); an unreadable one counts as none.
function feeOf(d: SendLedgerDelta): bigint {
  try {
    return d.fee ? parseDecimalCeil(d.fee, 6) : 0n;
  } catch {
    return 0n;
  }
}
