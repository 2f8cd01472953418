// One pass of a chain's deposit address watcher over N live addresses (the balance of each read on every
// block; the node-wide cap without an API key is 2,000 by default), through the node's own provider pool
// (which sends the calls of one tick as one JSON-RPC batch), beside the ceiling measured in the same run:
// the same anvil answering the same N eth_getBalance reads in JSON-RPC batches of 100.
// Usage: npm run bench:deposit-address-watch -- [addresses] [rounds]
import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { toHex, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { DepositAddressWatcher } from '../src/chains/evm/depositAddressWatcher.ts';
import { evmClients } from '../src/chains/providers/index.ts';
import type { EvmChainConfig } from '../src/config/schema.ts';
import { startAnvil } from '../src/devnet/anvil.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { Ledger } from '../src/ledger/index.ts';
import { createLogger } from '../src/log.ts';
import { createMetrics } from '../src/metrics.ts';
import { waitingOrder } from '../test/helpers/statusFixtures.ts';

const N = Number(process.argv[2] ?? 2000);
const ROUNDS = Number(process.argv[3] ?? 3);
const CHAIN_ID = 31_337_009;

const anvil = await startAnvil({ chainId: CHAIN_ID });
const log = createLogger('silent');
const { pool, decisionClient: client } = evmClients(
  { id: CHAIN_ID, rpcUrl: anvil.rpcUrl, pollIntervalMs: 1_000 },
  devnetChain(CHAIN_ID, anvil.rpcUrl),
  createMetrics(),
  log,
);
pool.start();
try {
  const ledger = Ledger.open(':memory:');
  const addresses: Address[] = [];
  for (let i = 0; i < N; i++) {
    const address = privateKeyToAccount(generatePrivateKey()).address;
    addresses.push(address);
    ledger.requests.insert({ ...waitingOrder(toHex(randomBytes(32)), Date.now()), origin_chain_id: CHAIN_ID, deposit_address: address });
  }
  // Empty addresses, as most watched ones are: the pass is its reads.
  const chain = { id: CHAIN_ID, nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' }, currencies: [] } as unknown as EvmChainConfig;
  const watcher = new DepositAddressWatcher(
    chain,
    client,
    ledger,
    { onDepositAddressFunded: () => false },
    () => undefined,
    log,
    async () => 21_000n,
    3_600_000,
  );

  const rate = (ms: number) => Math.round((N / ms) * 1000);
  for (let round = 1; round <= ROUNDS; round++) {
    const t0 = performance.now();
    await watcher.check();
    const pass = performance.now() - t0;
    // The ceiling: the same reads, 100 to a JSON-RPC batch, one batch after another.
    const t1 = performance.now();
    for (let i = 0; i < N; i += 100) {
      const body = addresses.slice(i, i + 100).map((a, k) => ({ jsonrpc: '2.0', id: k, method: 'eth_getBalance', params: [a, 'latest'] }));
      const res = await fetch(anvil.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const answers = (await res.json()) as { result?: string }[];
      if (answers.length !== body.length || answers.some((a) => a.result === undefined)) throw new Error('a batched eth_getBalance went unanswered');
    }
    const ceiling = performance.now() - t1;
    console.log(
      `round ${round}: a pass over ${N} addresses in ${pass.toFixed(0)} ms = ${rate(pass)} reads/s; ceiling (batches of 100, same anvil) ${rate(ceiling)} reads/s → ${Math.round((100 * ceiling) / pass)}%`,
    );
  }
  console.log(`  machine: ${cpus().length} × ${cpus()[0]?.model}, ${+(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}`);
} finally {
  await pool.stop();
  await anvil.stop();
}
