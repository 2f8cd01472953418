import { encodeFunctionData, erc20Abi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { linkWallet as linkThroughNode } from './link.ts';
import { until, type Stack } from './stack.ts';

// App balances in tests: funded by a marked USDC transfer to the solver on chain 8453, linked to a
// key by the wallet's signature, as an integrator does.

const FUNDING_CHAIN = 8453;
const marker = (credited: Address) => `012345abcdef${credited.slice(2).toLowerCase()}012345abcdef`;

/** Credits `credited`'s app balance with `units` (USDC smallest units) by a marked transfer from account `from`. */
export async function fundAppBalance(s: Stack, from: number, credited: Address, units: bigint): Promise<Hex> {
  const w = s.wallet(from, FUNDING_CHAIN);
  const usdc = s.devnet.chains.find((c) => c.id === FUNDING_CHAIN)!.contracts.stablecoin;
  const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [s.devnet.solver, units] });
  const hash = await w.sendTransaction({ account: w.account!, chain: w.chain, to: usdc, data: `${data}${marker(credited)}` as Hex });
  await s.publicClient(FUNDING_CHAIN).waitForTransactionReceipt({ hash });
  await until(() => (s.node.ledger.balances.get(`credit:${FUNDING_CHAIN}:${hash}`) ? true : undefined), 'the app balance credit');
  return hash;
}

/** Links devnet account `wallet` to the API key as its sponsor wallet. */
export async function linkWallet(s: Stack, k: { key: string; id: string }, wallet: number): Promise<void> {
  const acct = privateKeyToAccount(s.devnet.accounts[wallet]!.privateKey);
  const r = await linkThroughNode(s.url, k.key, acct);
  if (r.status !== 200) throw new Error(`link failed: ${r.status} ${JSON.stringify(r.body)}`);
}

/** A new API key sponsored by devnet account `account`, whose app balance is funded with 1 USDC (from account 1). */
export async function fundedSponsor(s: Stack, account: number, label: string): Promise<{ key: { key: string; id: string }; wallet: Address }> {
  const key = s.node.ledger.apiKeys.create(`${label} ${account}`);
  await linkWallet(s, key, account);
  const wallet = s.devnet.accounts[account]!.address as Address;
  await fundAppBalance(s, 1, wallet, 1_000_000n);
  return { key, wallet };
}
