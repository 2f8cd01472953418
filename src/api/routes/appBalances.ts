import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { formatUnits, getAddress, isAddress, isHex, verifyMessage, type Address, type Hex } from 'viem';
import { z } from 'zod';
import { currencyObject } from '../../quote/quote.ts';
import { formatUsd, usdValue } from '../../lib/money.ts';
import type { SignedPurpose } from '../../ledger/signatureNonces.ts';
import { ClaimError } from '../../solver/claims.ts';
import { requireCaller } from '../caller.ts';
import type { ApiContext } from '../context.ts';
import { clientOf } from '../clientAddress.ts';
import { ApiError } from '../errors.ts';
import { readOffLoop, type AppFeeBalances } from '../listing/run.ts';
import { amountParam, chainIdParam } from '../validate.ts';
import { checkSignature as budgeted } from './signatureChecks.ts';

const evmWallet = z
  .string()
  .refine((s) => isAddress(s, { strict: false }), 'must be a 0x-prefixed 20-byte hex address')
  .transform((s) => getAddress(s) as Address);
const walletParams = z.object({ wallet: evmWallet });
const signatureQuery = z.object({
  signature: z
    .string()
    .refine((s) => isHex(s) && s.length === 132, 'must be a 65-byte 0x-prefixed hex signature')
    .optional(),
});

/**
 * What a wallet signs: the exact request, with a nonce and an expiry, so that a signature
 * authorizes nothing else, once, for a short time (signature_nonces keeps the nonces used).
 */
export const linkMessage = (wallet: string, apiKeyId: string, nonce: string, expiresAt: number) =>
  `relay-node: use the app balance of ${wallet} for API key ${apiKeyId} (nonce ${nonce}, expires ${expiresAt})`;
export const unlinkMessage = (wallet: string, apiKeyId: string | undefined, nonce: string, expiresAt: number) =>
  `relay-node: stop using the app balance of ${wallet} for ${apiKeyId ? `API key ${apiKeyId}` : 'every API key'} (nonce ${nonce}, expires ${expiresAt})`;
export const claimMessage = (wallet: string, chainId: number, currency: string, recipient: string, issuedAt: number, nonce: string) =>
  `relay-node: claim the app fees of ${wallet} as ${currency} on chain ${chainId} to ${recipient} (issued ${issuedAt}, nonce ${nonce})`;
// How long a signed message is good for: the node issues it for this long and refuses any later.
const SIGNATURE_VALIDITY_MS = 10 * 60 * 1000;
// Clock skew between the node's replicas tolerated on a message's expiry.
const CLOCK_SKEW_MS = 60 * 1000;

const nonceParam = z.string().regex(/^[0-9a-zA-Z]{16,64}$/, 'must be 16 to 64 letters or digits (the nonce the node issued)');
const newNonce = () => randomBytes(16).toString('hex');

// A message the node issued expires SIGNATURE_VALIDITY_MS after issuance; one claiming to live
// longer was not issued by the node and is refused as well.
function checkExpiry(expiresAt: number, now: number): void {
  if (expiresAt < now) throw new ApiError(400, 'SIGNATURE_EXPIRED', `the signed message expired at ${expiresAt} (now ${now}); ask for a new one`);
  if (expiresAt > now + SIGNATURE_VALIDITY_MS + CLOCK_SKEW_MS) {
    throw new ApiError(400, 'SIGNATURE_EXPIRED', `expiresAt: a signed message lives at most ${SIGNATURE_VALIDITY_MS / 60_000} minutes; ask for a new one`);
  }
}

// A read-only API replica (its ledger may be a streaming standby, which refuses every write) records no link: it
// refuses before handing out a message to sign, rather than failing on the write.
function writable(ctx: ApiContext): void {
  if (!ctx.ports) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only; link and unlink through the node');
}

// Marks the nonce used inside the transaction of what it authorizes: a replay changes nothing.
function useNonce(ctx: ApiContext, purpose: SignedPurpose, wallet: string, nonce: string, expiresAt: number): void {
  if (!ctx.ledger.signatureNonces.use(purpose, wallet, nonce, expiresAt)) {
    throw new ApiError(400, 'INVALID_NONCE', `this ${purpose} signature was used already (nonce ${nonce}); ask for a new one`);
  }
}

