import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { keccak256, toHex, type Address, type Hex } from 'viem';
import { mnemonicToAccount, privateKeyToAccount } from 'viem/accounts';
import type { ConfigFile } from '../config/schema.ts';
import { startAnvil, type AnvilHandle } from './anvil.ts';
import { deployNodeContracts, type NodeContracts } from './deploy.ts';
import { startSvmDevnet, svmChainConfig, svmDescription, type SvmDevnet } from './svmChain.ts';
import { devnetExchangeConfig, devnetExchangeDescription, startDevnetExchange, type DevnetExchange } from './exchange/devnet.ts';

/** anvil's well-known test mnemonic: its accounts hold no real value anywhere. */
export const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk';
/** Devnet-only keys, derived from public strings so every devnet is the same. */
export const DEVNET_SOLVER_KEY = keccak256(toHex('relay-node devnet solver'));
export const DEVNET_ALLOCATOR_KEY = keccak256(toHex('relay-node devnet allocator'));

export const DEVNET_CHAINS = [
  { id: 8453, name: 'Base (devnet)' },
  { id: 10, name: 'OP Mainnet (devnet)' },
];

export interface DevnetOptions {
  dataDir: string;
  /** Seconds per block; undefined mines each transaction at once. */
  blockTime?: number;
  confirmations?: number;
  chains?: { id: number; name: string }[];
  testAccounts?: number;
  /** The perpetuals exchange stand-in (chain 1337); on unless false. */
  exchange?: boolean;
  /** The SVM chain (792703809, litesvm behind a local JSON-RPC); off unless true. */
  svm?: boolean;
  /** Milliseconds per SVM slot (default 200): shorter makes a blockhash expire sooner (150 slots). */
  svmSlotIntervalMs?: number;
  /** The node reaches the EVM chains by websocket (anvil serves it on the same port): new heads are pushed, not polled for. */
  websocket?: boolean;
}

export interface DevnetAccount {
  address: Address;
  privateKey: Hex;
}

export interface DevnetChain {
  id: number;
  name: string;
  rpcUrl: string;
  anvil: AnvilHandle;
  contracts: NodeContracts;
}

export interface Devnet {
  chains: DevnetChain[];
  accounts: DevnetAccount[];
  solver: Address;
  keys: { solver: Hex; allocator: Hex; svmSolver?: string };
  /** The perpetuals exchange stand-in (chain 1337), when started. */
  exchange?: DevnetExchange;
  /** The SVM chain (792703809), when started: its RPC, test mint, vault and funded test keypairs. */
  svm?: SvmDevnet;
  /** The node's config for these chains (keys excluded: they are passed in memory). */
  nodeConfig(overrides?: { port?: number; host?: string; logLevel?: string; dataDir?: string }): Omit<ConfigFile, 'solverKey'>;
  stop(): Promise<void>;
}

function account(i: number): DevnetAccount {
  const a = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: i });
  return { address: a.address, privateKey: toHex(a.getHdKey().privateKey!) };
}

