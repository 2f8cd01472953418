import PQueue from 'p-queue';
import { erc20Abi, getAddress, zeroAddress, type Address, type PublicClient } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { WatchedAddress } from '../../ledger/requests.ts';
import type { Logger } from '../../log.ts';
import { conversionRate, mulRatioFloor } from '../../lib/money.ts';
import { errText } from '../../lib/errors.ts';
import { Loop } from '../../lib/loop.ts';
import type { DepositAddressSweeps } from '../adapter.ts';

/**
 * A sweep is paid only for arrivals worth more than this many times its gas (chain config's
 * sweepMinCostMultiple overrides it).
 */
export const DEFAULT_SWEEP_MIN_COST_MULTIPLE = 3;

// A pass runs on every head the indexer reads; this timer only backs that up.
const BACKSTOP_MS = 30_000;
// Balance reads in flight at once in a pass. One after another, the thousands of addresses the caps allow
// (depositAddresses.maxWatched*) each cost a provider round trip, and a pass outlasted many blocks. The
// provider pool sends the calls of one tick as one JSON-RPC batch of at most 50: these fill one.
const READ_CONCURRENCY = 50;
// Expired addresses found funded whose arrival was looked up (#heldByExpiry), kept.
const HELD_BY_KEPT = 10_000;

/**
 * Watches the chain's deposit addresses: when a user's transfer has reached one (the quoted currency,
 * or the native currency by mistake) and is worth sweeping, reports it to the solver, which queues a
 * sweep payout that moves it into the depository, where the indexer sees it as a deposit for the
 * order. One sweep per address and currency is open at a time; a later arrival gets its own.
 */
export class DepositAddressWatcher {
  readonly #loop: Loop;
  // What #heldByExpiry found, by request and currency (the oldest forgotten past HELD_BY_KEPT).
  readonly #heldBy = new Map<string, number | undefined>();

