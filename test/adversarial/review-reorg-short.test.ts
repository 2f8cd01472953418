// Adversarial review: a reorg to a SHORTER fork, seen late (src/indexer/driver.ts, src/chains/providers/pool.ts).
// Chaos seed 471: chain 8453 was reverted past a deposit the node had already filled, to a fork shorter than the
// node's indexed tip, while one of the indexer's reads of a block above the new head was in flight. The pool lowered
// its floor to the shorter head after its 2 s wait, but that read, pinned to a block the chain no longer had, went on
// waiting for it (up to the pool's 30 s bound), so the indexer rewound only once the new fork had grown past the old
// tip, and the request was recorded DEPOSIT_REORGED late. Here the read in flight is made deterministic: a provider
// holds the indexer's block reads above the old tip until the chain has been reverted, then answers them (null: the
// block is gone), as a slow provider answering across the revert does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hex } from 'viem';
import { JsonRpcProxy, type RpcCall } from '../helpers/jsonRpcProxy.ts';
import { RpcProxy } from '../chaos/proxy.ts';
import { Rng } from '../chaos/prng.ts';
import { ProviderPool } from '../../src/chains/providers/index.ts';
import { startAnvil, type AnvilHandle } from '../../src/devnet/anvil.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { api, executeSteps, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const A = 8453;
const B = 10;
const CONFIRMATIONS = 3;

