import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address, Hex } from 'viem';
import { api, executeSteps, startStack, waitForStatus, type Stack, nativeBridge } from './helpers/stack.ts';

// Every log line about a request carries its id, under the one field name `requestId`: a line that
// names the request, its deposit, its payout or a transaction of either is found by that field.
let s: Stack;
const logLines: string[] = [];
const A = 8453;
const B = 10;
const BLOCKED_RECIPIENT = '0x00000000000000000000000000000000000b10C7' as Address;

beforeAll(async () => {
  s = await startStack({ logLines, config: { risk: { denyRecipients: [BLOCKED_RECIPIENT.toLowerCase()] } } });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

async function quoteAndDeposit(account: number, recipient: Address): Promise<{ requestId: Hex; depositTx: Hex }> {
  const user = s.devnet.accounts[account]!.address;
  const q = await api(s.url, '/quote', {
    body: nativeBridge(user, recipient, A, B, '10000000000000000'),
  });
  expect(q.status, JSON.stringify(q.body)).toBe(200);
  const requestId = q.body.steps.find((x: any) => x.id === 'deposit').requestId as Hex;
  const [depositTx] = await executeSteps(s, q.body, account);
  return { requestId, depositTx: depositTx! };
}

// What names the request in a log line: its id, its deposits' ids and transactions, its payouts'
// ids and their transactions' hashes.
function namesOf(requestId: Hex, depositTx: Hex): string[] {
  const ledger = s.node.ledger;
  const payouts = ledger.payouts.forRequest(requestId);
  const names = [
    requestId,
    depositTx,
    ...ledger.deposits.forRequest(requestId).map((d) => d.id),
    ...payouts.map((p) => p.id),
    ...payouts.flatMap((p) => ledger.payouts.txsOf(p.id).map((t) => t.hash)),
  ];
  return [...new Set(names.map((n) => n.toLowerCase()))];
}

function linesNaming(names: string[]): Record<string, unknown>[] {
  return logLines.filter((l) => names.some((n) => l.toLowerCase().includes(n))).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('log lines about a request', () => {
  it('carry requestId through a fill and a refund, from the deposit to the payout', { timeout: 120_000 }, async () => {
    const fill = await quoteAndDeposit(1, s.devnet.accounts[1]!.address);
    const refund = await quoteAndDeposit(2, BLOCKED_RECIPIENT);
    expect((await waitForStatus(s.url, fill.requestId, ['success', 'refund', 'failure'], 60_000)).status).toBe('success');
    expect((await waitForStatus(s.url, refund.requestId, ['success', 'refund'], 60_000)).status).toBe('refund');

    for (const { requestId, depositTx } of [fill, refund]) {
      const names = namesOf(requestId, depositTx);
      // The deposit, a payout and a transaction at least.
      expect(names.length).toBeGreaterThanOrEqual(4);
      const lines = linesNaming(names);
      const messages = lines.map((l) => l.msg);
      // One field name (the old `request` field is gone). The pipeline's steps are logged: decided, signed, paid.
      expect(messages).toEqual(
        expect.arrayContaining([expect.stringMatching(/fill queued|will not be filled/), expect.stringMatching(/signed and recorded/), 'payout paid']),
      );
      // Each offending line, with its fields, so that a failure names them all.
      const without = lines.filter((l) => l.requestId !== requestId || 'request' in l).map((l) => `${l.msg as string} {${Object.keys(l).join(',')}}`);
      expect(without).toEqual([]);
    }
  });
});
