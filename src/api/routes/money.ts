import type { FastifyInstance } from 'fastify';
import { formatUnits, getAddress, isAddress, isHex, verifyMessage, type Address, type Hex } from 'viem';
import { z } from 'zod';
import { apiAddress, canonicalAddress } from '../../chains/address.ts';
import { currencyObject } from '../../quote/quote.ts';
import { formatUsd, usdValue } from '../../quote/money.ts';
import { ClaimError, claimAppFees } from '../../solver/claims.ts';
import { FastFillError, fastFill } from '../../solver/fastFill.ts';
import { requireCaller } from '../caller.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { amountParam, chainIdParam } from '../validate.ts';

const evmWallet = z
  .string()
  .refine((s) => isAddress(s, { strict: false }), 'must be a 0x-prefixed 20-byte hex address')
  .transform((s) => getAddress(s) as Address);
const walletParams = z.object({ wallet: evmWallet });
const signatureQuery = z.object({ signature: z.string().refine((s) => isHex(s) && s.length === 132, 'must be a 65-byte 0x-prefixed hex signature').optional() });

// What a wallet signs: the exact request, so a signature authorizes nothing else.
export const linkMessage = (wallet: string, apiKeyId: string) => `relay-node: use the app balance of ${wallet} for API key ${apiKeyId}`;
export const claimMessage = (wallet: string, chainId: number, currency: string, recipient: string, issuedAt: number) =>
  `relay-node: claim the app fees of ${wallet} as ${currency} on chain ${chainId} to ${recipient} (issued ${issuedAt})`;
const CLAIM_VALIDITY_MS = 10 * 60 * 1000;

const claimBody = z.object({
  chainId: chainIdParam,
  currency: z.string().max(128),
  recipient: z.string().max(128).optional(),
  // The SDK sends an amount; a claim pays all that is owed, so it is only checked when given.
  amount: z.union([z.string(), z.number()]).optional(),
  issuedAt: z.number().int().optional(),
  referrer: z.string().optional(),
});

const fastFillBody = z
  .object({
    requestId: z.string().refine((s) => isHex(s) && s.length === 66, 'must be a 0x-prefixed 32-byte hex request id'),
    maxFillAmountUsd: z.union([z.string(), z.number()]).transform(String).pipe(z.string().regex(/^\d+(\.\d+)?$/, 'must be a decimal USD amount')).optional(),
    solverInputCurrencyAmount: amountParam.optional(),
  })
  .strict();

const linkBody = z.object({ wallet: evmWallet, signature: z.string().refine((s) => isHex(s), 'must be 0x-prefixed hex') }).strict();

