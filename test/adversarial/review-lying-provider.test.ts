// Adversarial review: ONE hostile RPC provider among a chain's several (src/chains/providers/pool.ts,
// src/chains/evm/priceFeed.ts). The hostile provider answers every JSON-RPC method as it likes, but cannot forge a
// signature or mine a block; the operator favours it (a paid, fast endpoint, weight 100 against 1), so it answers
// every read a single provider answers. Real anvil behind a lying JSON-RPC proxy, real HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { concat, createPublicClient, createWalletClient, http, keccak256, parseEther, zeroAddress, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { PriceFeedAbi, PriceFeedBytecode } from '../../contracts-abi/index.ts';
import { devnetChain } from '../../src/devnet/deploy.ts';
import type { Devnet } from '../../src/devnet/devnet.ts';
import { Connection, PublicKey } from '@solana/web3.js';
import { base58Encode } from '../../src/chains/svm/transactions.ts';
import { GAS_PRICE_ORACLE } from '../../src/chains/evm/l1DataFee.ts';
import { JsonRpcProxy, type RpcCall } from '../helpers/jsonRpcProxy.ts';
import { SvmLiarProxy } from '../helpers/svmLiarProxy.ts';
import { installL1Oracle } from '../helpers/l1Oracle.ts';
import { quoteEthToSol } from '../helpers/svmFill.ts';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
const GWEI = 1_000_000_000n;
// L1 fees as test/l1-data-fee.test.ts sets them (200 gwei L1 base fee, 100 gwei blob base fee, Base's scalars).
const L1 = { baseFee: 200_000_000_000n, blobBaseFee: 100_000_000_000n, baseFeeScalar: 2269, blobBaseFeeScalar: 1_055_778 };
const hex = (n: bigint) => `0x${n.toString(16)}`;
// latestRoundData(): (roundId, answer, startedAt, updatedAt, answeredInRound), the answer its second word.
const LATEST_ROUND_DATA = '0xfeaf968c';

// A transaction a provider says it holds in its pool (it holds nothing).
const pendingTx = (hash: string) => ({
  hash,
  blockHash: null,
  blockNumber: null,
  transactionIndex: null,
  from: '0x0000000000000000000000000000000000000001',
  to: '0x0000000000000000000000000000000000000001',
  nonce: '0x0',
  value: '0x0',
  input: '0x',
  gas: '0x5208',
  type: '0x2',
  maxFeePerGas: '0x1',
  maxPriorityFeePerGas: '0x1',
  chainId: hex(BigInt(B)),
  v: '0x0',
  r: '0x1',
  s: '0x1',
});

/** A provider that lies where told to, and forwards the rest to the chain. */
class LiarProxy extends JsonRpcProxy {
  /** eth_maxPriorityFeePerGas (and eth_gasPrice) answered with this, when set. */
  tip: bigint | undefined;
  /** An aggregator whose latestRoundData answer is multiplied by `times`, when set. */
  feed: { address: string; times: bigint } | undefined;
  /** A real transaction (by hash) shown, in the blocks served with their transactions, as a marked transfer of `value` to `to`. */
  forge: { hash: string; to: string; value: bigint; input: string } | undefined;
  /** Blocks asked by number are served with another hash (a branch that does not exist). */
  fakeHashes = false;
  /** The latest block served as this many blocks further on (its number only: a head the chain has not reached). */
  lead = 0;
  /** The L1 fee oracle said absent (no code) and its fee 0, when set. */
  l1Zero = false;
  /** eth_estimateGas answered with this, when set. */
  gas: bigint | undefined;
  estimates = 0;
  /** Signed transactions answered "sent" and dropped (then said to be pending, so that nobody sends them again). */
  dropSends = false;
  readonly dropped = new Set<string>();
  lies = 0;
  /** Made-up hashes served for blocks asked without their transactions (the indexer's header reads). */
  headerLies = 0;

