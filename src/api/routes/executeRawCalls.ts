import type { FastifyRequest } from 'fastify';
import { getAddress, isAddress, isHex, zeroAddress } from 'viem';
import { z } from 'zod';
import { RelayRefusedError } from '../../chains/adapter.ts';
import type { RelayTerms } from '../../chains/evm/relayTerms.ts';
import { PriceUnavailableError } from '../../quote/prices.ts';
import { readHeld, type HeldRead } from '../../chains/spendable.ts';
import { relayRequestId, relayValueAboveCap } from '../../solver/gaslessRelay.ts';
import { requireCaller } from '../caller.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { boundedArray, UINT256_DIGITS } from '../validate.ts';

// POST /execute with executionKind "rawCalls": the hosted gasless relay. The node sends the user's
// call (with its EIP-7702 authorization list: a wallet without gas delegates to a batch executor and
// the node pays) from its own key, charging the gas to the app balance that sponsors the caller's
// API key. The shapes are the published ones (paths["/execute"]); errors carry `error` (the
// published field) besides the node's {message, errorCode}.

const address = z.string().refine((s) => isAddress(s, { strict: false }), 'must be a 0x-prefixed 20-byte address');
const hex32 = z.string().regex(/^0x[0-9a-fA-F]{1,64}$/, 'must be 0x-prefixed hex of at most 32 bytes');
const authorization = z
  .object({
    chainId: z.number().int().nonnegative(),
    address,
    nonce: z.number().int().nonnegative(),
    yParity: z.union([z.literal(0), z.literal(1)]),
    r: hex32,
    s: hex32,
  })
  .strict();
const body = z
  .object({
    executionKind: z.literal('rawCalls'),
    data: z
      .object({
        chainId: z.number().int().positive(),
        to: address,
        data: z.string().refine((s) => isHex(s) && s.length % 2 === 0, 'must be 0x-prefixed hex bytes'),
        value: z
          .string()
          .regex(/^[0-9]+$/, 'must be an integer in wei, as a string')
          .max(UINT256_DIGITS, 'must fit in uint256'),
        authorizationList: boundedArray(authorization, 8, 'at most 8 authorizations')
          .refine((l) => l.length > 0, 'cannot be empty')
          .optional(),
      })
      .strict(),
    executionOptions: z.object({
      referrer: z.string().max(200),
      subsidizeFees: z.boolean(),
      destinationChainExecutionData: z.unknown().optional(),
    }),
    // The quote's request the call belongs to (the SDK sends it); the relay is a request of its own.
    requestId: z.string().optional(),
    originGasOverhead: z.number().optional(),
  })
  .passthrough();

/** Whether a POST /execute body asks for a raw-calls relay (the signed-deposit submission otherwise). */
export function isRawCalls(b: unknown): boolean {
  return typeof b === 'object' && b !== null && 'executionKind' in b;
}

/** Handles POST /execute rawCalls (its errors carry the published `error` field: src/api/errors.ts). */
export async function executeRawCalls(req: FastifyRequest, ctx: ApiContext) {
  try {
    return await relay(req, ctx);
  } catch (e) {
    if (e instanceof PriceUnavailableError) throw new ApiError(503, 'PRICE_UNAVAILABLE', `cannot price the gas now: ${e.message}`);
    throw e;
  }
}

async function relay(req: FastifyRequest, ctx: ApiContext) {
  const caller = requireCaller(req);
  const b = body.parse(req.body ?? {});
  if (b.executionOptions.destinationChainExecutionData !== undefined) {
    throw new ApiError(
      400,
      'INVALID_INPUT_PARAMETERS',
      'invalid request: executionOptions.destinationChainExecutionData: not supported by this node; relay the call on its own chain',
    );
  }
  if (!ctx.ports || !ctx.solverPort) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
  const chains = ctx.ports;
  const solver = ctx.solverPort;
  const chainId = b.data.chainId;
  const relayer = chains.relay(chainId);
  if (!relayer) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `invalid request: data.chainId: chain ${chainId} has no gasless relay on this node`);
  const native = ctx.registry.currency(chainId, zeroAddress);
  if (!native) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `invalid request: data.chainId: chain ${chainId} has no native currency configured to price gas`);
  const wallet = ctx.ledger.balances.sponsorOf(caller.id);
  if (!wallet) throw new ApiError(403, 'NO_SPONSOR_WALLET', 'no app balance sponsors this API key: link a sponsor wallet first (POST /app-balance/link)');

  const terms: RelayTerms = {
    to: getAddress(b.data.to),
    data: b.data.data as `0x${string}`,
    value: BigInt(b.data.value),
    authorizationList: (b.data.authorizationList ?? []).map((a) => ({
      chainId: a.chainId,
      address: getAddress(a.address),
      nonce: a.nonce,
      yParity: a.yParity,
      r: a.r as `0x${string}`,
      s: a.s as `0x${string}`,
    })),
  };
  // A replay of the same body is refused before it costs a simulation.
  const id = relayRequestId(chainId, terms);
  if (ctx.ledger.requests.get(id)) throw new ApiError(409, 'ALREADY_SUBMITTED', `this call was relayed already (request ${id}); a replay is refused`);

  // A bad value is refused before it costs a simulation, and before anything is recorded or held.
  const nativeUsdPrice = await ctx.prices.usdPrice(native);
  const aboveCap = relayValueAboveCap(terms.value, chainId, ctx.registry.chain(chainId) ?? {}, native.decimals, nativeUsdPrice);
  if (aboveCap) throw new ApiError(400, 'RELAY_VALUE_TOO_HIGH', `invalid request: ${aboveCap}`);

  let simulation;
  try {
    simulation = await relayer.simulateRelay(terms);
  } catch (e) {
    if (!(e instanceof RelayRefusedError)) throw e;
    const status = e.errorCode === 'RPC_UNAVAILABLE' ? 503 : e.errorCode === 'AUTHORIZATION_USED' ? 409 : 400;
    throw new ApiError(status, e.errorCode, e.message);
  }
  // The solver's native balance, with what its payouts are promised (admitRelay checks the relay
  // leaves them covered, in the transaction that records it).
  const solverWallet = chains.wallet(chainId);
  if (!solverWallet) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `invalid request: data.chainId: chain ${chainId} has no solver wallet on this node`);
  let solverNative: HeldRead;
  try {
    solverNative = await readHeld(ctx.ledger, chainId, zeroAddress, () => solverWallet.balanceOf(solverWallet.solver, zeroAddress));
  } catch {
    // The RPC's error may name the provider URL: never echoed.
    throw new ApiError(503, 'RPC_UNAVAILABLE', `chain ${chainId} cannot be read now to check the solver's balance; try again`);
  }
  // A refusal is a GaslessRelayError: its code's status is the API's (errors.ts).
  const { requestId } = await solver.admitRelay({
    chainId,
    terms,
    simulation,
    sponsor: { wallet, apiKeyId: caller.id },
    referrer: b.executionOptions.referrer || null,
    subsidizeFees: b.executionOptions.subsidizeFees,
    nativeUsdPrice,
    nativeDecimals: native.decimals,
    valueSpreadBps: ctx.config.fees.swapSpreadBps,
    solverNative,
    now: ctx.now(),
  });
  return { message: 'Transaction submitted', requestId };
}
