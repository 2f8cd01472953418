import { spendable } from '../spendable.ts';
// The perpetuals exchange (chain id 1337) behind the ChainAdapter interface.
//
//   payouts   a fill to the exchange (or a refund on it) is the solver's signed sendAsset to the
//             recipient, paid through the payout pipeline: see payoutSender.ts.
//   deposits  a withdrawal is the user's sendAsset to the solver. The indexer reads the solver's
//             non-funding ledger updates from a cursor kept in the ledger and associates a
//             transfer to a request only through the nonce the user authorized (exchange_nonces);
//             any other transfer is booked as an orphan deposit, which the solver refunds.
//   quotes    the exchange charges no gas: fill, refund and deposit costs are zero.

import { getAddress, isAddress, zeroAddress, type Address, type Hex } from 'viem';
import type { Config } from '../../config/load.ts';
import type { ExchangeChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { QuoteError } from '../../quote/errors.ts';
import type { ChainAdapter, ChainEvents, DepositRequest, DepositStep, FillCost, FillCostRequest, PayoutHooks } from '../adapter.ts';
import { ExchangeAssets, UnknownAssetError } from './assets.ts';
import { ExchangeClient, parseDecimalFloor, type SendLedgerDelta } from './client.ts';
import { exchangePayoutPipeline } from './payoutSender.ts';
import type { Payouts } from '../../submitter/pipeline.ts';
import { ExchangeNonces } from './nonces.ts';
import {
  formatUnitsDecimal,
  NONCE_MAPPING_TYPES,
  SEND_ASSET_PRIMARY_TYPE,
  SEND_ASSET_TYPES,
  type SendAssetParameters,
} from './typedData.ts';

const SOURCE = 'exchange-ledger';
// The order_ref of a transfer no authorization ties to a request: it matches no request.
const NO_REQUEST = `0x${'0'.repeat(64)}` as Hex;

export class ExchangeAdapter implements ChainAdapter {
  readonly chainId: number;
  readonly kind = 'exchange' as const;
  readonly solver: Address;
  readonly depositAddress: string;
  readonly confirmSeconds = 1;
  readonly client: ExchangeClient;
  readonly nonces: ExchangeNonces;
  readonly assets: ExchangeAssets;

  readonly #payouts: Payouts;
  readonly #log: Logger;
  #stopped = true;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #cycleWaiters: (() => void)[] = [];
  #lastDepositNonce = 0;
  #ready = false;
  #lastPoll = 0;

  constructor(
    private chain: ExchangeChainConfig,
    config: Config,
    private ledger: Ledger,
    private hooks: PayoutHooks & ChainEvents,
    private metrics: Metrics,
    log: Logger,
  ) {
    this.chainId = chain.id;
    this.solver = config.solverSigner.address;
    this.depositAddress = this.solver.toLowerCase();
    this.client = new ExchangeClient({ url: chain.exchangeUrl });
    this.nonces = new ExchangeNonces(ledger.db);
    this.assets = new ExchangeAssets(chain, this.client);
    this.#log = log.child({ chain: chain.id, component: 'exchange' });
    this.#payouts = exchangePayoutPipeline({
      chain,
      ledger,
      client: this.client,
      assets: this.assets,
      signer: config.solverSigner,
      hooks,
      metrics,
      log: this.#log,
      faults: config.faults,
    });
  }

  // ------------------------------------------------------------------------------------ lifecycle

  async start(): Promise<void> {
    await this.assets.check();
    this.#stopped = false;
    this.#ready = true;
    await this.#payouts.start();
    this.poke();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
    for (const w of this.#cycleWaiters) w();
    this.#cycleWaiters = [];
    await this.#payouts.stop();
  }

  wake(): void {
    this.poke();
    this.#payouts.wake();
  }

  // Runs an index cycle now, or one more after the running one.
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
    for (const w of waiters) w();
  }

  progress() {
    const indexed = this.ledger.indexer.cursor(this.chainId, SOURCE) ?? 0;
    const head = this.#lastPoll || indexed;
    return { head, indexed, ready: this.#ready && Date.now() - this.#lastPoll < Math.max(10_000, this.chain.pollIntervalMs * 10) };
  }

  // ------------------------------------------------------------------------------------ quotes

  parseTxId(s: string): string | undefined {
    return /^0x[0-9a-fA-F]{64}$/.test(s) ? s.toLowerCase() : undefined;
  }

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

}

export function depositId(chainId: number, hash: Hex | string): string {
  return `${chainId}:${hash.toLowerCase()}:0`;
}
