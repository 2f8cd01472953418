import { type BroadcastGate, OPEN_GATE } from '../../submitter/gate.ts';
import { spendable } from '../spendable.ts';
import {
  BaseError,
  ContractFunctionZeroDataError,
  encodeFunctionData,
  erc20Abi,
  getAddress,
  isAddress,
  isAddressEqual,
  keccak256,
  parseAbi,
  size,
  toHex,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  verifyTypedData,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
} from 'viem';
import { DepositAddressFactoryAbi, OrderFillerAbi, RelayDepositoryAbi } from '../../../contracts-abi/index.ts';
import { randomBytes } from 'node:crypto';
import type { Config } from '../../config/load.ts';
import type { EvmChainConfig } from '../../config/schema.ts';
import type { Ledger, PayoutRow, RequestRow } from '../../ledger/index.ts';
import type { Logger } from '../../log.ts';
import type { Metrics } from '../../metrics.ts';
import {
  RelayRefusedError,
  SignedDepositError,
  type ChainAdapter,
  type RelaySimulation,
  type ChainEvents,
  type DepositRequest,
  type DepositStep,
  type DestinationCall,
  type FillCost,
  type FillCostRequest,
  type PayoutHooks,
  type ReindexResult,
} from '../adapter.ts';
import type { RelaySimulator, SignedCallOutcome, VerifiedSignedDeposit } from '../ports.ts';
import { QuoteError } from '../../lib/quoteError.ts';
import { ChainConfigMismatch } from '../configMismatch.ts';
import { decodeRevert, errText, exceededAllowance, isRevert } from './rpcErrors.ts';
import { FundingWatcher } from './fundingWatcher.ts';
import { AUDIT_OPENING } from './auditOpening.ts';
import { EvmPayouts } from './payoutSender.ts';
import { IndexerDriver } from '../../indexer/driver.ts';
import { EvmDepositSource, type EvmHead } from './depositSource.ts';
import { viemChain } from './viemChain.ts';
import type { RelayTerms } from './relayTerms.ts';
import { recoverAuthorizationAddress } from 'viem/utils';
import { depositAddressOf } from './depositAddress.ts';
import { DepositAddressWatcher } from './depositAddressWatcher.ts';
import { fillGas, GAS, plainFillBound, refundGas } from './gas.ts';
import { confirmationsFor, confirmationsForWorth, depositWorth, mostConfirmations, type SeenPrice } from './confirmations.ts';
import type { SeenPrices } from '../seenPrices.ts';
import { CALLDATA_BYTES, L1DataFee, receiptFee } from './l1DataFee.ts';
import { evmClients, type ProviderPool } from '../providers/index.ts';
import type { DepositRow } from '../../ledger/types.ts';

const isNative = (currency: string) => getAddress(currency) === zeroAddress;

export const PERMIT_TYPES = [
  { name: 'owner', type: 'address' },
  { name: 'spender', type: 'address' },
  { name: 'value', type: 'uint256' },
  { name: 'nonce', type: 'uint256' },
  { name: 'deadline', type: 'uint256' },
] as const;
const permitAbi = parseAbi([
  'function name() view returns (string)',
  'function version() view returns (string)',
  'function nonces(address) view returns (uint256)',
]);

export class EvmAdapter implements ChainAdapter, RelaySimulator {
  readonly chainId: number;
  readonly kind = 'evm' as const;
  readonly depositAddress: string;
  readonly confirmSeconds: number;
  /** Reads routed to the best provider (pinned to the newest block seen). */
  readonly client: PublicClient;
  /** The same, with the reads that decide money answered by a quorum of providers. */
  readonly decisionClient: PublicClient;
  readonly providers: ProviderPool;
  readonly solver: Address;
  // Why deposit addresses are not quoted on this chain though a factory is configured (#verifyDepositAddressFactory).
  #noDepositAddresses: string | undefined;
  readonly #log: Logger;
  #indexer: IndexerDriver<EvmHead>;
  #submitter: EvmPayouts;
  #funding: FundingWatcher | undefined;
  #depositAddresses: DepositAddressWatcher | undefined;
  #baseFee: bigint | undefined;
  #l1: L1DataFee;
  #seenPrice: SeenPrice | undefined;
  #priority: { block: bigint; fee: bigint } | undefined;
  // The last head the indexer reported that was passed on.
  #lastHead: { number: number; hash: string } | undefined;

