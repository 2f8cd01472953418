import { isIP } from 'node:net';
import { z } from 'zod';
import { Secret } from './secret.ts';
import { evmSignerSource, svmSignerSource } from './signerSchema.ts';
import type { Address } from 'viem';
import { canonicalAddress, describeAddressKind, EXCHANGE_PERPS_USD } from '../kinds/address.ts';

const evmAddress = z
  .string()
  .refine((s) => canonicalAddress('evm', s) !== undefined, `must be ${describeAddressKind('evm')}`)
  .transform((s) => canonicalAddress('evm', s) as Address);

const svmAddress = z
  .string()
  .refine((s) => canonicalAddress('svm', s) !== undefined, `must be ${describeAddressKind('svm')}`)
  .transform((s) => canonicalAddress('svm', s)!);

// USD prices are decimal strings so that no float ever enters money arithmetic.
const usd = z.string().regex(/^\d+(\.\d+)?$/, 'must be a decimal string such as "3000.25"');
// A currency's price: a zero price gives the currency away (and no deposit could ever pay an
// EXACT_OUTPUT quote's output).
const positiveUsd = usd.refine((s) => /[1-9]/.test(s), 'must be a positive decimal string such as "3000.25" (a zero price gives the currency away)');

const priceFeed = z
  .object({
    // A Chainlink-style aggregator (latestRoundData) giving the currency's USD price.
    chainId: z.number().int().positive(),
    aggregator: evmAddress,
    // An answer older than this stops quoting (and postpones fills) rather than price wrong.
    maxAgeSeconds: z.number().int().min(1).default(3600),
  })
  .strict();

const currencyFields = {
  symbol: z.string().min(1),
  name: z.string().min(1),
  decimals: z.number().int().min(0).max(36),
  // The price when there is no feed (and the fallback description of the currency's worth).
  usdPrice: positiveUsd,
  priceFeed: priceFeed.optional(),
  logoURI: z.string().optional(),
};
const nativeCurrency = z.object(currencyFields).strict();

const keySource = z
  .object({
    // Name of the environment variable holding the private key.
    env: z.string().min(1).optional(),
    // Path of a file whose content is the private key.
    file: z.string().min(1).optional(),
  })
  .strict()
  .refine((k) => Boolean(k.env) !== Boolean(k.file), 'give exactly one of "env" or "file"');

// One RPC endpoint of a chain. Its URL often carries an API key: it never reaches a log, error,
// metric label or API answer; the node names the provider by `name` (default: its position, "p0").
// Provider URLs: HTTP everywhere; websocket JSON-RPC on EVM chains only (a Solana node's websocket
// serves subscriptions, not requests). The value never enters the message (it carries keys).
const schemeOf = (s: string) => /^([a-z][a-z0-9+.-]*):/i.exec(s)?.[1]?.toLowerCase();
const httpUrl = z
  .string()
  .url()
  .refine((s) => ['http', 'https'].includes(schemeOf(s) ?? ''), 'must be an http:// or https:// URL');
const evmRpcUrl = z
  .string()
  .url()
  .refine((s) => ['http', 'https', 'ws', 'wss'].includes(schemeOf(s) ?? ''), 'must be an http://, https://, ws:// or wss:// URL');

const rpcProvider = z
  .object({
    url: httpUrl,
    name: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,32}$/, 'must be 1-32 letters, digits, "_", "." or "-" (it labels metrics)')
      .optional(),
    // Share of the reads this provider takes among the healthy ones.
    weight: z.number().int().min(1).max(1_000).default(1),
    // Request budget: calls per second (0: no limit) and requests (batches) in flight.
    maxRps: z.number().min(0).default(0),
    maxConcurrent: z.number().int().min(1).max(1_024).default(32),
    // any: reads, quorum reads and broadcasts; read: no broadcasts; send: broadcasts only;
    // fallback: used only while no other provider for the call is usable.
    role: z.enum(['any', 'read', 'send', 'fallback']).default('any'),
  })
  .strict();

// An EVM chain's provider: also a websocket endpoint (one connection, JSON-RPC batches over it).
const evmRpcProvider = rpcProvider.extend({ url: evmRpcUrl }).strict();