  constructor(
    private chain: EvmChainConfig,
    private client: PublicClient,
    private ledger: Ledger,
    // The solver: it queues the sweep (the only writer of payouts).
    private sweeps: DepositAddressSweeps,
    private wake: () => void,
    private log: Logger,
    // What a sweep sent now would cost in gas at most, in the chain's native units.
    private sweepCost: () => Promise<bigint>,
    // How long after its quote a deposit address is still watched for arrivals.
    private watchMs: number,
  ) {
    this.#loop = new Loop(
      async () => void (await this.check()),
      BACKSTOP_MS,
      (e) => this.log.warn({ err: errText(e) }, 'deposit address check failed; will retry'),
    );
  }

  // What `amount` of `currency` is worth in the chain's native units, at the configured prices
  // (a threshold against dust needs no live feed).
  #inNative(currency: Address, amount: bigint): bigint {
    if (currency === zeroAddress) return amount;
    const cur = this.chain.currencies.find((c) => getAddress(c.address) === currency);
    if (!cur) return 0n;
    const native = this.chain.nativeCurrency;
    return mulRatioFloor(amount, conversionRate(cur.usdPrice, cur.decimals, native.usdPrice, native.decimals));
  }

  /** Starts watching: a check now, then on every poke (each head) and on a backstop timer. */
  start(): void {
    this.#loop.start();
  }

  /** Checks now, or once more after the check under way. */
  poke(): void {
    this.#loop.wake();
  }

  /** Stops watching; resolves once the check under way has finished. */
  async stop(): Promise<void> {
    await this.#loop.stop();
  }

  /** Checks the watched addresses (or only `requestId`'s, at any age); returns the sweeps queued. */
  async check(requestId?: string): Promise<number> {
    // Only the request an address was quoted for: a sweep under an arrival's id (it copies the address) would sweep another, empty one.
    const rows = requestId
      ? [this.ledger.requests.get(requestId)].filter((r) => r?.deposit_address && !r.parent_id && r.origin_chain_id === this.chain.id).map((r) => r!)
      : this.ledger.requests.depositAddresses(this.chain.id, Date.now() - this.watchMs);
    if (rows.length === 0) return 0;
    // No read of this pass is made at a block below this one (reads at `latest` are pinned to the newest block the node
    // knows, and this asks for no newer): a sweep that landed above it may have landed after the balance was read.
    const began = Date.now();
    const readFrom = { block: await this.client.getBlockNumber({ cacheTime: 0 }), at: began };
    const reads = new PQueue({ concurrency: READ_CONCURRENCY });
    // Every block: the quoted currency and the native one. A reindex (one request, asked for) reads every currency of
    // the chain too: another token sent to the address is swept, and refunded as DEPOSIT_ADDRESS_MISMATCH, where it
    // would stay at the address for good.
    const others = requestId ? this.chain.currencies.map((c) => getAddress(c.address)) : [];
    const held = await Promise.allSettled(
      rows.flatMap((r) => {
        const at = getAddress(r.deposit_address!);
        return [...new Set([getAddress(r.origin_currency), zeroAddress, ...others])].map((currency) =>
          // throwOnTimeout: no timeout is set; it only types the result as never void.
          reads.add(async () => ({ r, at, currency, balance: await this.#balance(at, currency) }), { throwOnTimeout: true }),
        );
      }),
    );
    let queued = 0;
    let cost: bigint | undefined;
    let failed: unknown;
    for (const h of held) {
      // A failed read holds back only its own address: the others are acted on, then the pass fails and is retried.
      if (h.status === 'rejected') {
        failed ??= h.reason;
        continue;
      }
      const { r, at, currency, balance } = h.value;
      if (balance === 0n) continue;
      // Dust: a sweep worth less than a few times its own gas is not paid (the arrival stays, and is swept with
      // whatever arrives after it once the sum is worth it). What a strict address's quote priced is never dust:
      // its fees paid for its one sweep. (An open address's arrivals are many, each charged the template's gas.)
      const open = r.money !== null && (JSON.parse(r.money) as { depositAddressType?: string }).depositAddressType === 'open';
      const quoted = !open && getAddress(r.origin_currency) === currency && balance >= BigInt(r.amount_in);
      if (!quoted) {
        cost ??= await this.sweepCost();
        if (this.#inNative(currency, balance) <= (cost * BigInt(Math.round((this.chain.sweepMinCostMultiple ?? DEFAULT_SWEEP_MIN_COST_MULTIPLE) * 100))) / 100n)
          continue;
      }
      const heldBy = await this.#heldByExpiry(r, at, currency);
      // After every await above (the sweep may settle meanwhile) and right before the sweep is queued, in the same tick.
      if (this.#sweptSince(r.id, currency, readFrom)) continue;
      const booked = this.sweeps.onDepositAddressFunded({ requestId: r.id, chainId: this.chain.id, currency, amount: balance, heldBy });
      if (booked) {
        queued++;
        this.log.info({ requestId: r.id, depositAddress: at, currency, amount: balance.toString() }, 'deposit address funded; sweep queued');
      }
    }
    if (queued) this.wake();
    if (failed !== undefined) throw failed;
    return queued;
  }

  // Whether a sweep of the address and currency landed above `block`: a pass outlasts blocks (thousands of addresses, 50
  // reads at a time, each sweep queued once all are read), and a balance read before such a sweep landed is what the
  // sweep moved. Queued again, it swept nothing and the solver paid its gas. The next pass reads past it.
  // A sweep found paid on chain without a transaction of its own in the ledger has no block here: one settled since the
  // pass began counts as landed after its reads.
  #sweptSince(requestId: string, currency: Address, since: { block: bigint; at: number }): boolean {
    return this.ledger.payouts.forRequest(requestId).some((p) => {
      if (p.kind !== 'sweep' || p.currency !== currency || p.state !== 'success') return false;
      const landed = this.ledger.payouts.txsOf(p.id).find((x) => x.block_number !== null && !x.cancel)?.block_number ?? null;
      return landed === null ? p.updated_at >= since.at : BigInt(landed) > since.block;
    });
  }

  #balance(at: Address, currency: Address, blockNumber?: bigint): Promise<bigint> {
    return currency === zeroAddress
      ? this.client.getBalance({ address: at, blockNumber })
      : this.client.readContract({ address: currency, abi: erc20Abi, functionName: 'balanceOf', args: [at], blockNumber });
  }

  // An address seen funded after its quote expired may have been paid in time while the node was down (a restart, a
  // takeover): dated by when the watcher saw it, it was refunded as ORDER_EXPIRED, the user paying the sweep's gas and
  // the refund's. When the address held the quoted amount at the last block made by the expiry, that block's time
  // (the chain's word, as a deposit's block time is). Undefined: not expired, not the quoted currency, not held then,
  // or the chain's state at that block could not be read (a provider keeping recent state only).
  async #heldByExpiry(r: WatchedAddress, at: Address, currency: Address): Promise<number | undefined> {
    if (r.expires_at === null || Date.now() <= r.expires_at || getAddress(r.origin_currency) !== currency) return undefined;
    // Read once per address: it is checked every block while its sweep is open.
    const k = `${r.id}:${currency}`;
    if (this.#heldBy.has(k)) return this.#heldBy.get(k);
    const heldBy = await this.#readHeldBy(r.id, r.expires_at, BigInt(r.amount_in), at, currency);
    if (this.#heldBy.size >= HELD_BY_KEPT) this.#heldBy.delete(this.#heldBy.keys().next().value!);
    this.#heldBy.set(k, heldBy);
    return heldBy;
  }

  async #readHeldBy(requestId: string, expiresAt: number, amount: bigint, at: Address, currency: Address): Promise<number | undefined> {
    try {
      const block = await this.#lastBlockBy(expiresAt);
      if (block === undefined || (await this.#balance(at, currency, block.number)) < amount) return undefined;
      return endOf(block);
    } catch (e) {
      this.log.warn({ requestId, err: errText(e) }, "the deposit address's balance at its quote's expiry could not be read; dated now");
      return undefined;
    }
  }

  // The newest block made by `t` (ms), the whole second of its time at or before it: back from the head in doubling
  // steps, then halving.
  async #lastBlockBy(t: number): Promise<{ number: bigint; timestamp: bigint } | undefined> {
    const by = (b: { timestamp: bigint }) => endOf(b) <= t;
    const head = await this.client.getBlock({ blockTag: 'latest' });
    if (by(head)) return head;
    type Block = { number: bigint; timestamp: bigint };
    let hi = head.number;
    let lo: Block | undefined;
    for (let step = 1n; lo === undefined; step *= 2n) {
      if (hi - step < 0n) return undefined;
      const b: Block = await this.client.getBlock({ blockNumber: hi - step });
      if (by(b)) lo = b;
      else hi = b.number;
    }
    while (hi - lo.number > 1n) {
      const b: Block = await this.client.getBlock({ blockNumber: (lo.number + hi) / 2n });
      if (by(b)) lo = b;
      else hi = b.number;
    }
    return lo;
  }
}

// A block's time is whole seconds: it was made by the end of that second at the latest.
const endOf = (b: { timestamp: bigint }) => Number(b.timestamp) * 1000 + 999;