  protected async answer(c: RpcCall): Promise<unknown> {
    const head = { jsonrpc: '2.0', id: c.id };
    const target = (c.params?.[0] as { to?: string } | string | undefined) ?? '';
    const at = (typeof target === 'string' ? target : (target.to ?? '')).toLowerCase();
    if (this.l1Zero && at === GAS_PRICE_ORACLE.toLowerCase() && (c.method === 'eth_getCode' || c.method === 'eth_call')) {
      this.lies++;
      return { ...head, result: c.method === 'eth_getCode' ? '0x' : `0x${'0'.repeat(64)}` };
    }
    if (c.method === 'eth_estimateGas' && this.gas !== undefined) {
      this.estimates++;
      return { ...head, result: hex(this.gas) };
    }
    if (c.method === 'eth_sendRawTransaction' && this.dropSends) {
      this.lies++;
      const hash = keccak256(c.params![0] as Hex);
      this.dropped.add(hash);
      return { ...head, result: hash };
    }
    if (c.method === 'eth_getTransactionByHash' && this.dropped.has(String(c.params?.[0]).toLowerCase())) {
      return { ...head, result: pendingTx(String(c.params![0])) };
    }
    if (c.method === 'eth_getBlockByNumber' && this.lead > 0 && c.params?.[0] === 'latest') {
      const a = await this.forward(c.method, c.params);
      const b = a.result as { number: string } | null;
      if (!b) return { ...a, ...head };
      this.lies++;
      return { ...head, result: { ...b, number: hex(BigInt(b.number) + BigInt(this.lead)) } };
    }
    if (c.method === 'eth_blockNumber' && this.lead > 0) {
      const a = await this.forward(c.method, c.params);
      this.lies++;
      return { ...head, result: hex(BigInt(a.result as string) + BigInt(this.lead)) };
    }
    if (c.method === 'eth_getBlockByNumber' && (this.forge || this.fakeHashes)) {
      const a = await this.forward(c.method, c.params);
      const b = a.result as { hash: string; transactions: ({ hash: string } | string)[] } | null;
      if (!b) return { ...a, ...head };
      if (this.forge && c.params?.[1] === true) {
        const forge = this.forge;
        b.transactions = b.transactions.map((x) => {
          if (typeof x === 'string' || x.hash.toLowerCase() !== forge.hash.toLowerCase()) return x;
          this.lies++;
          return { ...x, to: forge.to, value: hex(forge.value), input: forge.input };
        });
      }
      const tag = c.params?.[0];
      if (this.fakeHashes && typeof tag === 'string' && tag.startsWith('0x')) {
        this.lies++;
        if (c.params?.[1] !== true) this.headerLies++;
        b.hash = keccak256(concat([b.hash as Hex, '0x01']));
      }
      return { ...head, result: b };
    }
    if (this.tip !== undefined && (c.method === 'eth_maxPriorityFeePerGas' || c.method === 'eth_gasPrice')) {
      this.lies++;
      return { ...head, result: hex(this.tip) };
    }
    const a = await this.forward(c.method, c.params);
    const call = c.params?.[0] as { to?: string; data?: string; input?: string } | undefined;
    const data = call?.data ?? call?.input;
    if (
      this.feed &&
      c.method === 'eth_call' &&
      call?.to?.toLowerCase() === this.feed.address.toLowerCase() &&
      data?.startsWith(LATEST_ROUND_DATA) &&
      typeof a.result === 'string'
    ) {
      this.lies++;
      const words = a.result.slice(2).match(/.{64}/g)!;
      words[1] = (BigInt(`0x${words[1]}`) * this.feed.times).toString(16).padStart(64, '0');
      return { ...head, result: `0x${words.join('')}` };
    }
    return { ...a, ...head };
  }
}

let s: Stack;
let feed: Address;
const liars = new Map<number, LiarProxy>();
const others: JsonRpcProxy[] = [];

class Honest extends JsonRpcProxy {
  protected async answer(c: RpcCall): Promise<unknown> {
    return { ...(await this.forward(c.method, c.params)), jsonrpc: '2.0', id: c.id };
  }
}

// ETH's price on chain B comes from an aggregator on chain A (as test/price-feed.test.ts sets it up).
async function deployFeed(devnet: Devnet): Promise<Address> {
  const base = devnet.chains.find((c) => c.id === A)!;
  const wallet = createWalletClient({
    account: privateKeyToAccount(devnet.accounts[0]!.privateKey),
    chain: devnetChain(A, base.rpcUrl),
    transport: http(base.rpcUrl),
  });
  const hash = await wallet.deployContract({ abi: PriceFeedAbi, bytecode: PriceFeedBytecode, args: [8, 'ETH / USD', 300_000_000_000n] });
  const client = createPublicClient({ chain: devnetChain(A, base.rpcUrl), transport: http(base.rpcUrl) });
  return (await client.waitForTransactionReceipt({ hash })).contractAddress!;
}

