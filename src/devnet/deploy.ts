// Deploy the node's contracts (depository, order filler, test stablecoin) to a local anvil chain and fund
// the solver and test accounts. Works with instant mining and with --block-time: the transactions are signed with
// explicit nonces, gas and fees, sent together, and awaited until the chain has included every one.

import {
  createPublicClient,
  createTestClient,
  defineChain,
  encodeDeployData,
  encodeFunctionData,
  getAddress,
  getContractAddress,
  http,
  keccak256,
  parseEther,
  type Abi,
  type Address,
  type Chain,
  type Hex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { awaitIncluded, sendRawBatches, type RawTx } from './rawTransactions.ts';
import {
  OrderFillerAbi,
  OrderFillerBytecode,
  RelayDepositoryAbi,
  RelayDepositoryBytecode,
  TestStablecoinAbi,
  TestStablecoinBytecode,
  TestNftAbi,
  DepositAddressFactoryAbi,
  DepositAddressFactoryBytecode,
  TestNftBytecode,
  WrappedNativeAbi,
  WrappedNativeBytecode,
  BatchExecutorBytecode,
} from '../../contracts-abi/index.ts';

/**
 * Calibur's address (Uniswap's EIP-7702 batch executor, the same on every chain): the public SDK's
 * gasless batch delegates wallets to it by default. The devnet puts BatchExecutor's code there.
 */
export const CALIBUR_ADDRESS: Address = '0x000000009B1D0aF20D8C6d0A44e162d11F9b8f00';

export interface DeployNodeContractsOptions {
  rpcUrl: string;
  chainId: number;
  deployerKey: Hex;
  solver: Address;
  allocator: Address;
  fund: { accounts: Address[]; nativeWei: bigint; stablecoinUnits: bigint };
}

export interface NodeContracts {
  depository: Address;
  filler: Address;
  stablecoin: Address;
  /** WETH-style wrapped native currency (wrap and unwrap routes). */
  wrappedNative: Address;
  /** A sample destination-call target (an NFT mint for 0.01 ETH). */
  testNft: Address;
  /** Deposit addresses: CREATE2 clones swept by the solver. */
  depositAddressFactory: Address;
  /** The EIP-7702 batch executor wallets delegate to for gasless batches (at Calibur's address). */
  batchExecutor: Address;
  /** First block holding one of the deployments (where indexers can start). */
  deployBlock: bigint;
}

/** Gas limit for a mint of the test stablecoin (sent before the token is mined, so it cannot be estimated). */
const MINT_GAS = 120_000n;
const WRAP_GAS = 100_000n;
const SOLVER_WRAPPED = parseEther('100');
/** A deployer holding less than this gets topped up to DEPLOYER_TOP_UP via anvil_setBalance. */
const DEPLOYER_MIN_BALANCE = parseEther('1');
const DEPLOYER_TOP_UP = parseEther('1000');

/** A viem chain object for a local devnet chain. */
export function devnetChain(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: `devnet-${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
    testnet: true,
  });
}

export async function deployNodeContracts(opts: DeployNodeContractsOptions): Promise<NodeContracts> {
  const chain = devnetChain(opts.chainId, opts.rpcUrl);
  const transport = http(opts.rpcUrl, { retryCount: 0 });
  const account = privateKeyToAccount(opts.deployerKey);
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  const testClient = createTestClient({ chain, transport, mode: 'anvil' });

  const remoteChainId = await publicClient.getChainId();
  if (remoteChainId !== opts.chainId) {
    throw new Error(`${opts.rpcUrl} is chain ${remoteChainId}, expected ${opts.chainId}`);
  }

  if ((await publicClient.getBalance({ address: account.address })) < DEPLOYER_MIN_BALANCE) {
    await testClient.setBalance({ address: account.address, value: DEPLOYER_TOP_UP });
  }

  const deployments = [
    { name: 'RelayDepository', abi: RelayDepositoryAbi, bytecode: RelayDepositoryBytecode, args: [account.address, opts.allocator] },
    { name: 'OrderFiller', abi: OrderFillerAbi, bytecode: OrderFillerBytecode, args: [account.address, opts.solver] },
    { name: 'TestStablecoin', abi: TestStablecoinAbi, bytecode: TestStablecoinBytecode, args: [account.address] },
    { name: 'WrappedNative', abi: WrappedNativeAbi, bytecode: WrappedNativeBytecode, args: [] },
    // A sample target for destination calls: mints for 0.01 ETH.
    { name: 'TestNft', abi: TestNftAbi, bytecode: TestNftBytecode, args: [parseEther('0.01'), 1_000_000n] },
  ] as const;
  const [nonce, fees] = await Promise.all([
    publicClient.getTransactionCount({ address: account.address, blockTag: 'pending' }),
    publicClient.estimateFeesPerGas(),
  ]);
  const feeFields = { maxFeePerGas: fees.maxFeePerGas * 2n, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
  // Deposit addresses: clones of a forwarder, swept by the solver into the depository.
  const all = [
    ...deployments,
    {
      name: 'DepositAddressFactory',
      abi: DepositAddressFactoryAbi,
      bytecode: DepositAddressFactoryBytecode,
      args: [getContractAddress({ from: account.address, nonce: BigInt(nonce) }), opts.solver],
    },
  ] as const;
  const deployData = all.map((d) => encodeDeployData({ abi: d.abi as Abi, bytecode: d.bytecode, args: [...d.args] }));
  const deployGas = await Promise.all(deployData.map((data) => publicClient.estimateGas({ account, data })));

  const [depository, filler, stablecoin, wrappedNative, testNft, depositAddressFactory] = all.map((_, i) =>
    getContractAddress({ from: account.address, nonce: BigInt(nonce + i) }),
  ) as [Address, Address, Address, Address, Address, Address];

  // Everyone funded once, solver first.
  const funded = [...new Set([opts.solver, ...opts.fund.accounts].map((a) => getAddress(a)))];

  // In nonce order: the deployments, a mint per funded account, the wrapped native inventory, the relayer role.
  const calls: { label: string; to?: Address; data: Hex; value?: bigint; gas: bigint }[] = all.map((d, i) => ({
    label: `deploy ${d.name}`,
    data: deployData[i]!,
    gas: (deployGas[i]! * 12n) / 10n,
  }));
  if (opts.fund.stablecoinUnits > 0n) {
    for (const to of funded) {
      const data = encodeFunctionData({ abi: TestStablecoinAbi, functionName: 'mint', args: [to, opts.fund.stablecoinUnits] });
      calls.push({ label: `mint stablecoin to ${to}`, to: stablecoin, data, gas: MINT_GAS });
    }
  }
  // The solver's inventory of the wrapped native currency: wrapped by the deployer, sent over.
  calls.push(
    {
      label: 'wrap native',
      to: wrappedNative,
      data: encodeFunctionData({ abi: WrappedNativeAbi, functionName: 'deposit' }),
      value: SOLVER_WRAPPED,
      gas: WRAP_GAS,
    },
    {
      label: 'send wrapped native to the solver',
      to: wrappedNative,
      data: encodeFunctionData({ abi: WrappedNativeAbi, functionName: 'transfer', args: [opts.solver, SOLVER_WRAPPED] }),
      gas: WRAP_GAS,
    },
    {
      // The solver submits users' permit deposits.
      label: 'make the solver a relayer of the depository',
      to: depository,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'setRelayer', args: [opts.solver, true] }),
      gas: WRAP_GAS,
    },
  );
  // Signed here and sent together; anvil's automine can strand such a nonce chain (it then waits in `queued`
  // forever, and a deployment never came: CI saw a devnet start time out so), which awaitIncluded sends again.
  const txs: RawTx[] = await Promise.all(
    calls.map(async (c, i) => ({
      raw: await account.signTransaction({
        chainId: opts.chainId,
        type: 'eip1559',
        nonce: nonce + i,
        to: c.to,
        data: c.data,
        value: c.value,
        gas: c.gas,
        ...feeFields,
      }),
      sender: account.address,
      nonce: nonce + i,
    })),
  );

  const balances: Promise<unknown>[] = funded.map((address) => testClient.setBalance({ address, value: opts.fund.nativeWei }));
  // The batch executor's runtime code (what its creation code returns, by eth_call) placed at
  // Calibur's fixed address, where the SDK looks for it: no deployment, no nonce taken.
  balances.push(
    publicClient.call({ data: BatchExecutorBytecode }).then(({ data }) => {
      if (!data) throw new Error('devnet BatchExecutor creation returned no code');
      return testClient.setCode({ address: CALIBUR_ADDRESS, bytecode: data });
    }),
  );

  // One await for both: a balance call failing while the batch is sent is this deployment's error, never an
  // unhandled rejection.
  await Promise.all([
    sendRawBatches(
      opts.rpcUrl,
      txs.map((t) => t.raw),
    ).then(() => awaitIncluded(opts.rpcUrl, txs, { timeoutMs: 60_000, pollMs: 20 })),
    Promise.all(balances),
  ]);
  const receipts = await Promise.all(
    txs.map(async (t, i) => {
      const receipt = await publicClient.getTransactionReceipt({ hash: keccak256(t.raw) });
      if (receipt.status !== 'success') throw new Error(`devnet ${calls[i]!.label} reverted (tx ${receipt.transactionHash})`);
      return receipt;
    }),
  );

  const deployReceipts = receipts.slice(0, all.length);
  deployReceipts.forEach((r, i) => {
    const expected = [depository, filler, stablecoin, wrappedNative, testNft, depositAddressFactory][i]!;
    if (!r.contractAddress || getAddress(r.contractAddress) !== expected) {
      throw new Error(`devnet ${all[i]!.name} deployed at ${r.contractAddress}, expected ${expected}`);
    }
  });
  const deployBlock = deployReceipts.reduce((min, r) => (r.blockNumber < min ? r.blockNumber : min), deployReceipts[0]!.blockNumber);

  return { depository, filler, stablecoin, wrappedNative, testNft, depositAddressFactory, batchExecutor: CALIBUR_ADDRESS, deployBlock };
}
