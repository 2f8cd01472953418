// The node's contracts against a real anvil: deposits, allocator-signed execute, fills, and the Solidity
// order hash against the TypeScript order id.

import {
  BaseError,
  decodeErrorResult,
  ContractFunctionRevertedError,
  createPublicClient,
  createWalletClient,
  http,
  keccak256,
  parseEther,
  parseEventLogs,
  stringToHex,
  zeroAddress,
  type Address,
  type Hash,
  type Hex,
  type PublicClient,
} from 'viem';
import { mnemonicToAccount, type HDAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrderFillerAbi, OrderHashProbeAbi, OrderHashProbeBytecode, RelayDepositoryAbi, TestStablecoinAbi } from '../contracts-abi/index.ts';
import {
  callRequestDigest,
  callRequestId,
  erc20TransferCall,
  nativeTransferCall,
  randomCallRequestNonce,
  signCallRequest,
  type CallRequest,
} from '../src/chains/evm/callRequest.ts';
import { startAnvil, type AnvilHandle } from '../src/devnet/anvil.ts';
import { deployNodeContracts, devnetChain, type NodeContracts } from '../src/devnet/deploy.ts';
import { orderId, type OrderData } from '../src/quote/orderId.ts';

const MNEMONIC = 'test test test test test test test test test test test junk';
const account = (addressIndex: number): HDAccount => mnemonicToAccount(MNEMONIC, { addressIndex });

const deployer = account(0);
const allocator = account(1);
const solver = account(2);
const user = account(3);
const recipient = account(4);
const stranger = account(5);

const CHAIN_ID = 31_337;
const NATIVE_FUNDING = parseEther('100');
const STABLE_FUNDING = 1_000_000n * 10n ** 6n;
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

let anvil: AnvilHandle;
let contracts: NodeContracts;
let publicClient: PublicClient;

function walletFor(acct: HDAccount) {
  return createWalletClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl), account: acct });
}

async function mined(hash: Promise<Hash>) {
  const receipt = await publicClient.waitForTransactionReceipt({ hash: await hash });
  expect(receipt.status).toBe('success');
  return receipt;
}

/** Awaits `call`, which must revert with the custom error `errorName`; returns the decoded error. */
async function expectRevert(call: Promise<unknown>, errorName: string): Promise<ContractFunctionRevertedError> {
  try {
    await call;
  } catch (err) {
    const revert = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : null;
    if (revert instanceof ContractFunctionRevertedError) {
      expect(revert.data?.errorName).toBe(errorName);
      return revert;
    }
    throw err;
  }
  throw new Error(`expected a revert with ${errorName}, but the call succeeded`);
}

const id = (label: string): Hex => keccak256(stringToHex(label));

const stableBalance = (address: Address) =>
  publicClient.readContract({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'balanceOf', args: [address] });

async function latestTimestamp(): Promise<bigint> {
  return (await publicClient.getBlock({ blockTag: 'latest' })).timestamp;
}

beforeAll(async () => {
  anvil = await startAnvil({ chainId: CHAIN_ID });
  publicClient = createPublicClient({ chain: devnetChain(CHAIN_ID, anvil.rpcUrl), transport: http(anvil.rpcUrl), pollingInterval: 50 });
  contracts = await deployNodeContracts({
    rpcUrl: anvil.rpcUrl,
    chainId: CHAIN_ID,
    deployerKey: `0x${Buffer.from(deployer.getHdKey().privateKey!).toString('hex')}`,
    solver: solver.address,
    allocator: allocator.address,
    fund: { accounts: [user.address, stranger.address], nativeWei: NATIVE_FUNDING, stablecoinUnits: STABLE_FUNDING },
  });
}, 30_000);

afterAll(async () => {
  await anvil?.stop();
});

