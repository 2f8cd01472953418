import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ChainIntake, ChainProfile, DepositSteps } from '../../chains/ports.ts';
import { Registry, type Currency } from '../../config/registry.ts';
import type { ChainConfig } from '../../config/schema.ts';
import { usdValue } from '../../lib/money.ts';
import { buildQuote, QuoteError } from '../../quote/quote.ts';
import { PriceUnavailableError } from '../../quote/prices.ts';
import type { ApiContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { amountParam, boundedArray, chainIdParam } from '../validate.ts';

// The reference resources: what chains and currencies this node serves, each route's limits, and
// prices. Read from the config and the chains' balances; nothing here writes.

/** A currency's id in the hosted API's sense (`usdc`, `eth`): its symbol in lower case. */
export const currencyId = (c: Currency) => c.symbol.toLowerCase();

function currencyRecord(c: Currency, profile: ChainProfile) {
  return {
    chainId: c.chainId,
    address: profile.codec.api(c.address),
    symbol: c.symbol,
    name: c.name,
    decimals: c.decimals,
    vmType: profile.vmType,
    // Every currency the node serves is one its operator configured: verified, and on the default list.
    metadata: { logoURI: c.logoURI ?? '', verified: true, isNative: c.native },
  };
}

const csv = (v: unknown) => (typeof v === 'string' ? v.split(',').filter(Boolean) : Array.isArray(v) ? v : v === undefined ? undefined : [v]);
const bool = z.preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean());

