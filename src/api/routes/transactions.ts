import type { FastifyInstance } from 'fastify';
import { getAddress, isAddress } from 'viem';
import { z } from 'zod';
import type { ApiContext } from '../context.ts';
import { clientOf } from '../clientAddress.ts';
import type { DepositAddressReindex } from '../depositReindex.ts';
import { ApiError } from '../errors.ts';
import { chainIdParam } from '../validate.ts';

const body = z.object({
  txHash: z.string({ required_error: 'is required', invalid_type_error: 'must be a string' }).min(1).max(128),
  chainId: chainIdParam,
});

/** The public SDK reports its deposit here right after sending it, so the node indexes it at once. */
export function transactionRoutes(app: FastifyInstance, ctx: ApiContext, reindex: DepositAddressReindex) {
  app.post('/transactions/index', async (req) => {
    const { txHash, chainId } = body.parse(req.body ?? {});
    const intake = ctx.ports?.intake(chainId);
    if (!ctx.ports) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    if (!intake) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `chainId ${chainId} is not a supported chain`);
    const txId = ctx.chains.profile(chainId)!.codec.parseTxId(txHash);
    if (!txId) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `invalid request: txHash: is not a transaction id on chain ${chainId}`);
    let deposits: number;
    try {
      deposits = await intake.indexTransaction(txId);
    } catch (e) {
      if ((e as Error).name === 'TransactionReceiptNotFoundError') {
        throw new ApiError(404, 'TRANSACTION_NOT_FOUND', `transaction ${txHash} is not included on chain ${chainId} yet`);
      }
      throw e;
    }
    return { message: 'Success', deposits };
  });

  // Looks at a deposit address now rather than at the next block (an arrival the watcher missed,
  // or one older than its window): whatever sits there is swept and indexed. Unauthenticated: the
  // guards (age, per-address and node-wide limits) are the shared DepositAddressReindex's.
  app.post('/deposit-address/reindex', async (req) => {
    const b = reindexBody.parse(req.body ?? {});
    if (!ctx.ports) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    const r = b.requestId
      ? ctx.ledger.requests.get(b.requestId.toLowerCase())
      : b.depositAddress
        ? ctx.ledger.requests.byDepositAddress(canonicalEvm(b.depositAddress))
        : undefined;
    if (!b.requestId && !b.depositAddress) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: give depositAddress or requestId');
    if (!r || !r.deposit_address) throw new ApiError(404, 'DEPOSIT_ADDRESS_NOT_FOUND', 'no request with that deposit address');
    const { sweeps, request } = await reindex.reindex(r, { client: clientOf(req.ip) });
    return { message: 'Success', requestId: request.id, depositAddress: request.deposit_address, sweeps };
  });
}

const canonicalEvm = (s: string) => (isAddress(s, { strict: false }) ? getAddress(s) : s);

const reindexBody = z
  .object({
    depositAddress: z.string().min(1).max(128).optional(),
    requestId: z
      .string()
      .regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed 32-byte hex request id')
      .optional(),
  })
  .strict();
