import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20Abi, hexToString, toHex, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { Connection, Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, createTransferCheckedInstruction, getAssociatedTokenAddressSync } from '@solana/spl-token';
import { SVM_NATIVE } from '../../src/chains/address.ts';
import type { Pricing } from '../../src/ledger/types.ts';
import { ExchangeActionError, ExchangeClient } from '../../src/chains/exchange/client.ts';
import { HYPERLIQUID_NONCE_WINDOW, simpleSendTypedData, type SimpleSendAction } from '../../src/devnet/exchange/standin.ts';
import { splitSignature } from '../../src/chains/exchange/typedData.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from '../helpers/stack.ts';
import { heldExchangeFill, hundredNoncesAbove, refuseFirstPostFor, setPerps as setPerpsOf } from '../helpers/exchangeSteps.ts';

// Second attacker's review of the perpetuals exchange (chain 1337). An action of the solver the exchange refused for
// funds stays open, and the node posts the same signed body again until it is applied: never re-signed, since the
// first could still land. But the exchange does not keep a nonce valid for ever: it keeps each signer's 100 highest
// nonces, and a nonce not above the smallest of them is refused for good (and one older than about 2 days is too).
// Once the solver has used 100 nonces above a held action's, that action can never be applied, and a node that still
// waits for it never fails the payout: the fill is never made nor its deposit refunded.
let s: Stack;
const BASE = 8453;
const EX = 1337;

// A Token-2022 currency on the SVM chain (no extension), beside the devnet's SPL Token one; the solver holds some.
let mint2022: string;

