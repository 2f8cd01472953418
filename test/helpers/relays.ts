import { expect } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { api, holdSubmitter, type Stack } from './stack.ts';

/**
 * Admits a sponsored relay (POST /execute rawCalls, subsidizeFees) of `call` on `chainId`, by default a plain call to a
 * fresh wallet, while the chain's submitter is held: returns its request id, its payout's id, the fee cap its hold was
 * computed at (the node's price of gas at admission) and the release of the submitter (released already if it throws).
 */
export async function admitHeldRelay(
  s: Stack,
  chainId: number,
  key: { key: string },
  call: { to: Address; data: Hex } = { to: privateKeyToAccount(generatePrivateKey()).address, data: '0x' },
): Promise<{ requestId: Hex; payoutId: string; cap: bigint; release: () => void }> {
  const cap = await s.node.chains.costs(chainId)!.feePerGas!();
  const release = holdSubmitter(s, chainId);
  try {
    const res = await api(s.url, '/execute', {
      apiKey: key.key,
      body: { executionKind: 'rawCalls', data: { chainId, ...call, value: '0' }, executionOptions: { referrer: 'x', subsidizeFees: true } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const requestId = res.body.requestId as Hex;
    return { requestId, payoutId: `relay:${requestId}`, cap, release };
  } catch (e) {
    release();
    throw e;
  }
}