const chainFields = {
  id: z.number().int().positive(),
  name: z.string().min(1),
  // A single endpoint (kept for existing configs: a list of one); `rpc` lists several. Either is
  // enough: the loader fills `rpcUrl` from `rpc[0]` and `rpc` from `rpcUrl`.
  rpcUrl: httpUrl,
  rpc: z.array(rpcProvider).min(1).optional(),
  // Reads that decide money (a deposit's existence, "was this paid", the solver's nonce; on SVM the
  // vault's signatures, a signature's status and transaction, the finalized height a payout's
  // expiry is judged by) need this many providers agreeing; default: 2 when two or more providers
  // can read, else 1. At most the number of providers that can read.
  quorum: z.number().int().min(1).optional(),
  explorerUrl: z.string().url().optional(),
  // The RPC URL GET /chains publishes to wallets. Never rpcUrl: a provider URL carries its API key.
  publicRpcUrl: z.string().url().optional(),
  pollIntervalMs: z.number().int().min(10).default(1000),
  depositEnabled: z.boolean().default(true),
  // A private chain's requests are listed only to callers who ask for it (privateChainsToInclude).
  private: z.boolean().default(false),
  nativeCurrency,
  // The most native currency a quote's gas top-up (topupGasAmount) delivers on this chain: in USD
  // (absent: 50), and in the smallest unit when given; the lower of the two applies. The same caps
  // bound a gasless relay's value (POST /execute rawCalls): both hand out the solver's native
  // currency against a sponsor's app balance.
  maxTopupGasUsd: positiveUsd.optional(),
  maxTopupGasAmount: z
    .string()
    .regex(/^\d{1,78}$/, 'must be an integer string (the smallest unit)')
    .optional(),
};

const evmChain = z
  .object({
    ...chainFields,
    kind: z.literal('evm'),
    rpcUrl: evmRpcUrl,
    rpc: z.array(evmRpcProvider).min(1).optional(),
    depository: evmAddress,
    filler: evmAddress,
    // Deposit addresses (CREATE2 clones swept into the depository); absent: not offered on this chain.
    depositAddressFactory: evmAddress.optional(),
    // Block from which the depository is indexed on a fresh ledger (its deployment block).
    startBlock: z.number().int().min(0).default(0),
    confirmations: z.number().int().min(1).default(1),
    // Confirmations by value: a deposit worth at least minUsd (at the currency's configured
    // usdPrice) waits this many blocks, or for finality ("finalized": finalityDepth blocks) instead
    // of `confirmations`. The quote's timeEstimate follows the same table.
    confirmationsByValue: z.array(z.object({ minUsd: usd, confirmations: z.union([z.number().int().min(1), z.literal('finalized')]) }).strict()).optional(),
    // Blocks kept for reorg detection; a reorg deeper than this stops the chain's indexer.
    finalityDepth: z.number().int().min(1).default(64),
    maxLogRange: z.number().int().min(1).default(2000),
    // A fill not included after this many blocks is replaced at the same nonce with a higher fee.
    replaceAfterBlocks: z.number().int().min(1).default(3),
    // Fee limits: the most the node pays per gas (wei, a decimal string) and the same-nonce fee bumps
    // a transaction gets at most. A payout the market prices above the cap waits (unsigned: no nonce
    // is held behind it); a stuck transaction at the cap or out of bumps waits for the base fee to fall.
    maxFeePerGas: z
      .string()
      .regex(/^[0-9]{1,40}$/, 'must be an integer number of wei, as a string')
      .optional(),
    maxReplacements: z.number().int().min(0).optional(),
    // What becomes of a stuck transaction held at the cap (or out of bumps), which holds every nonce behind
    // it: 'wait' (absent: the default) keeps it until the base fee falls; 'cancel' replaces it, once it has
    // sat feeCapCancelAfterBlocks blocks past its replacement point, by a zero-value transfer to the solver
    // itself at the same nonce (21,000 gas, at most cancelMaxFeePerGas per gas; absent: the cap plus the
    // minimum replacement bump). The payout goes back to the queue and is sent again at a new nonce.
    feeCapPolicy: z.enum(['wait', 'cancel']).optional(),
    feeCapCancelAfterBlocks: z.number().int().min(1).optional(),
    cancelMaxFeePerGas: z
      .string()
      .regex(/^[0-9]{1,40}$/, 'must be an integer number of wei, as a string')
      .optional(),
    // How long a sponsored relay (POST /execute rawCalls) may wait unsigned after its admission (while the market asks
    // more than its own fee cap, or anything else keeps it from being signed) before it fails (TTL_EXPIRED), its
    // sponsor's hold released: the caller and the call's own logic move on, and a relay sent hours later is not what
    // was asked. One signed before then is not touched (its own cap's cancel owns it). Absent: 10 minutes.
    relayMaxWaitMs: z.number().int().min(1_000).max(86_400_000).optional(),
    // Margin added to gas estimates, in basis points.
    gasMarginBps: z.number().int().min(0).max(50_000).default(2_000),
    // The L1 data fee an OP-stack chain takes from each transaction beside its L2 gas (src/chains/evm/l1DataFee.ts):
    // auto prices it where the chain has the GasPriceOracle predeploy, op-stack requires it, none never prices it.
    l1DataFee: z.enum(['auto', 'op-stack', 'none']).default('auto'),
    // Margin on the oracle's upper bound, in basis points, for the L1 fees' rise between a quote and its fill.
    l1DataFeeMarginBps: z.number().int().min(0).max(100_000).default(10_000),
    // The most gas a fill's destination calls may take (QUOTED_GAS_LIMIT_EXCEEDED above it); never more
    // than one transaction may carry (EIP-7825).
    maxCallGas: z.number().int().min(21_000).max(16_777_216, 'must be at most 16,777,216: no transaction may carry more gas (EIP-7825)').default(1_000_000),
    // A deposit address is swept only when what arrived is worth more than this many times the
    // sweep's gas cost (valued at the currencies' configured usdPrice): dust costs the solver
    // nothing. Absent: 3.
    sweepMinCostMultiple: z.number().min(1).max(10_000).optional(),
    // Whether transfers to the solver on this chain fund app balances (the interface's chain 8453).
    appBalanceDeposits: z.boolean().default(false),
    // permit: the token implements EIP-2612 (usePermit quotes a signature instead of an approval).
    currencies: z.array(z.object({ ...currencyFields, address: evmAddress, permit: z.boolean().default(false) }).strict()).default([]),
  })
  .strict();

