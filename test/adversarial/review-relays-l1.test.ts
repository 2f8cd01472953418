// Adversarial review: sponsored relays (POST /execute rawCalls) and the L1 data fee of OP-stack chains.
// Chain 10 of the devnet gets a stand-in of the GasPriceOracle predeploy (as in test/l1-data-fee.test.ts); 8453 has none.
//
// 1. A relay's max_gas is its estimate plus the chain's margin, and the sponsor's hold covered max_gas; but the submitter
//    sent it while its estimate then was at most max_gas and signed that estimate plus the margin again. A wallet whose
//    code needs more after admission and burns all it is given on chain cost the solver ~18% more than the hold.
// 2. The same double margin on a call order's fill: priced at max_gas, signed up to max_gas plus the margin.
//    Both fixed in the submitter: a payout with a max_gas is never signed with more.
// 3. An open deposit address's template kept its fill's L1 data fee as quoted for every arrival (only the L2 part was
//    repriced): arrivals after L1 fees rose cost the solver the difference, arrival after arrival. Fixed: the L1 part
//    moves with the chain's reference L1 fee (L1DataFee.reference), read in the solver's snapshot.
// The holdSubmitter window stands in for the time between a relay's (or a quote's) admission and its transaction:
// the attacker's own transaction lands there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, zeroHash, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { GasPriceOracleStandinAbi, GrowingBurnerAbi, GrowingBurnerBytecode, OrderFillerAbi } from '../../contracts-abi/index.ts';
import { GAS_PRICE_ORACLE } from '../../src/chains/evm/l1DataFee.ts';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { usdMicroCeil } from '../../src/lib/money.ts';
import { StaticPriceSource } from '../../src/quote/prices.ts';
import { fundAppBalance, linkWallet } from '../helpers/appBalance.ts';
import { installL1Oracle, l1FeeOf as l1FeeUpperBound } from '../helpers/l1Oracle.ts';
import { api, holdSubmitter, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
let s: Stack;
const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;

async function setL1Fees(baseFee: bigint, blobBaseFee: bigint) {
  const w = s.wallet(0, B);
  await s.publicClient(B).waitForTransactionReceipt({
    hash: await w.writeContract({
      account: w.account!,
      chain: w.chain,
      address: GAS_PRICE_ORACLE,
      abi: GasPriceOracleStandinAbi,
      functionName: 'setL1Fees',
      args: [baseFee, blobBaseFee, 2269, 1_055_778],
    }),
  });
}

beforeAll(async () => {
  s = await startStack({
    chains: async (devnet, chains) => {
      await installL1Oracle(devnet.chains.find((c) => c.id === B)!, devnet.accounts[0]!.privateKey);
      return chains;
    },
  });
  // L1 cheap at first: 1 gwei L1 base fee, a blob base fee at its floor (1 wei).
  await setL1Fees(1_000_000_000n, 1n);
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

// An EIP-7702 delegate whose work depends on whether it runs in an estimate (no fee fields: gas price 0) or on chain:
// estimated, it burns `rounds` hashes (a number its wallet sets); on chain, it burns all the gas it is given but a little.

describe('sponsored relays: what the solver pays stays within what the sponsor was held', () => {
  it('a relay whose gas grows after admission (within the recorded max_gas) costs no more than its hold', async () => {
    const pc = s.publicClient(A);
    const funder = s.wallet(1, A);
    const deployed = await funder.deployContract({ account: funder.account!, chain: funder.chain, abi: GrowingBurnerAbi, bytecode: GrowingBurnerBytecode });
    const delegate = (await pc.waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    // The attacker's own wallet, delegated to the delegate above.
    const wallet = privateKeyToAccount(generatePrivateKey());
    const setRounds = async (rounds: bigint, authorizationList?: Awaited<ReturnType<typeof funder.signAuthorization>>[]) =>
      pc.waitForTransactionReceipt({
        hash: await funder.sendTransaction({
          account: funder.account!,
          chain: funder.chain,
          to: wallet.address,
          data: encodeFunctionData({ abi: GrowingBurnerAbi, functionName: 'setRounds', args: [rounds] }),
          authorizationList,
        }),
      });
    await setRounds(2_000n, [await funder.signAuthorization({ account: wallet, contractAddress: delegate, chainId: A, nonce: 0 })]);
    const estimate = () => pc.estimateGas({ account: s.devnet.solver as Address, to: wallet.address, data: '0x' });
    const e0 = await estimate();
    await setRounds(3_000n);
    const perRound = ((await estimate()) - e0) / 1_000n;
    await setRounds(2_000n);

    // The attacker's app: a key whose sponsor wallet (account 3) holds 20 USDC.
    const key = s.node.ledger.apiKeys.create('relay gas grower');
    await linkWallet(s, key, 3);
    await fundAppBalance(s, 1, s.devnet.accounts[3]!.address, 20_000_000n);

    // The chain's base fee at its floor, its priority fee the bulk of the price (as on OP-stack chains, whose base
    // fee sits near its minimum most of the time): the hold's fee cap (twice the base fee plus the tip) is then about
    // the price the relay pays.
    await rpc(chain(A).rpcUrl, 'anvil_setNextBlockBaseFeePerGas', ['0x1']);
    await setRounds(2_000n);
    const release = holdSubmitter(s, A);
    let requestId: Hex;
    try {
      const res = await api(s.url, '/execute', {
        apiKey: key.key,
        body: {
          executionKind: 'rawCalls',
          data: { chainId: A, to: wallet.address, data: '0x', value: '0' },
          executionOptions: { referrer: 'x', subsidizeFees: true },
        },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      requestId = res.body.requestId as Hex;
      const maxGas = BigInt(s.node.ledger.payouts.get(`relay:${requestId}`)!.max_gas!);
      // Admitted at max_gas (the estimate plus the chain's margin); the wallet now needs just under it.
      await setRounds(2_000n + (maxGas - e0 - 2_000n) / perRound);
      const grown = await estimate();
      expect(grown).toBeLessThanOrEqual(maxGas);
      expect(grown).toBeGreaterThan((e0 * 115n) / 100n);
    } finally {
      release();
    }
    await waitForStatus(s.url, requestId, ['success', 'failure']);
    const payout = s.node.ledger.payouts.get(`relay:${requestId}`)!;
    const receipt = await pc.getTransactionReceipt({ hash: payout.tx_hash as Hex });
    const held = BigInt(s.node.ledger.balances.get(`sponsor_hold:${requestId}`)!.amount);
    const charged = -BigInt(s.node.ledger.balances.get(`sponsorship:${requestId}`)?.amount ?? 0);
    const price = (JSON.parse(s.node.ledger.requests.get(requestId)!.money!) as { relay: { nativeUsdPrice: string } }).relay.nativeUsdPrice;
    const paid = usdMicroCeil(receipt.gasUsed * receipt.effectiveGasPrice, 18, price);
    const seen = {
      maxGas: payout.max_gas,
      gasLimit: (await pc.getTransaction({ hash: payout.tx_hash as Hex })).gas,
      gasUsed: receipt.gasUsed,
      held,
      charged,
      paid,
    };
    // The solver's cost of the relay was within what the sponsor's hold promised (the hold is the most it may cost):
    // past it, the charge takes the sponsor's balance below what it had available, the rest paid by the solver.
    expect(
      paid,
      JSON.stringify(seen, (_, v) => (typeof v === 'bigint' ? v.toString() : v)),
    ).toBeLessThanOrEqual(held);
    expect(charged).toBe(paid);
  }, 120_000);
});

describe('destination calls: a fill costs no more gas than its quote priced', () => {
  it('a call whose gas grows after the quote (within the quoted limit) is not signed with more gas than was priced', async () => {
    // The same delegate as a plain contract, the call order's target on A; the order deposited on B.
    const pc = s.publicClient(A);
    const funder = s.wallet(1, A);
    const deployed = await funder.deployContract({ account: funder.account!, chain: funder.chain, abi: GrowingBurnerAbi, bytecode: GrowingBurnerBytecode });
    const target = (await pc.waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const setRounds = async (rounds: bigint) =>
      pc.waitForTransactionReceipt({
        hash: await funder.sendTransaction({
          account: funder.account!,
          chain: funder.chain,
          to: target,
          data: encodeFunctionData({ abi: GrowingBurnerAbi, functionName: 'setRounds', args: [rounds] }),
        }),
      });
    await setRounds(2_000n);
    // The base fee at its floor, the tip the bulk of the price (as on OP-stack chains most of the time); the quote
    // priced once the node has seen it.
    await rpc(chain(A).rpcUrl, 'anvil_setNextBlockBaseFeePerGas', ['0x1']);
    await setRounds(2_000n);
    const tip = await pc.estimateMaxPriorityFeePerGas();
    await until(async () => ((await s.node.chains.costs(A)!.feePerGas!()) <= tip + 1_000n ? true : undefined), 'the node pricing at the low base fee');
    const amount = 10n ** 15n;
    const q = await api(s.url, '/quote', {
      body: {
        user: s.devnet.accounts[2]!.address,
        originChainId: B,
        destinationChainId: A,
        originCurrency: '0x0000000000000000000000000000000000000000',
        destinationCurrency: '0x0000000000000000000000000000000000000000',
        amount: amount.toString(),
        tradeType: 'EXACT_OUTPUT',
        txs: [{ to: target, value: amount.toString(), data: '0x' }],
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const orderId = q.body.steps.at(-1).requestId as Hex;
    const r = s.node.ledger.requests.get(orderId)!;
    const maxGas = BigInt(JSON.parse(r.money!).maxGas);
    const priced = BigInt(JSON.parse(r.pricing!).gasFeeOut); // native to native: wei
    // The target now needs just under the quoted limit (the filler's own work included).
    const estimateFill = async () =>
      pc.estimateGas({
        account: s.devnet.solver as Address,
        to: chain(A).contracts.filler,
        value: amount,
        data: encodeFunctionData({
          abi: OrderFillerAbi,
          functionName: 'fillCalls',
          args: [zeroHash, s.devnet.accounts[2]!.address, [{ to: target, value: amount, data: '0x' }]],
        }),
      });
    const e0 = await estimateFill();
    await setRounds(3_000n);
    const perRound = ((await estimateFill()) - e0) / 1_000n;
    await setRounds(2_000n + (maxGas - e0 - 3_000n) / perRound);
    expect(await estimateFill()).toBeLessThanOrEqual(maxGas);
    const w = s.wallet(2, B);
    for (const step of q.body.steps) {
      for (const item of step.items) {
        const d = item.data;
        await s.publicClient(B).waitForTransactionReceipt({
          hash: await w.sendTransaction({ account: w.account!, chain: w.chain, to: d.to, data: d.data, value: BigInt(d.value) }),
        });
      }
    }
    await waitForStatus(s.url, orderId, ['success', 'failure', 'refund'], 60_000);
    const fill = s.node.ledger.payouts.get(`fill:${orderId}`)!;
    const receipt = await pc.getTransactionReceipt({ hash: fill.tx_hash as Hex });
    const gasLimit = (await pc.getTransaction({ hash: fill.tx_hash as Hex })).gas;
    const paid = receipt.gasUsed * receipt.effectiveGasPrice;
    const seen = JSON.stringify({ maxGas, gasLimit, gasUsed: receipt.gasUsed, priced, paid }, (_, v) => (typeof v === 'bigint' ? v.toString() : v));
    // The fill costs the solver no more than its quote charged for it: it is signed with no more gas than was priced.
    expect(paid, seen).toBeLessThanOrEqual(priced);
    expect(gasLimit, seen).toBeLessThanOrEqual(maxGas);
  }, 120_000);
});

describe('L1 data fee: an open deposit address arrival', () => {
  const l1FeeOf = (to: Address, data: Hex) => l1FeeUpperBound(s.publicClient(B), B, to, data);

  it("an arrival at an open address is charged its fill's L1 data fee at today's L1 fees, not the template's", async () => {
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const q = await api(s.url, '/quote/v2', {
      body: {
        user: s.devnet.accounts[1]!.address,
        recipient,
        refundTo: s.devnet.accounts[3]!.address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '60000000',
        tradeType: 'EXACT_INPUT',
        useDepositAddress: true,
        depositAddressType: 'open',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const template = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    // L1 dearer later (a blob fee spike): the blob base fee from its floor to 10,000 gwei.
    await setL1Fees(1_000_000_000n, 10_000_000_000_000n);
    s.node.solver!.invalidate();
    const w = s.wallet(1, A);
    await s.publicClient(A).waitForTransactionReceipt({
      hash: await w.sendTransaction({
        account: w.account!,
        chain: w.chain,
        to: usdc(A),
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [at, 100_000_000n] }),
      }),
    });
    const arrival = await until(
      () => (s.node.ledger.db.prepare('SELECT id FROM requests WHERE parent_id = ?').get(template) as { id: Hex } | undefined)?.id,
      'the arrival',
    );
    await waitForStatus(s.url, arrival, ['success']);
    const fill = s.node.ledger.payouts.get(`fill:${arrival}`)!;
    // The fill's L1 data fee at today's L1 fees (the oracle's bound for the node's fillErc20), in USDC units (ETH at
    // the devnet's configured price).
    const l1 = await l1FeeOf(
      chain(B).contracts.filler,
      encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillErc20', args: [zeroHash, usdc(B), recipient, 0n] }),
    );
    const price = await new StaticPriceSource().usdPrice(s.node.registry.native(B));
    const l1Usdc = usdMicroCeil(l1, 18, price);
    const kept = 100_000_000n - BigInt(fill.amount);
    // What the solver kept of the arrival covers at least the L1 data fee its fill pays today (before its L2 gas, its
    // sweep and its service fee).
    expect(kept, `kept ${kept} of the arrival; its fill's L1 data fee today ${l1} wei (${l1Usdc} USDC units)`).toBeGreaterThanOrEqual(l1Usdc);
  }, 120_000);
});