// The signature step of a two-call flow, as the public SDK follows it: sign `message`, post `body`.
function signatureStep(action: string, description: string, message: string, endpoint: string, body: Record<string, unknown>) {
  return {
    steps: [
      {
        id: 'authorize',
        action,
        description,
        kind: 'signature',
        items: [{ status: 'incomplete', data: { sign: { signatureKind: 'eip191', message }, post: { endpoint, method: 'POST', body } } }],
      },
    ],
  };
}

// Within the caller's budget of signature checks, one at a time (signatureChecks.ts): a recovery is milliseconds of the event loop.
async function checkSignature(ctx: ApiContext, req: FastifyRequest, wallet: Address, message: string, signature: string, status: number): Promise<void> {
  const ok = await budgeted(ctx, req, () => verifyMessage({ address: wallet, message, signature: signature as Hex }).catch(() => false));
  if (!ok) throw new ApiError(status, 'INVALID_SIGNATURE', `the signature is not ${wallet}'s over the message: ${message}`);
}

const claimBody = z.object({
  chainId: chainIdParam,
  currency: z.string().max(128),
  recipient: z.string().max(128).optional(),
  // The SDK sends an amount; a claim pays all that is owed, so it is only checked when given.
  amount: z.union([z.string(), z.number()]).optional(),
  issuedAt: z.number().int().optional(),
  nonce: nonceParam.optional(),
  referrer: z.string().optional(),
});

const fastFillBody = z
  .object({
    requestId: z.string().refine((s) => isHex(s) && s.length === 66, 'must be a 0x-prefixed 32-byte hex request id'),
    maxFillAmountUsd: z
      .union([z.string(), z.number()])
      .transform(String)
      .pipe(
        z
          .string()
          .regex(/^\d+(\.\d+)?$/, 'must be a decimal USD amount')
          // Parsed into BigInts later: a body's worth of digits would cost milliseconds of the event loop to read.
          .max(40, 'must be at most 40 characters'),
      )
      .optional(),
    solverInputCurrencyAmount: amountParam.optional(),
  })
  .strict();

const hexSignature = z.string().refine((s) => isHex(s) && s.length === 132, 'must be a 65-byte 0x-prefixed hex signature');
// Without signature: asks for the message to sign. With it: nonce and expiresAt as issued.
const linkBody = z
  .object({ wallet: evmWallet, signature: hexSignature.optional(), nonce: nonceParam.optional(), expiresAt: z.number().int().optional() })
  .strict();
const unlinkBody = linkBody.extend({ apiKeyId: z.string().min(1).max(128).optional() }).strict();

// A signed post must carry the nonce and expiry of the message the node issued.
function signedParts(b: { nonce?: string; expiresAt?: number }): { nonce: string; expiresAt: number } {
  if (b.nonce === undefined || b.expiresAt === undefined) {
    throw new ApiError(
      400,
      'INVALID_INPUT_PARAMETERS',
      'invalid request: nonce and expiresAt are required with a signature: post without one first to get the message to sign',
    );
  }
  return { nonce: b.nonce, expiresAt: b.expiresAt };
}

