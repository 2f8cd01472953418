// A deposit address paid in time while the node was down (a restart, a takeover), seen by the restarted watcher only
// after its quote expired. Found by the review of SVM and exchange restarts (the same family as EVM and SVM deposits
// made while the node was down).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, erc20Abi, type Address, type Hex } from 'viem';
import { depositAddressQuote, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

let s: Stack;
const BASE = 8453;

beforeAll(async () => {
  s = await startStack({ config: { quote: { ttlSeconds: 10 } } });
}, 120_000);

afterAll(async () => {
  await s?.stop();
});

describe('a deposit address paid in time while the node was down, seen after its quote expired', () => {
  it('is filled: judged by when the payment reached the address, not by when the restarted watcher saw it', { timeout: 120_000 }, async () => {
    const q = await depositAddressQuote(s);
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const id = q.body.steps.at(-1).requestId as Hex;
    const at = q.body.steps.at(-1).depositAddress as Address;
    const expiresAt = s.node.ledger.requests.get(id)!.expires_at!;
    const usdc = s.devnet.chains.find((c) => c.id === BASE)!.contracts.stablecoin;
    await s.restartNode(undefined, async () => {
      const w = s.wallet(1, BASE);
      const hash = await w.sendTransaction({
        account: w.account!,
        chain: w.chain,
        to: usdc,
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [at, 10_000_000n] }),
      });
      await s.publicClient(BASE).waitForTransactionReceipt({ hash });
      expect(Date.now()).toBeLessThan(expiresAt);
      await until(() => (Date.now() > expiresAt + 1_000 ? true : undefined), 'the quote to expire', 30_000);
    });
    const done = await waitForStatus(s.url, id, ['success', 'failure', 'refund'], 60_000);
    expect(done.status, JSON.stringify(done)).toBe('success');
  });
});
