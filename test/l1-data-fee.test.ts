// The L1 data fee of OP-stack chains: beside its L2 gas, every transaction there pays for posting its bytes to L1,
// taken from the sender at inclusion. The node's fills, refunds and sweeps on such a chain must charge it, and a
// destination call's calldata (as large as whoever quotes it likes) most of all. Chain 10 of the devnet gets a
// stand-in of the GasPriceOracle predeploy (anvil has none) with L1 fees a test sets; chain 8453 has none.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseEther, zeroAddress, zeroHash, type Address, type Hex } from 'viem';
import { DepositAddressFactoryAbi, OrderFillerAbi, RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { nativeTransferCall } from '../src/chains/evm/callRequest.ts';
import { GAS, refundGas } from '../src/chains/evm/gas.ts';
import { installL1Oracle, l1FeeOf as l1FeeUpperBound } from './helpers/l1Oracle.ts';
import { api, startStack, type Stack } from './helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;

// L1 dear against the devnet's L2 gas (200 gwei L1 base fee, 100 gwei blob base fee, Base's scalars), so that an
// unpriced L1 fee shows in any quote.
const L1 = { baseFee: 200_000_000_000n, blobBaseFee: 100_000_000_000n, baseFeeScalar: 2269, blobBaseFeeScalar: 1_055_778 };

beforeAll(async () => {
  s = await startStack({
    chains: async (devnet, chains) => {
      await installL1Oracle(devnet.chains.find((c) => c.id === B)!, devnet.accounts[0]!.privateKey, L1);
      return chains;
    },
  });
});
afterAll(async () => {
  await s?.stop();
});

const l1FeeOf = (to: Address, data: Hex) => l1FeeUpperBound(s.publicClient(B), B, to, data);

const filler = () => s.devnet.chains.find((c) => c.id === B)!.contracts.filler;
const depository = () => s.devnet.chains.find((c) => c.id === B)!.contracts.depository;

describe('L1 data fee (OP-stack chains)', () => {
  it("prices a fill's and a refund's L1 data fee from the chain's oracle, with its margin, on top of their L2 gas", async () => {
    const costs = s.node.chains.costs(B)!;
    const feePerGas = await costs.feePerGas!();
    const fill = await costs.fillCost({ currency: zeroAddress, recipient: s.devnet.accounts[1]!.address, amount: parseEther('0.01') });
    const fillL1 = await l1FeeOf(filler(), encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillNative', args: [zeroHash, zeroAddress] }));
    expect(fillL1).toBeGreaterThan(0n);
    // The oracle's bound for the node's transaction, twice (the default 100% margin for L1's rise before the fill).
    expect(fill.l1Native).toBeGreaterThanOrEqual(2n * fillL1);
    expect(fill.native).toBe(GAS.fill.native * feePerGas + fill.l1Native!);

    const refundData = encodeFunctionData({
      abi: RelayDepositoryAbi,
      functionName: 'execute',
      args: [{ calls: [nativeTransferCall(zeroAddress, 0n)], nonce: 0n, expiration: 0n }, `0x${'00'.repeat(65)}`],
    });
    const refund = await costs.refundCost(zeroAddress);
    expect(refund - refundGas(true) * feePerGas).toBeGreaterThanOrEqual(2n * (await l1FeeOf(depository(), refundData)));

    // A deposit address's sweep (the node's own transaction) likewise.
    const factory = s.devnet.chains.find((c) => c.id === B)!.contracts.depositAddressFactory;
    const sweepData = encodeFunctionData({ abi: DepositAddressFactoryAbi, functionName: 'sweep', args: [zeroAddress, zeroHash, zeroAddress] });
    expect((await costs.sweepCost!()) - GAS.sweep * feePerGas).toBeGreaterThanOrEqual(2n * (await l1FeeOf(factory, sweepData)));

    // A chain without the oracle (8453) prices none.
    const plain = await s.node.chains.costs(A)!.fillCost({ currency: zeroAddress, recipient: s.devnet.accounts[1]!.address, amount: parseEther('0.01') });
    expect(plain.l1Native ?? 0n).toBe(0n);
  });

  it("holds a sponsored relay's L1 data fee against its sponsor: the call's data priced at the oracle's bound", async () => {
    // A plain call to an account (no authorizations) carrying 10 KB of data.
    const terms = { to: s.devnet.accounts[3]!.address, data: `0x${'5a'.repeat(10_000)}` as Hex, value: 0n, authorizationList: [] };
    const sim = await s.node.chains.relay(B)!.simulateRelay(terms);
    expect(sim.l1Native).toBeGreaterThanOrEqual(2n * (await l1FeeOf(terms.to, terms.data)));
    expect((await s.node.chains.relay(A)!.simulateRelay(terms)).l1Native).toBe(0n);
  });

  it("charges a destination call's calldata its L1 data fee: 20 KB of data quoted to an account costs the quote, not the solver", async () => {
    const recipient = s.devnet.accounts[2]!.address;
    const data = `0x${'5a'.repeat(20_000)}` as Hex;
    const q = await api(s.url, '/quote', {
      body: {
        user: s.devnet.accounts[2]!.address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: parseEther('0.01').toString(),
        tradeType: 'EXACT_OUTPUT',
        txs: [{ to: recipient, value: parseEther('0.01').toString(), data }],
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    // The fill the node would send: fillCalls carrying the call's 20 KB.
    const fillData = encodeFunctionData({
      abi: OrderFillerAbi,
      functionName: 'fillCalls',
      args: [zeroHash, recipient, [{ to: recipient, value: parseEther('0.01'), data }]],
    });
    const l1 = await l1FeeOf(filler(), fillData);
    // Dear enough that an unpriced L1 fee cannot hide in the L2 part of the charge.
    expect(l1).toBeGreaterThan(parseEther('0.001'));
    // relayerGas: the destination gas the relayer pays, charged in the input currency (ETH here, at one price).
    expect(q.body.fees.relayerGas.currency.address.toLowerCase()).toBe(zeroAddress);
    expect(BigInt(q.body.fees.relayerGas.amount)).toBeGreaterThanOrEqual(2n * l1);
  });
});
