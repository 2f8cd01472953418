import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { apiAddress, canonicalAddress } from '../../chains/address.ts';
import type { Currency } from '../../config/registry.ts';
import { buildQuote } from '../../quote/quote.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { amountParam, chainIdParam } from '../validate.ts';

// The reference resources: what chains and currencies this node serves, each route's limits, and
// prices. Read from the config and the chains' balances; nothing here writes.

function currencyRecord(c: Currency) {
  return {
    chainId: c.chainId,
    address: apiAddress(c.kind, c.address),
    symbol: c.symbol,
    name: c.name,
    decimals: c.decimals,
    vmType: c.kind,
    metadata: { logoURI: c.logoURI ?? '', verified: true, isNative: c.native },
  };
}

const csv = (v: unknown) => (typeof v === 'string' ? v.split(',').filter(Boolean) : Array.isArray(v) ? v : v === undefined ? undefined : [v]);

const currencySearch = z
  .object({
    chainIds: z.preprocess(csv, z.array(chainIdParam).max(100)).optional(),
    chainId: chainIdParam.optional(),
    address: z.string().max(128).optional(),
    term: z.string().max(100).optional(),
    symbol: z.string().max(50).optional(),
    limit: z.coerce.number().int().min(1).max(100).default(20),
  })
  .strict();

const routeQuery = z
  .object({
    originChainId: chainIdParam,
    destinationChainId: chainIdParam,
    currency: z.string().max(128).optional(),
    user: z.string().max(128).optional(),
  })
  .strict();

const priceQuery = z.object({
  user: z.string().max(128).optional(),
  recipient: z.string().max(128).optional(),
  originChainId: chainIdParam,
  destinationChainId: chainIdParam,
  originCurrency: z.string().max(128),
  destinationCurrency: z.string().max(128),
  amount: amountParam,
  tradeType: z.enum(['EXACT_INPUT', 'EXACT_OUTPUT', 'EXPECTED_OUTPUT']).default('EXACT_INPUT'),
});

const tokenPriceQuery = z.object({ chainId: chainIdParam, address: z.string().max(128) }).strict();

