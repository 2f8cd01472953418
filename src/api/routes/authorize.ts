import type { FastifyInstance, FastifyRequest } from 'fastify';
import { getAddress, isAddress, isHex, recoverTypedDataAddress, type Address, type Hex } from 'viem';
import { z } from 'zod';
import { nonceMappingTypedData } from '../../chains/exchange/typedData.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { checkSignature } from './signatureChecks.ts';

const address = z.string().refine((s) => isAddress(s, { strict: false }), 'must be a 0x-prefixed 20-byte hex address');
const signatureParam = z.string().refine((s) => isHex(s) && s.length >= 132 && s.length <= 200, 'must be a 0x-prefixed signature');
const uint = (max: number) =>
  z.union([z.number(), z.string().regex(/^[0-9]{1,16}$/, 'must be an integer')]).transform((v, c) => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n <= 0 || n > max) {
      c.addIssue({ code: 'custom', message: 'must be a positive integer' });
      return z.NEVER;
    }
    return n;
  });

const body = z
  .object({
    type: z.literal('nonce-mapping', { errorMap: () => ({ message: 'must be nonce-mapping' }) }),
    walletChainId: uint(Number.MAX_SAFE_INTEGER),
    wallet: address,
    depositor: address,
    nonce: uint(Number.MAX_SAFE_INTEGER),
    id: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed 32-byte hex request id'),
    signatureChainId: uint(Number.MAX_SAFE_INTEGER),
    signature: signatureParam.optional(),
  })
  .passthrough();
const query = z.object({ signature: signatureParam.optional() });

interface QuotedMapping {
  wallet: string;
  depositor: string;
  nonce: number;
}

// The nonce mapping the request's quote asked for (its `authorize` step's post body).
function quotedMapping(quote: string | undefined): QuotedMapping | undefined {
  if (!quote) return undefined;
  try {
    const q = JSON.parse(quote) as { steps?: { id: string; items?: { data?: { post?: { body?: QuotedMapping } } }[] }[] };
    return q.steps?.find((s) => s.id === 'authorize')?.items?.[0]?.data?.post?.body;
  } catch {
    return undefined;
  }
}

/**
 * POST /authorize?signature=0x...: the withdrawal quote's `authorize` step. The wallet's EIP-712
 * NonceMapping ties the nonce of its transfer to the solver on the exchange to the request; the
 * exchange indexer associates a transfer to a request only through this mapping.
 */
export function authorizeRoutes(app: FastifyInstance, ctx: ApiContext) {
  app.post('/authorize', async (req: FastifyRequest) => {
    const b = body.parse(req.body ?? {});
    const signature = query.parse(req.query ?? {}).signature ?? b.signature;
    if (!signature) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: signature: is required (query parameter)');
    if (!ctx.ports) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    const nonces = ctx.ledger.exchangeNonces;
    const r = ctx.ledger.requests.get(b.id.toLowerCase());
    if (!r || r.kind !== 'order') throw new ApiError(404, 'REQUEST_NOT_FOUND', `no request with id ${b.id}`);
    if (!ctx.chains.profile(r.origin_chain_id)?.nonceMappings) {
      throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `request ${r.id} is not a withdrawal from the exchange: nothing to authorize`);
    }
    if (b.walletChainId !== r.origin_chain_id) {
      throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `invalid request: walletChainId: must be ${r.origin_chain_id}, the request's origin chain`);
    }
    const wallet = getAddress(b.wallet);
    const depositor = getAddress(b.depositor);
    let signer: Address;
    try {
      // Within the caller's budget of signature checks, one at a time (signatureChecks.ts).
      signer = await checkSignature(ctx, req, () =>
        recoverTypedDataAddress({
          ...nonceMappingTypedData({ chainId: b.signatureChainId, wallet, depositor, id: b.id.toLowerCase() as Hex, nonce: b.nonce }),
          signature: signature as Hex,
        }),
      );
    } catch (e) {
      // Over the budget of signature checks (429): nothing was recovered.
      if (e instanceof ApiError) throw e;
      throw new ApiError(400, 'INVALID_SIGNATURE', 'the signature is not a valid EIP-712 signature');
    }
    if (signer !== wallet) {
      throw new ApiError(400, 'INVALID_SIGNATURE', `the signature is not ${wallet}'s over this NonceMapping (domain chainId ${b.signatureChainId})`);
    }
    const taken = nonces.get(wallet, b.nonce);
    if (taken && taken.request_id !== r.id) {
      throw new ApiError(400, 'NONCE_ALREADY_USED', `nonce ${b.nonce} of ${wallet} is already mapped to another request`);
    }
    const quoted = quotedMapping(ctx.ledger.requests.quoteOf(r.id));
    if (!quoted || quoted.nonce !== b.nonce || getAddress(quoted.wallet) !== wallet || getAddress(quoted.depositor) !== depositor) {
      throw new ApiError(
        400,
        'INVALID_INPUT_PARAMETERS',
        `the nonce mapping is not the one request ${r.id} was quoted with (nonce, wallet and depositor must match)`,
      );
    }
    if (getAddress(r.user!) !== wallet) {
      throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `wallet: request ${r.id} is ${r.user}'s`);
    }
    ctx.ledger.tx(() => {
      // Checked again inside the transaction: two posts racing record one mapping.
      const again = nonces.get(wallet, b.nonce);
      if (again) {
        if (again.request_id !== r.id) throw new ApiError(400, 'NONCE_ALREADY_USED', `nonce ${b.nonce} of ${wallet} is already mapped to another request`);
        return;
      }
      const other = nonces.ofRequest(r.id);
      if (other) throw new ApiError(400, 'NONCE_ALREADY_USED', `request ${r.id} is already authorized with nonce ${other.nonce}`);
      nonces.insert({ nonce: b.nonce, wallet, request_id: r.id, signature, created_at: Date.now() });
    });
    ctx.log.info({ requestId: r.id, wallet, nonce: b.nonce }, 'exchange nonce mapping recorded');
    // A transfer already waiting for its authorization is associated now.
    ctx.ports.intake(r.origin_chain_id)?.indexNow();
    return { message: 'Success' };
  });
}