beforeAll(async () => {
  s = await startStack({
    chains: async (devnet, chains) => {
      feed = await deployFeed(devnet);
      // B is an OP-stack chain: its L1 data fee is priced from the oracle predeploy.
      await installL1Oracle(devnet.chains.find((c) => c.id === B)!, devnet.accounts[0]!.privateKey, L1);
      return Promise.all(
        (chains as { id: number; rpcUrl: string; nativeCurrency: Record<string, unknown> }[]).map(async (c) => {
          if (c.id !== A && c.id !== B) return c;
          const liar = await new LiarProxy(c.rpcUrl).start();
          const honest = await new Honest(c.rpcUrl).start();
          liars.set(c.id, liar);
          others.push(honest);
          return {
            ...c,
            ...(c.id === B ? { nativeCurrency: { ...c.nativeCurrency, priceFeed: { chainId: A, aggregator: feed, maxAgeSeconds: 3600 } } } : {}),
            rpcUrl: undefined,
            // The hostile provider listed first, and favoured: it answers what one provider answers.
            rpc: [
              { url: liar.url, name: 'favoured', weight: 100 },
              { url: honest.url, name: 'honest', weight: 1 },
            ],
          };
        }),
      );
    },
  });
}, 120_000);

afterAll(async () => {
  await s?.stop();
  for (const p of [...liars.values(), ...others]) await p.stop();
});

const rpc = <T>(chain: number, method: string, params: unknown[] = []) =>
  s.publicClient(chain).request({ method: method as any, params: params as any }) as Promise<T>;

