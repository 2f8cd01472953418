// Issue #19 (idle CPU, lone-fill latency): where a chain's provider pushes new heads (a websocket
// newHeads subscription), the indexer reads on each pushed head rather than at its poll, so its
// poll can be a rare backstop. Here the poll interval is ten minutes: a deposit is indexed, filled and
// its fill confirmed only because the heads the chains push wake the node (before, the deposit
// waited for the next poll, ten minutes away, and the bounded wait below failed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { api, startStack, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';

const A = 8453;
const B = 10;
const TEN_MINUTES = 600_000;

describe('a node whose chains push their heads (websocket)', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({
      chains: async (_devnet, chains) =>
        (chains as { id: number; rpcUrl: string }[]).map((c) =>
          c.id === A || c.id === B ? { ...c, rpcUrl: undefined, rpc: [{ url: c.rpcUrl.replace(/^http/, 'ws'), name: 'ws' }], pollIntervalMs: TEN_MINUTES } : c,
        ),
    });
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('indexes, fills and confirms a deposit on pushed heads, with no poll due', async () => {
    const user = s.devnet.accounts[1]!.address;
    const q = await api(s.url, '/quote', {
      body: nativeBridge(user, '0x000000000000000000000000000000000000dEaD', A, B, '100000000000000000'),
    });
    expect(q.status).toBe(200);
    const requestId = q.body.steps[0].requestId as Hex;
    const origin = s.devnet.chains.find((c) => c.id === A)!;
    // Sent straight to the chain: nothing tells the node about it (no POST /transactions/index).
    const w = s.wallet(1, A);
    await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: origin.contracts.depository,
      value: 10n ** 17n,
      data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [user, requestId] }),
    });
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'], 30_000);
    expect(done.status).toBe('success');
  });
});
