import { type BroadcastGate, OPEN_GATE } from '../../submitter/gate.ts';
import { spendable } from '../spendable.ts';
// The perpetuals exchange (chain id 1337) behind the ChainAdapter interface.
//
//   payouts   a fill to the exchange (or a refund on it) is the solver's signed sendAsset to the
//             recipient, paid through the payout pipeline: see payoutSender.ts.
//   deposits  a withdrawal is the user's sendAsset to the solver, read by the indexer driver
//             (src/indexer) from the solver's ledger updates (depositSource.ts).
//   quotes    the exchange charges no gas: a deposit costs nothing; a fill, a refund or a claim costs the chain's
//             actionCost, its share of the solver's action budget, plus the activation fee of a recipient the
//             exchange does not know (a refund's always: see refundCost).

import { getAddress, zeroAddress, type Address, type Hex } from 'viem';
import type { Config } from '../../config/load.ts';
import type { ExchangeChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import { QuoteError } from '../../lib/quoteError.ts';
import type { ChainAdapter, ChainEvents, DepositRequest, DepositStep, FillCost, FillCostRequest, PayoutHooks } from '../adapter.ts';
import { ExchangeAssets, UnknownAssetError } from './assets.ts';
import { ExchangeClient, parseDecimalFloor } from './client.ts';
import { exchangePayoutPipeline } from './payoutSender.ts';
import type { Payouts } from '../../submitter/pipeline.ts';
import { depositId, ExchangeDepositSource } from './depositSource.ts';
import { IndexerDriver } from '../../indexer/driver.ts';
import { formatUnitsDecimal, NONCE_MAPPING_TYPES, SEND_ASSET_PRIMARY_TYPE, SEND_ASSET_TYPES, type SendAssetParameters } from './typedData.ts';
import type { DepositRow } from '../../ledger/types.ts';

export class ExchangeAdapter implements ChainAdapter {
  readonly chainId: number;
  readonly kind = 'exchange' as const;
  readonly solver: Address;
  readonly depositAddress: string;
  readonly confirmSeconds = 1;
  readonly client: ExchangeClient;
  readonly nonces: Ledger['exchangeNonces'];
  readonly assets: ExchangeAssets;

  readonly #payouts: Payouts;
  readonly #indexer: IndexerDriver;
  // When the last reported transaction's turn started, and the next turn while reports wait for it (#reportTurn).
  #lastReport: { at: number; next?: Promise<void> } | undefined;
  readonly #log: Logger;
  #lastDepositNonce = 0;
  #ready = false;

  constructor(
    private chain: ExchangeChainConfig,
    config: Config,
    private ledger: Ledger,
    hooks: PayoutHooks & ChainEvents,
    metrics: Metrics,
    log: Logger,
    gate: BroadcastGate = OPEN_GATE,
  ) {
    this.chainId = chain.id;
    this.solver = config.solverSigner.address;
    this.depositAddress = this.solver.toLowerCase();
    this.client = new ExchangeClient({ url: chain.exchangeUrl, weightPerMinute: chain.weightPerMinute });
    this.nonces = ledger.exchangeNonces;
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
      gate,
    });
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
      events: { onConfirmed: () => hooks.depositsConfirmed(), onHead: () => {}, onChecked: () => hooks.depositsChecked?.() },
      reorgs: hooks.reorgs,
      metrics,
      log: this.#log,
    });
  }

  // ------------------------------------------------------------------------------------ lifecycle

  async start(): Promise<void> {
    await this.assets.check();
    this.#ready = true;
    await this.#payouts.start();
    this.#indexer.start();
  }

  async stop(): Promise<void> {
    await this.#indexer.stop();
    await this.#payouts.stop();
  }

  get depositsChecked(): boolean {
    return this.#indexer.checked;
  }

  mayPayOutOf(deposit: DepositRow): boolean {
    return this.#indexer.mayPayOutOf(deposit);
  }

  payoutsQueued(): void {
    this.#payouts.wake();
  }

  progress() {
    const indexed = this.#indexer.indexed();
    const lastRead = this.#indexer.lastReadAt;
    const head = lastRead || indexed;
    return { head, indexed, ready: this.#ready && Date.now() - lastRead < Math.max(10_000, this.chain.pollIntervalMs * 10) };
  }

  // ------------------------------------------------------------------------------------ quotes

  indexNow(): void {
    this.#indexer.wake();
  }

  /**
   * A reported transaction reads nothing of its own here: it has the indexer make a whole pass over the solver's ledger,
   * whatever the id names. A pass is a read on the exchange's per-address budget (a ledger read weighs 20 of the 1,200 a
   * minute Hyperliquid allows) that the node's fills, refunds and balance reads share, and each report was one more: a
   * client reporting made-up hashes had the node read the ledger back to back. So reports take turns, one per poll
   * interval across every caller (#reportTurn): at most two passes a turn (a wake during a pass asks for one more).
   */
  async indexTransaction(txId: string): Promise<number> {
    await this.#reportTurn();
    await this.#indexer.nextPass();
    return this.ledger.deposits.get(depositId(this.chainId, txId as Hex)) ? 1 : 0;
  }

  // Resolves at once when no report's turn started within the poll interval, else at the next turn, which every report
  // waiting meanwhile shares.
  #reportTurn(): Promise<void> {
    const now = Date.now();
    const last = this.#lastReport;
    if (last?.next) return last.next;
    if (!last || now - last.at >= this.chain.pollIntervalMs) {
      this.#lastReport = { at: now };
      return Promise.resolve();
    }
    const at = last.at + this.chain.pollIntervalMs;
    last.next = new Promise<void>((resolve) => setTimeout(resolve, at - now)).then(() => {
      this.#lastReport = { at };
    });
    return last.next;
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

  /**
   * No gas: the fill's sendAsset spends an action of the solver's budget (chain config actionCost), plus, as account
   * rent, the activation fee the exchange charges the solver when it does not know the recipient.
   */
  async fillCost(req: FillCostRequest): Promise<FillCost> {
    const rent = await this.client.activationFee(getAddress(req.recipient), this.solver);
    return { native: BigInt(this.chain.actionCost) + rent, rent, minimumAmount: 0n };
  }

  /**
   * The action's share of the solver's action budget, plus the activation fee: a refund's recipient may have emptied
   * its account (its own transfer to the solver may have), and the exchange then charges the solver for it.
   */
  async refundCost(_currency: string): Promise<bigint> {
    return BigInt(this.chain.actionCost) + BigInt(this.chain.activationFee);
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
    if (req.depositAddressFor !== undefined)
      throw new QuoteError(`useDepositAddress: chain ${this.chainId} offers no deposit addresses`, 'INVALID_INPUT_PARAMETERS');
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
}

export { depositId };
