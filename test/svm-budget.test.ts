// An SVM chain's providers keep to their request budgets (`maxRps` in the chain's `rpc` list), and reads for the public
// API leave half of each to the node's own, as on an EVM chain (test/providers.test.ts). Against the real litesvm-backed
// JSON-RPC endpoint, over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvmRpcPool } from '../src/chains/svm/rpcPool.ts';
import { startSvmRpc, type SvmRpc } from '../src/devnet/svm/rpc.ts';
import { apiReads } from '../src/lib/apiReads.ts';

let rpc: SvmRpc;

beforeAll(async () => {
  rpc = await startSvmRpc({ slotIntervalMs: 50 });
});

afterAll(async () => {
  await rpc?.stop();
});

const pool = (maxRps: number) =>
  new SvmRpcPool({
    chain: { id: 792703809, rpcUrl: rpc.url, rpc: [{ url: rpc.url, name: 'metered', weight: 1, maxRps, maxConcurrent: 32, role: 'any' }] },
    maxWaitMs: 60_000,
  });

describe("an SVM chain's provider budget", () => {
  it("a read for the public API leaves half of a provider's budget to the node's own reads, which go first", async () => {
    // A client asking for quotes to the SVM chain as fast as it was answered spent the provider's budget: past it the
    // provider answers 429, which holds every read of the node (a payout's status, the vault's signatures) too.
    const p = pool(4);
    const call = { method: 'getVersion', params: [] };
    // The budget spent (a second's worth of calls), then four reads for the API waiting for it, then one of the node's.
    await Promise.all(Array.from({ length: 4 }, () => p.request(call)));
    let apiAnswered = 0;
    const waiting = Array.from({ length: 4 }, () => apiReads.run(true, () => p.request(call)).then(() => apiAnswered++));
    const beforeNode = await p.request(call).then(() => apiAnswered);
    await Promise.all(waiting);
    expect(apiAnswered).toBe(4);
    expect(beforeNode).toBe(0);
  });
});