  constructor(
    private chain: EvmChainConfig,
    config: Config,
    private ledger: Ledger,
    hooks: PayoutHooks & ChainEvents,
    metrics: Metrics,
    log: Logger,
    gate: BroadcastGate = OPEN_GATE,
    seenPrices?: SeenPrices,
  ) {
    this.chainId = chain.id;
    this.#seenPrice = seenPrices && ((address) => seenPrices.get(chain.id, address));
    this.depositAddress = chain.depository;
    this.confirmSeconds = chain.confirmations;
    const clog = log.child({ chain: chain.id });
    this.#log = clog;
    // A head a websocket provider pushes wakes the indexer at once (its poll is then only a backstop).
    const { pool, client, decisionClient } = evmClients(chain, viemChain(chain), metrics, clog, () => this.#indexer?.wake());
    this.providers = pool;
    this.client = client;
    // The L1 data fee every quote charges is a decision read: one provider's word alone (a fee of 0, no oracle) had the
    // solver pay the L1 fee of every fill it never charged.
    this.#l1 = new L1DataFee(decisionClient, chain.l1DataFee, chain.l1DataFeeMarginBps, () => BigInt(this.#indexer.head));
    this.decisionClient = decisionClient;
    const account = config.solverSigner;
    this.solver = account.address;
    this.#submitter = new EvmPayouts({
      chain,
      ledger,
      publicClient: this.decisionClient,
      account,
      allocator: config.allocatorSigner,
      hooks,
      metrics,
      log: clog,
      faults: config.faults,
      gate,
    });
    if (chain.appBalanceDeposits) {
      this.#funding = new FundingWatcher(chain, this.decisionClient, ledger, account.address, (t) => hooks.onFunding(t), clog, this.#seenPrice);
    }
    if (chain.depositAddressFactory) {
      this.#depositAddresses = new DepositAddressWatcher(
        chain,
        this.decisionClient,
        ledger,
        hooks,
        () => this.#submitter.wake(),
        clog,
        () => this.sweepCost(),
        config.depositAddresses.watchHours * 3_600_000,
      );
    }
    this.#indexer = new IndexerDriver<EvmHead>({
      config: {
        chainId: chain.id,
        cursor: 'depository',
        startBlock: chain.startBlock,
        confirmations: chain.confirmations,
        finalityDepth: chain.finalityDepth,
        maxRange: chain.maxLogRange,
        pollIntervalMs: chain.pollIntervalMs,
        followsHeads: () => pool.followsHeads(),
        // Each deposit waits as many blocks as its value asks, with what a reorg would take back beside it.
        byValue: chain.confirmationsByValue?.length
          ? {
              worth: (d) => depositWorth(chain, d.currency, BigInt(d.amount), this.#seenPrice) ?? 0n,
              confirmations: (worth) => confirmationsForWorth(chain, worth),
              most: mostConfirmations(chain),
            }
          : undefined,
      },
      source: new EvmDepositSource(chain, this.decisionClient),
      ledger,
      events: {
        onConfirmed: () => hooks.depositsConfirmed(),
        onChecked: () => hooks.depositsChecked?.(),
        onHead: (head) => {
          this.#baseFee = head.baseFeePerGas;
          // The indexer reports its head on every poll: only a new block (or another block at the
          // same height) gives the confirm pass, the funding scan and the deposit address watcher
          // anything new to read.
          // The fee oracle still hears every poll: a head read just now is a fresh head to price at.
          const fresh = head.number !== this.#lastHead?.number || head.hash !== this.#lastHead.hash;
          this.#submitter.onHead({ number: BigInt(head.number), baseFeePerGas: head.baseFeePerGas, gasLimit: head.gasLimit }, fresh);
          if (!fresh) return;
          this.#lastHead = { number: head.number, hash: head.hash };
          this.#funding?.onHead(BigInt(head.number));
          this.#depositAddresses?.poke();
        },
      },
      reorgs: hooks.reorgs,
      metrics,
      log: clog,
    });
  }

  async start(): Promise<void> {
    await this.providers.verifyChainId();
    // Every provider's head first: the check's reads are then pinned to the chain's head, so a provider still syncing (or a
    // few blocks behind a freshly deployed token) is not taken for the chain and does not make a good token look absent.
    await this.providers.probeHeads();
    await this.#verifyDecimals();
    await this.#verifyDepositAddressFactory();
    this.providers.start();
    // The audit's opening balances are read at the head of the node's first start on this chain
    // (src/audit): from there on, everything that moves the solver's money is in the books.
    if (!this.ledger.funding.scanMark(this.chainId, AUDIT_OPENING)) {
      const head = await this.client.getBlock({ blockTag: 'latest' });
      this.ledger.tx(() => this.ledger.funding.setScanMark(this.chainId, AUDIT_OPENING, Number(head.number), head.hash!));
    }
    await this.#submitter.start();
    this.#funding?.start();
    this.#depositAddresses?.start();
    this.#indexer.start();
  }

  // The node quotes deposit addresses by computing them (depositAddressOf), and only the factory's sweeper can sweep them
  // into its depository: a factory that is not one, or one made for another depository, has every address quoted on it
  // paid and never swept (nor refunded). The node does not start.
  async #verifyDepositAddressFactory(): Promise<void> {
    const factory = this.chain.depositAddressFactory;
    if (!factory) return;
    const probe = { depositor: this.solver, id: keccak256(toHex('relay-node factory check')) };
    let facts: [Address, Address, Address];
    try {
      const read = (functionName: 'depository' | 'sweeper') => this.client.readContract({ address: factory, abi: DepositAddressFactoryAbi, functionName });
      facts = await Promise.all([
        read('depository'),
        read('sweeper'),
        this.client.readContract({ address: factory, abi: DepositAddressFactoryAbi, functionName: 'addressOf', args: [probe.depositor, probe.id] }),
      ]);
    } catch (e) {
      if (!isRevert(e) && !(e instanceof BaseError && e.walk((x) => x instanceof ContractFunctionZeroDataError))) throw e;
      throw new ChainConfigMismatch(
        `chain ${this.chainId}: depositAddressFactory ${factory} answers no depository(), sweeper() or addressOf(): is it a deposit address factory on this chain?`,
      );
    }
    const [depository, sweeper, at] = facts;
    const wrong: string[] = [];
    if (!isAddressEqual(depository, this.chain.depository)) wrong.push(`sweeps into ${depository}, not the configured depository ${this.chain.depository}`);
    if (!isAddressEqual(at, depositAddressOf(factory, probe.depositor, probe.id))) wrong.push('makes addresses other than the ones the node quotes');
    if (wrong.length) throw new ChainConfigMismatch(`chain ${this.chainId}: depositAddressFactory ${factory} ${wrong.join('; ')}`);
    // Another sweeper is a rotated solver key (a factory's sweeper is fixed at its deployment): the node starts, and
    // quotes no new address on the factory (what reached the old ones is the old key's to sweep).
    if (!isAddressEqual(sweeper, this.solver)) {
      this.#noDepositAddresses = `chain ${this.chainId}'s deposit address factory is swept by ${sweeper}, not this node's solver ${this.solver}`;
      this.#log.error({ factory, sweeper, solver: this.solver }, 'deposit address factory swept by another key: no deposit addresses quoted on this chain');
    }
  }

  // A configured token whose decimals are not the token's own prices every amount of it off by a power of ten (an
  // 18-decimal token configured with 6 had each of its units worth 10^12 times too much): the node does not start.
  async #verifyDecimals(): Promise<void> {
    const tokens = this.chain.currencies.filter((c) => !isNative(c.address));
    const wrong: string[] = [];
    await Promise.all(
      tokens.map(async (c) => {
        let decimals: number;
        try {
          decimals = await this.client.readContract({ address: c.address, abi: erc20Abi, functionName: 'decimals' });
        } catch (e) {
          // An address with no code answers no data; a contract without decimals() reverts.
          if (!isRevert(e) && !(e instanceof BaseError && e.walk((x) => x instanceof ContractFunctionZeroDataError))) throw e;
          wrong.push(`${c.symbol} (${c.address}) answers no decimals(): is it a token on this chain?`);
          return;
        }
        if (decimals !== c.decimals) wrong.push(`${c.symbol} (${c.address}) has ${decimals} decimals, configured ${c.decimals}`);
      }),
    );
    if (wrong.length) throw new ChainConfigMismatch(`chain ${this.chainId}: ${wrong.join('; ')}`);
  }

  async stop(): Promise<void> {
    await this.#indexer.stop();
    await this.#funding?.stop();
    await this.#depositAddresses?.stop();
    await this.#submitter.stop();
    await this.providers.stop();
  }

  /** Seconds a deposit of this value waits for its confirmations (one block a second, as confirmSeconds). */
  confirmSecondsFor(currency: string, amount: bigint): number {
    return confirmationsFor(this.chain, currency, amount, this.#seenPrice);
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
    const providers = this.providers.health();
    return {
      head,
      indexed,
      ready: head > 0 && indexed >= head - 1 && !this.#indexer.fatal && providers.ready,
      providers: providers.providers,
      ...(providers.heldBy ? { heldBy: `chain ${this.chainId}: ${providers.heldBy}` } : {}),
    };
  }

  // EIP-2612: the user signs a permit for the depository; the node submits the deposit with it.
  async #permitStep(req: DepositRequest, deadline: number): Promise<DepositStep> {
    const cur = this.chain.currencies.find((c) => getAddress(c.address) === getAddress(req.currency));
    if (!cur?.permit) throw new QuoteError(`usePermit: ${req.currency} on chain ${this.chainId} does not support EIP-2612 permits`, 'INVALID_INPUT_PARAMETERS');
    const token = getAddress(cur.address);
    const owner = getAddress(req.user);
    const [name, version, nonce] = await Promise.all([
      this.client.readContract({ address: token, abi: permitAbi, functionName: 'name' }),
      this.client.readContract({ address: token, abi: permitAbi, functionName: 'version' }).catch(() => '1'),
      this.client.readContract({ address: token, abi: permitAbi, functionName: 'nonces', args: [owner] }),
    ]);
    const value = { owner, spender: this.chain.depository, value: req.amount.toString(), nonce: nonce.toString(), deadline: String(deadline) };
    return {
      id: 'authorize',
      kind: 'signature',
      action: 'Sign the permit in your wallet',
      description: 'Authorize the deposit; the relayer submits it and pays its gas',
      data: {
        sign: {
          signatureKind: 'eip712',
          domain: { name, version, chainId: this.chainId, verifyingContract: token },
          types: { Permit: PERMIT_TYPES },
          primaryType: 'Permit',
          value,
        },
        post: { endpoint: '/execute/permits', method: 'POST', body: { kind: 'eip2612', requestId: req.orderId, chainId: this.chainId, token, ...value } },
      },
      check: 'status-v3',
    };
  }

  async verifySignedDeposit(r: RequestRow, body: Record<string, unknown>, signature: Hex): Promise<VerifiedSignedDeposit> {
    const bad = (what: string) => new SignedDepositError('INVALID_INPUT_PARAMETERS', `invalid request: ${what}`);
    const str = (k: string) => (typeof body[k] === 'string' || typeof body[k] === 'number' ? String(body[k]) : undefined);
    if (str('kind') !== 'eip2612') throw bad('kind: must be eip2612');
    const [owner, token, spender] = ['owner', 'token', 'spender'].map((k) => {
      const v = str(k);
      if (!v || !isAddress(v, { strict: false })) throw bad(`${k}: must be an address`);
      return getAddress(v);
    }) as [Address, Address, Address];
    // Only a currency configured with a permit takes one: refused here, before any RPC call.
    const cur = this.chain.currencies.find((c) => getAddress(c.address) === getAddress(r.origin_currency));
    if (!cur?.permit)
      throw new SignedDepositError('INVALID_INPUT_PARAMETERS', `invalid request: ${r.origin_currency} on chain ${this.chainId} takes no EIP-2612 permit`);
    const [value, nonce, deadline] = ['value', 'nonce', 'deadline'].map((k) => {
      const v = str(k);
      if (!v || !/^[0-9]{1,78}$/.test(v)) throw bad(`${k}: must be an integer`);
      return BigInt(v);
    }) as [bigint, bigint, bigint];
    // The permit must be exactly the one the quote asked for.
    if (owner !== r.user || token !== getAddress(r.origin_currency) || spender !== this.chain.depository || value !== BigInt(r.amount_in)) {
      throw bad('the permit is not the one this request asked for (owner, token, spender and value must match the quote)');
    }
    if (deadline <= BigInt(Math.floor(Date.now() / 1000))) throw new SignedDepositError('SIGNATURE_EXPIRED', 'the permit has expired');
    let name: string, version: string, current: bigint, held: bigint;
    try {
      [name, version, current, held] = await Promise.all([
        this.client.readContract({ address: token, abi: permitAbi, functionName: 'name' }),
        this.client.readContract({ address: token, abi: permitAbi, functionName: 'version' }).catch(() => '1'),
        this.client.readContract({ address: token, abi: permitAbi, functionName: 'nonces', args: [owner] }),
        this.client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [owner] }),
      ]);
    } catch (e) {
      // A token that does not answer the permit reads takes no permit: the caller's problem. The
      // RPC failing is not, and its error (which may name the provider URL) is never echoed.
      if (isRevert(e))
        throw new SignedDepositError(
          'INVALID_INPUT_PARAMETERS',
          `invalid request: token ${token} on chain ${this.chainId} does not implement EIP-2612 permits`,
        );
      throw new SignedDepositError('RPC_UNAVAILABLE', `chain ${this.chainId} cannot be read now to check the permit; try again`);
    }
    if (nonce !== current) throw new SignedDepositError('INVALID_NONCE', `the permit's nonce is ${nonce}; the token expects ${current}`);
    const valid = await verifyTypedData({
      address: owner,
      domain: { name, version, chainId: this.chainId, verifyingContract: token },
      types: { Permit: PERMIT_TYPES },
      primaryType: 'Permit',
      message: { owner, spender, value, nonce, deadline },
      signature,
    }).catch(() => false);
    if (!valid) throw new SignedDepositError('INVALID_SIGNATURE', `the signature is not ${owner}'s over this permit`);
    // The node pays the deposit's gas: a permit over tokens the owner does not hold is refused
    // here, not discovered by a transaction the node sends.
    if (held < value) throw new SignedDepositError('GASLESS_PERMIT_BALANCE_TOO_LOW', `${owner} holds ${held} of ${token}, less than the permit's ${value}`);
    return {
      authorization: JSON.stringify({ kind: 'eip2612', deadline: deadline.toString(), signature }),
      permit: { chainId: this.chainId, token, owner, nonce, deadline },
    };
  }

  async checkDepositAddress(requestId: string): Promise<number> {
    return (await this.#depositAddresses?.check(requestId)) ?? 0;
  }

  reindex(fromBlock: number, toBlock: number, record: (r: ReindexResult) => void): Promise<ReindexResult> {
    return this.#indexer.reindex(fromBlock, toBlock, record);
  }

  indexNow(): void {
    this.#indexer.wake();
  }

  // Only the depository's logs of the transaction's block are read, never its receipt: a transaction can carry tens
  // of thousands of logs (paid once), and every call naming it had the node parse and check them all again.
  async indexTransaction(txId: string): Promise<number> {
    const hash = txId as Hex;
    const tx = await this.client.getTransaction({ hash }).catch((e: unknown) => {
      throw e instanceof TransactionNotFoundError ? new TransactionReceiptNotFoundError({ hash }) : e;
    });
    if (tx.blockHash === null || tx.blockNumber === null) throw new TransactionReceiptNotFoundError({ hash });
    const logs = await this.client.getLogs({ address: this.chain.depository, blockHash: tx.blockHash });
    const deposits = logs.filter((l) => l.transactionHash?.toLowerCase() === hash.toLowerCase()).length;
    if (deposits) await this.#indexer.waitFor(tx.blockNumber);
    return deposits;
  }

  async txFee(txId: string): Promise<bigint> {
    const r = await this.client.getTransactionReceipt({ hash: txId as Hex });
    return receiptFee(r);
  }

  async balanceOf(owner: string, currency: string): Promise<bigint> {
    if (getAddress(currency) === zeroAddress) return this.client.getBalance({ address: owner as Address });
    return this.client.readContract({ address: currency as Address, abi: erc20Abi, functionName: 'balanceOf', args: [owner as Address] });
  }

  async balance(currency: string): Promise<bigint> {
    return spendable(this.ledger, this.chainId, getAddress(currency), () => this.balanceOf(this.solver, currency));
  }

  // What a transaction sent now would pay per gas at most: twice the base fee plus the tip.
  async #maxFeePerGas(): Promise<bigint> {
    const block = BigInt(this.#indexer.head);
    // Head 0: no head read yet, or never (a standby serving quotes does not index), so none keeps these current: read now.
    if (this.#baseFee === undefined || block === 0n) {
      this.#baseFee = (await this.client.getBlock({ blockTag: 'latest' })).baseFeePerGas ?? 0n;
    }
    if (!this.#priority || this.#priority.block !== block || block === 0n) {
      this.#priority = { block, fee: await this.client.estimateMaxPriorityFeePerGas() };
    }
    return this.#baseFee * 2n + this.#priority.fee;
  }

  async fillCost(req: FillCostRequest): Promise<FillCost> {
    const maxFee = await this.#maxFeePerGas();
    if (req.calls?.length) {
      const { gas: gasLimit, data } = await this.#simulateCalls(req.recipient, req.amount, req.calls);
      const [l1Native, l1Reference] = await Promise.all([this.#l1.of(size(data)), this.#l1.reference()]);
      return { native: gasLimit * maxFee + l1Native, rent: 0n, minimumAmount: 0n, gasLimit, feePerGas: maxFee, l1Native, l1Reference };
    }
    const native = isNative(req.currency);
    // A native fill or a gas top-up sends native currency to the recipient: that runs its code.
    const sendsNative = native || req.topUp === true;
    const [l1Native, l1Reference, runsCode] = await Promise.all([
      this.#l1.of(native ? CALLDATA_BYTES.fill.native : CALLDATA_BYTES.fill.erc20),
      this.#l1.reference(),
      sendsNative && this.#runsCode(req.recipient),
    ]);
    // A recipient with code may take GAS.recipient beyond the price (a smart wallet's receive): charged here, or every
    // fill to one cost the solver that gas. One without code at its quote may be given code before its fill (deployed,
    // an EIP-7702 delegation): a fill sending it native currency is bounded at its price plus a small allowance (maxGas),
    // or it took GAS.recipient uncharged. A plain ERC-20 fill runs none of its recipient's code: it keeps the allowance
    // (pricedGas, at the submitter), so a token costlier than the devnet's (a proxy, a blocklist) is still paid.
    const priced = fillGas(native, req.topUp === true);
    const gas = priced + (runsCode ? GAS.recipient : 0n);
    const gasLimit = sendsNative && !runsCode ? plainFillBound(priced) : native ? gas : undefined;
    return { native: gas * maxFee + l1Native, rent: 0n, minimumAmount: 0n, gasLimit, feePerGas: maxFee, l1Native, l1Reference };
  }

  l1Reference(): Promise<bigint> {
    return this.#l1.reference();
  }

  // Whether native currency sent to `address` runs code there (a contract, or an account delegated under EIP-7702).
  async #runsCode(address: string): Promise<boolean> {
    if (!isAddress(address, { strict: false })) return false;
    const code = await this.client.getCode({ address: getAddress(address) });
    return code !== undefined && code !== '0x';
  }

  feePerGas(): Promise<bigint> {
    return this.#maxFeePerGas();
  }

  // Runs the fill of a call order as the solver would send it (for a fresh order id) and returns
  // the gas it needs with the margin, and the fill's calldata: a reverting call or one too costly is refused at quote time.
  async #simulateCalls(recipient: string, value: bigint, calls: DestinationCall[]): Promise<{ gas: bigint; data: Hex }> {
    const data = encodeFunctionData({
      abi: OrderFillerAbi,
      functionName: 'fillCalls',
      args: [keccak256(toHex(randomBytes(32))), recipient as Address, calls.map((c) => ({ to: c.to as Address, value: c.value, data: c.data }))],
    });
    let estimate: bigint;
    try {
      estimate = await this.client.estimateGas({ account: this.solver, to: this.chain.filler, value, data });
    } catch (e) {
      if (isRevert(e)) throw new QuoteError(`txs: the destination calls revert in simulation: ${decodeRevert(e) ?? errText(e)}`, 'EXECUTION_REVERTED');
      // Estimated without a fee, the allowance is the chain's own limit: out of gas there, no gas makes the calls run.
      const allowance = exceededAllowance(e);
      if (allowance !== undefined)
        throw new QuoteError(`txs: the destination calls run out of gas at the chain's limit (${allowance})`, 'QUOTED_GAS_LIMIT_EXCEEDED');
      throw e;
    }
    const gas = (estimate * BigInt(10_000 + this.chain.gasMarginBps)) / 10_000n;
    if (gas > BigInt(this.chain.maxCallGas)) {
      throw new QuoteError(`txs: the destination calls need ${gas} gas, more than the ${this.chain.maxCallGas} this node fills`, 'QUOTED_GAS_LIMIT_EXCEEDED');
    }
    return { gas, data };
  }

  async refundCost(currency: string): Promise<bigint> {
    const native = isNative(currency);
    const [fee, l1] = await Promise.all([this.#maxFeePerGas(), this.#l1.of(native ? CALLDATA_BYTES.refund.native : CALLDATA_BYTES.refund.erc20)]);
    return refundGas(native) * fee + l1;
  }

  async depositCost(currency: string): Promise<bigint> {
    return (isNative(currency) ? GAS.deposit.native : GAS.deposit.erc20) * (await this.#maxFeePerGas());
  }

  callOutcome(payout: PayoutRow): Promise<SignedCallOutcome | undefined> {
    return this.#submitter.callOutcome(payout);
  }

  /** The clone's creation and its sweep into the depository, at the fee a payout is sent with now. */
  async sweepCost(): Promise<bigint> {
    const [fee, l1] = await Promise.all([this.#maxFeePerGas(), this.#l1.of(CALLDATA_BYTES.sweep)]);
    return GAS.sweep * fee + l1;
  }

  async relayedDepositCost(currency: string): Promise<bigint> {
    if (isNative(currency)) throw new QuoteError('usePermit: native currency needs no approval; deposit it directly', 'INVALID_INPUT_PARAMETERS');
    const [fee, l1] = await Promise.all([this.#maxFeePerGas(), this.#l1.of(CALLDATA_BYTES.permitDeposit)]);
    return GAS.permitDeposit * fee + l1;
  }

  async simulateRelay(terms: RelayTerms): Promise<RelaySimulation> {
    const authorities: RelaySimulation['authorities'] = [];
    let estimate: bigint;
    try {
      for (const [i, a] of terms.authorizationList.entries()) {
        // An authorization for another chain, or whose nonce is not the signer's next one, is skipped
        // by the chain without a revert: the call would run undelegated. Refused here instead.
        if (a.chainId !== this.chainId && a.chainId !== 0)
          throw new RelayRefusedError('INVALID_AUTHORIZATION', `authorizationList[${i}].chainId: is ${a.chainId}, this chain is ${this.chainId}`);
        let address: Address;
        try {
          address = await recoverAuthorizationAddress({ authorization: a });
        } catch {
          throw new RelayRefusedError('INVALID_AUTHORIZATION', `authorizationList[${i}]: the signature does not recover`);
        }
        const next = await this.client.getTransactionCount({ address, blockTag: 'pending' });
        if (BigInt(next) !== BigInt(a.nonce)) {
          throw new RelayRefusedError(
            'AUTHORIZATION_USED',
            `authorizationList[${i}].nonce: ${address}'s next nonce is ${next}, the authorization is for ${a.nonce} (used or out of order)`,
          );
        }
        authorities.push({ address, nonce: BigInt(a.nonce) });
      }
      await this.#checkRelayTarget(terms.to, authorities);
      estimate = await this.client.estimateGas({
        account: this.solver,
        to: terms.to,
        data: terms.data,
        value: terms.value,
        authorizationList: terms.authorizationList.length ? terms.authorizationList : undefined,
      });
    } catch (e) {
      if (e instanceof RelayRefusedError) throw e;
      if (isRevert(e)) throw new RelayRefusedError('SIMULATION_FAILED', `the call reverts in simulation: ${decodeRevert(e) ?? errText(e)}`);
      // Estimated without a fee, the allowance is the chain's own limit: a call out of gas there never runs, whatever is
      // tried again (taken for the RPC failing, it was a 503 "try again" for good).
      const allowance = exceededAllowance(e);
      if (allowance !== undefined)
        throw new RelayRefusedError('GAS_LIMIT_EXCEEDED', `the call runs out of gas at the chain's limit (${allowance}) in simulation`);
      throw new RelayRefusedError('RPC_UNAVAILABLE', `chain ${this.chainId} cannot be read now to simulate the call; try again`);
    }
    const gas = (estimate * BigInt(10_000 + this.chain.gasMarginBps) + 9_999n) / 10_000n;
    // Bounded as destination calls are: a call needing more than a block holds would be signed, refused
    // by every node, and hold the solver's nonce (and every payout after it) for ever.
    if (gas > BigInt(this.chain.maxCallGas)) {
      throw new RelayRefusedError(
        'GAS_LIMIT_EXCEEDED',
        `the call needs ${gas} gas, more than the chain's maxCallGas ${this.chain.maxCallGas} this node relays`,
      );
    }
    // Its L1 data fee: the call's data and each authorization (chain id, address, nonce, y parity, r, s: 100 bytes RLP-encoded at most).
    const [maxFeePerGas, l1Native] = await Promise.all([this.#maxFeePerGas(), this.#l1.of(size(terms.data) + 100 * terms.authorizationList.length)]);
    return { gas, maxFeePerGas, l1Native, authorities };
  }

  // The relayed call is made with the solver's key as msg.sender: a contract that grants the solver
  // anything (a token it holds or approved, the filler, the depository, the deposit address factory,
  // any contract where it holds a role) would act for the solver. So the target must be a wallet: an
  // account without code, one delegated by EIP-7702 (its code is 0xef0100 + the delegate, which runs
  // as the wallet), or a signer of this call's own authorizations. Code at such a target acts as the
  // wallet, never as the solver.
  async #checkRelayTarget(to: Address, authorities: { address: string }[]): Promise<void> {
    const own = [this.chain.depository, this.chain.filler, this.chain.depositAddressFactory, this.solver, ...this.chain.currencies.map((c) => c.address)];
    const refuse = (why: string) =>
      new RelayRefusedError(
        'TARGET_NOT_ALLOWED',
        `data.to: ${to} ${why}; the node relays calls to wallets only (an account without code, or one delegated by EIP-7702)`,
      );
    if (own.some((a) => a !== undefined && getAddress(a) === to)) throw refuse("is one of the node's contracts or currencies");
    if (authorities.some((a) => getAddress(a.address) === to)) return;
    const code = (await this.client.getCode({ address: to })) ?? '0x';
    if (code !== '0x' && !code.toLowerCase().startsWith('0xef0100')) throw refuse('is a contract');
  }

  async depositSteps(req: DepositRequest): Promise<DepositStep[]> {
    // On EVM the sender of a transaction pays its gas; another payer needs a relayer (gasless execution).
    if (req.feePayer !== undefined) throw new QuoteError('depositFeePayer: only SVM-origin deposits can have another fee payer', 'INVALID_INPUT_PARAMETERS');
    const depository = this.chain.depository;
    const user = req.user as Address;
    const tx = (to: string, data: Hex, value: bigint) => ({ from: user, to, data, value: value.toString(), chainId: this.chainId });
    const action = 'Confirm transaction in your wallet';
    if (req.permitDeadline !== undefined) return [await this.#permitStep(req, req.permitDeadline)];
    if (req.depositAddressFor !== undefined) {
      const factory = this.chain.depositAddressFactory;
      if (!factory || this.#noDepositAddresses)
        throw new QuoteError(`useDepositAddress: chain ${this.chainId} offers no deposit addresses`, 'INVALID_INPUT_PARAMETERS');
      const at = depositAddressOf(factory, getAddress(req.depositAddressFor), req.orderId);
      const native = isNative(req.currency);
      return [
        {
          id: 'deposit',
          kind: 'transaction',
          action,
          description: 'Send the funds to your deposit address',
          data: native
            ? tx(at, '0x', req.amount)
            : tx(getAddress(req.currency), encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [at, req.amount] }), 0n),
          check: 'status-v3',
          depositAddress: at,
        },
      ];
    }
    const deposit = (data: Hex, value: bigint): DepositStep => ({
      id: 'deposit',
      kind: 'transaction',
      action,
      description: 'Deposit funds to the relayer',
      data: tx(depository, data, value),
      check: 'status-v3',
    });
    if (isNative(req.currency)) {
      return [deposit(encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [user, req.orderId] }), req.amount)];
    }
    const token = getAddress(req.currency);
    const steps = [deposit(encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositErc20', args: [user, token, req.amount, req.orderId] }), 0n)];
    const allowance = await this.client.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [user, depository] });
    if (allowance >= req.amount) return steps;
    const approve: DepositStep = {
      id: 'approve',
      kind: 'transaction',
      action,
      description: 'Approve the depository to take the deposit',
      data: tx(token, encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [depository, req.amount] }), 0n),
    };
    return [approve, ...steps];
  }
}
