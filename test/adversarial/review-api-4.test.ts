// Adversarial review of the public API as a hostile client (fourth pass), end to end: the node is one process, one event
// loop, one ledger writer, and its RPC providers' budgets are shared by the API and the node's own work. What a client
// may do to delay a deposit's fill or refund by an amount it controls. Costs are counted (reads, and whose), never timed.
import { Connection, Transaction } from '@solana/web3.js';
import { zeroAddress, type Hex } from 'viem';
import { SVM_NATIVE } from '../../src/chains/address.ts';
import { ExchangeClient } from '../../src/chains/exchange/client.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderPool } from '../../src/chains/providers/pool.ts';
import type { RpcCall } from '../../src/chains/providers/provider.ts';
import { isApiRead } from '../../src/lib/apiReads.ts';
import { fillsOn } from '../helpers/devnetOrders.ts';
import { api, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const SVM = 792703809;
const EXCHANGE = 1337;
// The exchange's ledger is read every 3 s here (Hyperliquid weighs each read 20 of the 1,200 a minute it allows an address).
const EXCHANGE_POLL_MS = 3_000;
let s: Stack;
let conn: Connection;

beforeAll(async () => {
  // Base's and the SVM chain's indexers poll every 30 s: a deposit there is read when its report wakes the indexer, as
  // on a chain whose blocks come slower than the SDK reports (on the devnet's instant blocks, the indexer's own poll may
  // come first).
  s = await startStack({
    svm: true,
    chain: (c) => (c.id === 8453 || c.id === SVM ? { ...c, pollIntervalMs: 30_000 } : c.id === EXCHANGE ? { ...c, pollIntervalMs: EXCHANGE_POLL_MS } : c),
  });
  conn = new Connection(s.devnet.svm!.rpcUrl, 'confirmed');
}, 120_000);
afterAll(async () => s?.stop(), 120_000);

interface Read {
  method: string;
  chain: number;
  api: boolean;
  /** An eth_getLogs by block hash (the API's read of one transaction's block). */
  byBlockHash: boolean;
}

// Every chain read the node makes while `fn` runs, by method, and whether it was made as the public API's (a read that
// yields to the node's own: lib/apiReads.ts).
async function readsDuring<T>(fn: (reads: Read[]) => Promise<T>): Promise<T> {
  const { request } = ProviderPool.prototype;
  const reads: Read[] = [];
  ProviderPool.prototype.request = function (this: ProviderPool, call: RpcCall) {
    const filter = (call.params as unknown[] | undefined)?.[0] as { blockHash?: unknown } | undefined;
    reads.push({ method: call.method, chain: this.chainId, api: isApiRead(), byBlockHash: typeof filter?.blockHash === 'string' });
    return request.call(this, call);
  };
  try {
    return await fn(reads);
  } finally {
    ProviderPool.prototype.request = request;
  }
}

// A user's 0.03 ETH deposit from Base (8453) to Optimism (10): its request id and the deposit's transaction hash.
async function deposit(account: number): Promise<{ id: Hex; hash: Hex }> {
  const user = s.devnet.accounts[account]!.address;
  const q = await api(s.url, '/quote', { body: nativeBridge(user, user, 8453, 10, '30000000000000000') });
  expect(q.status).toBe(200);
  const item = q.body.steps[0].items[0].data;
  const wallet = s.wallet(account, 8453);
  const hash = await wallet.sendTransaction({ account: wallet.account!, chain: wallet.chain, to: item.to, data: item.data, value: BigInt(item.value) });
  return { id: q.body.steps[0].requestId, hash };
}

describe('a deposit reported on POST /transactions/index', () => {
  // The API marks every chain read made while it serves a request as the API's, and such a read yields to the node's own
  // (half of each provider's budget is kept for those, test/providers.test.ts): a client reading as fast as it is
  // answered cannot hold a fill's reads behind its own. The mark is an AsyncLocalStorage context, and it followed
  // everything the request set off. The SDK reports each deposit here right after sending it; the report wakes the
  // chain's indexer, and the indexer's pass, the solver's decision it wakes and the submitter's fill all ran as the
  // API's: the fill's eth_estimateGas waited with any client's reads for the half left to the API. And each of the
  // node's loops schedules its next pass from the one before: on the devnet's 50 ms poll, every later pass of Base's
  // indexer read as the API too, for good (an adversarial review's run: 40 of 40 head reads after the fill).
  it("wakes the node's indexer, solver and submitter as the node's own work, not the API's", async () => {
    // Quoted before the count: the quote's reads are the API's, rightly.
    const { id, hash } = await deposit(1);
    await readsDuring(async (reads) => {
      const indexed = await api(s.url, '/transactions/index', { body: { txHash: hash, chainId: 8453 } });
      expect([indexed.status, indexed.body.deposits]).toEqual([200, 1]);
      await waitForStatus(s.url, id, ['success'], 60_000);
      expect(await fillsOn(s.devnet, id)).toHaveLength(1);
      // Some of the node's own reads after the fill (the indexers' head reads, the solver's inventory).
      const after = reads.length;
      await until(() => (reads.length >= after + 20 ? true : undefined), "the node's own reads after the fill");
      // The request's own reads are the API's: the transaction, and its block's depository logs (by block hash).
      const requests = reads.filter((r) => r.method === 'eth_getTransactionByHash' || (r.method === 'eth_getLogs' && r.byBlockHash));
      expect(requests.map((r) => [r.chain, r.method, r.api])).toEqual([
        [8453, 'eth_getTransactionByHash', true],
        [8453, 'eth_getLogs', true],
      ]);
      // Everything else is the node's: the indexer's pass the report woke, the solver's, the fill's estimate and send.
      // Before, on this run: Base's indexer's head and range reads, and the fill's eth_estimateGas and
      // eth_sendRawTransaction on Optimism, were the API's.
      expect(reads.filter((r) => !requests.includes(r) && r.api).map((r) => `${r.chain}:${r.method}`)).toEqual([]);
      expect(reads.some((r) => r.chain === 10 && r.method === 'eth_estimateGas')).toBe(true);
    });
  });
});

describe('an SVM deposit reported on POST /transactions/index', () => {
  // On SVM the report reads the transaction and records its deposit confirmed at once, from within the request: the
  // confirmation wakes the solver there, and the solver's pass (its inventory and prices, read for the decision) ran as
  // the API's reads.
  it("wakes the solver as the node's own work, not the API's", async () => {
    const user = s.devnet.svm!.keypair(0);
    const q = await api(s.url, '/quote/v2', {
      body: {
        user: user.publicKey.toBase58(),
        recipient: s.devnet.accounts[2]!.address,
        originChainId: SVM,
        destinationChainId: 10,
        originCurrency: SVM_NATIVE,
        destinationCurrency: zeroAddress,
        amount: '1000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    const tx = Transaction.from(Buffer.from(step.items[0].data.transaction, 'base64'));
    tx.partialSign(user);
    const sig = await conn.sendRawTransaction(tx.serialize(), { skipPreflight: false, preflightCommitment: 'confirmed' });
    await readsDuring(async (reads) => {
      // The decision reads inventory and prices afresh (as it does once its last reading is a second old).
      s.node.solver!.invalidate();
      const indexed = await api(s.url, '/transactions/index', { body: { txHash: sig, chainId: SVM } });
      expect([indexed.status, indexed.body.deposits]).toEqual([200, 1]);
      await waitForStatus(s.url, step.requestId, ['success'], 60_000);
      // The request reads the SVM chain only: every EVM read meanwhile is the node's own (the solver's inventory, the
      // fill's estimate and send). Before: the solver's reads of the EVM chains' balances and fees were the API's.
      const evm = reads.filter((r) => r.chain !== SVM);
      expect(evm.filter((r) => r.api).map((r) => `${r.chain}:${r.method}`)).toEqual([]);
      expect(evm.some((r) => r.method === 'eth_getBalance')).toBe(true);
    });
  });
});

describe('reports of exchange transfers on POST /transactions/index', () => {
  // On the exchange a report reads nothing of its own: it has the indexer read the solver's ledger now (a whole pass),
  // whatever the hash names. A ledger read weighs 20 of the 1,200 a minute the exchange allows an address, a budget the
  // node's fills, refunds and balance reads on the exchange share. A client without a key may report 60 times a minute
  // (the quotes' bucket), with a key 6,000, and each report was one more read of the ledger, as fast as the exchange
  // answered (before: 40 reports of made-up hashes, 10 ms apart, 40 reads).
  it('force at most a pass per poll interval, whatever their rate: the rest wait for it', async () => {
    const { ledgerUpdates } = ExchangeClient.prototype;
    let reads = 0;
    ExchangeClient.prototype.ledgerUpdates = function (this: ExchangeClient, ...a: Parameters<typeof ledgerUpdates>) {
      reads++;
      return ledgerUpdates.apply(this, a);
    };
    try {
      const started = Date.now();
      const answers: Promise<{ status: number; body: { deposits?: number } }>[] = [];
      // 40 reports, one every 10 ms, each of a hash no transfer has: a flood from one address without a key.
      for (let i = 0; i < 40; i++) {
        answers.push(api(s.url, '/transactions/index', { body: { txHash: `0x${(0xbad00000 + i).toString(16).padStart(64, '0')}`, chainId: EXCHANGE } }));
        await new Promise((r) => setTimeout(r, 10));
      }
      const answered = await Promise.all(answers);
      // Each answered as before: no deposit there.
      expect(answered.map((a) => [a.status, a.body.deposits])).toEqual(answered.map(() => [200, 0]));
      // The indexer's own pass per poll interval, and at most two passes the reports force per interval. After: 3 reads.
      const intervals = Math.ceil((Date.now() - started) / EXCHANGE_POLL_MS) + 1;
      expect(reads).toBeLessThanOrEqual(3 * intervals);
    } finally {
      ExchangeClient.prototype.ledgerUpdates = ledgerUpdates;
    }
  });
});