/** The app balance routes: app fee balances and claims, linking a wallet to an API key, fast fill against the app balance. */
export function appBalanceRoutes(app: FastifyInstance, ctx: ApiContext) {
  const { ledger, registry } = ctx;

  // The wallet's app balance (what sponsors its keys' requests and fast fills) and the app fees it
  // has accrued, each as an App balance record.
  app.get('/app-fees/:wallet/balances', async (req) => {
    const { wallet } = walletParams.parse(req.params);
    // App balances are kept in micro-USD: shown as the funding chain's 6-decimal stablecoin.
    const funding = [...registry.chains.values()].find((c) => ctx.chains.profile(c.id)!.appBalanceDeposits) ?? [...registry.chains.values()][0]!;
    const usd = registry.currenciesOf(funding.id).find((c) => !c.native && c.decimals === 6 && c.usdPrice === '1') ?? registry.native(funding.id);
    // Off the node's event loop: both sums walk every entry of the wallet (a busy app's has one per request), and this
    // read takes no key. A caller has one such read in progress at a time (api.listing.perCaller).
    const [read] = (await readOffLoop(ctx, { kind: 'appFeeBalances', wallet }, req.apiCaller?.id ?? `ip:${clientOf(req.ip)}`)) as [AppFeeBalances];
    const { balance, held, available } = read.summary;
    const appBalance = {
      type: 'app-balance',
      currency: currencyObject(usd),
      amount: balance.toString(),
      amountFormatted: formatUsd(balance),
      amountUsd: formatUsd(balance),
      minimumAmount: available.toString(),
      held: held.toString(),
    };
    const fees = read.fees.flatMap((b) => {
      const c = registry.currency(b.chainId, b.currency);
      if (!c || b.amount === 0n) return [];
      return [
        {
          type: 'app-fees',
          currency: currencyObject(c),
          amount: b.amount.toString(),
          amountFormatted: formatUnits(b.amount, c.decimals),
          amountUsd: usdValue(b.amount, c.decimals, c.usdPrice),
          minimumAmount: b.amount.toString(),
        },
      ];
    });
    return { balances: [appBalance, ...fees] };
  });

  // Links the app balance of a wallet to the caller's key: the wallet signs, nobody pays gas. Two
  // calls: the first (no signature) answers the message to sign; the second carries its signature.
  app.post('/app-balance/link', async (req) => {
    const caller = requireCaller(req);
    writable(ctx);
    const b = linkBody.parse(req.body ?? {});
    const now = ctx.now();
    if (!b.signature) {
      const nonce = newNonce();
      const expiresAt = now + SIGNATURE_VALIDITY_MS;
      return signatureStep(
        'Sign the link',
        `Sponsor the requests of API key ${caller.id} from the app balance of ${b.wallet}`,
        linkMessage(b.wallet, caller.id, nonce, expiresAt),
        '/app-balance/link',
        {
          wallet: b.wallet,
          nonce,
          expiresAt,
        },
      );
    }
    const { nonce, expiresAt } = signedParts(b);
    checkExpiry(expiresAt, now);
    const message = linkMessage(b.wallet, caller.id, nonce, expiresAt);
    await checkSignature(ctx, req, b.wallet, message, b.signature, 400);
    ledger.tx(() => {
      useNonce(ctx, 'link', b.wallet, nonce, expiresAt);
      ledger.balances.link(caller.id, b.wallet, message, b.signature!);
    });
    return { message: 'Success', wallet: b.wallet, apiKeyId: caller.id };
  });

  // A wallet ends its sponsorship of one API key (apiKeyId) or of all, by its own signature: no
  // API key needed, the key holder cannot keep spending a wallet that withdrew. Two calls, as link.
  app.post('/app-balance/unlink', async (req) => {
    writable(ctx);
    const b = unlinkBody.parse(req.body ?? {});
    const now = ctx.now();
    if (!b.signature) {
      const nonce = newNonce();
      const expiresAt = now + SIGNATURE_VALIDITY_MS;
      return signatureStep(
        'Sign the unlink',
        `Stop sponsoring ${b.apiKeyId ? `API key ${b.apiKeyId}` : 'every API key'} from the app balance of ${b.wallet}`,
        unlinkMessage(b.wallet, b.apiKeyId, nonce, expiresAt),
        '/app-balance/unlink',
        {
          wallet: b.wallet,
          ...(b.apiKeyId ? { apiKeyId: b.apiKeyId } : {}),
          nonce,
          expiresAt,
        },
      );
    }
    const { nonce, expiresAt } = signedParts(b);
    checkExpiry(expiresAt, now);
    await checkSignature(ctx, req, b.wallet, unlinkMessage(b.wallet, b.apiKeyId, nonce, expiresAt), b.signature, 400);
    const unlinked = ledger.tx(() => {
      useNonce(ctx, 'unlink', b.wallet, nonce, expiresAt);
      return ledger.balances.unlink(b.wallet, b.apiKeyId);
    });
    return { message: 'Success', wallet: b.wallet, unlinked };
  });

  // Claiming is two calls, as the public SDK makes them: the first answers with a signature step
  // for the wallet; the second carries the signature and pays.
  app.post('/app-fees/:wallet/claim', async (req) => {
    const { wallet } = walletParams.parse(req.params);
    const { signature } = signatureQuery.parse(req.query ?? {});
    const b = claimBody.parse(req.body ?? {});
    const target = registry.currency(b.chainId, b.currency);
    if (!target) throw new ApiError(400, 'UNSUPPORTED_CURRENCY', `currency ${b.currency} is not supported on chain ${b.chainId}`);
    const { codec } = ctx.chains.profile(b.chainId)!;
    const recipient = codec.canonical(b.recipient ?? wallet);
    if (!recipient) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `recipient: is not an address on chain ${b.chainId}`);
    const currency = codec.api(target.address);
    if (!signature) {
      const issuedAt = ctx.now();
      const nonce = newNonce();
      return signatureStep(
        'Sign the claim',
        `Claim your ${target.symbol} app fees on chain ${b.chainId}`,
        claimMessage(wallet, b.chainId, currency, recipient, issuedAt, nonce),
        `/app-fees/${wallet}/claim`,
        {
          chainId: b.chainId,
          currency,
          recipient,
          issuedAt,
          nonce,
        },
      );
    }
    if (b.issuedAt === undefined || b.nonce === undefined) {
      throw new ApiError(
        400,
        'INVALID_INPUT_PARAMETERS',
        'invalid request: issuedAt and nonce are required with a signature: post without one first to get the message to sign',
      );
    }
    const expiresAt = b.issuedAt + SIGNATURE_VALIDITY_MS;
    if (b.issuedAt > ctx.now() + CLOCK_SKEW_MS) throw new ApiError(400, 'SIGNATURE_EXPIRED', 'issuedAt: is in the future; ask for a new claim message');
    checkExpiry(expiresAt, ctx.now());
    await checkSignature(ctx, req, wallet, claimMessage(wallet, b.chainId, currency, recipient, b.issuedAt, b.nonce), signature, 401);
    const solver = ctx.solverPort;
    if (!solver) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    try {
      // The claim and its nonce in one transaction: nothing owed books nothing and keeps the nonce.
      const payout = await solver.claimAppFees({ wallet, target, recipient }, () => useNonce(ctx, 'claim', wallet, b.nonce!, expiresAt));
      // steps: none left (the published answer of this path is the steps object).
      return { message: 'Success', steps: [], claimId: payout.id, amount: payout.amount, chainId: payout.chain_id, currency, recipient };
    } catch (e) {
      // Over the outflow budget is a conflict with the hour's other payouts, as for a fast fill (409): the claim may be
      // made later. The rest is the request's own (400).
      if (e instanceof ClaimError) throw new ApiError(e.errorCode === 'OUTFLOW_BUDGET' ? 409 : 400, e.errorCode, e.message);
      throw e;
    }
  });

  app.post('/fast-fill', async (req) => {
    const caller = requireCaller(req);
    const b = fastFillBody.parse(req.body ?? {});
    if (!ctx.solverPort) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    // A refusal is a FastFillError: its code's status is the API's (errors.ts).
    const r = await ctx.solverPort.fastFill({
      requestId: b.requestId.toLowerCase(),
      apiKeyId: caller.id,
      maxFillAmountUsd: b.maxFillAmountUsd,
      solverInputCurrencyAmount: b.solverInputCurrencyAmount,
      holdSeconds: ctx.config.fastFill.holdSeconds,
    });
    return {
      message: 'Success',
      requestId: b.requestId,
      amount: r.amount.toString(),
      amountUsd: formatUsd(r.valueMicro),
      hold: { amountUsd: formatUsd(r.holdMicro) },
    };
  });
}
