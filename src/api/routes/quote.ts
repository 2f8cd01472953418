import type { FastifyInstance, FastifyRequest } from 'fastify';
import '../caller.ts';
import { z } from 'zod';
import { buildQuote } from '../../quote/quote.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { amountParam, boundedArray, chainIdParam } from '../validate.ts';

// Clients send more fields than this node acts on (the public SDK sends several); unknown fields
// are ignored rather than rejected, known ones are validated.
// Addresses are checked against the kind of chain they belong to, in buildQuote.
const addressString = z.string({ required_error: 'is required', invalid_type_error: 'must be a string' }).min(1, 'is required').max(128, 'is too long');

const quoteBody = z.object({
  user: addressString,
  recipient: addressString.optional(),
  refundTo: addressString.optional(),
  originChainId: chainIdParam.optional(),
  destinationChainId: chainIdParam.optional(),
  fromChainId: chainIdParam.optional(),
  toChainId: chainIdParam.optional(),
  originCurrency: addressString,
  destinationCurrency: addressString,
  amount: amountParam,
  tradeType: z.enum(['EXACT_INPUT', 'EXACT_OUTPUT', 'EXPECTED_OUTPUT'], {
    errorMap: () => ({ message: 'must be EXACT_INPUT, EXACT_OUTPUT or EXPECTED_OUTPUT' }),
  }),
  // Basis points, as a string or a number.
  slippageTolerance: z.coerce.number().int('must be whole basis points').min(0).max(5_000).optional(),
  protocolVersion: z.enum(['v1', 'v2']).optional(),
  referrer: z.string().max(200).optional(),
  depositFeePayer: addressString.optional(),
  useDepositAddress: z.boolean().optional(),
  depositAddressType: z.enum(['strict', 'open']).optional(),
  usePermit: z.boolean().optional(),
  // Arrays: their length is checked before any item is parsed (boundedArray).
  appFees: boundedArray(
    z.object({ recipient: addressString, fee: z.coerce.number().int('must be whole basis points').min(1).max(10_000) }).strict(),
    10,
  ).optional(),
  subsidizeFees: z.boolean().optional(),
  maxSubsidizationAmount: amountParam.optional(),
  sponsoredFeeComponents: boundedArray(z.string().max(20), 4).optional(),
  subsidizeRent: z.boolean().optional(),
  topupGas: z.boolean().optional(),
  topupGasAmount: amountParam.optional(),
  txs: boundedArray(
    z
      .object({
        to: addressString,
        value: z
          .string()
          .regex(/^[0-9]{1,78}$/, 'must be an integer in wei, as a string')
          .transform((v) => BigInt(v))
          .refine((v) => v < 2n ** 256n, 'must fit in uint256')
          .default('0'),
        data: z
          .string()
          .regex(/^0x([0-9a-fA-F]{2})*$/, 'must be 0x-prefixed hex bytes')
          .max(200_000)
          .default('0x')
          .transform((d) => d as `0x${string}`),
      })
      .strict(),
    10,
  )
    // The fill sends them all in one call: their sum is its value.
    .refine((txs) => txs.reduce((sum, t) => sum + t.value, 0n) < 2n ** 256n, 'the values together must fit in uint256')
    .optional(),
});

// How long a caller found at its cap is refused without counting again: the count reads up to the cap's rows (20,000
// by default) on the node's thread, and a refused quote costs its caller nothing else, so a key at its cap asking at
// its rate limit (100 a second) spent a fifth of the event loop on counts. Its room comes back only as its oldest
// addresses leave the watch window: refused a second longer, the caller loses nothing.
const FULL_FOR_MS = 1_000;

// Every live deposit address is read by its chain's watcher on every block: a quote for one more is refused (429)
// once its caller holds as many as allowed (quotes without an API key share one node-wide cap). `full`: when each
// caller (its key id, '' without one) was last counted at its cap.
function depositAddressRoom(ctx: ApiContext, apiKeyId: string | null, full: Map<string, number>, recount = false): void {
  const { watchHours, maxWatchedAnonymous, maxWatchedPerKey } = ctx.config.depositAddresses;
  const cap = apiKeyId === null ? maxWatchedAnonymous : maxWatchedPerKey;
  const who = apiKeyId ?? '';
  const now = Date.now();
  const at = full.get(who);
  if (recount || at === undefined || now - at >= FULL_FOR_MS) {
    if (ctx.ledger.requests.watchedOf(apiKeyId, now - watchHours * 3_600_000, cap) < cap) {
      full.delete(who);
      return;
    }
    // Entries older than FULL_FOR_MS are recounted anyway: dropping them all keeps the map to the callers at a cap now.
    if (full.size >= 10_000) full.clear();
    full.set(who, now);
  }
  const whose = apiKeyId === null ? 'without an API key (an API key has its own limit)' : 'for this API key';
  throw new ApiError(429, 'RATE_LIMITED', `at most ${cap} deposit addresses watched at once ${whose}; each is watched for ${watchHours} hours after its quote`);
}

export function quoteRoutes(app: FastifyInstance, ctx: ApiContext) {
  const full = new Map<string, number>();
  const handler = async (req: FastifyRequest) => {
    const chains = ctx.ports;
    if (!chains) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only; quote through the node');
    const b = quoteBody.parse(req.body ?? {});
    const originChainId = b.originChainId ?? b.fromChainId;
    const destinationChainId = b.destinationChainId ?? b.toChainId;
    if (originChainId === undefined) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: originChainId: is required');
    if (destinationChainId === undefined) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: destinationChainId: is required');
    if (b.useDepositAddress) depositAddressRoom(ctx, req.apiCaller?.id ?? null, full);
    // The sponsor of a subsidized request is the wallet linked to the caller's API key. Its balance is a sum of all its
    // entries (one or more per request it sponsored), read on the node's thread: only a quote that asks for
    // sponsorship (subsidizeFees) uses it, and only such a quote reads it.
    const wallet = req.apiCaller && b.subsidizeFees ? ctx.ledger.balances.sponsorOf(req.apiCaller.id) : undefined;
    const sponsor = wallet && req.apiCaller ? { wallet, apiKeyId: req.apiCaller.id, balance: ctx.ledger.balances.summary(wallet).available } : undefined;
    const quote = await buildQuote(
      { ...b, originChainId, destinationChainId },
      { config: ctx.config, registry: ctx.registry, chains, prices: ctx.prices, solver: ctx.solver, sponsor },
    );
    ctx.ledger.tx(() => {
      // The sponsor was read before the quote was priced: a wallet whose unlink answered meanwhile is not named.
      if (sponsor && ctx.ledger.balances.sponsorOf(sponsor.apiKeyId) !== sponsor.wallet)
        throw new ApiError(403, 'NO_APP_BALANCE', `the app balance wallet ${sponsor.wallet} is no longer linked to this API key: link one first`);
      // Counted again with the insert: quotes built meanwhile may have taken the room.
      if (quote.request.deposit_address) depositAddressRoom(ctx, req.apiCaller?.id ?? null, full, true);
      ctx.ledger.requests.insert({ ...quote.request, api_key_id: req.apiCaller?.id ?? null, referrer: b.referrer ?? null });
    });
    ctx.log.info({ requestId: quote.request.id, origin: originChainId, destination: destinationChainId, amountIn: quote.request.amount_in }, 'quoted');
    return quote.response;
  };
  app.post('/quote', handler);
  app.post('/quote/v2', handler);
}
