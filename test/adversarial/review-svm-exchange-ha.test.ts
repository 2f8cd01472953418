import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection, Transaction } from '@solana/web3.js';
import { erc20Abi, getAddress, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ExchangeClient } from '../../src/chains/exchange/client.ts';
import { ExchangePayoutSender } from '../../src/chains/exchange/payoutSender.ts';
import type { Pricing } from '../../src/ledger/types.ts';
import { SVM_NATIVE } from '../../src/chains/address.ts';
import { rpc } from '../../src/devnet/rawTransactions.ts';
import { api, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { heldExchangeFill, hundredNoncesAbove, setPerps } from '../helpers/exchangeSteps.ts';

// Money review of the SVM chain and the exchange (chain 1337) across restarts and takeovers.
// - The exchange decides what an action costs the solver when it applies it, not when the solver signed it: a signed
//   action held open (refused for funds, or recorded by a node that then stopped) is posted again later, into whatever
//   the exchange holds by then (an activation fee the quote never charged).
// - An action held open across a restart that rotated the solver key was judged by the new key's ledger.
// - An SVM deposit made while the node was down was judged by when the restarted node read it.
let s: Stack;
const BASE = 8453;

const ex = () => s.devnet.exchange!;
const state = () => ex().standin.state;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
// What the solver sent `who` on the exchange, read from the exchange's own ledger.
const solverSendsTo = (who: Address) =>
  state()
    .ledger(who)
    .filter((u) => u.delta.type === 'send' && u.delta.user === s.devnet.solver);
const usdcBalance = (who: Address) => s.publicClient(BASE).readContract({ address: usdc(BASE), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

describe('an exchange fill held open across a restart while its recipient emptied its account', () => {
  beforeAll(async () => {
    s = await startStack();
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });

  it('is not posted again into an activation fee its quote never charged: held, then refunded once it is dead', { timeout: 240_000 }, async () => {
    // A recipient the exchange knows: its quote charges no activation fee.
    const key = generatePrivateKey();
    const owner = privateKeyToAccount(key).address;
    state().credit(owner, { perpsUsd: '2' });
    const user = privateKeyToAccount(s.devnet.accounts[1]!.privateKey).address;
    const userBefore = await usdcBalance(user);
    const { requestId, payoutId, held, stash } = await heldExchangeFill(s, 1, owner);
    expect((JSON.parse(s.node.ledger.requests.get(requestId)!.pricing!) as Pricing).rent).toBe('0');

    // The node stops with the signed fill open. Meanwhile the recipient sends everything away (the exchange purges the
    // account: new again) and the solver's perps USD comes back.
    const client = new ExchangeClient({ url: ex().url });
    const token = `USDC:${state().usdc.tokenId}`;
    // What the node asks of the exchange about this recipient once it runs again: the activation fee, or the post itself.
    const proto = ExchangeClient.prototype;
    const { activationFee, submit } = proto;
    let looked = false;
    proto.activationFee = async function (this: ExchangeClient, who: Address, source: Address) {
      if (who.toLowerCase() === owner.toLowerCase()) looked = true;
      return activationFee.call(this, who, source);
    };
    proto.submit = async function (this: ExchangeClient, body: Parameters<typeof submit>[0]) {
      if (body.action?.destination?.toLowerCase() === owner.toLowerCase()) looked = true;
      return submit.call(this, body);
    };
    try {
      await s.restartNode(undefined, async () => {
        await client.sendAsset(
          key,
          {
            exchangeChain: 'Mainnet',
            destination: s.devnet.accounts[2]!.address,
            sourceDex: '',
            destinationDex: '',
            token,
            amount: '2.0',
            fromSubAccount: '',
            nonce: Date.now(),
          },
          { signatureChainId: 1 },
        );
        expect(state().exists(owner)).toBe(false);
        setPerps(s, s.devnet.solver, stash);
      });
      await until(() => (looked ? true : undefined), 'the restarted node to take up the held fill', 60_000);
      // Before: the restarted node posted the same signed action again; the exchange applied it and charged the solver
      // 1 USDC to activate the recipient, which the fill's quote had not charged (prepare() refuses exactly that fill
      // before it is signed).
      expect(solverSendsTo(owner)).toEqual([]);
      expect(s.node.ledger.payouts.get(payoutId)!.state).toBe('sent');
    } finally {
      proto.activationFee = activationFee;
      proto.submit = submit;
    }

    // The held action dies for good (100 of the solver's nonces above it): the fill fails and the deposit is refunded on
    // 8453, the recipient never paid and never activated at the solver's expense.
    await hundredNoncesAbove(s, held.nonce);
    const done = await waitForStatus(s.url, requestId, ['refund', 'success'], 60_000);
    expect(done.status).toBe('refund');
    expect(s.node.ledger.payouts.get(payoutId)!.state).toBe('failed');
    await until(async () => ((await usdcBalance(user)) > userBefore - 5_000_000n ? true : undefined), 'the refund on 8453', 30_000);
    expect(solverSendsTo(owner)).toEqual([]);
    expect(state().exists(owner)).toBe(false);
  });
});

// The exchange's confirm pass took every open action of the chain as the running solver's: paid when its nonce is in the
// running solver's ledger, dead once the running solver has used 100 nonces above it. After a restart with another solver
// key (a rotation), an action the old key signed and left open was judged by the new key's ledger: posted again (and
// applied, from the old account), never seen paid there, and then "dead" once the new key had made 100 payouts: the fill
// failed and its deposit refunded, though the old action paid it. EVM and SVM senders reconcile only their own.
describe('an exchange fill held open across a restart that rotated the solver key', () => {
  let r: Stack;
  beforeAll(async () => {
    r = await startStack();
  }, 120_000);
  afterAll(async () => {
    await r?.stop();
  });

  it("is never judged by the new key's ledger: not failed and refunded while the old key's action paid it", { timeout: 240_000 }, async () => {
    const st = r.devnet.exchange!.standin.state;
    const oldSolver = r.devnet.solver;
    const recipient = r.devnet.accounts[2]!.address;
    const recipientBefore = st.perpsUsd(recipient);
    const { payoutId, held, stash } = await heldExchangeFill(r, 1, recipient);
    expect(getAddress(held.sender)).toBe(getAddress(oldSolver));

    // Confirm passes of the exchange's sender from here on.
    const proto = ExchangePayoutSender.prototype;
    const confirm = proto.confirm;
    let passes = 0;
    proto.confirm = async function (this: ExchangePayoutSender, ...a: Parameters<typeof confirm>) {
      try {
        return await confirm.apply(this, a);
      } finally {
        passes++;
      }
    };
    const newKey = generatePrivateKey();
    try {
      // The operator rotates the solver key while the node is down; the old account gets its perps USD back.
      await r.restartNode(undefined, async () => {
        r.devnet.keys.solver = newKey;
        // The new key holds gas on the EVM chains (the node's start sends its approvals).
        for (const c of r.devnet.chains) await rpc(c.rpcUrl, 'anvil_setBalance', [privateKeyToAccount(newKey).address, toHex(10n ** 20n)]);
        setPerps(r, oldSolver, stash);
      });
      expect(getAddress(r.node.solverAddress)).toBe(privateKeyToAccount(newKey).address);
      // The new key pays 100 other actions (its next payouts, here self-transfers).
      await hundredNoncesAbove(r, held.nonce, newKey);
      const from = passes;
      await until(() => (passes >= from + 3 ? true : undefined), 'three confirm passes after the new key used 100 nonces', 60_000);
    } finally {
      proto.confirm = confirm;
    }
    // Before: the new key's confirm pass posted the old key's action again (applied, from the old account), never found it
    // in the new key's ledger, and took it for dead: the fill failed (its deposit refunded on 8453) though it was paid.
    const paid = st.perpsUsd(recipient) - recipientBefore;
    const fill = r.node.ledger.payouts.get(payoutId)!;
    expect({ paid: paid > 0n, state: fill.state }).not.toEqual({ paid: true, state: 'failed' });
    expect(fill.state).toBe('sent');
  });
});

// A deposit on the SVM chain was judged by when the node read it (the indexer's read time), where an EVM deposit is
// judged by its block's time: one sent in time while the node was down (a restart, a takeover, an outage) and read
// after its quote expired was refunded as ORDER_EXPIRED, the user paying the refund's cost for the node's downtime.
describe('an SVM deposit sent in time while the node was down, read after its quote expired', () => {
  let v: Stack;
  const SVM = 792703809;
  beforeAll(async () => {
    // A short quote life: the node stays down past it.
    v = await startStack({ svm: true, config: { quote: { ttlSeconds: 10 } } });
  }, 120_000);
  afterAll(async () => {
    await v?.stop();
  });

  it("is judged by its block's time: filled, not refunded as ORDER_EXPIRED", { timeout: 120_000 }, async () => {
    const svm = v.devnet.svm!;
    const conn = new Connection(svm.rpcUrl, 'confirmed');
    const user = svm.keypair(0);
    const recipient = v.devnet.accounts[1]!.address;
    const q = await api(v.url, '/quote/v2', {
      body: {
        user: user.publicKey.toBase58(),
        recipient,
        originChainId: SVM,
        destinationChainId: BASE,
        originCurrency: SVM_NATIVE,
        destinationCurrency: zeroAddress,
        amount: '1000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const step = q.body.steps[0];
    const requestId = step.requestId as Hex;
    const out = BigInt(q.body.details.currencyOut.amount);
    const expiresAt = v.node.ledger.requests.get(requestId)!.expires_at!;
    const before = await v.publicClient(BASE).getBalance({ address: recipient });

    let landed = 0;
    await v.restartNode(undefined, async () => {
      // The wallet signs and sends the quote's deposit while the node is down, in the quote's life.
      const tx = Transaction.from(Buffer.from(step.items[0].data.transaction, 'base64'));
      tx.partialSign(user);
      const sig = await conn.sendRawTransaction(tx.serialize(), { skipPreflight: false, preflightCommitment: 'confirmed' });
      await until(
        async () => (['confirmed', 'finalized'].includes((await conn.getSignatureStatus(sig)).value?.confirmationStatus ?? '') ? true : undefined),
        'the deposit to land',
        30_000,
      );
      landed = Date.now();
      expect(landed).toBeLessThan(expiresAt);
      // The node starts again only once the quote has expired.
      await until(() => (Date.now() > expiresAt + 1_000 ? true : undefined), 'the quote to expire', 30_000);
    });
    // Before: the restarted indexer read it after the expiry, recorded that read as its arrival and refunded it
    // (ORDER_EXPIRED), less the refund's cost.
    const done = await waitForStatus(v.url, requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status, JSON.stringify(done)).toBe('success');
    expect((await v.publicClient(BASE).getBalance({ address: recipient })) - before).toBe(out);
    // Its arrival is the chain's (no later than when the test saw it land), not the restarted node's read.
    const [dep] = v.node.ledger.deposits.byOrderRef(requestId);
    expect(dep!.seen_at).toBeLessThanOrEqual(landed + 1_000);
  });
});
