// The OP-stack GasPriceOracle predeploy on a devnet chain (anvil has none): the stand-in contract's code installed at
// the predeploy's address, and the oracle's bound for a transaction as the node's would be sent.
import { createPublicClient, createWalletClient, http, serializeTransaction, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { GasPriceOracleStandinAbi, GasPriceOracleStandinBytecode } from '../../contracts-abi/index.ts';
import { GAS_PRICE_ORACLE } from '../../src/chains/evm/l1DataFee.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import { rpc } from '../../src/devnet/rawTransactions.ts';

/** Installs the stand-in oracle at the predeploy's address on `chain`, deployed from `deployerKey`, with `fees` set when given. */
export async function installL1Oracle(
  chain: { id: number; rpcUrl: string },
  deployerKey: Hex,
  fees?: { baseFee: bigint; blobBaseFee: bigint; baseFeeScalar: number; blobBaseFeeScalar: number },
): Promise<void> {
  const viemChain = devnetChain(chain.id, chain.rpcUrl);
  const wallet = createWalletClient({ account: privateKeyToAccount(deployerKey), chain: viemChain, transport: http(chain.rpcUrl) });
  const client = createPublicClient({ chain: viemChain, transport: http(chain.rpcUrl), pollingInterval: 50 });
  const { contractAddress } = await client.waitForTransactionReceipt({
    hash: await wallet.deployContract({ abi: GasPriceOracleStandinAbi, bytecode: GasPriceOracleStandinBytecode }),
  });
  await rpc(chain.rpcUrl, 'anvil_setCode', [GAS_PRICE_ORACLE, await rpc<Hex>(chain.rpcUrl, 'eth_getCode', [contractAddress!, 'latest'])]);
  if (!fees) return;
  const args = [fees.baseFee, fees.blobBaseFee, fees.baseFeeScalar, fees.blobBaseFeeScalar] as const;
  await client.waitForTransactionReceipt({
    hash: await wallet.writeContract({ address: GAS_PRICE_ORACLE, abi: GasPriceOracleStandinAbi, functionName: 'setL1Fees', args }),
  });
}

/**
 * The oracle's bound for a transaction to `to` carrying `data`: its unsigned EIP-1559 serialization with every other
 * field at a width the node's own transactions never pass, so the figure is what the node's transaction pays at most.
 */
export async function l1FeeOf(client: PublicClient, chainId: number, to: Address, data: Hex): Promise<bigint> {
  const unsigned = serializeTransaction({
    type: 'eip1559',
    chainId,
    nonce: 2 ** 32,
    maxFeePerGas: 10n ** 15n,
    maxPriorityFeePerGas: 10n ** 15n,
    gas: 2n ** 24n,
    to,
    value: 10n ** 24n,
    data,
  });
  return client.readContract({
    address: GAS_PRICE_ORACLE,
    abi: GasPriceOracleStandinAbi,
    functionName: 'getL1FeeUpperBound',
    args: [BigInt((unsigned.length - 2) / 2)],
  });
}
