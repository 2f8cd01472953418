// The deposit address watcher against a real anvil chain: every watched address's balance read in one
// pass, a bounded number at a time, and a failed read holding back only its own address.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, createTestClient, http, parseEther, toHex, zeroAddress, type Address, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { DepositAddressFunding } from '../src/chains/adapter.ts';
import { DepositAddressWatcher } from '../src/chains/evm/depositAddressWatcher.ts';
import type { EvmChainConfig } from '../src/config/schema.ts';
import { startAnvil, type AnvilHandle } from '../src/devnet/anvil.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { Ledger } from '../src/ledger/index.ts';
import { createLogger } from '../src/log.ts';
import { waitingOrder } from './helpers/statusFixtures.ts';

const CHAIN_ID = 31_337_007;
let anvil: AnvilHandle;
let client: PublicClient;

beforeAll(async () => {
  anvil = await startAnvil({ chainId: CHAIN_ID });
  client = createPublicClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl, { retryCount: 0 }) });
}, 60_000);

afterAll(async () => {
  await anvil?.stop();
});

const chain = {
  id: CHAIN_ID,
  nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
  currencies: [],
} as unknown as EvmChainConfig;

// `n` live deposit-address requests of native currency, each address holding 1 ETH.
async function fundedAddresses(ledger: Ledger, n: number): Promise<{ id: string; address: Address }[]> {
  const test = createTestClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl), mode: 'anvil' });
  const made = [];
  for (let i = 0; i < n; i++) {
    const id = toHex(randomBytes(32));
    const address = privateKeyToAccount(generatePrivateKey()).address;
    ledger.requests.insert({ ...waitingOrder(id, Date.now() + i), origin_chain_id: CHAIN_ID, deposit_address: address });
    await test.setBalance({ address, value: parseEther('1') });
    made.push({ id, address });
  }
  return made;
}

function watcher(ledger: Ledger, readClient: PublicClient, funded: DepositAddressFunding[]) {
  const sweeps = { onDepositAddressFunded: (f: DepositAddressFunding) => funded.push(f) > 0 };
  return new DepositAddressWatcher(
    chain,
    readClient,
    ledger,
    sweeps,
    () => undefined,
    createLogger('silent'),
    async () => 21_000n,
    3_600_000,
  );
}

describe('DepositAddressWatcher', () => {
  it('reads every address in a pass, at most 50 at a time', async () => {
    const ledger = Ledger.open(':memory:');
    const addresses = await fundedAddresses(ledger, 120);
    let inFlight = 0;
    let most = 0;
    const counting = {
      ...client,
      getBalance: async (args: { address: Address }) => {
        most = Math.max(most, ++inFlight);
        try {
          return await client.getBalance(args);
        } finally {
          inFlight--;
        }
      },
    } as PublicClient;
    const funded: DepositAddressFunding[] = [];
    expect(await watcher(ledger, counting, funded).check()).toBe(120);
    expect(funded.map((f) => f.requestId).sort()).toEqual(addresses.map((a) => a.id).sort());
    expect(funded.every((f) => f.amount === parseEther('1') && f.currency === zeroAddress)).toBe(true);
    // In parallel (one after another, a pass over the thousands the caps allow outlasted blocks), and bounded.
    expect(most).toBe(50);
  });

  it('a failed read holds back only its own address: the others are swept, and the pass fails to be retried', async () => {
    const ledger = Ledger.open(':memory:');
    const addresses = await fundedAddresses(ledger, 5);
    // The first address watched is the one whose read fails.
    const bad = addresses[0]!.address;
    const failing = {
      ...client,
      getBalance: (args: { address: Address }) => (args.address === bad ? Promise.reject(new Error('provider answered 503')) : client.getBalance(args)),
    } as PublicClient;
    const funded: DepositAddressFunding[] = [];
    await expect(watcher(ledger, failing, funded).check()).rejects.toThrow('provider answered 503');
    expect(funded.map((f) => f.requestId).sort()).toEqual(
      addresses
        .slice(1)
        .map((a) => a.id)
        .sort(),
    );
    // Read again with the provider back: the held-back address is swept.
    const again: DepositAddressFunding[] = [];
    await watcher(ledger, client, again).check(addresses[0]!.id);
    expect(again.map((f) => f.requestId)).toEqual([addresses[0]!.id]);
  });
});