describe('one hostile provider of two', () => {
  it("the L1 data fee a quote charges is never the hostile provider's (no oracle, a fee of 0)", async () => {
    const adapter = s.node.adapters.get(B)! as unknown as { l1Reference(): Promise<bigint> };
    const liar = liars.get(B)!;
    liar.l1Zero = true;
    try {
      // The node may refuse to price (providers disagree), never price the L1 fee at 0.
      for (let i = 0; i < 3; i++) {
        const fee = await adapter.l1Reference().catch(() => undefined);
        expect(fee).not.toBe(0n);
        await rpc(B, 'evm_mine');
      }
      expect(liar.lies).toBeGreaterThan(0);
    } finally {
      liar.l1Zero = false;
    }
    // Honest again: the L1 fee is priced (the lie left nothing behind).
    await rpc(B, 'evm_mine');
    await until(async () => ((await adapter.l1Reference()) > 0n ? true : undefined), 'the L1 data fee priced');
  });

  it('a price feed read through the hostile provider cannot price ETH at ten times the market', async () => {
    const price = async () => (await api(s.url, `/currencies/token/price/v2?chainId=${B}&address=${zeroAddress}`)).body as { price?: string };
    expect((await price()).price).toBe('3000');
    liars.get(A)!.feed = { address: feed, times: 10n };
    try {
      // Past the feed's one-second cache: the node asks the aggregator again, through its providers.
      const before = liars.get(A)!.lies;
      await until(() => (liars.get(A)!.lies > before ? true : undefined), 'the node read the feed through the hostile provider', 20_000);
      for (let i = 0; i < 5; i++) {
        // The node may refuse to price (providers disagree), never price at the lie.
        expect((await price()).price).not.toBe('30000');
        await new Promise((r) => setTimeout(r, 300));
      }
      const q = await api(s.url, '/quote', {
        body: {
          user: s.devnet.accounts[1]!.address,
          originChainId: B,
          destinationChainId: A,
          originCurrency: zeroAddress,
          destinationCurrency: s.devnet.chains.find((c) => c.id === A)!.contracts.stablecoin,
          amount: '1000000000000000000',
          tradeType: 'EXACT_INPUT',
        },
      });
      // 1 ETH (3,000 USD) is never quoted at more than it is worth.
      if (q.status === 200) expect(BigInt(q.body.details.currencyOut.amount)).toBeLessThanOrEqual(3_000_000_000n);
    } finally {
      liars.get(A)!.feed = undefined;
    }
  }, 60_000);

  it("a fill is not sent with the hostile provider's priority fee (paid to the block's builder)", async () => {
    const user = s.devnet.accounts[2]!.address;
    const honestTip = BigInt(await rpc<Hex>(B, 'eth_maxPriorityFeePerGas'));
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps[0].requestId as Hex;
    // From now on the favoured provider of B names a tip of 500 gwei; a block on B has the node price fees again.
    const liar = liars.get(B)!;
    liar.tip = 500n * GWEI;
    try {
      await rpc(B, 'evm_mine');
      await until(() => (liar.lies > 0 ? true : undefined), 'the node read the priority fee after the new head', 20_000);
      await executeSteps(s, q.body, 2);
      await waitForStatus(s.url, requestId, ['success']);
      const fill = s.node.ledger.payouts.ofChain(B).find((p) => p.request_id === requestId)!;
      const [tx] = s.node.ledger.payouts.txsOf(fill.id).filter((t) => !t.cancel);
      expect(BigInt(tx!.max_priority_fee_per_gas)).toBeLessThanOrEqual(honestTip);
      const receipt = await s.publicClient(B).getTransactionReceipt({ hash: tx!.hash });
      const block = await s.publicClient(B).getBlock({ blockNumber: receipt.blockNumber });
      // What the solver paid per gas beyond the base fee: at most the honest market's tip.
      expect(receipt.effectiveGasPrice - block.baseFeePerGas!).toBeLessThanOrEqual(honestTip);
    } finally {
      liar.tip = undefined;
    }
  }, 60_000);

  it('a transaction the hostile provider shows as a marked transfer to the solver credits no app balance', async () => {
    // The attacker's real transaction: one wei to itself (successful, a receipt every provider agrees on). Signed
    // first, so that its hash is known before any block holding it is served.
    const attacker = s.devnet.accounts[4]!.address;
    const w = s.wallet(4, A);
    const request = await w.prepareTransactionRequest({ account: w.account!, chain: w.chain, to: attacker, value: 1n });
    const raw = await w.signTransaction(request as any);
    const hash = keccak256(raw);
    // Served in its block as 100 ETH to the solver, marked for the attacker's app balance.
    const liar = liars.get(A)!;
    const marker = `012345abcdef${attacker.slice(2).toLowerCase()}012345abcdef`;
    liar.forge = { hash, to: s.devnet.solver, value: parseEther('100'), input: `0x${marker}` };
    const credit = () => s.node.ledger.balances.get(`credit:${A}:${hash}`);
    const before = liar.lies;
    let receipt: { blockNumber: bigint } | undefined;
    try {
      await rpc(A, 'eth_sendRawTransaction', [raw]);
      receipt = await s.publicClient(A).waitForTransactionReceipt({ hash });
      await rpc(A, 'anvil_mine', ['0x3']);
      // The funding scan read the block through the hostile provider (it may refuse to go on while providers disagree).
      await until(() => (liar.lies > before || credit() ? true : undefined), 'the funding scan read the forged block', 30_000);
      expect(credit()).toBeUndefined();
    } finally {
      liar.forge = undefined;
    }
    // Honest again: the scan reads past the block, and credits nothing for a transfer of one wei to the attacker itself.
    await rpc(A, 'evm_mine');
    await until(
      () => ((s.node.ledger.indexer.cursor(A, 'app-balance') ?? 0) >= Number(receipt!.blockNumber) ? true : undefined),
      'the funding scan past the block',
      30_000,
    );
    expect(credit()).toBeUndefined();
  }, 90_000);

  it('block hashes the hostile provider makes up do not stop the indexer for good', async () => {
    const liar = liars.get(A)!;
    const before = liar.headerLies;
    liar.fakeHashes = true;
    try {
      // The chain moves on while the hostile provider answers the indexer's header reads (its tip check, its rewind).
      await until(
        async () => {
          await rpc(A, 'evm_mine');
          return liar.headerLies > before + 30 ? true : undefined;
        },
        'block reads answered by the hostile provider',
        30_000,
      );
    } finally {
      liar.fakeHashes = false;
    }
    // Honest again: a deposit on A is filled (the indexer still reads the chain).
    const user = s.devnet.accounts[3]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    await executeSteps(s, q.body, 3);
    await waitForStatus(s.url, q.body.steps[0].requestId, ['success']);
  }, 90_000);

  it('a hostile provider answering "sent" and dropping every transaction does not keep a fill off the chain', async () => {
    const user = s.devnet.accounts[2]!.address;
    const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const liar = liars.get(B)!;
    liar.dropSends = true;
    try {
      await executeSteps(s, q.body, 2);
      await waitForStatus(s.url, q.body.steps[0].requestId, ['success']);
      // Paid once, by one transaction.
      const fill = s.node.ledger.payouts.ofChain(B).find((p) => p.request_id === q.body.steps[0].requestId)!;
      expect(s.node.ledger.payouts.txsOf(fill.id).filter((t) => t.state === 'included')).toHaveLength(1);
      expect(liar.dropped.size).toBeGreaterThan(0);
    } finally {
      liar.dropSends = false;
    }
  }, 60_000);

  for (const [what, gas] of [
    ['10 million gas (every fill refused as over its quoted gas)', 10_000_000n],
    ['21,000 gas (a fill sent to run out of gas)', 21_000n],
  ] as const) {
    it(`a hostile provider estimating ${what} has no fill refunded nor reverted`, async () => {
      const user = s.devnet.accounts[2]!.address;
      const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000') });
      expect(q.status, JSON.stringify(q.body)).toBe(200);
      const requestId = q.body.steps[0].requestId as Hex;
      const liar = liars.get(B)!;
      const before = liar.estimates;
      liar.gas = gas;
      try {
        await executeSteps(s, q.body, 2);
        // The submitter estimated the fill through the hostile provider (or already settled it on that estimate).
        await until(
          async () =>
            liar.estimates > before + 1 ||
            ['success', 'failure', 'refund'].includes((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status)
              ? true
              : undefined,
          'the fill estimated by the hostile provider',
          30_000,
        );
      } finally {
        liar.gas = undefined;
      }
      const status = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
      expect(status.status).toBe('success');
      const fill = s.node.ledger.payouts.ofChain(B).find((p) => p.request_id === requestId)!;
      expect(s.node.ledger.payouts.txsOf(fill.id).filter((t) => t.state === 'reverted')).toHaveLength(0);
    }, 90_000);
  }
});

describe('one hostile provider of two, deposits waiting 3 blocks', () => {
  let st: Stack;
  let liar: LiarProxy;
  let honest: Honest;
  beforeAll(async () => {
    st = await startStack({
      confirmations: 3,
      chains: async (_devnet, chains) =>
        Promise.all(
          (chains as { id: number; rpcUrl: string }[]).map(async (c) => {
            if (c.id !== A) return c;
            liar = await new LiarProxy(c.rpcUrl).start();
            honest = await new Honest(c.rpcUrl).start();
            return {
              ...c,
              rpcUrl: undefined,
              rpc: [
                { url: liar.url, name: 'favoured', weight: 100 },
                { url: honest.url, name: 'honest', weight: 1 },
              ],
            };
          }),
        ),
    });
  }, 120_000);
  afterAll(async () => {
    await st?.stop();
    await liar?.stop();
    await honest?.stop();
  });

  it('a head the hostile provider claims 50 blocks on does not count a deposit confirmed early', async () => {
    const user = st.devnet.accounts[1]!.address;
    const q = await api(st.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000') });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps[0].requestId as Hex;
    liar.lead = 50;
    try {
      const [tx] = await executeSteps(st, q.body, 1);
      const block = Number((await st.publicClient(A).getTransactionReceipt({ hash: tx! })).blockNumber);
      // The node has read the deposit's block, and the head through the hostile provider a few times since.
      const before = liar.lies;
      await until(
        () => (liar.lies >= before + 5 && st.node.adapters.get(A)!.progress().indexed >= block ? true : undefined),
        "the deposit's block indexed, heads read through the hostile provider",
        30_000,
      );
      // The deposit has 1 block of the 3 it waits: nothing is paid for it.
      expect(st.node.ledger.payouts.ofChain(B).filter((p) => p.request_id === requestId)).toHaveLength(0);
    } finally {
      liar.lead = 0;
    }
    // Its blocks mined, it is filled.
    await st.publicClient(A).request({ method: 'anvil_mine' as any, params: ['0x3'] as any });
    await waitForStatus(st.url, requestId, ['success']);
  }, 90_000);
});

/**
 * An SVM provider that takes the node's transactions and keeps them ("sent", it answers), and names every blockhash it
 * gives out already expired (its lastValidBlockHeight 200 blocks early: 50 below the blockhash's own height).
 */
class SvmHoldingLiar extends JsonRpcProxy {
  hold = false;
  readonly held: string[] = [];
  earlyExpiry = false;
  /** The finalized heights it was asked (one per confirm pass of the node's SVM submitter). */
  epochReads = 0;

  protected async answer(c: RpcCall): Promise<unknown> {
    const head = { jsonrpc: '2.0', id: c.id };
    if (c.method === 'getEpochInfo') this.epochReads++;
    if (this.hold && c.method === 'sendTransaction') {
      const wire = String(c.params![0]);
      const bytes = Buffer.from(wire, 'base64');
      this.held.push(wire);
      // The first signature follows the signature count (one byte for a count below 128).
      return { ...head, result: base58Encode(bytes.subarray(1, 65)) };
    }
    const a = await this.forward(c.method, c.params);
    if (this.earlyExpiry && c.method === 'getLatestBlockhash' && a.result?.value) {
      return { ...head, result: { ...a.result, value: { ...a.result.value, lastValidBlockHeight: a.result.value.lastValidBlockHeight - 200 } } };
    }
    return { ...a, ...head };
  }

  /** Sends what it held to the chain, in order. */
  async release(): Promise<void> {
    for (const wire of this.held.splice(0)) await this.forward('sendTransaction', [wire, { encoding: 'base64', skipPreflight: true }]);
  }
}

/** The honest SVM provider, which can be made to refuse sends for a while (as a node that is unhealthy does). */
class SvmGate extends JsonRpcProxy {
  refuseSends = false;

  protected async answer(c: RpcCall): Promise<unknown> {
    const head = { jsonrpc: '2.0', id: c.id };
    if (this.refuseSends && c.method === 'sendTransaction') return { ...head, error: { code: -32005, message: 'Node is unhealthy' } };
    return { ...(await this.forward(c.method, c.params)), ...head };
  }
}

// A stack whose SVM chain is read through the providers `make` puts in front of the devnet's SVM RPC, the first
// favoured (by its weight): it answers every read a single provider answers.
async function svmStackBehind(make: (rpcUrl: string) => Promise<{ url: string; name: string; weight?: number }[]>): Promise<Stack> {
  return startStack({
    svm: true,
    chains: async (_devnet, chains) =>
      Promise.all(
        (chains as { id: number; rpcUrl: string; kind?: string }[]).map(async (c) => {
          if (c.kind !== 'svm') return c;
          const rpc = await make(c.rpcUrl);
          return { ...c, rpcUrl: rpc[0]!.url, rpc };
        }),
      ),
  });
}

describe('one hostile SVM provider of two', () => {
  let sv: Stack;
  let liar: SvmHoldingLiar;
  let gate: SvmGate;
  beforeAll(async () => {
    sv = await svmStackBehind(async (rpcUrl) => {
      liar = await new SvmHoldingLiar(rpcUrl).start();
      gate = await new SvmGate(rpcUrl).start();
      return [
        { url: liar.url, name: 'favoured', weight: 1000 },
        { url: gate.url, name: 'honest' },
      ];
    });
  }, 120_000);
  afterAll(async () => {
    await sv?.stop();
    await liar?.stop();
    await gate?.stop();
  });

  it('a blockhash named expired early cannot have a payout signed again while its first transaction can still land', async () => {
    const conn = new Connection(sv.devnet.svm!.rpcUrl, 'confirmed');
    // Past the finalization depth: a height 50 below a recent blockhash's is final.
    sv.devnet.svm!.rpc.advanceSlots(100);
    const { id, recipient, amount, quote } = await quoteEthToSol(sv, 1);
    // The honest provider refuses sends meanwhile: the hostile one alone takes them.
    gate.refuseSends = true;
    liar.hold = true;
    liar.earlyExpiry = true;
    const ledger = sv.node.ledger;
    try {
      const [hash] = await executeSteps(sv, quote, 1);
      await api(sv.url, '/transactions/index', { body: { txHash: hash, chainId: A } });
      await until(() => (liar.held.length >= 1 ? true : undefined), 'the fill handed to the hostile provider', 30_000);
      // Confirm passes at the finalized height the providers agree on, past the lied expiry (not the real one).
      const passes = liar.epochReads;
      await until(
        () => (ledger.payouts.txsOf(`fill:${id}`).length > 1 || liar.epochReads >= passes + 3 ? true : undefined),
        'confirm passes past the lied expiry',
        30_000,
      );
      // Never a second signature while the first transaction's blockhash is valid.
      expect(ledger.payouts.txsOf(`fill:${id}`)).toHaveLength(1);
    } finally {
      gate.refuseSends = false;
      liar.hold = false;
      liar.earlyExpiry = false;
      // The hostile provider sends everything it held.
      await liar.release();
    }
    const done = await waitForStatus(sv.url, id, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
    // Paid once.
    expect(BigInt(await conn.getBalance(new PublicKey(recipient), 'confirmed'))).toBe(amount);
  }, 90_000);
});

describe('one hostile SVM provider of three, the priority fee', () => {
  // The cap the SVM adapter holds a compute-unit price to (MAX_MICRO_LAMPORTS_PER_CU, micro-lamports).
  const CAP = 10_000_000;
  let sv: Stack;
  let liar: SvmLiarProxy;
  let honest: Honest;
  beforeAll(async () => {
    sv = await svmStackBehind(async (rpcUrl) => {
      liar = await new SvmLiarProxy(rpcUrl).start();
      honest = await new Honest(rpcUrl).start();
      return [
        { url: liar.url, name: 'favoured', weight: 1000 },
        { url: honest.url, name: 'honest' },
        { url: rpcUrl, name: 'honest-2' },
      ];
    });
  }, 120_000);
  afterAll(async () => {
    await sv?.stop();
    await liar?.stop();
    await honest?.stop();
  });

  it('a payout is not sent at the compute-unit price the hostile provider names (the cap)', async () => {
    // Every recent slot's fee named the cap, for the chain and for the payout's writable accounts alike.
    let chainWide = 0;
    liar.lying(({ method, params }, result) => {
      if (method !== 'getRecentPrioritizationFees') return result;
      if (!(params[0] as unknown[] | undefined)?.length) chainWide++;
      return (result as { slot: number }[]).map((f) => ({ ...f, prioritizationFee: CAP }));
    });
    try {
      // A quote that read the chain's fee through the hostile provider (past the adapter's 2 s cache of a read from
      // before it lied): the payout's bound (twice the chain's fee) is then the lie too.
      const { id, recipient, amount, quote } = await until(async () => {
        const before = chainWide;
        const q = await quoteEthToSol(sv, 1);
        return chainWide > before ? q : undefined;
      }, "a quote priced on the hostile provider's chain-wide fee");
      const [hash] = await executeSteps(sv, quote, 1);
      await api(sv.url, '/transactions/index', { body: { txHash: hash, chainId: A } });
      const done = await waitForStatus(sv.url, id, ['success', 'failure', 'refund'], 30_000);
      expect(done.status).toBe('success');
      expect(liar.lied.getRecentPrioritizationFees).toBeGreaterThan(0);
      const txs = sv.node.ledger.payouts.txsOf(`fill:${id}`);
      expect(txs).toHaveLength(1);
      // The compute-unit price signed (micro-lamports): the honest providers' (none paid on the devnet), not the cap.
      expect(BigInt(txs[0]!.max_fee_per_gas)).toBeLessThan(BigInt(CAP));
      const conn = new Connection(sv.devnet.svm!.rpcUrl, 'confirmed');
      expect(BigInt(await conn.getBalance(new PublicKey(recipient), 'confirmed'))).toBe(amount);
    } finally {
      liar.lying(undefined);
    }
  }, 90_000);
});
