import { z } from 'zod';
import { getAddress, isAddress, type Address } from 'viem';

const address = z
  .string()
  .refine((s) => isAddress(s, { strict: false }), 'must be a 0x-prefixed 20-byte hex address')
  .transform((s) => getAddress(s) as Address);

// USD prices are decimal strings so that no float ever enters money arithmetic.
const usd = z.string().regex(/^\d+(\.\d+)?$/, 'must be a decimal string such as "3000.25"');

const currency = z.object({
  address,
  symbol: z.string().min(1),
  name: z.string().min(1),
  decimals: z.number().int().min(0).max(36),
  usdPrice: usd,
  logoURI: z.string().optional(),
});

const nativeCurrency = currency.omit({ address: true });

const keySource = z
  .object({
    // Name of the environment variable holding the 0x-prefixed private key.
    env: z.string().min(1).optional(),
    // Path of a file whose content is the private key.
    file: z.string().min(1).optional(),
  })
  .strict()
  .refine((k) => Boolean(k.env) !== Boolean(k.file), 'give exactly one of "env" or "file"');

const evmChain = z
  .object({
    id: z.number().int().positive(),
    name: z.string().min(1),
    kind: z.literal('evm').default('evm'),
    rpcUrl: z.string().url(),
    explorerUrl: z.string().url().optional(),
    depository: address,
    filler: address,
    // Block from which the depository is indexed on a fresh ledger (its deployment block).
    startBlock: z.number().int().min(0).default(0),
    confirmations: z.number().int().min(1).default(1),
    // Blocks kept for reorg detection; a reorg deeper than this stops the chain's indexer.
    finalityDepth: z.number().int().min(1).default(64),
    pollIntervalMs: z.number().int().min(10).default(1000),
    maxLogRange: z.number().int().min(1).default(2000),
    // A fill not included after this many blocks is replaced at the same nonce with a higher fee.
    replaceAfterBlocks: z.number().int().min(1).default(3),
    // Margin added to gas estimates, in basis points.
    gasMarginBps: z.number().int().min(0).max(50_000).default(2_000),
    depositEnabled: z.boolean().default(true),
    nativeCurrency,
    currencies: z.array(currency).default([]),
  })
  .strict();

export const configSchema = z
  .object({
    dataDir: z.string().min(1).default('./data'),
    api: z
      .object({
        host: z.string().min(1).default('127.0.0.1'),
        port: z.number().int().min(0).max(65_535).default(4000),
      })
      .strict()
      .default({}),
    log: z
      .object({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info') })
      .strict()
      .default({}),
    solverKey: keySource,
    // Signs the depository's call requests (refunds); the solver key when absent.
    allocatorKey: keySource.optional(),
    fees: z
      .object({ relayerServiceBps: z.number().int().min(0).max(5_000).default(10) })
      .strict()
      .default({}),
    quote: z
      .object({
        // How long a quote may be deposited against.
        ttlSeconds: z.number().int().min(10).default(600),
        // How long after the quote the fill may still happen (the order's output deadline).
        fillDeadlineSeconds: z.number().int().min(60).default(3600),
      })
      .strict()
      .default({}),
    chains: z.array(evmChain).min(1, 'must list at least one chain'),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const seen = new Set<number>();
    cfg.chains.forEach((c, i) => {
      if (seen.has(c.id)) ctx.addIssue({ code: 'custom', path: ['chains', i, 'id'], message: `duplicate chain id ${c.id}` });
      seen.add(c.id);
    });
  });

export type ConfigFile = z.input<typeof configSchema>;
export type ParsedConfig = z.output<typeof configSchema>;
export type ChainConfig = ParsedConfig['chains'][number];
export type CurrencyConfig = z.output<typeof currency>;