// The hosted search's parameters. Flags about sources the node does not have (external search)
// are accepted and change nothing: every currency is the operator's own.
const currencySearch = z
  .object({
    chainIds: z.preprocess(csv, boundedArray(chainIdParam, 100)).optional(),
    chainId: chainIdParam.optional(),
    address: z.string().max(128).optional(),
    term: z.string().max(100).optional(),
    symbol: z.string().max(50).optional(),
    currencyId: z.string().max(50).optional(),
    // chainId:address pairs.
    tokens: z.preprocess(csv, boundedArray(z.string().max(200), 100)).optional(),
    defaultList: bool.optional(),
    verified: bool.optional(),
    includeAllChains: bool.optional(),
    useExternalSearch: bool.optional(),
    depositAddressOnly: bool.optional(),
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

/**
 * One chain in the hosted API's published shape. The RPC URL shown is the chain's `publicRpcUrl`
 * (empty when not configured), never the node's own `rpcUrl` or exchange URL: provider URLs carry
 * API keys. `live`: the chain's deposit steps and indexing, absent on a read-only replica.
 */
export function chainRecord(chain: ChainConfig, profile: ChainProfile, live: { deposits: DepositSteps; intake: ChainIntake } | undefined) {
  const native = new Registry([chain]).native(chain.id);
  const currencies = new Registry([chain]).currenciesOf(chain.id);
  const brief = (c: Currency) => ({ id: currencyId(c), symbol: c.symbol, name: c.name, address: profile.codec.api(c.address), decimals: c.decimals });
  const depository = live?.deposits.depositAddress ?? profile.depository;
  return {
    id: chain.id,
    name: chain.name
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, ''),
    displayName: chain.name,
    httpRpcUrl: chain.publicRpcUrl ?? '',
    explorerUrl: chain.explorerUrl ?? '',
    explorerPaths: null,
    depositEnabled: chain.depositEnabled,
    tokenSupport: 'Limited' as const,
    disabled: false,
    partialDisableLimit: 0,
    blockProductionLagging: live ? !live.intake.progress().ready : false,
    currency: { ...brief(native), supportsBridging: true },
    withdrawalFee: 0,
    depositFee: 0,
    surgeEnabled: false,
    featuredTokens: [],
    erc20Currencies: currencies
      .filter((c) => !c.native)
      .map((c) => ({
        ...brief(c),
        supportsBridging: true,
        supportsPermit: profile.permitCurrencies.has(c.address),
        withdrawalFee: 0,
        depositFee: 0,
        surgeEnabled: false,
      })),
    solverCurrencies: currencies.map(brief),
    iconUrl: null,
    logoUrl: null,
    brandColor: null,
    // relayReceiver: the contract deposits are sent to. depository and filler: the node's own names.
    contracts: profile.contracts,
    vmType: profile.vmType,
    explorerQueryParams: null,
    baseChainId: null,
    statusMessage: null,
    solverAddresses: live ? [live.deposits.solver] : [],
    tags: [],
    protocol: { v2: { chainId: String(chain.id), depository, depositoryVault: null } },
  };
}

// referrer: the public SDK's configureDynamicChains sends its `source` as one on every GET /chains; it changes nothing
// here (the answer is the same for every caller), and refusing it left an integrator's client without chains.
const chainsQuery = z.object({ includeChains: z.string().max(2000).optional(), referrer: z.string().max(200).optional() }).strict();
const liquidityQuery = z.object({ chainId: chainIdParam }).strict();

export function referenceRoutes(app: FastifyInstance, ctx: ApiContext) {
  const { registry } = ctx;
  const profile = (chainId: number) => ctx.chains.profile(chainId)!;
  const live = (chainId: number) => {
    const deposits = ctx.ports?.deposits(chainId);
    const intake = ctx.ports?.intake(chainId);
    return deposits && intake ? { deposits, intake } : undefined;
  };
  const record = (c: Currency) => currencyRecord(c, profile(c.chainId));

  app.get('/chains', async (req) => {
    const q = chainsQuery.parse(req.query ?? {});
    const only = q.includeChains?.split(',').filter(Boolean).map(Number);
    return { chains: [...registry.chains.values()].filter((c) => !only || only.includes(c.id)).map((c) => chainRecord(c, profile(c.id), live(c.id))) };
  });

  // The solver's spendable balance of each currency on a chain (what it can pay out there now).
  app.get('/chains/liquidity', async (req) => {
    const q = liquidityQuery.parse(req.query ?? {});
    const chain = registry.chain(q.chainId);
    if (!chain) throw new ApiError(400, 'UNSUPPORTED_CHAIN', `chainId ${q.chainId} is not a supported chain`);
    const costs = ctx.ports?.costs(chain.id);
    if (!costs) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    const liquidity = await Promise.all(
      registry.currenciesOf(chain.id).map(async (c) => {
        const held = await costs.balance(c.address);
        const balance = held > 0n ? held : 0n;
        return {
          chainId: chain.id,
          currencyId: currencyId(c),
          symbol: c.symbol,
          address: profile(chain.id).codec.api(c.address),
          decimals: c.decimals,
          balance: balance.toString(),
          amountUsd: usdValue(balance, c.decimals, await ctx.prices.usdPrice(c)),
        };
      }),
    );
    return { liquidity };
  });

  const searchCurrencies = async (input: unknown) => {
    const q = currencySearch.parse(input ?? {});
    const term = q.term?.toLowerCase();
    const tokens = q.tokens?.map((t) => {
      const [chainId, address] = t.split(':');
      const chain = registry.chain(Number(chainId));
      if (!chain || address === undefined)
        throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `invalid request: tokens: ${t} is not chainId:address of a supported chain`);
      return `${chain.id}:${profile(chain.id).codec.canonical(address)}`;
    });
    // The address in each chain's spelling, made canonical once per chain (an EVM one is a keccak), not once per currency.
    const addressOn = new Map<number, string | undefined>();
    const addressIn = (chainId: number, address: string) => {
      if (!addressOn.has(chainId)) addressOn.set(chainId, profile(chainId).codec.canonical(address));
      return addressOn.get(chainId);
    };
    const matches = (c: Currency, withAddress: boolean) => {
      if (withAddress && q.address !== undefined && addressIn(c.chainId, q.address) !== c.address) return false;
      if (q.symbol !== undefined && c.symbol.toLowerCase() !== q.symbol.toLowerCase()) return false;
      if (q.currencyId !== undefined && currencyId(c) !== q.currencyId.toLowerCase()) return false;
      if (tokens && !tokens.includes(`${c.chainId}:${c.address}`)) return false;
      if (term !== undefined && !c.symbol.toLowerCase().includes(term) && !c.name.toLowerCase().includes(term)) return false;
      // Only chains that offer deposit addresses (EVM chains with a deposit-address factory).
      if (q.depositAddressOnly && !profile(c.chainId).depositAddresses) return false;
      // Every currency here is the operator's own (verified, on the default list): those flags narrow nothing.
      return true;
    };
    // Each chain once: a chain named again would be searched and listed again.
    const chains = [...new Set(q.chainIds ?? (q.chainId !== undefined ? [q.chainId] : [...registry.chains.keys()]))];
    let out = chains.flatMap((id) => registry.currenciesOf(id).filter((c) => matches(c, true)));
    // includeAllChains: the same currency (by id) on every chain, not only the one named.
    if (q.includeAllChains && out.length) {
      const ids = new Set(out.map(currencyId));
      out = [...registry.chains.keys()].flatMap((id) => registry.currenciesOf(id).filter((c) => ids.has(currencyId(c)) && matches(c, false)));
    }
    return out.slice(0, q.limit).map(record);
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
    // currency: an id (`usdc`, as the hosted API takes it) or an address on the origin chain.
    const cin =
      q.currency === undefined
        ? registry.native(origin.id)
        : (registry.currenciesOf(origin.id).find((c) => currencyId(c) === q.currency!.toLowerCase()) ?? registry.currency(origin.id, q.currency));
    if (!cin) throw new ApiError(400, 'UNSUPPORTED_CURRENCY', `currency ${q.currency} is not supported on chain ${origin.id}`);
    const cout = registry.currenciesOf(dest.id).find((c) => c.native === cin.native && c.symbol === cin.symbol);
    const destCosts = ctx.ports?.costs(dest.id);
    const solverBalance = cout && destCosts ? await destCosts.balance(cout.address) : 0n;
    const user = q.user !== undefined ? profile(origin.id).codec.canonical(q.user) : undefined;
    if (q.user !== undefined && user === undefined) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', `user: is not an address on chain ${origin.id}`);
    const userBalance = user && ctx.ports ? await ctx.ports.costs(origin.id)!.balanceOf(user, cin.address) : undefined;
    const max = solverBalance > 0n ? solverBalance : 0n;
    const enabled = Boolean(cout && destCosts && origin.depositEnabled && origin.id !== dest.id);
    const maxBridgeAmount = userBalance === undefined ? undefined : userBalance < max ? userBalance : max;
    // fee: the relayer fee (gas + service, in the currency) the node would charge for bridging the
    // user's maximum, or one whole unit without a user: priced exactly as /price prices it.
    const feeAmount = maxBridgeAmount !== undefined && maxBridgeAmount > 0n ? maxBridgeAmount : 10n ** BigInt(cin.decimals);
    const fee = enabled && cout ? await bridgeFee(q.user, origin.id, dest.id, cin.address, cout.address, feeAmount) : undefined;
    return {
      enabled,
      currency: record(cin),
      solver: { address: ctx.ports?.deposits(dest.id)?.solver ?? null, balance: max.toString(), capacityPerRequest: max.toString() },
      // Without a user, no user object (the published type has it optional, never null).
      ...(userBalance === undefined ? {} : { user: { balance: userBalance.toString(), maxBridgeAmount: maxBridgeAmount!.toString() } }),
      ...(fee === undefined ? {} : { fee }),
      supportsExternalLiquidity: false,
    };
  });

  // A quote without steps: what the user would receive, and the fees, without creating a request.
  const price = async (input: unknown) => {
    const chains = ctx.ports;
    if (!chains) throw new ApiError(503, 'READ_ONLY', 'this API replica serves reads only');
    const q = priceQuery.parse(input ?? {});
    const origin = registry.chain(q.originChainId);
    const dest = registry.chain(q.destinationChainId);
    // Without a user, price for the solver's own address on each side (any valid address will do).
    const user = q.user ?? (origin && chains.deposits(origin.id)?.solver) ?? '';
    const recipient = q.recipient ?? (dest && origin && profile(dest.id).vmType !== profile(origin.id).vmType ? chains.deposits(dest.id)?.solver : undefined);
    const quote = await buildQuote({ ...q, user, recipient }, { config: ctx.config, registry, chains, prices: ctx.prices, solver: ctx.solver });
    const { fees, details } = quote.response as { fees: unknown; details: unknown };
    return { fees, details };
  };
  app.get('/price', (req) => price(req.query));

  // The relayer fee of a bridge, as /price answers it; undefined when the node cannot price it now
  // (no price, no capacity): the published field is optional, and a guess is worse than none.
  const bridgeFee = async (
    user: string | undefined,
    originChainId: number,
    destinationChainId: number,
    originCurrency: string,
    destinationCurrency: string,
    amount: bigint,
  ) => {
    try {
      const { fees } = (await price({
        user,
        originChainId,
        destinationChainId,
        originCurrency,
        destinationCurrency,
        amount: amount.toString(),
        tradeType: 'EXACT_INPUT',
      })) as {
        fees: { relayer: { amount: string } };
      };
      return fees.relayer.amount;
    } catch (e) {
      if (e instanceof ApiError || e instanceof QuoteError || e instanceof PriceUnavailableError) return undefined;
      throw e;
    }
  };
  app.post('/price', (req) => price(req.body));

  const tokenPrice = async (query: unknown) => {
    const q = tokenPriceQuery.parse(query ?? {});
    const c = registry.currency(q.chainId, q.address);
    if (!c) throw new ApiError(404, 'UNSUPPORTED_CURRENCY', `currency ${q.address} is not known on chain ${q.chainId}`);
    return ctx.prices.usdPrice(c);
  };
  // The published type has a number here (a display value, never used for money: the node's own
  // arithmetic reads the decimal string). v2 answers the exact decimal string.
  app.get('/currencies/token/price', async (req) => ({ price: Number(await tokenPrice(req.query)) }));
  app.get('/currencies/token/price/v2', async (req) => ({ price: await tokenPrice(req.query) }));
}