beforeAll(async () => {
  s = await startStack({
    svm: true,
    chains: async (devnet, chains) => {
      const rpc = devnet.svm!.rpc;
      mint2022 = rpc.createMint(6, { token2022: true }).toBase58();
      rpc.mintTo(mint2022, devnet.svm!.solver, 1_000_000n * 10n ** 6n);
      return (chains as { kind: string; currencies: unknown[] }[]).map((c) =>
        c.kind === 'svm'
          ? {
              ...c,
              currencies: [
                ...c.currencies,
                { address: mint2022, symbol: 'USDT', name: 'Test Token-2022', decimals: 6, usdPrice: '1', tokenProgram: 'token-2022' },
              ],
            }
          : c,
      );
    },
  });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const ex = () => s.devnet.exchange!;
const state = () => ex().standin.state;
const account = (i: number) => privateKeyToAccount(s.devnet.accounts[i]!.privateKey);
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const usdcBalance = (who: Address) => s.publicClient(BASE).readContract({ address: usdc(BASE), abi: erc20Abi, functionName: 'balanceOf', args: [who] });
// The test moves the solver's perps USD away and back (test/helpers/exchangeSteps.ts: each move drops the solver's
// inventory snapshot, whose reading while it was away refused the next test's fill with SOLVER_BALANCE_TOO_LOW).
const setPerps = (who: Address, units: bigint) => setPerpsOf(s, who, units);

// A fill of 5 USDC from 8453 to perps USD on the exchange, by account `from` for `to`, whose first post the exchange
// refuses for funds: the solver's perps USD leaves between the fill's decision and its post (other payouts, an
// operator's transfer; here moved aside by the test, `stash`). The node keeps its signed action open.
async function heldFill(from: number, to: number) {
  const user = account(from);
  const recipient = account(to).address;
  const userBefore = await usdcBalance(user.address);
  const recipientBefore = state().perpsUsd(recipient);
  const { requestId, payoutId, held, stash } = await heldExchangeFill(s, from, recipient);
  return { user, recipient, solver: s.devnet.solver, requestId, payoutId, held, userBefore, recipientBefore, stash };
}

describe('an exchange payout held for funds whose nonce the exchange no longer accepts', () => {
  it('is failed once the solver has used 100 nonces above it, and its deposit refunded, not left open for good', { timeout: 240_000 }, async () => {
    const { user, recipient, solver, requestId, payoutId, held, userBefore, recipientBefore, stash } = await heldFill(1, 2);

    await hundredNoncesAbove(s, held.nonce);
    // The solver holds enough again: the held action is posted again, and the exchange refuses it for good.
    setPerps(solver, stash);
    const body = JSON.parse(hexToString(s.node.ledger.payouts.rawOf(held.hash)));
    const refused = await new ExchangeClient({ url: ex().url }).submit(body).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ExchangeActionError);
    expect((refused as ExchangeActionError).exchangeMessage).toMatch(/nonce/i);

    // Before: the payout stayed 'sent' for good, reposted and refused on every pass; the user's 5 USDC was neither
    // filled nor refunded. Now the action is known dead, the fill fails and the deposit is refunded on 8453.
    const done = await waitForStatus(s.url, requestId, ['refund'], 30_000);
    expect(done.status).toBe('refund');
    expect(s.node.ledger.payouts.get(payoutId)!.state).toBe('failed');
    await until(async () => ((await usdcBalance(user.address)) > userBefore - 5_000_000n ? true : undefined), 'the refund on 8453', 30_000);
    // The fill was never made: the held action was not applied.
    expect(state().perpsUsd(recipient)).toBe(recipientBefore);
  });
});

// A refund on the exchange has nothing to fall back on: its action held for funds and then dead for good (100 of the
// solver's nonces above it), it was failed and the deposit left to an operator (MANUAL_REFUND_REQUIRED), though the
// exchange can never apply the old action and a new one pays it once.
describe('an exchange refund held for funds whose nonce the exchange no longer accepts', () => {
  it('is signed again with a new nonce and paid once, not left to an operator', { timeout: 240_000 }, async () => {
    const user = privateKeyToAccount(generatePrivateKey());
    state().credit(user.address, { perpsUsd: '20' });
    const solver = s.devnet.solver;
    // The solver's perps USD leaves just before the refund's first post: refused for funds, the signed refund stays open.
    const refused = refuseFirstPostFor(s, user.address);
    let refundId: string;
    try {
      // A usdSend to the solver names no request: an orphan deposit, refunded.
      const action: SimpleSendAction = {
        type: 'usdSend',
        amount: '5.0',
        signatureChainId: toHex(1),
        exchangeChain: 'Mainnet',
        destination: solver.toLowerCase(),
        time: Date.now(),
      };
      const signature = splitSignature(await user.signTypedData(simpleSendTypedData(action) as never));
      const res = await fetch(`${ex().url}/exchange`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ action, nonce: action.time, signature }),
      });
      expect(((await res.json()) as { status: string }).status).toBe('ok');
      refundId = await until(
        () => {
          const row = s.node.ledger.db
            .prepare(`SELECT id FROM payouts WHERE kind = 'refund' AND chain_id = ? AND lower(recipient) = ?`)
            .get(EX, user.address.toLowerCase()) as { id: string } | undefined;
          return row && s.node.ledger.payouts.txsOf(row.id).find((t) => /insufficient/i.test(t.error ?? '')) ? row.id : undefined;
        },
        'the refund refused for funds',
        60_000,
      );
    } finally {
      refused.restore();
    }
    const held = s.node.ledger.payouts.txsOf(refundId)[0]!;
    await hundredNoncesAbove(s, held.nonce);
    setPerps(solver, refused.stash()!);
    const done = await until(
      () => {
        const p = s.node.ledger.payouts.get(refundId)!;
        const r = s.node.ledger.requests.get(p.request_id!)!;
        return p.state === 'success' || r.refund_fail_reason ? { payout: p.state, request: r.status, refundFailReason: r.refund_fail_reason } : undefined;
      },
      'the refund paid or left to an operator',
      60_000,
    );
    expect(done).toEqual({ payout: 'success', request: 'refund', refundFailReason: null });
    // The dead action and the one that paid: the user got the 5 USD back once, less the refund's cost.
    expect(s.node.ledger.payouts.txsOf(refundId).map((t) => t.state)).toEqual(['dropped', 'included']);
    const refunded = BigInt(s.node.ledger.payouts.get(refundId)!.amount);
    expect(refunded).toBeGreaterThan(3_000_000n);
    expect(state().perpsUsd(user.address)).toBe(15_000_000n + refunded);
  });
});