describe('devnet deployment', { timeout: 30_000 }, () => {
  it('deploys the three contracts with the right roles and funds the accounts', async () => {
    for (const address of [contracts.depository, contracts.filler, contracts.stablecoin]) {
      expect((await publicClient.getCode({ address }))?.length ?? 0).toBeGreaterThan(2);
    }
    const read = publicClient.readContract;
    expect(await read({ address: contracts.depository, abi: RelayDepositoryAbi, functionName: 'allocator' })).toBe(allocator.address);
    expect(await read({ address: contracts.depository, abi: RelayDepositoryAbi, functionName: 'owner' })).toBe(deployer.address);
    expect(await read({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'solvers', args: [solver.address] })).toBe(true);
    expect(await read({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'decimals' })).toBe(6);
    expect(await read({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'symbol' })).toBe('USDC');
    for (const a of [solver, user, stranger]) {
      expect(await stableBalance(a.address)).toBe(STABLE_FUNDING);
      expect(await publicClient.getBalance({ address: a.address })).toBe(NATIVE_FUNDING);
    }
    expect(contracts.deployBlock).toBeGreaterThan(0n);
  });

  it('deploys with --block-time 1 too, and stop() ends the anvil process', async () => {
    const slow = await startAnvil({ chainId: 4_242, blockTime: 1 });
    try {
      const deployed = await deployNodeContracts({
        rpcUrl: slow.rpcUrl,
        chainId: 4_242,
        deployerKey: `0x${Buffer.from(deployer.getHdKey().privateKey!).toString('hex')}`,
        solver: solver.address,
        allocator: allocator.address,
        fund: { accounts: [user.address], nativeWei: 5n, stablecoinUnits: 7n },
      });
      const slowClient = createPublicClient({ transport: http(slow.rpcUrl) });
      for (const address of [deployed.depository, deployed.filler, deployed.stablecoin]) {
        expect((await slowClient.getCode({ address }))?.length ?? 0).toBeGreaterThan(2);
      }
      expect(await slowClient.readContract({ address: deployed.stablecoin, abi: TestStablecoinAbi, functionName: 'balanceOf', args: [user.address] })).toBe(7n);
      expect(await slowClient.getBalance({ address: user.address })).toBe(5n);
    } finally {
      await slow.stop();
    }
    expect(() => process.kill(slow.pid, 0)).toThrow();
  });
});

describe('RelayDepository deposits', { timeout: 30_000 }, () => {
  it('depositNative emits RelayNativeDeposit crediting the named depositor, or the sender for address(0)', async () => {
    const wallet = walletFor(user);
    const before = await publicClient.getBalance({ address: contracts.depository });

    const named = await mined(
      wallet.writeContract({
        address: contracts.depository,
        abi: RelayDepositoryAbi,
        functionName: 'depositNative',
        args: [stranger.address, id('native-named')],
        value: parseEther('1'),
      }),
    );
    const [namedEvent] = parseEventLogs({ abi: RelayDepositoryAbi, eventName: 'RelayNativeDeposit', logs: named.logs });
    expect(namedEvent?.address.toLowerCase()).toBe(contracts.depository.toLowerCase());
    expect(namedEvent?.args).toEqual({ from: stranger.address, amount: parseEther('1'), id: id('native-named') });

    const self = await mined(
      wallet.writeContract({
        address: contracts.depository,
        abi: RelayDepositoryAbi,
        functionName: 'depositNative',
        args: [zeroAddress, id('native-self')],
        value: 12_345n,
      }),
    );
    const [selfEvent] = parseEventLogs({ abi: RelayDepositoryAbi, eventName: 'RelayNativeDeposit', logs: self.logs });
    expect(selfEvent?.args).toEqual({ from: user.address, amount: 12_345n, id: id('native-self') });

    expect(await publicClient.getBalance({ address: contracts.depository })).toBe(before + parseEther('1') + 12_345n);
  });

  it('depositErc20 with an amount pulls exactly that amount and emits RelayErc20Deposit', async () => {
    const wallet = walletFor(user);
    await mined(
      wallet.writeContract({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'approve', args: [contracts.depository, 10_000_000n] }),
    );
    const userBefore = await stableBalance(user.address);
    const depoBefore = await stableBalance(contracts.depository);

    const receipt = await mined(
      wallet.writeContract({
        address: contracts.depository,
        abi: RelayDepositoryAbi,
        functionName: 'depositErc20',
        args: [zeroAddress, contracts.stablecoin, 2_500_000n, id('erc20-amount')],
      }),
    );
    const events = parseEventLogs({ abi: RelayDepositoryAbi, eventName: 'RelayErc20Deposit', logs: receipt.logs });
    expect(events).toHaveLength(1);
    expect(events[0]!.args).toEqual({ from: user.address, token: contracts.stablecoin, amount: 2_500_000n, id: id('erc20-amount') });
    expect(await stableBalance(user.address)).toBe(userBefore - 2_500_000n);
    expect(await stableBalance(contracts.depository)).toBe(depoBefore + 2_500_000n);
    expect(
      await publicClient.readContract({
        address: contracts.stablecoin,
        abi: TestStablecoinAbi,
        functionName: 'allowance',
        args: [user.address, contracts.depository],
      }),
    ).toBe(7_500_000n);
  });

  it('depositErc20 without an amount pulls the whole allowance', async () => {
    const wallet = walletFor(stranger);
    await mined(
      wallet.writeContract({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'approve', args: [contracts.depository, 42_000_000n] }),
    );
    const depoBefore = await stableBalance(contracts.depository);

    const receipt = await mined(
      wallet.writeContract({
        address: contracts.depository,
        abi: RelayDepositoryAbi,
        functionName: 'depositErc20',
        args: [user.address, contracts.stablecoin, id('erc20-allowance')],
      }),
    );
    const [event] = parseEventLogs({ abi: RelayDepositoryAbi, eventName: 'RelayErc20Deposit', logs: receipt.logs });
    expect(event?.args).toEqual({ from: user.address, token: contracts.stablecoin, amount: 42_000_000n, id: id('erc20-allowance') });
    expect(await stableBalance(contracts.depository)).toBe(depoBefore + 42_000_000n);
    expect(await stableBalance(stranger.address)).toBe(STABLE_FUNDING - 42_000_000n);
    expect(
      await publicClient.readContract({
        address: contracts.stablecoin,
        abi: TestStablecoinAbi,
        functionName: 'allowance',
        args: [stranger.address, contracts.depository],
      }),
    ).toBe(0n);
  });
});