const svmChain = z
  .object({
    ...chainFields,
    kind: z.literal('svm'),
    // Deposits are transfers to this address with a memo carrying the order id.
    vault: svmAddress,
    commitment: z.enum(['confirmed', 'finalized']).default('confirmed'),
    currencies: z
      .array(z.object({ ...currencyFields, address: svmAddress, tokenProgram: z.enum(['spl-token', 'token-2022']).default('spl-token') }).strict())
      .default([]),
  })
  .strict();

const exchangeCurrency = z
  .string()
  .refine((s) => {
    const a = canonicalAddress('exchange', s);
    return a !== undefined && a.length >= 34 && a !== EXCHANGE_PERPS_USD;
  }, 'must be a spot currency of the exchange: 0x + the 16-byte tokenId (32 hex), + the hex-encoded DEX name for a named DEX')
  .transform((s) => canonicalAddress('exchange', s)!);

// The perpetuals exchange (chain 1337): its native currency is perps USD (address 32 hex zeros,
// decimals 6: micro-USD); `currencies` are its spot tokens (decimals = the token's weiDecimals).
const exchangeChain = z
  .object({
    ...chainFields,
    kind: z.literal('exchange'),
    // {exchange_url}: the exchange's POST /info and POST /exchange live under it.
    exchangeUrl: z.string().url(),
    // The request weight the node spends on the exchange a minute, its reads and actions together (Hyperliquid answers
    // 429 past 1,200 a minute per IP address; most reads weigh 20). The node's own requests take it first; the public
    // API's reads only while half of it is left. 0: no budget (an endpoint of one's own, the devnet's stand-in).
    weightPerMinute: z.number().int().min(0).default(1_200),
    // A ledger read weighs 20: polled every second, the indexer alone would spend Hyperliquid's whole minute.
    pollIntervalMs: z.number().int().min(10).default(3_000),
    // The sendAsset `exchangeChain` the exchange accepts ('Mainnet', 'Testnet').
    exchangeChain: z.string().min(1).default('Mainnet'),
    // The chain id the node signs its own actions with, and the default of the withdrawal quote's
    // signatures (the wallet overrides it with its active chain).
    signatureChainId: z.number().int().positive().default(1),
    // A transfer to the solver whose nonce has no authorization yet waits this long for one before
    // it is booked as an orphan deposit (refunded).
    orphanGraceMs: z.number().int().min(0).default(60_000),
    // What one action the solver posts costs it, in the native currency's smallest unit (USDC: 6 decimals). The
    // exchange charges no gas, but every action spends the address's action budget (10,000, plus one per USDC it
    // has traded). A refund or claim pays it out of what it returns, and one worth no more is not sent
    // (AMOUNT_TOO_LOW_TO_REFUND): anyone's dust transfer would otherwise spend an action of the budget.
    actionCost: z
      .string()
      .regex(/^\d{1,30}$/, 'must be an integer string (the smallest unit)')
      .default('100000'),
    // The exchange's activation fee, in the native currency's smallest unit (Hyperliquid: 1 USDC): the first transfer
    // to an account it does not know (never funded, or emptied and purged) costs the sender this much. A fill's quote
    // charges it as account rent when the exchange says the recipient is new; a refund, excess or claim always bears
    // it, since its recipient may empty the account before it is paid.
    activationFee: z
      .string()
      .regex(/^\d{1,30}$/, 'must be an integer string (the smallest unit)')
      .default('1000000'),
    // Not used by the exchange (it has no JSON-RPC); /chains shows the exchange URL when absent.
    rpcUrl: httpUrl.optional(),
    rpc: z.array(rpcProvider).optional(),
    nativeCurrency: nativeCurrency.default({ symbol: 'USDC', name: 'USD Coin (perps)', decimals: 6, usdPrice: '1' }),
    currencies: z.array(z.object({ ...currencyFields, address: exchangeCurrency }).strict()).default([]),
  })
  .strict();

