import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEventLogs, zeroAddress, type Hex } from 'viem';
import { OrderFillerAbi } from '../contracts-abi/index.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

// Graceful drain (what SIGTERM runs): no new quotes, what is recorded is signed and broadcast,
// and a restarted node finishes everything, with nothing paid twice.
let s: Stack;
const A = 8453;
const B = 10;

beforeAll(async () => {
  s = await startStack({ blockTime: 1 });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const user = (i: number) => s.devnet.accounts[i]!.address;
const quote = (account: number) =>
  api(s.url, '/quote', {
    body: {
      user: user(account),
      originChainId: A,
      destinationChainId: B,
      originCurrency: zeroAddress,
      destinationCurrency: zeroAddress,
      amount: '10000000000000000',
      tradeType: 'EXACT_INPUT',
    },
  });

async function fillsOnChain(id: Hex) {
  const c = s.devnet.chains.find((x) => x.id === B)!;
  const logs = await s.publicClient(B).getLogs({ address: c.contracts.filler, fromBlock: 0n, toBlock: 'latest' });
  return parseEventLogs({ abi: OrderFillerAbi, logs, eventName: 'OrderFilled' }).filter((l) => l.args.orderId === id);
}

describe('graceful drain', () => {
  it('mid-fill: stops quoting (503), broadcasts what is recorded, and a restart loses nothing', async () => {
    const q1 = await quote(1);
    const q2 = await quote(2);
    const first = q1.body.steps.at(-1).requestId as Hex;
    const second = q2.body.steps.at(-1).requestId as Hex;
    await executeSteps(s, q1.body, 1);
    // Mid-fill: the fill is recorded (decided), not yet made.
    await until(() => (s.node.ledger.payouts.forRequest(first).length ? true : undefined), 'the fill to be recorded');
    const left = await s.node.drain(20_000);
    expect(left).toBe(0);
    const payouts = s.node.ledger.payouts.forRequest(first);
    expect(payouts.map((p) => p.kind)).toEqual(['fill']);
    expect(['sent', 'success']).toContain(payouts[0]!.state);
    expect(s.node.ledger.db.prepare(`SELECT COUNT(*) AS n FROM transactions WHERE state = 'signed'`).get()).toEqual({ n: 0 });
    const refused = await quote(3);
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ errorCode: 'NODE_DRAINING' });
    expect(refused.body.message).toContain('shutting down');
    // Reads keep answering while draining.
    expect((await api(s.url, `/intents/status/v3?requestId=${first}`)).status).toBe(200);
    // A deposit that lands while the node drains is not decided by it, and not lost.
    await executeSteps(s, q2.body, 2);
    await s.restartNode();
    expect((await waitForStatus(s.url, first, ['success', 'refund', 'failure'])).status).toBe('success');
    expect((await waitForStatus(s.url, second, ['success', 'refund', 'failure'])).status).toBe('success');
    expect(await fillsOnChain(first)).toHaveLength(1);
    expect(await fillsOnChain(second)).toHaveLength(1);
  });
});