export function moneyRoutes(app: FastifyInstance, ctx: ApiContext) {
  const { ledger, registry } = ctx;

  // The wallet's app balance (what sponsors its keys' requests and fast fills) and the app fees it
  // has accrued, each as an App balance record.
  app.get('/app-fees/:wallet/balances', async (req) => {
    const { wallet } = walletParams.parse(req.params);
    // App balances are kept in micro-USD: shown as the funding chain's 6-decimal stablecoin.
    const funding = [...registry.chains.values()].find((c) => c.kind === 'evm' && c.appBalanceDeposits) ?? [...registry.chains.values()][0]!;
    const usd = registry.currenciesOf(funding.id).find((c) => !c.native && c.decimals === 6 && c.usdPrice === '1') ?? registry.native(funding.id);
    const { balance, held, available } = ledger.balances.summary(wallet);
    const appBalance = {
      type: 'app-balance',
      currency: currencyObject(usd),
      amount: balance.toString(),
      amountFormatted: formatUsd(balance),
      amountUsd: formatUsd(balance),
      minimumAmount: available.toString(),
      held: held.toString(),
    };
    const fees = ledger.appFees.balances(wallet).flatMap((b) => {
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

  // Links the app balance of a wallet to the caller's key: the wallet signs, nobody pays gas.
  app.post('/app-balance/link', async (req) => {
    const caller = requireCaller(req);
    const { wallet, signature } = linkBody.parse(req.body ?? {});
    const message = linkMessage(wallet, caller.id);
    const ok = await verifyMessage({ address: wallet, message, signature: signature as Hex }).catch(() => false);
    if (!ok) throw new ApiError(400, 'INVALID_SIGNATURE', `the signature is not ${wallet}'s over the message: ${message}`);
    ledger.tx(() => ledger.balances.link(caller.id, wallet, message, signature));
    return { message: 'Success', wallet, apiKeyId: caller.id };
  });

  // Claiming is two calls, as the public SDK makes them: the first answers with a signature step
  // for the wallet; the second carries the signature and pays.
  app.post('/app-fees/:wallet/claim', async (req) => {
    const { wallet } = walletParams.parse(req.params);
    const { signature } = signatureQuery.parse(req.query ?? {});
    const b = claimBody.parse(req.body ?? {});
    const target = registry.currency(b.chainId, b.currency);
    if (!target) throw new ApiError(400, 'UNSUPPORTED_CURRENCY', `currency ${b.currency} is not supported on chain ${b.chainId}`);
    const chain = registry.chain(b.chainId)!;
    const recipient = canonicalAddress(chain.kind, b.recipient ?? wallet);
    if (!recipient) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `recipient: is not an address on chain ${b.chainId}`);
    const currency = apiAddress(target.kind, target.address);
    if (!signature) {
      const issuedAt = Date.now();
      return {
        steps: [
          {
            id: 'authorize',
            action: 'Sign the claim',
            description: `Claim your ${target.symbol} app fees on chain ${b.chainId}`,
            kind: 'signature',
            items: [
              {
                status: 'incomplete',
                data: {
                  sign: { signatureKind: 'eip191', message: claimMessage(wallet, b.chainId, currency, recipient, issuedAt) },
                  post: { endpoint: `/app-fees/${wallet}/claim`, method: 'POST', body: { chainId: b.chainId, currency, recipient, issuedAt } },
                },
              },
            ],
          },
        ],
      };
    }
    if (b.issuedAt === undefined || Math.abs(Date.now() - b.issuedAt) > CLAIM_VALIDITY_MS) {
      throw new ApiError(400, 'SIGNATURE_EXPIRED', 'the claim signature is missing issuedAt or is older than 10 minutes; ask for a new one');
    }
    const ok = await verifyMessage({ address: wallet, message: claimMessage(wallet, b.chainId, currency, recipient, b.issuedAt), signature: signature as Hex }).catch(() => false);
    if (!ok) throw new ApiError(401, 'INVALID_SIGNATURE', `the signature is not ${wallet}'s claim`);
    if (!ctx.adapters) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    try {
      const payout = claimAppFees(ledger, registry, { wallet, target, recipient });
      ctx.adapters.get(b.chainId)?.wake();
      // steps: none left (the published answer of this path is the steps object).
      return { message: 'Success', steps: [], claimId: payout.id, amount: payout.amount, chainId: payout.chain_id, currency, recipient };
    } catch (e) {
      if (e instanceof ClaimError) throw new ApiError(400, 'NOTHING_TO_CLAIM', e.message);
      throw e;
    }
  });

  app.post('/fast-fill', async (req) => {
    const caller = requireCaller(req);
    const b = fastFillBody.parse(req.body ?? {});
    if (!ctx.adapters) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    try {
      const r = await fastFill(ledger, registry, ctx.adapters, ctx.prices, {
        requestId: b.requestId.toLowerCase(),
        apiKeyId: caller.id,
        maxFillAmountUsd: b.maxFillAmountUsd,
        solverInputCurrencyAmount: b.solverInputCurrencyAmount,
        holdSeconds: ctx.config.fastFill.holdSeconds,
      });
      return { message: 'Success', requestId: b.requestId, amount: r.amount.toString(), amountUsd: formatUsd(r.valueMicro), hold: { amountUsd: formatUsd(r.holdMicro) } };
    } catch (e) {
      if (e instanceof FastFillError) throw new ApiError(e.status, e.errorCode, e.message);
      throw e;
    }
  });
}