// The fee-cap policy's settings, checked together: a cancel must be able to replace a transaction held at the cap.
function feeCapPolicyIssues(c: z.output<typeof evmChain>): [string, string][] {
  const issues: [string, string][] = [];
  const cancel = c.feeCapPolicy === 'cancel';
  if (!cancel) {
    for (const field of ['feeCapCancelAfterBlocks', 'cancelMaxFeePerGas'] as const) {
      if (c[field] !== undefined) issues.push([field, `applies only with feeCapPolicy "cancel" (feeCapPolicy is "${c.feeCapPolicy ?? 'wait'}")`]);
    }
    return issues;
  }
  if (c.maxFeePerGas === undefined && c.maxReplacements === undefined) {
    issues.push(['feeCapPolicy', '"cancel" needs maxFeePerGas or maxReplacements: without either no transaction is ever held at a cap']);
  }
  if (c.cancelMaxFeePerGas !== undefined && c.maxFeePerGas !== undefined && BigInt(c.cancelMaxFeePerGas) <= BigInt(c.maxFeePerGas)) {
    issues.push([
      'cancelMaxFeePerGas',
      `must be above maxFeePerGas (${c.maxFeePerGas}): a cancel replaces a transaction priced up to the cap, so it must bid more`,
    ]);
  }
  return issues;
}

// A chain without "kind" is an EVM chain; `rpcUrl` and `rpc` complete each other (see chainFields).
const chain = z.preprocess(
  (c) => {
    if (!c || typeof c !== 'object') return c;
    const o: Record<string, unknown> = { ...(c as Record<string, unknown>) };
    if (!('kind' in o)) o.kind = 'evm';
    const list = Array.isArray(o.rpc) ? (o.rpc as unknown[]) : undefined;
    // rpcUrl (the audit's and the price feeds' own client): the first HTTP provider, else the first (a websocket).
    const urls = (list ?? []).map((p) => (p as { url?: unknown })?.url).filter((u): u is string => typeof u === 'string');
    if (o.rpcUrl === undefined && urls.length) o.rpcUrl = urls.find((u) => /^https?:/i.test(u)) ?? urls[0];
    if (o.rpc === undefined && typeof o.rpcUrl === 'string' && o.kind !== 'exchange') o.rpc = [{ url: o.rpcUrl }];
    return o;
  },
  z.discriminatedUnion('kind', [evmChain, svmChain, exchangeChain]),
);

// Risk limits (src/solver/risk.ts): what the solver may put at stake. Absent limits do not apply.
const riskSchema = z
  .object({
    // The largest order (its deposit's USD worth) filled on any route; above it the deposit is
    // refunded with SOLVER_CAPACITY_EXCEEDED.
    maxOrderUsd: usd.optional(),
    // Per-route overrides of maxOrderUsd.
    routes: z
      .array(z.object({ originChainId: z.number().int().positive(), destinationChainId: z.number().int().positive(), maxOrderUsd: usd }).strict())
      .default([]),
    chains: z
      .array(
        z
          .object({
            chainId: z.number().int().positive(),
            // USD worth of deposits on this origin chain acted on (a fill decided) whose fill is not
            // final yet; a deposit beyond it waits (postponed, IN_FLIGHT_LIMIT).
            maxInFlightUsd: usd.optional(),
            // USD worth of fills decided on this destination chain in the last hour; a fill beyond it
            // waits (postponed, OUTFLOW_BUDGET).
            outflowUsdPerHour: usd.optional(),
          })
          .strict(),
      )
      .default([]),
    // Pauses payouts on a chain when the solver's balance there moves in a way the ledger does
    // not explain by more than toleranceUsd, until an operator resumes the chain.
    lossBreaker: z
      .object({ toleranceUsd: usd.default('10') })
      .strict()
      .optional(),
    // Wallets (any chain's address form). A deposit from a denied depositor (or not allowed, when
    // an allow list is given) fails with BLOCKED_WALLET and is not refunded automatically; a fill
    // to a denied recipient fails with BLOCKED_WALLET and is refunded.
    denyRecipients: z.array(z.string().min(1)).default([]),
    allowRecipients: z.array(z.string().min(1)).optional(),
    denyDepositors: z.array(z.string().min(1)).default([]),
    allowDepositors: z.array(z.string().min(1)).optional(),
    // Index, decide and record what the node would do, and send nothing.
    dryRun: z.boolean().default(false),
  })
  .strict()
  .default({});

// The admin API (src/admin/server.ts): its own listen address; absent port: not served.
const adminSchema = z
  .object({
    host: z.string().min(1).default('127.0.0.1'),
    port: z.number().int().min(0).max(65_535).optional(),
    // The widest block range one admin re-index reads (one getLogs call over it).
    reindexMaxBlocks: z.number().int().min(1).max(1_000_000).default(10_000),
  })
  .strict()
  .default({});

