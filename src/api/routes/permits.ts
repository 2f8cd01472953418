import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireCaller } from '../caller.ts';
import { executeRawCalls, isRawCalls } from './executeRawCalls.ts';
import { isHex, type Hex } from 'viem';
import { z } from 'zod';
import { SignedDepositError } from '../../chains/adapter.ts';
import type { VerifiedSignedDeposit } from '../../chains/ports.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { checkSignature } from './signatureChecks.ts';
import type { Pricing } from '../../ledger/types.ts';
import { breakdown } from '../../quote/fillAmount.ts';
import { usdMicroCeil } from '../../lib/money.ts';
import { moneyOf } from '../../solver/appBalanceBooks.ts';
import { signedDepositPayoutId } from '../../solver/signedDeposits.ts';

const signatureParam = z.string().refine((s) => isHex(s) && s.length >= 132 && s.length <= 200, 'must be a 0x-prefixed signature');
const query = z.object({ signature: signatureParam.optional() });
const body = z
  .object({ requestId: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed 32-byte hex request id'), signature: signatureParam.optional() })
  .passthrough();

// The post of a quote's `authorize` step for a signed deposit (usePermit): the node checks the
// permit against the request, records the deposit it will submit (status `depositing`) in one
// ledger transaction, then submits it on the origin chain and pays its gas.
//
// POST /execute is the same submission made by an integrator's backend with its API key: the
// gasless flow. The request must be sponsored by that key (quoted with subsidizeFees), so the
// deposit's gas, priced in the quote's execution fee, is paid from the key's app balance.
/** Whether a request's quote asked for a signed deposit (usePermit), from its money record. */
export function quotedWithPermit(money: string | null): boolean {
  return money !== null && (JSON.parse(money) as { permit?: boolean }).permit === true;
}

export function permitRoutes(app: FastifyInstance, ctx: ApiContext) {
  const submit = async (req: FastifyRequest, gasless: boolean) => {
    const caller = gasless ? requireCaller(req) : undefined;
    const b = body.parse(req.body ?? {});
    const signature = query.parse(req.query ?? {}).signature ?? b.signature;
    if (!signature) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: signature: is required (query or body)');
    if (!ctx.ports || !ctx.solverPort) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    const solver = ctx.solverPort;
    const r = ctx.ledger.requests.get(b.requestId.toLowerCase());
    if (!r || r.kind !== 'order') throw new ApiError(404, 'REQUEST_NOT_FOUND', `no request with id ${b.requestId}`);
    if (caller) {
      const sponsor = r.money ? (JSON.parse(r.money) as { sponsor?: { apiKeyId: string } | null }).sponsor : undefined;
      if (sponsor?.apiKeyId !== caller.id) {
        throw new ApiError(
          403,
          'NOT_SPONSORED_BY_KEY',
          `request ${r.id} is not sponsored by this API key: quote it with usePermit, subsidizeFees and this key`,
        );
      }
    }
    // Only a request quoted with usePermit: its quote priced the deposit's gas the node pays; any
    // other request's deposit is the user's own transaction.
    if (!quotedWithPermit(r.money)) {
      throw new ApiError(
        400,
        'INVALID_INPUT_PARAMETERS',
        `invalid request: request ${r.id} was not quoted with usePermit; deposit it as its quote's steps say`,
      );
    }
    const chains = ctx.ports;
    const deposits = chains.deposits(r.origin_chain_id);
    if (!deposits?.verifySignedDeposit) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `chain ${r.origin_chain_id} takes no signed deposits`);
    const id = signedDepositPayoutId(r.id);
    const submitted = () =>
      new ApiError(409, 'ALREADY_SUBMITTED', `request ${r.id} is ${ctx.ledger.requests.get(r.id)!.status}: its deposit was submitted already`);
    if (r.status !== 'waiting' || ctx.ledger.payouts.get(id)) throw submitted();
    let verified: VerifiedSignedDeposit;
    try {
      // Without a key, within the signature budget (signatureChecks.ts): each check is a recovery and four reads of the
      // origin chain on the solver's providers. A sponsor's key is held to its priced calls' bucket instead: it posts
      // every user's permit of its app (POST /execute), far more than a wallet's rare signatures. The request, waiting
      // for its permit, has a check of its own first: others emptying the shared budget do not lock its user out.
      const verify = () => deposits.verifySignedDeposit!(r, b, signature as Hex);
      verified = await (req.apiCaller ? verify() : checkSignature(ctx, req, verify, `permit:${r.id}`));
    } catch (e) {
      if (e instanceof SignedDepositError) throw new ApiError(e.errorCode === 'RPC_UNAVAILABLE' ? 503 : 400, e.errorCode, e.message);
      throw e;
    }
    // A sponsored request's fees, the deposit's gas among them, are the sponsor's: when its app
    // balance no longer covers them, the fill would fail after the node paid the deposit's gas.
    const sponsorWallet = moneyOf(r)?.sponsor?.wallet;
    let sponsoredMicro = 0n;
    if (sponsorWallet) {
      const cout = ctx.registry.currency(r.destination_chain_id, r.destination_currency);
      if (!cout)
        throw new ApiError(400, 'UNSUPPORTED_CURRENCY', `currency ${r.destination_currency} is no longer supported on chain ${r.destination_chain_id}`);
      const sponsored = r.pricing ? breakdown(BigInt(r.amount_in), JSON.parse(r.pricing) as Pricing).sponsored : 0n;
      sponsoredMicro = usdMicroCeil(sponsored, cout.decimals, await ctx.prices.usdPrice(cout));
    }
    // The solver records the deposit it will submit (its payout, the sponsor's hold, status
    // depositing, the permit's nonce used) in one ledger transaction that checks again what was
    // checked above, and refuses a permit that funds another request already (PERMIT_ALREADY_USED).
    solver.submitSignedDeposit({ request: r, ...verified, sponsor: sponsorWallet ? { wallet: sponsorWallet, micro: sponsoredMicro } : undefined, gasless });
    return { message: 'Success', requestId: r.id };
  };
  app.post('/permits', (req) => submit(req, false));
  // The hosted service's path for the same submission.
  app.post('/execute/permits', (req) => submit(req, false));
  // The hosted operation: executionKind rawCalls (a gasless relay, executeRawCalls.ts); without an
  // executionKind, the signed-deposit submission above.
  app.post('/execute', (req) => (isRawCalls(req.body) ? executeRawCalls(req, ctx) : submit(req, true)));
}
