import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { chainIdParam } from '../validate.ts';

const body = z.object({
  txHash: z.string({ required_error: 'is required', invalid_type_error: 'must be a string' }).min(1).max(128),
  chainId: chainIdParam,
});

// The public SDK reports its deposit here right after sending it, so the node indexes it at once.
export function transactionRoutes(app: FastifyInstance, ctx: ApiContext) {
  app.post('/transactions/index', async (req) => {
    const { txHash, chainId } = body.parse(req.body ?? {});
    const adapter = ctx.adapters?.get(chainId);
    if (!ctx.adapters) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    if (!adapter) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `chainId ${chainId} is not a supported chain`);
    const txId = adapter.parseTxId(txHash);
    if (!txId) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `invalid request: txHash: is not a transaction id on chain ${chainId}`);
    let deposits: number;
    try {
      deposits = await adapter.indexTransaction(txId);
    } catch (e) {
      if ((e as Error).name === 'TransactionReceiptNotFoundError') {
        throw new ApiError(404, 'TRANSACTION_NOT_FOUND', `transaction ${txHash} is not included on chain ${chainId} yet`);
      }
      throw e;
    }
    return { message: 'Success', deposits };
  });
}
