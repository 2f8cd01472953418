import type { ApiContext } from './context.ts';
import { ApiError } from './errors.ts';
import { RateLimiter } from './rateLimit.ts';
import type { RequestRow } from '../ledger/types.ts';

/** What one reindex did: the sweeps it queued, and (when asked for) what the address held before it looked. */
export interface Reindexed {
  sweeps: number;
  held?: bigint;
}

/**
 * The deposit-address reindex (look at an address now rather than at the next block), behind its
 * guards. Anyone may call it, at either path (the node's POST /deposit-address/reindex and the
 * hosted POST /transactions/deposit-address/reindex), so both go through one instance: it reaches
 * requests up to reindexMaxAgeDays old only, and each client, each address and all of them together a
 * few times a minute, whichever path asks, so it cannot be used to make the solver sweep at will, to
 * make the node read chains without bound, or by one client to use up everyone's budget.
 */
export class DepositAddressReindex {
  readonly #ctx: ApiContext;
  readonly #perClient: RateLimiter;
  readonly #perAddress: RateLimiter;
  readonly #overall: RateLimiter;

  constructor(ctx: ApiContext) {
    this.#ctx = ctx;
    this.#perClient = new RateLimiter(ctx.config.depositAddresses.reindexPerClientPerMinute);
    this.#perAddress = new RateLimiter(ctx.config.depositAddresses.reindexPerAddressPerMinute);
    this.#overall = new RateLimiter(ctx.config.depositAddresses.reindexPerMinute);
  }

  /**
   * Checks the request's age and the buckets (400 DEPOSIT_ADDRESS_EXPIRED, 429 RATE_LIMITED): the caller's
   * (`client`, counted as the API's per-address limits count it), the address's and the node's; and
   * only then reads the chain: the address's balance when `readBalance`, and the check that sweeps
   * what sits there.
   */
  async reindex(asked: RequestRow, opts: { client: string; readBalance?: boolean }): Promise<Reindexed & { request: RequestRow }> {
    const ports = this.#ctx.ports;
    if (!ports) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    // An open address's arrivals copy its address, but a sweep is made for (refundTo, request id): the address is
    // looked at, and swept, for the request it was quoted for (under an arrival's id, another, empty address).
    let r: RequestRow | undefined = asked;
    while (r?.parent_id) r = this.#ctx.ledger.requests.get(r.parent_id);
    if (!r) throw new ApiError(404, 'DEPOSIT_ADDRESS_NOT_FOUND', `the request ${asked.id} arrived at is not found`);
    const address = r.deposit_address;
    if (!address) throw new ApiError(404, 'DEPOSIT_ADDRESS_NOT_FOUND', `request ${r.id} has no deposit address`);
    const { reindexMaxAgeDays } = this.#ctx.config.depositAddresses;
    if (r.created_at < this.#ctx.now() - reindexMaxAgeDays * 86_400_000) {
      throw new ApiError(
        400,
        'DEPOSIT_ADDRESS_EXPIRED',
        `the deposit address of request ${r.id} was quoted more than ${reindexMaxAgeDays} days ago; ask the operator to sweep it`,
      );
    }
    limited(this.#perClient.take(opts.client), 'from this client');
    limited(this.#perAddress.take(address), 'for this deposit address');
    limited(this.#overall.take('all'), 'on this node');
    const held = opts.readBalance ? await ports.costs(r.origin_chain_id)?.balanceOf(address, r.origin_currency) : undefined;
    const sweeps = (await ports.intake(r.origin_chain_id)?.checkDepositAddress?.(r.id)) ?? 0;
    return held === undefined ? { sweeps, request: r } : { sweeps, held, request: r };
  }
}

function limited(t: ReturnType<RateLimiter['take']>, what: string): void {
  if (!t.ok) throw new ApiError(429, 'RATE_LIMITED', `too many reindex calls ${what}; retry in ${Math.ceil(t.retryAfterMs / 1000)} s`);
}