describe('RelayDepository execute', { timeout: 30_000 }, () => {
  async function request(calls: CallRequest['calls'], expiresIn = 3_600n): Promise<CallRequest> {
    return { calls, nonce: randomCallRequestNonce(), expiration: (await latestTimestamp()) + expiresIn };
  }

  const sign = (req: CallRequest, signer: HDAccount = allocator, depository: Address = contracts.depository) =>
    signCallRequest({ account: signer, chainId: CHAIN_ID, depository, request: req });

  const simulateExecute = (req: CallRequest, signature: Hex) =>
    publicClient.simulateContract({
      account: solver,
      address: contracts.depository,
      abi: RelayDepositoryAbi,
      functionName: 'execute',
      args: [req, signature],
    });

  it('pays native and erc20 out for a request signed by the allocator, submitted by the solver', async () => {
    const req = await request([
      nativeTransferCall(recipient.address, parseEther('0.5')),
      erc20TransferCall(contracts.stablecoin, recipient.address, 1_250_000n),
    ]);
    const signature = await sign(req);

    // The contract's hashing matches the TypeScript helpers.
    const [structHash, digest] = await publicClient.readContract({
      address: contracts.depository,
      abi: RelayDepositoryAbi,
      functionName: 'hashCallRequest',
      args: [req],
    });
    expect(structHash).toBe(callRequestId(req));
    expect(digest).toBe(callRequestDigest({ chainId: CHAIN_ID, depository: contracts.depository, request: req }));

    const nativeBefore = await publicClient.getBalance({ address: recipient.address });
    const stableBefore = await stableBalance(recipient.address);
    const depoNativeBefore = await publicClient.getBalance({ address: contracts.depository });

    const receipt = await mined(
      walletFor(solver).writeContract({ address: contracts.depository, abi: RelayDepositoryAbi, functionName: 'execute', args: [req, signature] }),
    );

    expect(await publicClient.getBalance({ address: recipient.address })).toBe(nativeBefore + parseEther('0.5'));
    expect(await stableBalance(recipient.address)).toBe(stableBefore + 1_250_000n);
    expect(await publicClient.getBalance({ address: contracts.depository })).toBe(depoNativeBefore - parseEther('0.5'));

    const executed = parseEventLogs({ abi: RelayDepositoryAbi, eventName: 'RelayCallExecuted', logs: receipt.logs });
    expect(executed).toHaveLength(2);
    expect(executed.map((e) => e.args.id)).toEqual([callRequestId(req), callRequestId(req)]);
    expect(executed.map((e) => e.args.call)).toEqual(req.calls);
    expect(
      await publicClient.readContract({ address: contracts.depository, abi: RelayDepositoryAbi, functionName: 'callRequests', args: [callRequestId(req)] }),
    ).toBe(true);
  });

  it('rejects an expired request', async () => {
    const req: CallRequest = {
      calls: [nativeTransferCall(recipient.address, 1n)],
      nonce: randomCallRequestNonce(),
      expiration: (await latestTimestamp()) - 1n,
    };
    await expectRevert(simulateExecute(req, await sign(req)), 'CallRequestExpired');
  });

  it('rejects a replayed request, on chain, without paying twice', async () => {
    const req = await request([nativeTransferCall(recipient.address, 1_000n)]);
    const signature = await sign(req);
    const wallet = walletFor(solver);
    await mined(wallet.writeContract({ address: contracts.depository, abi: RelayDepositoryAbi, functionName: 'execute', args: [req, signature] }));
    const after = await publicClient.getBalance({ address: recipient.address });

    await expectRevert(simulateExecute(req, signature), 'CallRequestAlreadyUsed');
    // Force it on chain (explicit gas skips estimation): the transaction reverts and nothing moves.
    const hash = await wallet.writeContract({
      address: contracts.depository,
      abi: RelayDepositoryAbi,
      functionName: 'execute',
      args: [req, signature],
      gas: 200_000n,
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe('reverted');
    expect(await publicClient.getBalance({ address: recipient.address })).toBe(after);
  });

  it('rejects a signature from anyone but the allocator, or for another depository', async () => {
    const req = await request([nativeTransferCall(stranger.address, parseEther('0.1'))]);
    await expectRevert(simulateExecute(req, await sign(req, user)), 'InvalidSignature');
    await expectRevert(simulateExecute(req, await sign(req, allocator, contracts.filler)), 'InvalidSignature');
    await expectRevert(simulateExecute(req, '0x1234'), 'InvalidSignature');
    // The genuine signature works (so the rejections above are about the signer).
    await simulateExecute(req, await sign(req));
  });

  it("rejects the malleable (high-s) twin of the allocator's signature", async () => {
    const req = await request([nativeTransferCall(stranger.address, 1n)]);
    const signature = await sign(req);
    const r = signature.slice(2, 66);
    const s = BigInt(`0x${signature.slice(66, 130)}`);
    const v = Number.parseInt(signature.slice(130, 132), 16);
    const twin: Hex = `0x${r}${(SECP256K1_N - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}`;
    await expectRevert(simulateExecute(req, twin), 'InvalidSignature');
    await simulateExecute(req, signature);
  });

  it('reverts the whole request when a call fails and failure is not allowed', async () => {
    const tooMuch = (await stableBalance(contracts.depository)) + 1n;
    const req = await request([nativeTransferCall(stranger.address, 1n), erc20TransferCall(contracts.stablecoin, stranger.address, tooMuch)]);
    await expectRevert(simulateExecute(req, await sign(req)), 'CallFailed');
  });

  it('lets only the owner change the allocator', async () => {
    await expectRevert(
      publicClient.simulateContract({
        account: stranger,
        address: contracts.depository,
        abi: RelayDepositoryAbi,
        functionName: 'setAllocator',
        args: [stranger.address],
      }),
      'Unauthorized',
    );
  });
});

describe('OrderFiller', { timeout: 30_000 }, () => {
  const orderA = id('order-a');
  const orderB = id('order-b');

  it('fillNative forwards the value to the recipient and emits OrderFilled', async () => {
    const before = await publicClient.getBalance({ address: recipient.address });
    const receipt = await mined(
      walletFor(solver).writeContract({
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillNative',
        args: [orderA, recipient.address],
        value: parseEther('2'),
      }),
    );
    expect(await publicClient.getBalance({ address: recipient.address })).toBe(before + parseEther('2'));
    expect(await publicClient.getBalance({ address: contracts.filler })).toBe(0n);
    const events = parseEventLogs({ abi: OrderFillerAbi, eventName: 'OrderFilled', logs: receipt.logs });
    expect(events).toHaveLength(1);
    expect(events[0]!.args).toEqual({ orderId: orderA, solver: solver.address, recipient: recipient.address, token: zeroAddress, amount: parseEther('2') });
    expect(await publicClient.readContract({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'filled', args: [orderA] })).toBe(true);
  });

  it('fillErc20 moves tokens from the solver to the recipient and emits OrderFilled', async () => {
    const wallet = walletFor(solver);
    await mined(
      wallet.writeContract({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'approve', args: [contracts.filler, 2n ** 256n - 1n] }),
    );
    const recipientBefore = await stableBalance(recipient.address);
    const solverBefore = await stableBalance(solver.address);
    const receipt = await mined(
      wallet.writeContract({
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillErc20',
        args: [orderB, contracts.stablecoin, recipient.address, 3_000_000n],
      }),
    );
    expect(await stableBalance(recipient.address)).toBe(recipientBefore + 3_000_000n);
    expect(await stableBalance(solver.address)).toBe(solverBefore - 3_000_000n);
    const [event] = parseEventLogs({ abi: OrderFillerAbi, eventName: 'OrderFilled', logs: receipt.logs });
    expect(event?.args).toEqual({ orderId: orderB, solver: solver.address, recipient: recipient.address, token: contracts.stablecoin, amount: 3_000_000n });
  });

  it('rejects a second fill of the same order id with OrderAlreadyFilled', async () => {
    const native = await expectRevert(
      publicClient.simulateContract({
        account: solver,
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillNative',
        args: [orderA, recipient.address],
        value: 1n,
      }),
      'OrderAlreadyFilled',
    );
    expect(native.data?.args).toEqual([orderA]);
    const erc20 = await expectRevert(
      publicClient.simulateContract({
        account: solver,
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillErc20',
        args: [orderA, contracts.stablecoin, recipient.address, 1n],
      }),
      'OrderAlreadyFilled',
    );
    expect(erc20.data?.args).toEqual([orderA]);
  });

  it('lets no one but a solver fill', async () => {
    const orderC = id('order-c');
    const err = await expectRevert(
      publicClient.simulateContract({
        account: stranger,
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillNative',
        args: [orderC, stranger.address],
        value: 1n,
      }),
      'NotSolver',
    );
    expect(err.data?.args).toEqual([stranger.address]);
    expect(await publicClient.readContract({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'filled', args: [orderC] })).toBe(false);
  });

  it('reverts when the native payout cannot be delivered', async () => {
    // The stablecoin contract has no receive function, so it rejects plain value transfers.
    await expectRevert(
      publicClient.simulateContract({
        account: solver,
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillNative',
        args: [id('order-d'), contracts.stablecoin],
        value: 1n,
      }),
      'NativeTransferFailed',
    );
  });
});

describe('OrderFiller.fillBatch', { timeout: 30_000 }, () => {
  it('pays each order on its own: a filled-before order, a repeat inside the batch and a refusing recipient are skipped, the rest paid', async () => {
    const wallet = walletFor(solver);
    await mined(
      wallet.writeContract({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'approve', args: [contracts.filler, 2n ** 256n - 1n] }),
    );
    const earlier = id('batch-earlier');
    await mined(
      wallet.writeContract({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'fillNative', args: [earlier, recipient.address], value: 5n }),
    );
    const [n1, n2, e1, bad] = [id('batch-n1'), id('batch-n2'), id('batch-e1'), id('batch-bad')];
    const fills = [
      { orderId: n1, token: zeroAddress, recipient: recipient.address, amount: 100n },
      { orderId: earlier, token: zeroAddress, recipient: recipient.address, amount: 7n }, // filled before
      { orderId: bad, token: zeroAddress, recipient: contracts.stablecoin, amount: 11n }, // refuses value
      { orderId: e1, token: contracts.stablecoin, recipient: recipient.address, amount: 4_000_000n },
      { orderId: n1, token: zeroAddress, recipient: recipient.address, amount: 100n }, // twice in one batch
      { orderId: n2, token: zeroAddress, recipient: user.address, amount: 200n },
    ];
    const nativeBefore = await publicClient.getBalance({ address: recipient.address });
    const userBefore = await publicClient.getBalance({ address: user.address });
    const stableBefore = await stableBalance(recipient.address);
    const receipt = await mined(
      wallet.writeContract({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'fillBatch', args: [fills], value: 418n }),
    );

    const paid = parseEventLogs({ abi: OrderFillerAbi, eventName: 'OrderFilled', logs: receipt.logs }).map((e) => e.args.orderId);
    expect(paid).toEqual([n1, e1, n2]);
    const skipped = parseEventLogs({ abi: OrderFillerAbi, eventName: 'FillSkipped', logs: receipt.logs });
    expect(skipped.map((e) => [e.args.orderId, decodeErrorResult({ abi: OrderFillerAbi, data: e.args.reason }).errorName])).toEqual([
      [earlier, 'OrderAlreadyFilled'],
      [bad, 'NativeTransferFailed'],
      [n1, 'OrderAlreadyFilled'],
    ]);
    // Each paid exactly once; the skipped value returned to the solver, none left in the filler.
    expect(await publicClient.getBalance({ address: recipient.address })).toBe(nativeBefore + 100n);
    expect(await publicClient.getBalance({ address: user.address })).toBe(userBefore + 200n);
    expect(await stableBalance(recipient.address)).toBe(stableBefore + 4_000_000n);
    expect(await publicClient.getBalance({ address: contracts.filler })).toBe(0n);
    const filled = (o: Hex) => publicClient.readContract({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'filled', args: [o] });
    expect(await filled(bad)).toBe(false);
    expect(await filled(n2)).toBe(true);
    // A skipped order can still be paid on its own later; a paid one never again.
    await mined(
      wallet.writeContract({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'fillNative', args: [bad, recipient.address], value: 11n }),
    );
    await expectRevert(
      publicClient.simulateContract({
        account: solver,
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillNative',
        args: [n2, user.address],
        value: 1n,
      }),
      'OrderAlreadyFilled',
    );
  });

  it('lets no one but a solver fill a batch', async () => {
    await expectRevert(
      publicClient.simulateContract({
        account: stranger,
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillBatch',
        args: [[{ orderId: id('batch-stranger'), token: zeroAddress, recipient: stranger.address, amount: 1n }]],
        value: 1n,
      }),
      'NotSolver',
    );
  });

  it('costs at least 30% less gas per fill in a batch of 20 than a lone fill', async () => {
    const wallet = walletFor(solver);
    const lone = await mined(
      wallet.writeContract({
        address: contracts.filler,
        abi: OrderFillerAbi,
        functionName: 'fillNative',
        args: [id('gas-lone'), recipient.address],
        value: 1n,
      }),
    );
    const fills = Array.from({ length: 20 }, (_, i) => ({ orderId: id(`gas-batch-${i}`), token: zeroAddress, recipient: recipient.address, amount: 1n }));
    const batch = await mined(wallet.writeContract({ address: contracts.filler, abi: OrderFillerAbi, functionName: 'fillBatch', args: [fills], value: 20n }));
    expect(parseEventLogs({ abi: OrderFillerAbi, eventName: 'OrderFilled', logs: batch.logs })).toHaveLength(20);
    expect(batch.gasUsed * 100n).toBeLessThanOrEqual(lone.gasUsed * 20n * 70n);
  });
});

describe('TestStablecoin', { timeout: 30_000 }, () => {
  it('accepts an EIP-2612 permit signed by the holder, once', async () => {
    const nonces = () => publicClient.readContract({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'nonces', args: [user.address] });
    const nonce = await nonces();
    const deadline = (await latestTimestamp()) + 600n;
    const message = { owner: user.address, spender: stranger.address, value: 777n, nonce, deadline };
    const signature = await user.signTypedData({
      domain: { name: 'Test USD Coin', version: '1', chainId: CHAIN_ID, verifyingContract: contracts.stablecoin },
      types: {
        Permit: [
          { name: 'owner', type: 'address' },
          { name: 'spender', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'nonce', type: 'uint256' },
          { name: 'deadline', type: 'uint256' },
        ],
      },
      primaryType: 'Permit',
      message,
    });
    const r = `0x${signature.slice(2, 66)}` as Hex;
    const s = `0x${signature.slice(66, 130)}` as Hex;
    const v = Number.parseInt(signature.slice(130, 132), 16);
    const args = [user.address, stranger.address, 777n, deadline, v, r, s] as const;

    await mined(walletFor(stranger).writeContract({ address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'permit', args }));
    expect(
      await publicClient.readContract({
        address: contracts.stablecoin,
        abi: TestStablecoinAbi,
        functionName: 'allowance',
        args: [user.address, stranger.address],
      }),
    ).toBe(777n);
    expect(await nonces()).toBe(nonce + 1n);
    // The nonce moved on, so the same signature no longer recovers the holder.
    await expectRevert(
      publicClient.simulateContract({ account: stranger, address: contracts.stablecoin, abi: TestStablecoinAbi, functionName: 'permit', args }),
      'InvalidSignature',
    );
  });
});

describe('OrderHashProbe', { timeout: 30_000 }, () => {
  let probe: Address;

  beforeAll(async () => {
    const receipt = await mined(walletFor(deployer).deployContract({ abi: OrderHashProbeAbi, bytecode: OrderHashProbeBytecode }));
    probe = receipt.contractAddress!;
  });

  const hashOnChain = (order: OrderData) => publicClient.readContract({ address: probe, abi: OrderHashProbeAbi, functionName: 'hashOrder', args: [order] });

  it('computes the same EIP-712 struct hash as orderId() for a non-trivial order', async () => {
    const order: OrderData = {
      version: 'v2',
      solverChainId: '8453',
      solver: solver.address,
      salt: 0xdeadbeefcafen,
      inputs: [
        {
          payment: { chainId: '1', currency: '0x0000000000000000000000000000000000000000', amount: 1_000_000_000_000_000_000n, weight: 1n },
          refunds: [
            {
              chainId: '1',
              recipient: user.address,
              currency: '0x0000000000000000000000000000000000000000',
              minimumAmount: 990_000_000_000_000_000n,
              deadline: 1_900_000_000,
              extraData: '0x',
            },
            {
              chainId: '8453',
              recipient: stranger.address,
              currency: '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913',
              minimumAmount: 2_500_000_000n,
              deadline: 1_900_000_500,
              extraData: '0x01020304',
            },
          ],
        },
        {
          payment: { chainId: '792703809', currency: '0xc6fa7af3bedbad3a3d65f36aabc97431b1bbe4c2d2f6e0e47ca60203452f5d61', amount: 5_000_000n, weight: 3n },
          refunds: [
            {
              chainId: '792703809',
              recipient: '0x0b8a1c6e0a1d7a2f5c3e4d9b8a7f6e5d4c3b2a1908f7e6d5c4b3a29180f7e6d5',
              currency: '0xc6fa7af3bedbad3a3d65f36aabc97431b1bbe4c2d2f6e0e47ca60203452f5d61',
              minimumAmount: 4_900_000n,
              deadline: 4_294_967_295,
              extraData: '0xff',
            },
          ],
        },
      ],
      output: {
        chainId: '10',
        payments: [
          {
            recipient: recipient.address,
            currency: '0x0b2c639c533813f4aa9d7837caf62653d097ff85',
            minimumAmount: 3_400_000_000n,
            expectedAmount: 3_450_000_000n,
          },
          { recipient: user.address, currency: '0x0000000000000000000000000000000000000000', minimumAmount: 1n, expectedAmount: 2n },
        ],
        deadline: 1_900_001_000,
        calls: ['0xa9059cbb000000000000000000000000000000000000000000000000000000000000dead0000000000000000000000000000000000000000000000000000000000000001'],
        extraData: '0xabcdef',
      },
      fees: [
        {
          recipientChainId: '8453',
          recipient: deployer.address,
          currencyChainId: '1',
          currency: '0x0000000000000000000000000000000000000000',
          amount: 1_234_567n,
        },
      ],
    };
    const expected = orderId(order);
    expect(await hashOnChain(order)).toBe(expected);

    // And it is sensitive to nested fields: change one refund deadline and both sides move together.
    const changed: OrderData = structuredClone(order);
    changed.inputs[1]!.refunds[0]!.deadline = 1;
    expect(orderId(changed)).not.toBe(expected);
    expect(await hashOnChain(changed)).toBe(orderId(changed));
  });

  it('agrees on an order with empty arrays', async () => {
    const order: OrderData = {
      version: 'v2',
      solverChainId: '1',
      solver: zeroAddress,
      salt: 0n,
      inputs: [],
      output: { chainId: '1', payments: [], deadline: 0, calls: [], extraData: '0x' },
      fees: [],
    };
    expect(await hashOnChain(order)).toBe(orderId(order));
  });
});