/** Local EVM chains (anvil) with the node's contracts deployed and the solver and test accounts funded. */
export async function startDevnet(opts: DevnetOptions): Promise<Devnet> {
  const specs = opts.chains ?? DEVNET_CHAINS;
  const deployer = account(0);
  const accounts = Array.from({ length: opts.testAccounts ?? 5 }, (_, i) => account(i));
  const solver = privateKeyToAccount(DEVNET_SOLVER_KEY).address;
  const allocator = privateKeyToAccount(DEVNET_ALLOCATOR_KEY).address;
  const anvils: AnvilHandle[] = [];
  let exchange: DevnetExchange | undefined;
  let svm: SvmDevnet | undefined;
  try {
    if (opts.svm) svm = await startSvmDevnet({ testAccounts: opts.testAccounts, slotIntervalMs: opts.svmSlotIntervalMs });
    if (opts.exchange !== false)
      exchange = await startDevnetExchange(
        solver,
        accounts.map((a) => a.address),
      );
    const chains = await Promise.all(
      specs.map(async (spec) => {
        const anvil = await startAnvil({ chainId: spec.id, blockTime: opts.blockTime });
        anvils.push(anvil);
        const contracts = await deployNodeContracts({
          rpcUrl: anvil.rpcUrl,
          chainId: spec.id,
          deployerKey: deployer.privateKey,
          solver,
          allocator,
          fund: { accounts: accounts.map((a) => a.address), nativeWei: 10_000n * 10n ** 18n, stablecoinUnits: 1_000_000n * 10n ** 6n },
        });
        return { ...spec, rpcUrl: anvil.rpcUrl, anvil, contracts };
      }),
    );
    const confirmations = opts.confirmations ?? 1;
    const devnet: Devnet = {
      chains,
      accounts,
      solver,
      keys: { solver: DEVNET_SOLVER_KEY, allocator: DEVNET_ALLOCATOR_KEY, ...(svm ? { svmSolver: svm.solverKey } : {}) },
      exchange,
      svm,
      nodeConfig: (o = {}) => ({
        dataDir: o.dataDir ?? opts.dataDir,
        // A developer's own machine: limits high enough never to get in the way of a test loop.
        api: {
          host: o.host ?? '127.0.0.1',
          port: o.port ?? 4000,
          rateLimit: {
            perKeyPerMinute: 1_000_000,
            pricedPerKeyPerMinute: 1_000_000,
            unauthenticatedPerMinute: 1_000_000,
            anonymousQuotesPerMinute: 1_000_000,
            anonymousQuotesPerMinuteTotal: 1_000_000,
            probesPerMinute: 1_000_000,
            wsConnectionsPerIp: 10_000,
            wsMessagesPerConnectionPerMinute: 1_000_000,
            wsMessagesPerIpPerMinute: 1_000_000,
          },
        },
        // Webhook receivers on a developer's machine listen on 127.0.0.1.
        events: { allowPrivateTargets: true },
        log: { level: (o.logLevel ?? 'info') as 'info' },
        fees: { relayerServiceBps: 10 },
        quote: { ttlSeconds: 600, fillDeadlineSeconds: 3600 },
        chains: chains
          .map(
            (c) =>
              ({
                id: c.id,
                name: c.name,
                kind: 'evm' as const,
                rpcUrl: opts.websocket ? c.rpcUrl.replace(/^http/, 'ws') : c.rpcUrl,
                depository: c.contracts.depository,
                filler: c.contracts.filler,
                depositAddressFactory: c.contracts.depositAddressFactory,
                startBlock: Number(c.contracts.deployBlock),
                confirmations,
                finalityDepth: 64,
                pollIntervalMs: opts.blockTime === undefined ? 50 : 100,
                replaceAfterBlocks: 3,
                // The interface's app balance funding chain.
                appBalanceDeposits: c.id === 8453,
                nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
                currencies: [
                  { address: c.contracts.stablecoin, symbol: 'USDC', name: 'Test USD Coin', decimals: 6, usdPrice: '1', permit: true },
                  { address: c.contracts.wrappedNative, symbol: 'WETH', name: 'Wrapped Ether', decimals: 18, usdPrice: '3000' },
                ],
              }) as ConfigFile['chains'][number],
          )
          .concat(exchange ? [devnetExchangeConfig(exchange, { pollIntervalMs: opts.blockTime === undefined ? 50 : 100 })] : [])
          .concat(svm ? [svmChainConfig(svm)] : []),
      }),
      stop: async () => {
        await Promise.all([...anvils.map((a) => a.stop()), exchange?.standin.stop(), svm?.stop()]);
      },
    };
    return devnet;
  } catch (e) {
    await Promise.all([...anvils.map((a) => a.stop()), exchange?.standin.stop(), svm?.stop()]);
    throw e;
  }
}

/** What a developer needs to use the devnet from a wallet or a script. Test keys only. */
export function writeDevnetDescription(devnet: Devnet, path: string, apiUrl: string, apiKey?: string): void {
  mkdirSync(join(path, '..'), { recursive: true });
  const description = {
    api: apiUrl,
    // A key of this devnet's ledger, for the endpoints that need one (it goes with the ledger).
    ...(apiKey ? { apiKey } : {}),
    solver: devnet.solver,
    chains: devnet.chains.map((c) => ({
      id: c.id,
      name: c.name,
      rpcUrl: c.rpcUrl,
      depository: c.contracts.depository,
      filler: c.contracts.filler,
      currencies: { native: '0x0000000000000000000000000000000000000000', USDC: c.contracts.stablecoin, WETH: c.contracts.wrappedNative },
      sampleCallTarget: c.contracts.testNft,
    })),
    ...(devnet.exchange ? { exchange: devnetExchangeDescription(devnet.exchange) } : {}),
    ...(devnet.svm ? { svm: svmDescription(devnet.svm) } : {}),
    testAccounts: devnet.accounts,
  };
  writeFileSync(path, `${JSON.stringify(description, null, 2)}\n`);
}

/** The devnet's chains start empty every time, so its ledger must too. */
export function resetDevnetLedger(dataDir: string): void {
  for (const suffix of ['', '-wal', '-shm']) rmSync(join(dataDir, `ledger.sqlite${suffix}`), { force: true });
}
