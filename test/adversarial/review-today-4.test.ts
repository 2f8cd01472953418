// Adversarial review of the session's commits 031fa0c..d575b39 (review-today-4): each test failed before its fix.
// Against the real litesvm-backed JSON-RPC endpoint, over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvmRpcPool } from '../../src/chains/svm/rpcPool.ts';
import { startSvmRpc, type SvmRpc } from '../../src/devnet/svm/rpc.ts';
import { apiReads } from '../../src/lib/apiReads.ts';

let rpc: SvmRpc;

beforeAll(async () => {
  rpc = await startSvmRpc({ slotIntervalMs: 50 });
});
afterAll(async () => {
  await rpc?.stop();
});

describe("e8b1b87: the reads one API request starts together and an SVM provider's budget", () => {
  // The pool checked a provider's budget, then spent it after the caller's await: calls started in one tick (a quote's
  // mint, rent and fee reads; a listing's balances) each passed a check that left room for one. A request of the API
  // reading eight things at once sent all eight against a budget of 4 a second, past the half it leaves to the node's
  // own reads (and past maxRps: the provider's 429 then pauses every read, the node's too).
  it("take no more than the API's half: the node's read started after them goes before the rest", async () => {
    const p = new SvmRpcPool({
      chain: { id: 792703809, rpcUrl: rpc.url, rpc: [{ url: rpc.url, name: 'metered', weight: 1, maxRps: 4, maxConcurrent: 32, role: 'any' }] },
      maxWaitMs: 60_000,
    });
    const call = { method: 'getVersion', params: [] };
    let apiAnswered = 0;
    const burst = apiReads.run(true, () => Promise.all(Array.from({ length: 8 }, () => p.request(call).then(() => apiAnswered++))));
    const beforeNode = await p.request(call).then(() => apiAnswered);
    await burst;
    expect(apiAnswered).toBe(8);
    // Half of the budget of 4: before the fix, all 8.
    expect(beforeNode).toBeLessThanOrEqual(2);
  });
});
