// An order placed on the devnet through a node's API (quote, then the user's deposit on Base), and
// the fills of an order read from the destination chain itself (never from the ledger).
import { createPublicClient, createWalletClient, type Hex, http, parseEventLogs, zeroAddress } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { OrderFillerAbi } from '../../contracts-abi/index.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import type { Devnet } from '../../src/devnet/devnet.ts';
import { api } from './stack.ts';

/**
 * Quotes 0.03 ETH from Base (8453) to Optimism (10) at `url` for test account `account` and deposits it; returns the
 * request id. With `apiKey`, the order is that key's (its webhooks get the order's events).
 */
export async function depositOn(devnet: Devnet, url: string, account: number, apiKey?: string): Promise<Hex> {
  const q = await api(url, '/quote', {
    apiKey,
    body: {
      user: devnet.accounts[account]!.address,
      originChainId: 8453,
      destinationChainId: 10,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: '30000000000000000',
      tradeType: 'EXACT_INPUT',
    },
  });
  // A plain throw (not expect): bench/failover.ts places orders with it too.
  if (q.status !== 200) throw new Error(`quote answered ${q.status}: ${JSON.stringify(q.body)}`);
  const item = q.body.steps[0].items[0].data;
  const c = devnet.chains.find((x) => x.id === 8453)!;
  const wallet = createWalletClient({
    account: privateKeyToAccount(devnet.accounts[account]!.privateKey),
    chain: devnetChain(8453, c.rpcUrl),
    transport: http(c.rpcUrl),
  });
  await wallet.sendTransaction({ to: item.to, data: item.data, value: BigInt(item.value) });
  return q.body.steps[0].requestId;
}

/** The OrderFilled events of an order on Optimism (10), read from the chain. */
export async function fillsOn(devnet: Devnet, id: Hex) {
  const c = devnet.chains.find((x) => x.id === 10)!;
  const pc = createPublicClient({ chain: devnetChain(10, c.rpcUrl), transport: http(c.rpcUrl) });
  const logs = await pc.getLogs({ address: c.contracts.filler, fromBlock: 0n, toBlock: 'latest' });
  return parseEventLogs({ abi: OrderFillerAbi, logs, eventName: 'OrderFilled' }).filter((l) => l.args.orderId === id);
}
