import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { authorize, flooded as floodedBlock, sendDeposit } from '../helpers/exchangeSteps.ts';
import { api, startStack, waitForStatus, type Stack } from '../helpers/stack.ts';

// A withdrawal from the exchange lands in a millisecond an attacker filled with 500 updates of the solver's ledger.
//
// The exchange answers at most 500 ledger updates of a time range, the oldest first, and a millisecond holding 500 cannot
// be read past them (the next page starts at the last one's time). It stamps updates with its block time, and anyone
// adds updates to the solver's ledger (a usdSend of 0.01 USD to it). The deposit source read the solver's ledger only:
// the user's transfer, the 501st update of its millisecond, was never read, so the user's 20 USD were neither filled nor
// refunded.
let s: Stack;
const BASE = 8453;
const EX = 1337;
const PERPS = `0x${'0'.repeat(32)}`;
const FLOOD = 500;

beforeAll(async () => {
  // The stand-in's clock stands still for the whole flood (seconds here, a block's millisecond on the exchange), so the
  // user's authorization after it comes seconds past the flood's time: the orphan grace is a minute, as by default,
  // rather than the devnet's 2 s.
  s = await startStack({
    chains: async (_devnet, chains) => (chains as { kind: string }[]).map((c) => (c.kind === 'exchange' ? { ...c, orphanGraceMs: 60_000 } : c)),
  });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const ex = () => s.devnet.exchange!;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const usdcBalance = (who: Address) => s.publicClient(BASE).readContract({ address: usdc(BASE), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

// One block of the exchange: 500 dust transfers to the solver, then `then` (test/helpers/exchangeSteps.ts).
const flooded = (then: () => Promise<void>) => floodedBlock(s, FLOOD, then);

// A withdrawal of 20 perps USD by a fresh user to a fresh recipient on 8453.
async function withdrawal() {
  const user = privateKeyToAccount(generatePrivateKey());
  ex().standin.credit(user.address, { perpsUsd: '30' });
  const recipient = privateKeyToAccount(generatePrivateKey()).address;
  const q = await api(s.url, '/quote/v2', {
    body: {
      user: user.address,
      recipient,
      originChainId: EX,
      destinationChainId: BASE,
      originCurrency: PERPS,
      destinationCurrency: usdc(BASE),
      amount: '20000000',
      tradeType: 'EXACT_INPUT',
      protocolVersion: 'v2',
    },
  });
  expect(q.status).toBe(200);
  return { user, recipient, quote: q.body, requestId: q.body.steps[0].requestId as string, out: BigInt(q.body.details.currencyOut.amount) };
}

async function filled(w: Awaited<ReturnType<typeof withdrawal>>) {
  // Before: the request stayed `waiting` for good (the indexer read the solver's ledger past the flooded millisecond),
  // the user's 20 USD kept by the solver.
  const done = await waitForStatus(s.url, w.requestId, ['success', 'failure', 'refund'], 60_000);
  expect(done.status).toBe('success');
  expect(await usdcBalance(w.recipient)).toBe(w.out);
  // The attacker's dust is booked as the orphans it is, never as the user's deposit.
  expect(s.node.ledger.deposits.forRequest(w.requestId).map((d) => d.depositor)).toEqual([w.user.address]);
}

describe('a withdrawal from the exchange in a millisecond holding 500 attacker updates of the solver ledger', () => {
  it('authorized first: read through the depositor wallet and filled', async () => {
    const w = await withdrawal();
    expect((await authorize(s, w.quote, w.user, BASE)).status).toBe(200);
    await flooded(async () => {
      expect((await sendDeposit(s, w.quote, w.user, BASE)).body).toMatchObject({ status: 'ok' });
    });
    await filled(w);
  }, 240_000);

  it('authorized after the transfer, within the orphan grace: read through the depositor wallet and filled', async () => {
    const w = await withdrawal();
    await flooded(async () => {
      expect((await sendDeposit(s, w.quote, w.user, BASE)).body).toMatchObject({ status: 'ok' });
    });
    expect((await authorize(s, w.quote, w.user, BASE)).status).toBe(200);
    await filled(w);
  }, 240_000);
});
