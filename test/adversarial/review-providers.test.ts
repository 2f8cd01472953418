// Adversarial review: exactly-once payment when a chain's RPC providers lag (src/chains/providers/,
// src/chains/evm/payoutSender.ts). A provider here is a load-balanced endpoint: receipts are served by a
// backend that trails the head (as providers serve receipt and log lookups from an indexing cluster of
// their own), every other call by the current one. Faithful to JSON-RPC: a receipt of a block the lagging
// backend has not reached is `null`, as a node answers for a transaction it does not hold.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, type Address } from 'viem';
import { JsonRpcProxy, type RpcCall } from '../helpers/jsonRpcProxy.ts';
import { pastFinality } from '../helpers/finality.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;

/** One provider of chain A whose receipts come from a backend `lag` blocks behind (none while it is 0). */
class ReceiptLagProxy extends JsonRpcProxy {
  lag = 0n;
  /** Receipts answered null though the chain holds them (the lagging backend's answers). */
  withheld = new Map<string, number>();

  protected async answer(c: RpcCall): Promise<unknown> {
    const head = { jsonrpc: '2.0', id: c.id };
    const a = await this.forward(c.method, c.params);
    if (this.lag > 0n && (c.method === 'eth_getTransactionReceipt' || c.method === 'eth_getTransactionByHash') && a.result) {
      const tip = BigInt((await this.forward('eth_blockNumber')).result as string);
      const bn = a.result.blockNumber ? BigInt(a.result.blockNumber) : undefined;
      if (bn !== undefined && bn > tip - this.lag) {
        if (c.method === 'eth_getTransactionReceipt') {
          const h = String((c.params ?? [])[0]).toLowerCase();
          this.withheld.set(h, (this.withheld.get(h) ?? 0) + 1);
          return { ...head, result: null };
        }
        // The lagging backend holds the transaction in its pool only.
        return { ...head, result: { ...a.result, blockNumber: null, blockHash: null, transactionIndex: null } };
      }
    }
    return { ...a, ...head };
  }
}

let s: Stack;
let proxies: ReceiptLagProxy[] = [];
const lagReceipts = (blocks: bigint) => proxies.forEach((p) => (p.lag = blocks));
const withheld = () => proxies.reduce((n, p) => n + [...p.withheld.values()].reduce((a, b) => a + b, 0), 0);

// Chain A reached through one such provider (the node's default, `rpcUrl`), or two of them under a quorum of 2: each
// answers the receipt read and the head read of one batch from different backends, so the head check passes.
async function startWith(providers: 1 | 2): Promise<void> {
  proxies = [];
  s = await startStack({
    chains: async (_devnet, chains) =>
      Promise.all(
        (chains as { id: number; rpcUrl: string }[]).map(async (c) => {
          if (c.id !== A) return c;
          for (let i = 0; i < providers; i++) proxies.push(await new ReceiptLagProxy(c.rpcUrl).start());
          if (providers === 1) return { ...c, rpcUrl: proxies[0]!.url };
          return { ...c, rpcUrl: undefined, rpc: proxies.map((p, i) => ({ url: p.url, name: `lb${i}` })), quorum: 2 };
        }),
      ),
  });
}
async function stop(): Promise<void> {
  await s?.stop();
  for (const p of proxies) await p.stop();
}

const chain = (id: number) => s.devnet.chains.find((c) => c.id === id)!;
const usdc = (id: number) => chain(id).contracts.stablecoin;
const account = (i: number) => s.devnet.accounts[i]!;
const balanceOf = (who: Address) => s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

describe.each([1, 2] as const)('a lagging receipt backend (%i load-balanced providers)', (providers) => {
  beforeAll(() => startWith(providers), 120_000);
  afterAll(stop);

  it('never has a claim (a plain transfer) paid twice: the nonce its own transaction used is not taken for one something else used', async () => {
    // App fees owed to feeTo on chain B, from an ordinary order.
    const feeTo = account(3).address;
    const q = await api(s.url, '/quote', {
      body: {
        user: account(1).address,
        originChainId: A,
        destinationChainId: B,
        originCurrency: usdc(A),
        destinationCurrency: usdc(B),
        amount: '1000000000',
        tradeType: 'EXACT_INPUT',
        appFees: [{ recipient: feeTo, fee: 100 }],
      },
    });
    expect(q.status).toBe(200);
    await executeSteps(s, q.body, 1);
    await waitForStatus(s.url, q.body.steps.at(-1).requestId, ['success']);

    // Claimable once the deposit on A is final.
    await pastFinality(s, A);
    // From now on chain A's receipts come from a backend 5 blocks behind (the devnet mines on each transaction).
    lagReceipts(5n);
    const ask = await api(s.url, `/app-fees/${feeTo}/claim`, { body: { chainId: A, currency: usdc(A), recipient: feeTo, amount: '10000000' } });
    expect(ask.status).toBe(200);
    const item = ask.body.steps[0].items[0].data;
    const wallet = s.wallet(3, A);
    const signature = await wallet.signMessage({ account: wallet.account!, message: item.sign.message });
    const before = await balanceOf(feeTo);
    const paid = await api(s.url, `${item.post.endpoint}?signature=${signature}`, { body: item.post.body });
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    const claimed = BigInt(paid.body.amount);
    expect(claimed).toBeGreaterThan(0n);

    // The claim lands (its block mined at once); the node looks for its receipt several times and is served none.
    await until(async () => ((await balanceOf(feeTo)) - before >= claimed ? true : undefined), 'the claim landed');
    await until(() => (withheld() >= 6 ? true : undefined), 'looks without a receipt', 20_000);
    // The backend catches up.
    for (let i = 0; i < 6; i++) await s.publicClient(A).request({ method: 'evm_mine' as any, params: [] as any });
    lagReceipts(0n);
    const claim = () => s.node.ledger.payouts.ofChain(A).filter((p) => p.kind === 'claim' && p.recipient.toLowerCase() === feeTo.toLowerCase());
    await until(() => (claim().length === 1 && claim()[0]!.state === 'success' ? true : undefined), 'the claim settled', 20_000);
    // Paid once: the recipient got the claim once, and the solver signed one claim transaction.
    expect((await balanceOf(feeTo)) - before).toBe(claimed);
    expect(s.node.ledger.payouts.txsOf(claim()[0]!.id).filter((t) => !t.cancel)).toHaveLength(1);
  }, 120_000);
});