// A fill of an SPL currency to a recipient without a token account creates it (the associated token account program,
// paid by the solver) and its quote charges the rent. For a Token-2022 mint the program always creates the account with
// the ImmutableOwner extension: more bytes than the mint's own extensions ask (getAccountLenForMint), so more rent than
// the quote charged. Anyone can take fills to fresh keys, close each account and keep the difference the solver paid.
describe('a Token-2022 fill to a recipient without a token account', () => {
  it('charges the rent of the account the fill creates, not of a smaller one', async () => {
    const SVM = s.devnet.svm!.id;
    const conn = new Connection(s.devnet.svm!.rpcUrl, 'confirmed');
    const recipient = Keypair.generate().publicKey;
    const q = await api(s.url, '/quote/v2', {
      body: {
        tradeType: 'EXACT_INPUT',
        user: account(3).address,
        recipient: recipient.toBase58(),
        originChainId: BASE,
        destinationChainId: SVM,
        originCurrency: usdc(BASE),
        destinationCurrency: mint2022,
        amount: '20000000',
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(200);
    const requestId = q.body.steps.at(-1).requestId as string;
    await executeSteps(s, q.body, 3);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status, JSON.stringify(done)).toBe('success');
    const ata = getAssociatedTokenAddressSync(new PublicKey(mint2022), recipient, true, TOKEN_2022_PROGRAM_ID);
    const info = await conn.getAccountInfo(ata, 'confirmed');
    expect(info).not.toBeNull();
    // What the solver put into the account it created (all of it comes back to whoever closes the account).
    const paid = BigInt(info!.lamports);
    const quoted = BigInt((JSON.parse(s.node.ledger.requests.get(requestId)!.pricing!) as Pricing).rent ?? '0');
    // Before: quoted 2,039,280 lamports (165 bytes) for an account of 170 bytes holding 2,074,080: 34,800 lamports a fill.
    expect(quoted).toBe(paid);
  });
});

// One transaction may move several currencies to the vault (a wallet batching transfers, an aggregator's route): the
// vault holds each. The node booked one deposit per signature, the first currency it found, and the rest was held by
// the vault with no deposit: never filled, never refunded, named only by the audit.
describe('an SVM transaction that deposits two currencies to the vault', () => {
  it('is booked as two deposits, each refunded (no order named), not one', async () => {
    const SVM = s.devnet.svm!.id;
    const svm = s.devnet.svm!;
    const conn = new Connection(svm.rpcUrl, 'confirmed');
    const user = svm.keypair(4);
    svm.rpc.mintTo(svm.mint, user.publicKey, 10_000_000n);
    const mint = new PublicKey(svm.mint);
    const vault = new PublicKey(svm.vault);
    const { blockhash } = await conn.getLatestBlockhash('confirmed');
    const tx = new Transaction({ feePayer: user.publicKey, recentBlockhash: blockhash }).add(
      createTransferCheckedInstruction(
        getAssociatedTokenAddressSync(mint, user.publicKey, true, TOKEN_PROGRAM_ID),
        mint,
        getAssociatedTokenAddressSync(mint, vault, true, TOKEN_PROGRAM_ID),
        user.publicKey,
        5_000_000n,
        6,
        [],
        TOKEN_PROGRAM_ID,
      ),
      SystemProgram.transfer({ fromPubkey: user.publicKey, toPubkey: vault, lamports: 200_000_000 }),
    );
    tx.sign(user);
    const sig = await conn.sendRawTransaction(tx.serialize());
    const idx = await api(s.url, '/transactions/index', { body: { txHash: sig, chainId: SVM } });
    expect(idx.status, JSON.stringify(idx.body)).toBe(200);
    const ofTx = () => [0, 1, 2].map((i) => s.node.ledger.deposits.get(`${SVM}:${sig}:${i}`)).filter((d) => d !== undefined);
    await until(() => (ofTx().length >= 1 ? true : undefined), 'the transaction indexed', 20_000);
    // Before: one deposit (the SPL one); the 0.2 SOL stayed in the vault with no deposit.
    expect(
      ofTx()
        .map((d) => d.currency)
        .sort(),
    ).toEqual([svm.mint, SVM_NATIVE].sort());
    expect(ofTx().find((d) => d.currency === SVM_NATIVE)).toMatchObject({ amount: '200000000', depositor: user.publicKey.toBase58() });
    // Each is refunded to its depositor, less the refund's cost.
    const solRefund = () =>
      s.node.ledger.payouts.forDeposit(`${SVM}:${sig}:1`).find((p) => p.kind === 'refund' && p.state === 'success') ??
      s.node.ledger.payouts.forDeposit(`${SVM}:${sig}:0`).find((p) => p.kind === 'refund' && p.state === 'success' && p.currency === SVM_NATIVE);
    const refund = await until(solRefund, 'the SOL deposit refunded', 30_000);
    expect(refund).toMatchObject({ recipient: user.publicKey.toBase58(), currency: SVM_NATIVE });
    expect(BigInt(refund.amount)).toBeGreaterThan(199_000_000n);
  });
});

// The same, by the exchange's clock: it takes no nonce older than 2 days. A fill held for funds longer than that (the
// solver idle, nobody topping it up) can never be applied, and waiting for it left the deposit neither filled nor
// refunded.
describe('an exchange payout held for funds past the exchange nonce window', () => {
  it('is failed once the exchange clock is 2 days past its nonce, and its deposit refunded', { timeout: 240_000 }, async () => {
    const { requestId, payoutId, held, userBefore, recipientBefore, stash, user, recipient, solver } = await heldFill(3, 0);
    const restore = await pastNonceWindow(3);
    try {
      setPerps(solver, stash);
      const body = JSON.parse(hexToString(s.node.ledger.payouts.rawOf(held.hash)));
      const refused = await new ExchangeClient({ url: ex().url }).submit(body).catch((e: unknown) => e);
      expect((refused as ExchangeActionError).exchangeMessage).toMatch(/nonce/i);
      // Before: the payout stayed 'sent', posted and refused on every pass, the deposit neither filled nor refunded.
      const done = await waitForStatus(s.url, requestId, ['refund'], 30_000);
      expect(done.status).toBe('refund');
      expect(s.node.ledger.payouts.get(payoutId)!.state).toBe('failed');
      await until(async () => ((await usdcBalance(user.address)) > userBefore - 5_000_000n ? true : undefined), 'the refund on 8453', 30_000);
      expect(state().perpsUsd(recipient)).toBe(recipientBefore);
    } finally {
      restore();
    }
  });
});

// Moves the exchange's clock 2 days and an hour ahead (past every nonce of now), and has the solver's ledger show that
// time: anything moving in it, here a transfer of 0.5 perps USD to the solver by account `from`. Returns the undo.
async function pastNonceWindow(from: number): Promise<() => void> {
  const st = state() as unknown as { now: () => number };
  const clock = st.now;
  const restore = () => {
    st.now = clock;
    state().nonceWindow = undefined;
  };
  state().nonceWindow = HYPERLIQUID_NONCE_WINDOW;
  st.now = () => Date.now() + HYPERLIQUID_NONCE_WINDOW.behindMs + 60 * 60_000;
  try {
    state().credit(account(from).address, { perpsUsd: '1' });
    const usd = state().usdc;
    await new ExchangeClient({ url: ex().url }).sendAsset(
      s.devnet.accounts[from]!.privateKey,
      {
        exchangeChain: 'Mainnet',
        destination: s.devnet.solver.toLowerCase(),
        sourceDex: '',
        destinationDex: '',
        token: `${usd.name}:${usd.tokenId}`,
        amount: '0.5',
        fromSubAccount: '',
        nonce: st.now(),
      },
      { signatureChainId: 0xa4b1 },
    );
  } catch (e) {
    restore();
    throw e;
  }
  return restore;
}

// Until the returned release, the solver's reads of its perps USD on the exchange (its inventory snapshot reads every
// chain at once) do not answer: the solver has no reading of inventory and prices.
function holdSolverReads(): () => void {
  const withdrawable = ExchangeClient.prototype.withdrawable;
  let release!: () => void;
  const released = new Promise<void>((r) => {
    release = r;
  });
  ExchangeClient.prototype.withdrawable = async function (this: ExchangeClient, ...args: Parameters<typeof withdrawable>) {
    await released;
    return withdrawable.apply(this, args);
  };
  return () => {
    ExchangeClient.prototype.withdrawable = withdrawable;
    release();
  };
}

// A fill that fails is refunded in the transaction that fails it, at the refund's cost read in the solver's inventory
// snapshot. With no snapshot (dropped by invalidate(), as an operator's retry does; or none read yet after a start) the
// request was failed with MANUAL_REFUND_REQUIRED: the user's deposit left to an operator, though nothing stood in the
// way of its refund.
describe('a fill that fails while the solver holds no reading of inventory and prices', () => {
  const refundedOrLeft = (requestId: string) =>
    until(
      async () => {
        const st = (await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body;
        return st.status === 'refund' || st.refundFailReason ? st : undefined;
      },
      `request ${requestId} refunded or left to an operator`,
      30_000,
    );

  it('is refunded once the solver has read them again (its reading dropped)', { timeout: 240_000 }, async () => {
    const { requestId, payoutId, stash, solver, user, userBefore } = await heldFill(4, 2);
    const release = holdSolverReads();
    let restore: (() => void) | undefined;
    try {
      setPerps(solver, stash); // drops the snapshot
      restore = await pastNonceWindow(4);
      await until(() => (s.node.ledger.payouts.get(payoutId)!.state === 'failed' ? true : undefined), 'the fill failed', 30_000);
    } finally {
      release();
      restore?.();
    }
    expect(await refundedOrLeft(requestId)).toMatchObject({ status: 'refund', failReason: 'TRANSACTION_REVERTED' });
    await until(async () => ((await usdcBalance(user.address)) > userBefore - 5_000_000n ? true : undefined), 'the refund on 8453', 30_000);
  });

  it('is refunded when a restarted node finds it failed before its first reading', { timeout: 240_000 }, async () => {
    const { requestId, payoutId, stash, solver, user, userBefore } = await heldFill(1, 0);
    let restore: (() => void) | undefined;
    try {
      await s.restartNode(undefined, async () => {
        setPerps(solver, stash);
        restore = await pastNonceWindow(1);
      });
      await until(() => (s.node.ledger.payouts.get(payoutId)!.state === 'failed' ? true : undefined), 'the fill failed', 30_000);
    } finally {
      restore?.();
    }
    expect(await refundedOrLeft(requestId)).toMatchObject({ status: 'refund', failReason: 'TRANSACTION_REVERTED' });
    await until(async () => ((await usdcBalance(user.address)) > userBefore - 5_000_000n ? true : undefined), 'the refund on 8453', 30_000);
  });
});