// Where the ledger lives: absent `url`, the SQLite file in dataDir (the embedded default); with it, PostgreSQL
// (src/ledger/postgres). The URL carries a password: it is held as a Secret and never logged.
const ledgerSchema = z
  .object({
    url: z
      .string()
      .regex(/^postgres(ql)?:\/\/\S+$/, 'must be a postgres://user:password@host:port/database URL')
      .transform((s) => new Secret(s))
      .optional(),
    // Bound of one call to PostgreSQL: past it the call fails (LedgerUnavailable) and the connection is dropped.
    timeoutMs: z.number().int().min(100).max(120_000).default(5_000),
    // An API replica (relay-node api) on PostgreSQL keeps the Status records it reads between their changes, told of
    // each by PostgreSQL's notifications; this bounds how old a kept record may be served (0: keep none).
    statusCacheMaxAgeMs: z.number().int().min(0).max(3_600_000).default(5_000),
  })
  .strict()
  .default({});

// A proxy the API trusts: an IPv4 or IPv6 address, or a CIDR range of either.
const proxyAddress = z.string().refine((s) => {
  const [ip, bits, ...rest] = s.split('/');
  // No IPv6 zone (fe80::1%eth0): the proxy matcher does not take one.
  const v = ip?.includes('%') ? 0 : isIP(ip ?? '');
  if (!v || rest.length) return false;
  return bits === undefined || (/^[0-9]{1,3}$/.test(bits) && Number(bits) <= (v === 4 ? 32 : 128));
}, 'must be an IP address or a CIDR range (e.g. 10.0.0.0/8)');

