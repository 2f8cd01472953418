// A fill to the SVM chain while a client keeps quoting to it: the fill's priority fee never waits on a read the API started.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Keypair } from '@solana/web3.js';
import { zeroAddress, type Hex } from 'viem';
import type { SvmAdapter } from '../../src/chains/svm/adapter.ts';
import { SVM_NATIVE } from '../../src/chains/address.ts';
import { isApiRead } from '../../src/lib/apiReads.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';

const SVM = 792703809;
const A = 8453;
let s: Stack;

beforeAll(async () => {
  s = await startStack({ svm: true });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const ethToSol = (recipient: string) =>
  api(s.url, '/quote/v2', {
    body: {
      tradeType: 'EXACT_INPUT',
      user: s.devnet.accounts[1]!.address,
      recipient,
      originChainId: A,
      destinationChainId: SVM,
      originCurrency: zeroAddress,
      destinationCurrency: SVM_NATIVE,
      amount: '100000000000000000',
    },
  });

describe("SVM's priority fee: a read the API started is never what the node's fill waits on", () => {
  // A quote to SVM prices the fill's priority fee through the adapter's 2 s cache (#priorityFee), which the payout's
  // own fee read joins. The quote's read is the API's: at the provider it waits for half the budget to be left to the
  // node's (e8b1b87), up to maxWaitMs, then fails. Held here (never answered while the API keeps quoting), as
  // eb5e617's tests hold the API's EVM fee reads.
  it('pays a fill to SVM while a client keeps quoting to SVM and its fee reads wait', async () => {
    const adapter = s.node.adapters.get(SVM) as SvmAdapter;
    const conn = adapter.conn as unknown as { getRecentPrioritizationFees: (c?: unknown) => Promise<unknown> };
    const original = conn.getRecentPrioritizationFees.bind(conn);
    const held: (() => void)[] = [];
    const reads: { api: boolean; writable: boolean }[] = [];
    let holding = true;
    conn.getRecentPrioritizationFees = (c?: unknown) => {
      const api = isApiRead();
      reads.push({ api, writable: c !== undefined });
      if (!api || !holding) return original(c);
      return new Promise((resolve, reject) => held.push(() => original(c).then(resolve, reject)));
    };
    let quoting = true;
    const quotes: Promise<unknown>[] = [];
    try {
      const q = await ethToSol(Keypair.generate().publicKey.toBase58());
      expect(q.status, JSON.stringify(q.body)).toBe(200);
      const requestId = q.body.steps.at(-1).requestId as Hex;
      // The attacker: a quote to SVM every 500 ms, each left waiting on its fee read.
      const attacker = (async () => {
        while (quoting) {
          quotes.push(ethToSol(Keypair.generate().publicKey.toBase58()));
          await new Promise((r) => setTimeout(r, 500));
        }
      })();
      quotes.push(attacker);
      await until(() => (reads.some((r) => r.api) ? true : undefined), "the API's fee read");
      await executeSteps(s, q.body, 1);
      const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'], 20_000);
      expect(done.status, JSON.stringify(done)).toBe('success');
    } finally {
      quoting = false;
      holding = false;
      for (const h of held.splice(0)) h();
      await Promise.allSettled(quotes);
      conn.getRecentPrioritizationFees = original;
    }
  }, 60_000);
});
