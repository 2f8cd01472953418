// Adversarial review of the day's commits (c88a9d2: a flooded millisecond of the exchange read through depositor
// wallets; c6e4e23: a sponsored relay's own fee cap; 1743daf: app fees claimable past their deposit's finality).
//
// A fast-filled withdrawal from the exchange whose transfer lands in a millisecond an attacker flooded. The exchange
// lists at most 500 ledger updates of a millisecond, so c88a9d2 reads such a millisecond through the ledger of every
// wallet that authorized a nonce the exchange could take then, for a request still 'waiting'. A fast fill moves its
// request out of 'waiting' (pending, then success) before its deposit comes, though that deposit is what settles it:
// its wallet was never read, the user's transfer never booked, and at the hold's deadline the app that fast-filled
// paid the whole input (a permanent debit) while the solver kept the user's transfer unbooked.
//
// c6e4e23: a relay waiting unsigned on its own fee cap is postponed, and stays queued. The submitter read the chain's
// 500 oldest queued payouts (payouts.queued, QUEUED_BATCH) and skipped those postponed: an app that had 500 cheap relays
// admitted at a low base fee (each hold a few cents, never charged while it waits) held every later fill and refund of
// the chain out of that window for as long as the base fee stayed above their caps (fixed in src/submitter/pipeline.ts).
//
// Real devnet (anvil, the exchange stand-in), the node over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { depositId } from '../../src/chains/exchange/depositSource.ts';
import { fundAppBalance, linkWallet } from '../helpers/appBalance.ts';
import { authorize, dustSender, flooded as floodedBlock, sendDeposit } from '../helpers/exchangeSteps.ts';
import { api, executeSteps, holdSubmitter, nativeBridge, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { mineAtBaseFee } from '../helpers/baseFee.ts';

let s: Stack;
const BASE = 8453;
const EX = 1337;
const PERPS = `0x${'0'.repeat(32)}`;
const FLOOD = 500;
let app: { key: string; id: string };
// Devnet account 4 holds the app's balance.
const APP_WALLET = 4;

beforeAll(async () => {
  s = await startStack();
  app = s.node.ledger.apiKeys.create('app');
  await linkWallet(s, app, APP_WALLET);
  await fundAppBalance(s, APP_WALLET, s.devnet.accounts[APP_WALLET]!.address, 100_000_000n);
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const ex = () => s.devnet.exchange!;
const state = () => ex().standin.state;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const usdcBalance = (who: Address) => s.publicClient(BASE).readContract({ address: usdc(BASE), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

// One block of the exchange: 500 dust transfers to the solver, then `then` (test/helpers/exchangeSteps.ts).
const flooded = (then: () => Promise<void>) => floodedBlock(s, FLOOD, then);

// The exchange indexer's cursor has moved past `t`: whatever it was going to read of that millisecond, it has read
// (one more update after it gives the cursor somewhere to go; it moves past `t` once the orphan grace has passed).
async function readPast(t: number): Promise<void> {
  await dustSender(s)();
  await until(() => ((s.node.ledger.indexer.cursor(EX, 'exchange-ledger') ?? 0) > t ? true : undefined), `the exchange cursor past ${t}`, 60_000);
}

describe('c88a9d2: a flooded millisecond of the exchange', () => {
  it('a fast-filled withdrawal whose transfer lands in it: the transfer is booked and settles the fast fill', async () => {
    const user = privateKeyToAccount(generatePrivateKey());
    ex().standin.credit(user.address, { perpsUsd: '30' });
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const q = await api(s.url, '/quote/v2', {
      apiKey: app.key,
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
    const requestId = q.body.steps[0].requestId as string;
    expect((await authorize(s, q.body, user, BASE)).status).toBe(200);
    // The app fills the user at once, holding the input's worth on its balance until the transfer comes.
    expect((await api(s.url, '/fast-fill', { apiKey: app.key, body: { requestId } })).status).toBe(200);
    await waitForStatus(s.url, requestId, ['success'], 60_000);
    expect(await usdcBalance(recipient)).toBe(BigInt(q.body.details.currencyOut.amount));

    const T = await flooded(async () => {
      expect((await sendDeposit(s, q.body, user, BASE)).body).toMatchObject({ status: 'ok' });
    });
    const transfer = state()
      .ledger(user.address)
      .find((u) => u.time === T && u.delta.type === 'send');
    expect(transfer).toBeDefined();
    await readPast(T);
    // Before: nothing booked (the request was 'success', so its wallet was not read), and the hold was left to become
    // the app's permanent debit at its deadline.
    expect(s.node.ledger.deposits.get(depositId(EX, transfer!.hash))).toMatchObject({ depositor: user.address, order_ref: requestId });
    const release = await until(() => s.node.ledger.balances.get(`hold_release:${requestId}`), 'the fast fill settled by its deposit');
    expect(release.detail).toBe(depositId(EX, transfer!.hash));
    expect(s.node.ledger.balances.get(`permanent_debit:${requestId}`)).toBeUndefined();
  }, 240_000);
});

describe('c6e4e23: relays waiting on their own fee cap', () => {
  const A = 8453;
  const B = 10;
  const GWEI = 1_000_000_000n;
  const RELAYS = 500;
  const mineAt = (baseFee: bigint) => mineAtBaseFee(s, A, baseFee);

  it('500 relays admitted at a low base fee do not hold a later fill of their chain while the base fee is above their caps', async () => {
    const key = s.node.ledger.apiKeys.create('cheap relays');
    await linkWallet(s, key, 3);
    await fundAppBalance(s, 1, s.devnet.accounts[3]!.address, 300_000_000n);
    await mineAt(GWEI);
    const release = holdSubmitter(s, A);
    try {
      for (let i = 0; i < RELAYS; i += 25) {
        await Promise.all(
          Array.from({ length: Math.min(25, RELAYS - i) }, async () => {
            const res = await api(s.url, '/execute', {
              apiKey: key.key,
              body: {
                executionKind: 'rawCalls',
                data: { chainId: A, to: privateKeyToAccount(generatePrivateKey()).address, data: '0x', value: '0' },
                executionOptions: { referrer: 'x', subsidizeFees: true },
              },
            });
            expect(res.status, JSON.stringify(res.body)).toBe(200);
          }),
        );
      }
      // The base fee rises past every relay's cap (twice 1 gwei plus the tip): each waits unsigned.
      await mineAt(10n * GWEI);
    } finally {
      release();
    }
    await until(() => (s.node.ledger.payouts.queued(A, RELAYS).length === RELAYS ? true : undefined), 'the relays queued');

    // A user's 0.01 ETH from B to A: its fill on A is decided after the relays, and the market is within the chain's cap.
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const q = await api(s.url, '/quote/v2', { body: nativeBridge(s.devnet.accounts[2]!.address, recipient, B, A, '10000000000000000') });
    expect(q.status).toBe(200);
    await executeSteps(s, q.body, 2);
    // Before: the fill stayed queued behind the 500 waiting relays (the submitter never read it).
    const done = await waitForStatus(s.url, q.body.steps[0].requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status).toBe('success');
  }, 300_000);
});
