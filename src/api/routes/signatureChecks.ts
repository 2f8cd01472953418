import type { FastifyRequest } from 'fastify';
import '../caller.ts';
import { clientOf } from '../clientAddress.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { RateLimiter } from '../rateLimit.ts';

// Recovering the signer of a signature (secp256k1, in JavaScript) costs 2 to 6 ms of the node's event loop, 10 to 50
// times a whole ordinary request, and the routes that do it (unlink, claim, authorize) take no API key: a client at its
// general limit (600 a minute per address) spent up to 5% of the loop per address on signatures it made up. These are
// a wallet's rare acts (a link, an unlink, a claim, a withdrawal's authorization), each one check: the budget is far
// above what a wallet needs and far below what would hold the loop.

interface Budget {
  perCaller: RateLimiter;
  anonymous: RateLimiter;
  /** Checks each request has had of its own (`own`), oldest first: at most PERMIT_CHECKS_PER_REQUEST each. */
  ownChecks: Map<string, number>;
}

// The checks a request waiting for its permit has of its own, outside the shared budget of callers without a key: that
// budget is node-wide (client addresses are cheap), and a few addresses posting made-up signatures all the time kept it
// empty, every user's POST /permits refused until their permit's deadline passed. One, never refilled: its user's post
// is checked whatever others spend (a second post takes from the shared budget again), and the checks had outside it
// are at most one per request, so at most the quotes that make them (anonymousQuotesPerMinuteTotal without a key,
// each far costlier): twice the shared budget at worst. Spent only by who knows the request's id (its user, until its
// deposit is on chain).
const PERMIT_CHECKS_PER_REQUEST = 1;
// The requests whose own checks are remembered, the oldest forgotten first (a request that old has expired).
const OWN_CHECKS_TRACKED = 100_000;
// One budget per API (its context), shared by every route that checks signatures.
const budgets = new WeakMap<ApiContext, Budget>();

/**
 * Runs a signature check (`recover`) within the caller's budget, one at a time and each in a turn of the event loop of
 * its own: past the budget, 429 and nothing recovered. Callers without an API key also share one node-wide budget.
 * Checks that arrive together (20 requests in one read of the sockets were 20 recoveries back to back, 100 ms and more
 * before any timer of the node ran) wait their turn instead, the node's own work running between them. `own`: what the
 * check is for (a request waiting for its permit) when it has a check of its own, taken before the shared budget.
 */
export function checkSignature<T>(ctx: ApiContext, req: FastifyRequest, recover: () => Promise<T>, own?: string): Promise<T> {
  takeSignatureCheck(ctx, req, own);
  const mine = queue.then(() => new Promise<void>((r) => setImmediate(r))).then(recover);
  queue = mine.then(
    () => undefined,
    () => undefined,
  );
  return mine;
}

// The last check queued: the next starts once it has ended, in a later turn of the event loop.
let queue: Promise<void> = Promise.resolve();

function takeSignatureCheck(ctx: ApiContext, req: FastifyRequest, own: string | undefined): void {
  let budget = budgets.get(ctx);
  if (!budget) {
    // api.rateLimit.signatureChecksPerMinute for one caller (its API key, else its client address), and
    // signatureChecksPerMinuteTotal for all callers without a key together (a client may hold many addresses).
    const { signatureChecksPerMinute, signatureChecksPerMinuteTotal } = ctx.config.api.rateLimit;
    budget = {
      perCaller: new RateLimiter(signatureChecksPerMinute),
      anonymous: new RateLimiter(signatureChecksPerMinuteTotal),
      ownChecks: new Map(),
    };
    budgets.set(ctx, budget);
  }
  const caller = req.apiCaller ? `key:${req.apiCaller.id}` : `ip:${clientOf(req.ip)}`;
  if (!budget.perCaller.take(caller).ok) {
    throw new ApiError(
      429,
      'RATE_LIMITED',
      `at most ${budget.perCaller.perMinute} signature checks per minute ${req.apiCaller ? 'for this API key' : 'from this address'}`,
    );
  }
  if (!req.apiCaller && !(own !== undefined && takeOwn(budget.ownChecks, own)) && !budget.anonymous.take('').ok) {
    throw new ApiError(429, 'RATE_LIMITED', `at most ${budget.anonymous.perMinute} signature checks per minute without an API key; try again shortly`);
  }
}

// Takes one of `own`'s checks; false when it has had them all.
function takeOwn(checks: Map<string, number>, own: string): boolean {
  const had = checks.get(own) ?? 0;
  if (had >= PERMIT_CHECKS_PER_REQUEST) return false;
  if (had === 0 && checks.size >= OWN_CHECKS_TRACKED) checks.delete(checks.keys().next().value!);
  checks.set(own, had + 1);
  return true;
}