/** Shared by every provider of chain A: block reads above `above` wait until `release()` (then go to the chain as it is then). */
class Hold {
  above: bigint | undefined;
  held = 0;
  #waiting: (() => void)[] = [];
  /** Whether some read is held now. */
  get holding(): boolean {
    return this.#waiting.length > 0;
  }
  wait(): Promise<void> {
    this.held++;
    return new Promise((r) => this.#waiting.push(r));
  }
  release(): void {
    this.above = undefined;
    for (const r of this.#waiting.splice(0)) r();
  }
}

/** A provider of chain A that holds eth_getBlockByNumber for a block above `hold.above`, and head reads meanwhile (see Hold). */
class HoldingProxy extends JsonRpcProxy {
  constructor(
    target: string,
    private hold: Hold,
  ) {
    super(target);
  }

  protected async answer(c: RpcCall): Promise<unknown> {
    const tag = c.params?.[0];
    if (
      c.method === 'eth_getBlockByNumber' &&
      this.hold.above !== undefined &&
      typeof tag === 'string' &&
      tag.startsWith('0x') &&
      BigInt(tag) > this.hold.above
    )
      await this.hold.wait();
    // The head read batched with a held block read (the pool's head check) is answered with it, after the revert, as a
    // provider answers a batch at one point of its chain. (A batch's calls start in order: the block read is held first.)
    else if (c.method === 'eth_blockNumber' && this.hold.holding) await this.hold.wait();
    return { ...(await this.forward(c.method, c.params)), jsonrpc: '2.0', id: c.id };
  }
}

let s: Stack;
let hold: Hold;
let proxies: { stop(): Promise<void> }[] = [];

const rpc = (method: string, params: unknown[] = []) => s.publicClient(A).request({ method: method as any, params: params as any });
const chainHead = async () => Number(await s.publicClient(A).getBlockNumber({ cacheTime: 0 }));
const reorgsOnA = async () => (await s.node.metrics.reorgs.get()).values.find((v) => String(v.labels.chain) === String(A))?.value ?? 0;

// Chain A reached through `providers` holding providers (one: the node's rpcUrl; several: its providers list, quorum 2),
// and, with `lagging`, one more provider `lagging` blocks behind for good.
async function startWith(providers: number, lagging?: number): Promise<void> {
  hold = new Hold();
  proxies = [];
  s = await startStack({
    confirmations: CONFIRMATIONS,
    chains: async (_devnet, chains) =>
      Promise.all(
        (chains as { id: number; rpcUrl: string }[]).map(async (c) => {
          if (c.id !== A) return c;
          const urls: string[] = [];
          for (let i = 0; i < providers; i++) {
            const p = await new HoldingProxy(c.rpcUrl, hold).start();
            proxies.push(p);
            urls.push(p.url);
          }
          if (lagging !== undefined) {
            const behind = new RpcProxy({ target: c.rpcUrl, rng: new Rng(7), rates: { lag: 1 }, lagBlocks: lagging, lagMs: 1e9, label: 'laggy' });
            proxies.push(behind);
            urls.push(await behind.start());
          }
          if (urls.length === 1) return { ...c, rpcUrl: urls[0] };
          return { ...c, rpcUrl: undefined, rpc: urls.map((url, i) => ({ url, name: `p${i}` })) };
        }),
      ),
  });
}
async function stop(): Promise<void> {
  await s?.stop();
  for (const p of proxies) await p.stop();
}

// A deposit on A filled on B: its request id, and the snapshot taken just before it (the block below the deposit's).
async function filledDeposit(account: number): Promise<{ requestId: Hex; snapshot: Hex; block: number }> {
  const user = s.devnet.accounts[account]!.address;
  const q = await api(s.url, '/quote', { body: nativeBridge(user, user, A, B, '10000000000000000') });
  expect(q.status).toBe(200);
  const requestId = q.body.steps[0].requestId as Hex;
  const snapshot = (await rpc('evm_snapshot')) as Hex;
  const [tx] = await executeSteps(s, q.body, account);
  const block = Number((await s.publicClient(A).getTransactionReceipt({ hash: tx! })).blockNumber);
  await rpc('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);
  await waitForStatus(s.url, requestId, ['success']);
  return { requestId, snapshot, block };
}

// The indexer of A has recorded every block up to the chain's head.
async function indexedToHead(): Promise<number> {
  const head = await chainHead();
  return until(
    () => (s.node.ledger.indexer.tip(A)?.number === head && s.node.adapters.get(A)!.progress().indexed >= head ? head : undefined),
    'the indexer at the head',
  );
}

describe.each([1, 3])('a reorg to a shorter fork after the node filled a deposit (%i providers)', (providers) => {
  beforeAll(() => startWith(providers), 120_000);
  afterAll(stop);

  it('records DEPOSIT_REORGED on a shorter fork read between passes', async () => {
    const { requestId, snapshot, block } = await filledDeposit(3);
    await rpc('anvil_mine', ['0x6']);
    const oldTip = await indexedToHead();
    await rpc('evm_revert', [snapshot]);
    await rpc('anvil_mine', [`0x${(CONFIRMATIONS + 1).toString(16)}`]);
    const newHead = await chainHead();
    expect(newHead).toBe(block + CONFIRMATIONS);
    expect(newHead).toBeLessThan(oldTip);
    await until(
      () => (s.node.ledger.requests.get(requestId)?.fail_reason === 'DEPOSIT_REORGED' ? true : undefined),
      'the request recorded DEPOSIT_REORGED',
      15_000,
    );
    expect(await chainHead()).toBe(newHead);
    expect(s.node.ledger.payouts.forRequest(requestId).filter((p) => p.state === 'success')).toHaveLength(1);
  });

  it('records DEPOSIT_REORGED without waiting for the new fork to grow past the old tip, though a read of the old fork was in flight', async () => {
    const { requestId, snapshot, block } = await filledDeposit(1);
    // The node's tip well above the deposit's block and its confirmations.
    await rpc('anvil_mine', ['0x6']);
    const oldTip = await indexedToHead();
    const reorgsBefore = await reorgsOnA();

    // A pass reads the next blocks of the old fork; the provider answers its header reads only after the revert.
    hold.above = BigInt(oldTip);
    await rpc('anvil_mine', ['0x2']);
    await until(() => (hold.held > 0 ? true : undefined), 'a block read of the old fork in flight');

    // The new fork: from the block below the deposit, as many blocks as the deposit's confirmations (the indexer
    // reports an acted-on deposit gone once the new chain has gone that far past its old block), and no more:
    // well below the old tip, and it does not grow while the node decides.
    await rpc('evm_revert', [snapshot]);
    await rpc('anvil_mine', [`0x${(CONFIRMATIONS + 1).toString(16)}`]);
    const newHead = await chainHead();
    expect(newHead).toBe(block + CONFIRMATIONS);
    expect(newHead).toBeLessThan(oldTip);
    hold.release();

    // Before the fix: the read of the gone block waited out the pool's 30 s bound (or for the new fork to grow back
    // past it), and the request stayed `success` with no failReason past this bound.
    await until(
      () => (s.node.ledger.requests.get(requestId)?.fail_reason === 'DEPOSIT_REORGED' ? true : undefined),
      'the request recorded DEPOSIT_REORGED',
      15_000,
    );
    expect(await chainHead()).toBe(newHead);
    expect(await reorgsOnA()).toBeGreaterThan(reorgsBefore);
    // Paid once, and the indexer stands on the new fork.
    expect(s.node.ledger.payouts.forRequest(requestId).filter((p) => p.state === 'success')).toHaveLength(1);
    await until(() => (s.node.ledger.indexer.tip(A)?.number === newHead ? true : undefined), 'the indexer on the new fork');
    expect(s.node.adapters.get(A)!.progress().ready).toBe(true);
  });
});

describe('one provider lagging behind two others', () => {
  beforeAll(() => startWith(2, 5), 120_000);
  afterAll(stop);

  it('never rewinds: a provider behind is not a shorter chain', async () => {
    const before = await reorgsOnA();
    const { requestId } = await filledDeposit(2);
    // Well past the lagging provider's head, for longer than the pool's wait before it lowers its floor.
    const until2 = Date.now() + 5_000;
    while (Date.now() < until2) {
      await rpc('anvil_mine', ['0x1']);
      await indexedToHead();
    }
    // The provider was behind all along (the pool names it), and the node never took it for a shorter chain.
    const laggy = s.node.adapters
      .get(A)!
      .progress()
      .providers?.find((p) => p.name === 'p2');
    expect(laggy?.state).toMatch(/^behind by \d+ blocks$/);
    expect(await reorgsOnA()).toBe(before);
    expect(s.node.ledger.requests.get(requestId)?.fail_reason ?? null).toBeNull();
    expect(await waitForStatus(s.url, requestId, ['success'])).toMatchObject({ status: 'success' });
  });
});

describe('the provider pool on a chain that gets shorter under a call in flight', () => {
  let anvil: AnvilHandle;
  const call = async (method: string, params: unknown[] = []): Promise<any> => {
    const res = await fetch(anvil.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return ((await res.json()) as { result: unknown }).result;
  };
  beforeAll(async () => {
    anvil = await startAnvil({ chainId: 31337 });
    // A head above 0 (the pool takes a head of 0 for none).
    await call('anvil_mine', ['0x10']);
  });
  afterAll(() => anvil?.stop());

  // A read of the next block (as an indexer asks for a block one past the head it read) waits for it: the chain is
  // then reverted below it. Before: the read waited out maxWaitMs ("no provider answered ... in 30000 ms"), as long as
  // the chain did not grow back past it.
  it.each([1, 2])('fails a read pinned above the shorter chain once the floor goes down, rather than waiting for the block (%i providers)', async (n) => {
    const pool = new ProviderPool({
      chainId: 31337,
      providers: Array.from({ length: n }, (_, i) => ({ url: anvil.rpcUrl, name: `p${i}`, weight: 1, maxRps: 0, maxConcurrent: 32, role: 'any' as const })),
      metrics: createMetrics(),
      log: createLogger('silent'),
      maxWaitMs: 30_000,
      shorterAfterMs: 500,
    });
    const snap = await call('evm_snapshot');
    await call('anvil_mine', ['0x5']);
    await pool.request({ method: 'eth_getBlockByNumber', params: ['latest', false] });
    const top = pool.floor;
    const next = `0x${(top + 1n).toString(16)}`;
    const block = pool.request({ method: 'eth_getBlockByNumber', params: [next, false] });
    const logs = pool.quorum({ method: 'eth_getLogs', params: [{ fromBlock: next, toBlock: next }] });
    block.catch(() => {});
    logs.catch(() => {});
    await call('evm_revert', [snap]);
    const shorter = BigInt(await call('eth_blockNumber'));
    expect(shorter).toBeLessThan(top);
    await expect(block).rejects.toThrow(`needs block ${top + 1n}, above the head of the shorter chain (${shorter})`);
    await expect(logs).rejects.toThrow(`needs block ${top + 1n}, above the head of the shorter chain (${shorter})`);
    expect(pool.floor).toBe(shorter);
  });
});