export function referenceRoutes(app: FastifyInstance, ctx: ApiContext) {
  const { registry } = ctx;

  app.get('/chains', async () => ({
    chains: [...registry.chains.values()].map((chain) => {
      const adapter = ctx.adapters?.get(chain.id);
      const currencies = registry.currenciesOf(chain.id);
      const native = currencies.find((c) => c.native)!;
      return {
        id: chain.id,
        name: chain.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, ''),
        displayName: chain.name,
        httpRpcUrl: chain.rpcUrl ?? (chain.kind === 'exchange' ? chain.exchangeUrl : ''),
        explorerUrl: chain.explorerUrl ?? '',
        vmType: chain.kind,
        depositEnabled: chain.depositEnabled,
        currency: { ...currencyRecord(native), id: native.symbol.toLowerCase(), supportsBridging: true },
        erc20Currencies: currencies
          .filter((c) => !c.native)
          .map((c) => ({ ...currencyRecord(c), id: c.symbol.toLowerCase(), supportsBridging: true })),
        contracts: chain.kind === 'evm' ? { depository: chain.depository, filler: chain.filler } : chain.kind === 'svm' ? { vault: chain.vault } : {},
        protocol: { v2: { depository: adapter?.depositAddress ?? (chain.kind === 'evm' ? chain.depository : chain.kind === 'svm' ? chain.vault : '') } },
        solverAddresses: adapter ? [adapter.solver] : [],
      };
    }),
  }));

  const searchCurrencies = async (input: unknown) => {
    const q = currencySearch.parse(input ?? {});
    const chains = q.chainIds ?? (q.chainId !== undefined ? [q.chainId] : [...registry.chains.keys()]);
    const term = q.term?.toLowerCase();
    const out = chains.flatMap((id) =>
      registry.currenciesOf(id).filter((c) => {
        if (q.address !== undefined && canonicalAddress(c.kind, q.address) !== c.address) return false;
        if (q.symbol !== undefined && c.symbol.toLowerCase() !== q.symbol.toLowerCase()) return false;
        if (term !== undefined && !c.symbol.toLowerCase().includes(term) && !c.name.toLowerCase().includes(term)) return false;
        return true;
      }),
    );
    return out.slice(0, q.limit).map(currencyRecord);
  };
  app.get('/currencies/v2', (req) => searchCurrencies(req.query));
  app.post('/currencies/v2', (req) => searchCurrencies(req.body));

  // Per route: whether it is open, and how much the solver can carry now (its spendable
  // inventory on the destination, less what the ledger has promised).
  app.get('/config/v2', async (req) => {
    const q = routeQuery.parse(req.query ?? {});
    const origin = registry.chain(q.originChainId);
    const dest = registry.chain(q.destinationChainId);
    if (!origin) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `originChainId ${q.originChainId} is not a supported chain`);
    if (!dest) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `destinationChainId ${q.destinationChainId} is not a supported chain`);
    const cin = q.currency === undefined ? registry.native(origin.id) : registry.currency(origin.id, q.currency);
    if (!cin) throw new ApiError(400, 'UNSUPPORTED_CURRENCY', `currency ${q.currency} is not supported on chain ${origin.id}`);
    const cout = registry.currenciesOf(dest.id).find((c) => c.native === cin.native && c.symbol === cin.symbol);
    const destAdapter = ctx.adapters?.get(dest.id);
    const solverBalance = cout && destAdapter ? await destAdapter.balance(cout.address) : 0n;
    const user = q.user !== undefined ? canonicalAddress(origin.kind, q.user) : undefined;
    if (q.user !== undefined && user === undefined) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `user: is not an address on chain ${origin.id}`);
    const userBalance = user && ctx.adapters ? await ctx.adapters.get(origin.id)!.balanceOf(user, cin.address) : undefined;
    const max = solverBalance > 0n ? solverBalance : 0n;
    return {
      enabled: Boolean(cout && destAdapter && origin.depositEnabled && origin.id !== dest.id),
      currency: currencyRecord(cin),
      solver: { address: destAdapter?.solver ?? null, balance: max.toString(), capacityPerRequest: max.toString() },
      user: userBalance === undefined ? null : { balance: userBalance.toString(), maxBridgeAmount: (userBalance < max ? userBalance : max).toString() },
    };
  });

  // A quote without steps: what the user would receive, and the fees, without creating a request.
  const price = async (input: unknown) => {
    if (!ctx.adapters) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    const q = priceQuery.parse(input ?? {});
    const origin = registry.chain(q.originChainId);
    const dest = registry.chain(q.destinationChainId);
    // Without a user, price for the solver's own address on each side (any valid address will do).
    const user = q.user ?? (origin && ctx.adapters.get(origin.id)?.solver) ?? '';
    const recipient = q.recipient ?? (dest && origin && dest.kind !== origin.kind ? ctx.adapters.get(dest.id)?.solver : undefined);
    const quote = await buildQuote(
      { ...q, user, recipient },
      { config: ctx.config, registry, adapters: ctx.adapters, prices: ctx.prices, solver: ctx.solver },
    );
    const { fees, details } = quote.response as { fees: unknown; details: unknown };
    return { fees, details };
  };
  app.get('/price', (req) => price(req.query));
  app.post('/price', (req) => price(req.body));

  app.get('/currencies/token/price', async (req) => {
    const q = tokenPriceQuery.parse(req.query ?? {});
    const c = registry.currency(q.chainId, q.address);
    if (!c) throw new ApiError(404, 'UNSUPPORTED_CURRENCY', `currency ${q.address} is not known on chain ${q.chainId}`);
    // A decimal string: USD values never pass through floats here.
    return { price: await ctx.prices.usdPrice(c) };
  });
}
