import { erc20Abi, getAddress, zeroAddress, type Address, type PublicClient } from 'viem';
import type { EvmChainConfig } from '../../config/schema.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { Logger } from '../../log.ts';
import { conversionRate, mulRatioFloor } from '../../quote/money.ts';
import { errText } from '../../lib/errors.ts';

// A sweep is paid only for arrivals worth more than this many times its gas (chain config's
// sweepMinCostMultiple overrides it).
export const DEFAULT_SWEEP_MIN_COST_MULTIPLE = 3;

// Watches the chain's deposit addresses: when a user's transfer has reached one (the quoted
// currency, or the native currency by mistake), queues a sweep payout that moves it into the
// depository, where the indexer sees it as a deposit for the order. One sweep per address and
// currency is open at a time; a later arrival gets its own.
export class DepositAddressWatcher {
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(
    private chain: EvmChainConfig,
    private client: PublicClient,
    private ledger: Ledger,
    private wake: () => void,
    private log: Logger,
    // What a sweep sent now would cost in gas at most, in the chain's native units.
    private sweepCost: () => Promise<bigint>,
    // How long after its quote a deposit address is still watched for arrivals.
    private watchMs: number,
  ) {}

  // What `amount` of `currency` is worth in the chain's native units, at the configured prices
  // (a threshold against dust needs no live feed).
  #inNative(currency: Address, amount: bigint): bigint {
    if (currency === zeroAddress) return amount;
    const cur = this.chain.currencies.find((c) => getAddress(c.address) === currency);
    if (!cur) return 0n;
    const native = this.chain.nativeCurrency;
    return mulRatioFloor(amount, conversionRate(cur.usdPrice, cur.decimals, native.usdPrice, native.decimals));
  }

  poke(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.check()
      .then(() => undefined)
      .catch((e) => this.log.warn({ err: errText(e) }, 'deposit address check failed; will retry'))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.poke();
        }
      });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }

  // Checks the watched addresses (or only `requestId`'s, at any age); returns the sweeps queued.
  async check(requestId?: string): Promise<number> {
    const rows = requestId
      ? [this.ledger.requests.get(requestId)].filter((r) => r?.deposit_address && r.origin_chain_id === this.chain.id).map((r) => r!)
      : this.ledger.requests.depositAddresses(this.chain.id, Date.now() - this.watchMs);
    let queued = 0;
    let cost: bigint | undefined;
    for (const r of rows) {
      const at = getAddress(r.deposit_address!);
      for (const currency of [...new Set([getAddress(r.origin_currency), zeroAddress])]) {
        const balance =
          currency === zeroAddress
            ? await this.client.getBalance({ address: at })
            : await this.client.readContract({ address: currency as Address, abi: erc20Abi, functionName: 'balanceOf', args: [at] });
        if (balance === 0n) continue;
        // Dust: a sweep worth less than a few times its own gas is not paid (the arrival stays,
        // and is swept with whatever arrives after it once the sum is worth it).
        cost ??= await this.sweepCost();
        if (this.#inNative(currency, balance) <= cost * BigInt(Math.round((this.chain.sweepMinCostMultiple ?? DEFAULT_SWEEP_MIN_COST_MULTIPLE) * 100)) / 100n) continue;
        const booked = this.ledger.tx(() => {
          const sweeps = this.ledger.payouts.forRequest(r.id).filter((p) => p.kind === 'sweep' && p.currency === currency);
          if (sweeps.some((p) => p.state === 'queued' || p.state === 'sent')) return false;
          this.ledger.payouts.insert({
            id: `sweep:${r.id}:${currency}:${sweeps.length}`,
            kind: 'sweep',
            request_id: r.id,
            deposit_id: null,
            chain_id: this.chain.id,
            // Whose deposit the sweep makes: refunds go back there.
            recipient: r.refund_to!,
            currency,
            amount: balance.toString(),
            decided_at: Date.now(),
          });
          return true;
        });
        if (booked) {
          queued++;
          this.log.info({ requestId: r.id, depositAddress: at, currency, amount: balance.toString() }, 'deposit address funded; sweep queued');
        }
      }
    }
    if (queued) this.wake();
    return queued;
  }
}