export const configSchema = z
  .object({
    dataDir: z.string().min(1).default('./data'),
    ledger: ledgerSchema,
    api: z
      .object({
        host: z.string().min(1).default('127.0.0.1'),
        port: z.number().int().min(0).max(65_535).default(4000),
        // Calls per minute, per API key and per client IP without one (429 beyond). A presented key
        // that is not valid costs the caller's IP bucket a call (key guessing is limited).
        rateLimit: z
          .object({
            perKeyPerMinute: z.number().int().min(1).default(6_000),
            // Of those, quotes, prices and liquidity reads (the routes anonymousQuotesPerMinute counts) per API key: each
            // reads chains on the solver's RPC budget, and a quote is stored for its life.
            pricedPerKeyPerMinute: z.number().int().min(1).default(1_200),
            unauthenticatedPerMinute: z.number().int().min(1).default(600),
            // The same, per network (an IPv4 /24, an IPv6 /48, whose every /64 has a bucket of its own above). Absent:
            // ten times unauthenticatedPerMinute.
            unauthenticatedPerNetworkPerMinute: z.number().int().min(1).optional(),
            // Quotes, prices and liquidity (/quote, /price, /config/v2, /chains/liquidity) without an API key,
            // per client IP (each costs RPC calls).
            anonymousQuotesPerMinute: z.number().int().min(1).default(60),
            // The same, all callers without a key together: client addresses are cheap (a /48 of IPv6 holds 65,536 /64s).
            anonymousQuotesPerMinuteTotal: z.number().int().min(1).default(600),
            // Signatures recovered (link, unlink, claim, authorize: milliseconds of the event loop each) per API key, or per
            // client IP without one, and of all callers without a key together (src/api/routes/signatureChecks.ts).
            signatureChecksPerMinute: z.number().int().min(1).default(20),
            signatureChecksPerMinuteTotal: z.number().int().min(1).default(600),
            // /health, /ready, /metrics per client IP (probes need far less).
            probesPerMinute: z.number().int().min(1).default(600),
            // Status stream: open websocket connections per client IP, and messages per connection and per IP.
            wsConnectionsPerIp: z.number().int().min(1).default(20),
            wsMessagesPerConnectionPerMinute: z.number().int().min(1).default(120),
            wsMessagesPerIpPerMinute: z.number().int().min(1).default(600),
          })
          .strict()
          .default({}),
        // Whose X-Forwarded-For gives the client address (what every per-IP limit counts by). false
        // (the default): nobody's, the peer address counts, as a client can write any header. A list
        // of proxy addresses or CIDRs: when the peer is one of them, the client is the last address
        // in X-Forwarded-For that is not. No hop count: it cannot tell a proxy from a client that
        // reaches the node directly (Fastify 5 refuses to trust one).
        trustProxy: z.union([z.literal(false), z.array(proxyAddress).min(1).max(64)]).default(false),
        // Receiving one request: its headers within headersTimeoutMs, all of it within requestTimeoutMs,
        // else 408 and the connection closed (a client that sends Content-Length and trickles its body
        // would otherwise hold a socket forever). Answering is not bounded here (listing.timeoutMs is).
        headersTimeoutMs: z.number().int().min(500).max(600_000).default(15_000),
        requestTimeoutMs: z.number().int().min(500).max(600_000).default(30_000),
        // Open connections per client address (an IPv6 client by its /64; a trusted proxy is not counted): one past it
        // closes the address's oldest idle keep-alive connection, or is refused when all are busy (src/api/connectionCap.ts).
        connectionsPerIp: z.number().int().min(1).default(256),
        // Open connections of all clients together, trusted proxies' included: one past it is treated as one past
        // connectionsPerIp (the oldest idle one closed for it, else refused). Absent: half the process's file descriptor
        // limit, at most 10,000; the other half is the node's own (RPC, the ledger, webhooks).
        maxConnections: z.number().int().min(1).optional(),
        // Serve /metrics and /ready on their own address (a private interface) instead of the public one.
        metricsListen: z
          .object({ host: z.string().min(1).default('127.0.0.1'), port: z.number().int().min(0).max(65_535) })
          .strict()
          .optional(),
        // Request listings (GET /requests/v2, /requests/v3): their cost bound, and the worker threads
        // (own read-only ledger connections) that run them off the node's event loop.
        listing: z
          .object({
            workers: z.number().int().min(1).max(16).default(2),
            maxGroups: z.number().int().min(1).max(50).default(5),
            maxValuesPerField: z.number().int().min(1).max(500).default(20),
            maxFilterValues: z.number().int().min(1).max(5_000).default(100),
            maxFiltersLength: z.number().int().min(64).max(65_536).default(4_096),
            // A listing that runs longer is cut (its worker replaced) and answered 503.
            timeoutMs: z.number().int().min(100).default(10_000),
            // Listings one caller (its API key, else its address) may have in progress at once (one that timed out until
            // its worker has stopped running it); past it, 429: the workers and their queue are shared, and one
            // caller's heavy listings would hold them all. Below `workers`, one caller never holds every worker.
            perCaller: z.number().int().min(1).default(1),
            // Linux thread niceness of the listing workers (0-19): behind the main thread when cores are short.
            workerNice: z.number().int().min(0).max(19).default(10),
          })
          .strict()
          .default({}),
      })
      .strict()
      .default({}),
    log: z
      .object({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info') })
      .strict()
      .default({}),
    // Required to run the node; a read-only API replica (`relay-node api`) needs only solverAddress.
    solverKey: keySource.optional(),
    // The solver's EVM address, for a replica without the key (checked against the key when both are given).
    solverAddress: evmAddress.optional(),
    // Signs the depository's call requests (refunds); the solver key when absent.
    allocatorKey: keySource.optional(),
    // Signers (issue 17): instead of solverKey / allocatorKey / svmSolverKey, a key kept out of the config's
    // plain sight: an encrypted keystore file, or (EVM) a remote JSON-RPC signer holding the key.
    solverSigner: evmSignerSource.optional(),
    allocatorSigner: evmSignerSource.optional(),
    svmSolverSigner: svmSignerSource.optional(),
    fees: z
      .object({
        relayerServiceBps: z.number().int().min(0).max(5_000).default(10),
        // The node's margin on swaps, taken off the price ratio.
        swapSpreadBps: z.number().int().min(0).max(5_000).default(30),
        // Slippage a swap tolerates when the quote does not say.
        defaultSlippageBps: z.number().int().min(0).max(5_000).default(50),
      })
      .strict()
      .default({}),
    quote: z
      .object({
        // How long a quote may be deposited against.
        ttlSeconds: z.number().int().min(10).default(600),
        // How long after the quote the fill may still happen (the order's output deadline).
        fillDeadlineSeconds: z.number().int().min(60).default(3600),
        // A quote nothing happened to (no deposit, signature, payout or event) is deleted this long after it expired.
        pruneGraceSeconds: z.number().int().min(0).default(3_600),
        pruneIntervalSeconds: z.number().int().min(1).default(300),
      })
      .strict()
      // A deposit made as its quote ends must still be fillable: at or past the fill deadline it is refunded at once.
      .refine((q) => q.ttlSeconds < q.fillDeadlineSeconds, {
        message: 'must be less than quote.fillDeadlineSeconds (a deposit made as its quote ends would be refunded at once)',
        path: ['ttlSeconds'],
      })
      .default({}),
    fastFill: z
      .object({
        // A fast fill's hold becomes a permanent debit when no deposit lands within this time.
        holdSeconds: z.number().int().min(1).default(3600),
      })
      .strict()
      .default({}),
    // Status events: signed webhooks (retried with exponential backoff and full jitter, then dead)
    // and the websocket status stream.
    events: z
      .object({
        // A delivery succeeds on a 2xx answer within this time.
        deliveryTimeoutMs: z.number().int().min(100).max(120_000).default(10_000),
        // Attempts before a delivery is dead; with the defaults the schedule spans about 4-5 hours.
        maxAttempts: z.number().int().min(1).max(10_000).default(20),
        // Retry n waits a random time in [0, min(backoffMaxMs, backoffBaseMs * 2^(n-1))].
        backoffBaseMs: z.number().int().min(1).default(1_000),
        backoffMaxMs: z.number().int().min(1).default(3_600_000),
        // Deliveries in flight at once (never two of the same request to the same webhook).
        concurrency: z.number().int().min(1).max(256).default(16),
        // Deliveries of one API key's webhooks in flight at once (absent: a quarter of concurrency, at least
        // one): a key whose receivers hold every delivery until it times out cannot take every slot.
        perKeyConcurrency: z.number().int().min(1).max(256).optional(),
        // The deliverer also polls (deliveries written by the CLI, retries coming due).
        pollIntervalMs: z.number().int().min(10).default(1_000),
        // Webhook targets on loopback, private, link-local, unique-local or CGNAT addresses are refused
        // (checked when connecting, after DNS). Only a devnet or a test turns this on.
        allowPrivateTargets: z.boolean().default(false),
        // Live webhooks per API key.
        maxWebhooksPerKey: z.number().int().min(1).max(1_000).default(10),
        // POST /webhooks/:id/redeliver calls per API key per minute.
        redeliverPerMinute: z.number().int().min(1).default(6),
        // Dead deliveries one {dead: true} redelivery re-queues at most (the answer's `more` says more are left): a
        // key with a million dead cannot make one call rewrite them all while the node waits on the ledger.
        redeliverDeadChunk: z.number().int().min(1).max(100_000).default(1_000),
        // Websocket: a heartbeat message and ping every N seconds; a client that missed a pong is dropped.
        heartbeatSeconds: z.number().int().min(1).default(30),
        // Websocket: messages queued for a client that does not read fast enough before it is closed (4008).
        wsMaxBufferedMessages: z.number().int().min(1).default(1_000),
        // Websocket: bytes the socket may hold unsent before messages queue instead.
        wsMaxBufferedBytes: z.number().int().min(1).default(1_048_576),
      })
      .strict()
      .default({}),
    // The retirement of GET /requests/v2: dates (ISO), the monthly stepped limit, the links.
    requestsV2: z
      .object({
        deprecatedAt: z.string().datetime({ offset: true }).or(z.string().date()).default('2026-07-22'),
        throttledFrom: z.string().datetime({ offset: true }).or(z.string().date()).default('2026-09-01'),
        sunsetAt: z.string().datetime({ offset: true }).or(z.string().date()).default('2026-11-24'),
        // Calls per minute per caller in each month from throttledFrom; the last stage holds until the sunset.
        monthlyLimits: z.array(z.number().int().min(1)).min(1).default([600, 120, 30]),
        // Absent: this node's own /requests/v3 and /requests/v2/migration-guide, as links relative to the request.
        successor: z.string().url().optional(),
        migrationGuide: z.string().url().optional(),
      })
      .strict()
      .default({}),
    // Deposit addresses: how long the watcher looks at a quoted address, and the reindex operation
    // (unauthenticated) that looks at one now: how old a request it still reaches, how often.
    depositAddresses: z
      .object({
        watchHours: z.number().int().min(1).default(24),
        // Deposit addresses live at once (quoted within watchHours), which the watcher reads on every block: quotes
        // without an API key share one cap node-wide, each key has its own; 429 beyond.
        maxWatchedAnonymous: z.number().int().min(0).default(2_000),
        maxWatchedPerKey: z.number().int().min(0).default(20_000),
        reindexMaxAgeDays: z.number().int().min(1).default(30),
        reindexPerAddressPerMinute: z.number().int().min(1).default(2),
        // Each client's share of the node-wide budget (by IP, as the API's other per-address limits): one client
        // cannot take it all and keep every other user from recovering a missed deposit.
        reindexPerClientPerMinute: z.number().int().min(1).default(20),
        reindexPerMinute: z.number().int().min(1).default(120),
      })
      .strict()
      .default({}),
    // SIGTERM: drain (stop quoting, sign and broadcast what is recorded) for at most this long.
    shutdown: z
      .object({ drainTimeoutMs: z.number().int().min(0).max(600_000).default(30_000) })
      .strict()
      .default({}),
    // Active/standby (docs: README "Active/standby"): several `relay-node start` on one ledger, one
    // acting on the chains under a lease in the ledger, the others serving the API and waiting.
    // Disabled: the node acts at once and never touches the lease (one node per ledger).
    ha: z
      .object({
        enabled: z.boolean().default(false),
        // How long a lease runs without a renewal: the bound on a takeover after the leader dies.
        leaseMs: z.number().int().min(500).max(600_000).default(15_000),
        // How often the leader renews (and a standby tries to take the lease): at most a third of leaseMs.
        renewMs: z.number().int().min(50).max(200_000).default(3_000),
        // This node's name in the lease (default: host name and process id).
        nodeId: z.string().min(1).max(200).optional(),
      })
      .strict()
      .default({}),
    risk: riskSchema,
    admin: adminSchema,
    // Inventory that comes back (src/solver/withdrawals.ts): per chain and currency, the inventory
    // the operator aims at (the solver's wallet plus what the depository owes it, in smallest units;
    // relay_inventory_skew compares the two) and the depository balance owed to the solver above which
    // the node withdraws it to the solver's wallet on its own.
    inventory: z
      .object({
        targets: z
          .array(
            z
              .object({
                chainId: z.number().int().positive(),
                currency: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be the currency address (the zero address for native)'),
                target: z
                  .string()
                  .regex(/^[0-9]{1,78}$/, 'must be an integer in the smallest unit')
                  .optional(),
                withdrawAbove: z
                  .string()
                  .regex(/^[0-9]{1,78}$/, 'must be an integer in the smallest unit')
                  .optional(),
              })
              .strict(),
          )
          .default([]),
      })
      .strict()
      .default({}),
    chains: z.array(chain).min(1, 'must list at least one chain'),
    // The solver's key on SVM chains (a base58 secret key or a JSON byte array); required with an SVM chain.
    svmSolverKey: keySource.optional(),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const seen = new Set<number>();
    cfg.chains.forEach((c, i) => {
      const names = (c.rpc ?? []).map((p, j) => p.name ?? `p${j}`);
      if (new Set(names).size !== names.length) ctx.addIssue({ code: 'custom', path: ['chains', i, 'rpc'], message: 'provider names must be unique' });
      if (c.rpc && !c.rpc.some((p) => p.role !== 'send'))
        ctx.addIssue({ code: 'custom', path: ['chains', i, 'rpc'], message: 'needs a provider that can read (role other than "send")' });
      // A quorum larger than the providers that can read could never be met: every decision read
      // (a deposit's existence, "was this paid", the nonce or expiry) would wait forever.
      const readers = (c.rpc ?? []).filter((p) => p.role !== 'send').length;
      if (c.kind !== 'exchange' && c.quorum !== undefined && c.quorum > readers)
        ctx.addIssue({
          code: 'custom',
          path: ['chains', i, 'quorum'],
          message: `is ${c.quorum}, more than the ${readers} provider${readers === 1 ? '' : 's'} that can read`,
        });
      if (seen.has(c.id)) ctx.addIssue({ code: 'custom', path: ['chains', i, 'id'], message: `duplicate chain id ${c.id}` });
      if (c.kind === 'evm') feeCapPolicyIssues(c).forEach(([field, message]) => ctx.addIssue({ code: 'custom', path: ['chains', i, field], message }));
      seen.add(c.id);
    });
    const limited = new Set<number>();
    cfg.risk.chains.forEach((c, i) => {
      if (limited.has(c.chainId)) ctx.addIssue({ code: 'custom', path: ['risk', 'chains', i, 'chainId'], message: `duplicate chain id ${c.chainId}` });
      if (!seen.has(c.chainId)) ctx.addIssue({ code: 'custom', path: ['risk', 'chains', i, 'chainId'], message: `chain ${c.chainId} is not configured` });
      limited.add(c.chainId);
    });
    // Node refuses a headers bound past the request's (the headers are part of the request).
    if (cfg.api.headersTimeoutMs > cfg.api.requestTimeoutMs)
      ctx.addIssue({
        code: 'custom',
        path: ['api', 'headersTimeoutMs'],
        message: `is ${cfg.api.headersTimeoutMs}: must be at most api.requestTimeoutMs (${cfg.api.requestTimeoutMs})`,
      });
    // A leader renews at least three times per lease: it stops acting a quarter of a lease before its
    // expiry (src/lease/leadership.ts), so a renewal (or two) must land before that.
    if (cfg.ha.renewMs * 3 > cfg.ha.leaseMs)
      ctx.addIssue({ code: 'custom', path: ['ha', 'renewMs'], message: `is ${cfg.ha.renewMs}: must be at most a third of ha.leaseMs (${cfg.ha.leaseMs})` });
    if (!cfg.solverKey && !cfg.solverSigner && !cfg.solverAddress)
      ctx.addIssue({ code: 'custom', path: ['solverKey'], message: 'is required (or solverSigner; a read-only API replica may give solverAddress instead)' });
    for (const [key, signer] of [
      ['solverKey', 'solverSigner'],
      ['allocatorKey', 'allocatorSigner'],
      ['svmSolverKey', 'svmSolverSigner'],
    ] as const) {
      if (cfg[key] && cfg[signer]) ctx.addIssue({ code: 'custom', path: [signer], message: `give ${key} or ${signer}, not both` });
    }
    if (cfg.chains.some((c) => c.kind === 'svm') && !cfg.svmSolverKey && !cfg.svmSolverSigner) {
      ctx.addIssue({ code: 'custom', path: ['svmSolverKey'], message: 'is required when an SVM chain is configured' });
    }
  });

export type ConfigFile = z.input<typeof configSchema>;
export type ParsedConfig = z.output<typeof configSchema>;
export type ChainConfig = ParsedConfig['chains'][number];
export type EvmChainConfig = Extract<ChainConfig, { kind: 'evm' }>;
export type SvmChainConfig = Extract<ChainConfig, { kind: 'svm' }>;
export type ExchangeChainConfig = Extract<ChainConfig, { kind: 'exchange' }>;
export type RiskConfig = ParsedConfig['risk'];
export type RpcProviderConfig = z.output<typeof rpcProvider>;
export type InventoryConfig = ParsedConfig['inventory'];
export type CurrencyConfig = ChainConfig['currencies'][number];
