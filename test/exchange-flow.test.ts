import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineChain, erc20Abi, formatUnits, hexToString, keccak256, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { join } from 'node:path';
import axios from 'axios';
import { convertViemChainToRelayChain, createClient, getClient } from '@relayprotocol/relay-sdk';
import { ExchangeNonces } from '../src/ledger/exchangeNonces.ts';
import { devnetChain } from '../src/devnet/deploy.ts';
import { ExchangeActionError, ExchangeClient, signSendAsset } from '../src/chains/exchange/client.ts';
import { Ledger } from '../src/ledger/index.ts';
import type { NewPayout } from '../src/ledger/payouts.ts';
import { api, executeSteps, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';
import { auditCli, auditStack } from './helpers/audit.ts';
import { authorize, sendDeposit } from './helpers/exchangeSteps.ts';

// Chain 1337, the perpetuals exchange, through the quote flow against the devnet's stand-in.
let s: Stack;
const BASE = 8453;
const EX = 1337;
const PERPS = `0x${'0'.repeat(32)}`;
// What a refund on the exchange returns less: the chain's actionCost (default 0.1 USDC), its action's share of the
// solver's action budget.
const ACTION_COST = 100_000n;
// The exchange's activation fee (1 USDC): the first transfer to an account it does not know costs the sender that
// much. A refund on the exchange is charged it too, since its recipient may have emptied the account (purged, new).
const ACTIVATION_FEE = 1_000_000n;
const REFUND_COST = ACTION_COST + ACTIVATION_FEE;

beforeAll(async () => {
  s = await startStack();
});
afterAll(async () => {
  await s?.stop();
});

const ex = () => s.devnet.exchange!;
const state = () => ex().standin.state;
const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
const account = (i: number): PrivateKeyAccount => privateKeyToAccount(s.devnet.accounts[i]!.privateKey);
const usdcBalance = (who: Address) => s.publicClient(BASE).readContract({ address: usdc(BASE), abi: erc20Abi, functionName: 'balanceOf', args: [who] });

async function withdrawalQuote(user: Address, amount: string, extra: Record<string, unknown> = {}) {
  return api(s.url, '/quote/v2', {
    body: {
      user,
      recipient: user,
      originChainId: EX,
      destinationChainId: BASE,
      originCurrency: PERPS,
      destinationCurrency: usdc(BASE),
      amount,
      tradeType: 'EXACT_INPUT',
      protocolVersion: 'v2',
      ...extra,
    },
  });
}

// `amount` USDC (smallest unit) on 8453 from account 1 to perps USD on the exchange for `recipient` (account 2).
const perpsQuote = (amount: string, recipient: Address = account(2).address) =>
  api(s.url, '/quote/v2', {
    body: {
      user: account(1).address,
      recipient,
      originChainId: BASE,
      destinationChainId: EX,
      originCurrency: usdc(BASE),
      destinationCurrency: PERPS,
      amount,
      tradeType: 'EXACT_INPUT',
    },
  });

describe('deposits to the exchange (destination 1337)', () => {
  it('USDC on 8453 to perps USD: the fill is the solver sendAsset; withdrawable grows by the quoted amount', async () => {
    const recipient = account(2).address;
    const before = state().perpsUsd(recipient);
    const q = await perpsQuote('5000000');
    expect(q.status).toBe(200);
    expect(q.body.details.operation).toBe('bridge');
    expect(q.body.details.currencyOut.currency).toMatchObject({ chainId: EX, address: PERPS, decimals: 6 });
    const out = BigInt(q.body.details.currencyOut.amount);
    expect(out).toBeGreaterThan(0n);
    const requestId = q.body.steps.at(-1).requestId;
    await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    expect(state().perpsUsd(recipient) - before).toBe(out);
    // The fill's id is the keccak of the signed action the solver posted.
    expect(done.txHashes).toHaveLength(1);
    const send = state().ledger(recipient).at(-1)!;
    expect(send.delta).toMatchObject({ type: 'send', user: s.devnet.solver, destination: recipient, sourceDex: '', destinationDex: '' });
    const tx = s.node.ledger.payouts.txsOf(`fill:${requestId}`)[0]!;
    expect(tx).toMatchObject({ hash: done.txHashes[0], state: 'included', nonce: send.delta.nonce });
    expect(keccak256(s.node.ledger.payouts.rawOf(tx.hash))).toBe(tx.hash);
  });

  it("a fill's quote charges the solver's action (actionCost): one worth less is refused, so dust cannot spend the action budget", async () => {
    // The exchange charges no gas, but the solver's sendAsset spends an action of its address's budget: quoted at no
    // cost, anyone's stream of 10-unit orders took one action each, for a fee that rounded to 1 unit.
    const dust = await perpsQuote('10');
    expect(dust.status).toBe(400);
    expect(dust.body.errorCode).toBe('AMOUNT_TOO_LOW');
    const q = await perpsQuote('5000000');
    expect(q.status).toBe(200);
    // The action is the fill's cost: the quote's relayer gas, in the output currency (USD on the exchange, 6 decimals).
    expect(BigInt(q.body.fees.relayerGas.amount)).toBe(ACTION_COST);
    expect(BigInt(q.body.details.currencyOut.amount)).toBeLessThanOrEqual(5_000_000n - ACTION_COST);
  });

  it('a fill to an account the exchange does not know is charged its activation fee, as account rent', async () => {
    // The exchange charges the sender 1 USDC for the first transfer to a new account. Quoted at the action's cost
    // alone, every order to a fresh address cost the solver 1 USDC that nobody paid.
    const fresh = privateKeyToAccount(generatePrivateKey()).address;
    const q = await perpsQuote('5000000', fresh);
    expect(q.status).toBe(200);
    expect(BigInt(q.body.fees.relayerGas.amount)).toBe(ACTION_COST + ACTIVATION_FEE);
    const out = BigInt(q.body.details.currencyOut.amount);
    expect(out).toBeLessThanOrEqual(5_000_000n - ACTION_COST - ACTIVATION_FEE);
    const requestId = q.body.steps.at(-1).requestId;
    await executeSteps(s, q.body, 1);
    expect(await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'])).toMatchObject({ status: 'success' });
    expect(state().perpsUsd(fresh)).toBe(out);
    expect(state().ledger(fresh).at(-1)!.delta).toMatchObject({ user: s.devnet.solver, fee: '1.0' });
    // Booked as the fill's transaction fee: unbooked, each one read as 1 USDC lost (the loss breaker pauses the chain
    // past its tolerance, and anyone could trip it with a few fills to fresh addresses).
    expect(s.node.ledger.payouts.txsOf(`fill:${requestId}`).map((t) => t.fee)).toEqual([ACTIVATION_FEE.toString()]);
  });

  it('never activates an account its quote charged no fee for: emptied after the quote, the fill is refused and refunded', async () => {
    // An account the exchange knows is quoted no activation fee. Its owner then sends everything away: the exchange
    // purges it, and the fill would activate it again at the solver's expense, 1 USDC an order.
    const key = generatePrivateKey();
    const owner = privateKeyToAccount(key).address;
    ex().standin.credit(owner, { perpsUsd: '2' });
    const q = await perpsQuote('5000000', owner);
    expect(q.status).toBe(200);
    expect(BigInt(q.body.fees.relayerGas.amount)).toBe(ACTION_COST);
    const client = new ExchangeClient({ url: ex().url });
    const token = `USDC:${state().usdc.tokenId}`;
    const params = { exchangeChain: 'Mainnet', destination: account(2).address, sourceDex: '', destinationDex: '', token, amount: '2.0', fromSubAccount: '' };
    await client.sendAsset(key, { ...params, nonce: Date.now() }, { signatureChainId: 1 });
    expect(state().exists(owner)).toBe(false);
    const requestId = q.body.steps.at(-1).requestId;
    await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
    expect(done).toMatchObject({ status: 'refund', failReason: 'NEW_CALLDATA_INCLUDES_HIGHER_RENT_FEE' });
    expect(
      state()
        .ledger(owner)
        .filter((u) => u.delta.user === s.devnet.solver),
    ).toEqual([]);
  });

  it('spot tokens: USDC to spot USDC, and ETH to HYPE on the named DEX xyz', async () => {
    const recipient = account(3).address;
    const c = ex().currencies;
    const beforeSpot = state().spotBalance(recipient, 'USDC');
    const q = await api(s.url, '/quote/v2', {
      body: {
        user: account(1).address,
        recipient,
        originChainId: BASE,
        destinationChainId: EX,
        originCurrency: usdc(BASE),
        destinationCurrency: c.spotUSDC,
        amount: '3000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q.status).toBe(200);
    expect(q.body.details.currencyOut.currency).toMatchObject({ address: c.spotUSDC, decimals: 8 });
    await executeSteps(s, q.body, 1);
    expect((await waitForStatus(s.url, q.body.steps.at(-1).requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect(state().spotBalance(recipient, 'USDC') - beforeSpot).toBe(BigInt(q.body.details.currencyOut.amount));

    const beforeXyz = state().spotBalance(recipient, 'HYPE', 'xyz');
    const q2 = await api(s.url, '/quote/v2', {
      body: {
        user: account(1).address,
        recipient,
        originChainId: BASE,
        destinationChainId: EX,
        originCurrency: zeroAddress,
        destinationCurrency: c.xyzHYPE,
        amount: '10000000000000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    expect(q2.status).toBe(200);
    expect(q2.body.details.currencyOut.currency).toMatchObject({ address: c.xyzHYPE, symbol: 'HYPE' });
    await executeSteps(s, q2.body, 1);
    expect((await waitForStatus(s.url, q2.body.steps.at(-1).requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    const got = state().spotBalance(recipient, 'HYPE', 'xyz') - beforeXyz;
    expect(got).toBeGreaterThanOrEqual(BigInt(q2.body.details.currencyOut.minimumAmount));
    expect(state().ledger(recipient).at(-1)!.delta).toMatchObject({ sourceDex: 'xyz', destinationDex: 'xyz', token: 'HYPE' });
  });
});

describe('withdrawals from the exchange (origin 1337)', () => {
  it('a viem wallet signs both steps; the node associates the transfer by its nonce and fills on 8453', async () => {
    const user = account(1);
    const recipient = account(4).address;
    const q = await withdrawalQuote(user.address, '20000000', { recipient });
    expect(q.status).toBe(200);
    expect(q.body.steps.map((x: any) => [x.id, x.kind])).toEqual([
      ['authorize', 'signature'],
      ['deposit', 'transaction'],
    ]);
    const requestId = q.body.steps[0].requestId as Hex;
    const auth = q.body.steps[0].items[0].data;
    expect(auth.sign).toMatchObject({
      signatureKind: 'eip712',
      domain: { name: 'ServiceNonceMapping', version: '2', chainId: 1, verifyingContract: zeroAddress },
      primaryType: 'NonceMapping',
      value: { chainId: 'exchange', wallet: user.address.toLowerCase(), depositor: user.address.toLowerCase(), id: requestId },
    });
    const nonce = auth.sign.value.nonce;
    expect(Number.isSafeInteger(nonce)).toBe(true);
    expect(auth.post).toEqual({
      endpoint: '/authorize',
      method: 'POST',
      body: {
        type: 'nonce-mapping',
        walletChainId: EX,
        wallet: user.address.toLowerCase(),
        depositor: user.address.toLowerCase(),
        nonce,
        id: requestId,
        signatureChainId: 1,
      },
    });
    const dep = q.body.steps[1].items[0];
    expect(dep.check).toEqual({ endpoint: `/intents/status?requestId=${requestId}`, method: 'GET' });
    expect(dep.data).toMatchObject({
      action: {
        type: 'sendAsset',
        parameters: {
          exchangeChain: 'Mainnet',
          destination: s.devnet.solver.toLowerCase(),
          sourceDex: '',
          destinationDex: '',
          amount: '20.0',
          fromSubAccount: '',
          nonce,
        },
      },
      nonce,
      eip712PrimaryType: 'ExchangeTransaction:SendAsset',
    });
    expect(dep.data.eip712Types['ExchangeTransaction:SendAsset']).toHaveLength(8);

    const a = await authorize(s, q.body, user, BASE);
    expect(a.status).toBe(200);
    expect(a.body).toEqual({ message: 'Success' });
    // Posting the same authorization again is harmless.
    expect((await authorize(s, q.body, user, BASE)).status).toBe(200);

    const beforeUser = state().perpsUsd(user.address);
    const beforeOut = await usdcBalance(recipient);
    const sent = await sendDeposit(s, q.body, user, BASE);
    expect(sent.body).toEqual({ status: 'ok', response: { type: 'default' } });
    expect(beforeUser - state().perpsUsd(user.address)).toBe(20_000_000n);

    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund']);
    expect(done.status).toBe('success');
    expect((await usdcBalance(recipient)) - beforeOut).toBe(BigInt(q.body.details.currencyOut.amount));
    const inHash = state().ledger(user.address).at(-1)!.hash;
    expect(done.inTxHashes).toEqual([inHash.toLowerCase()]);
  });

  it('a short transfer is refunded to the user on the exchange', async () => {
    const user = account(2);
    const q = await withdrawalQuote(user.address, '10000000');
    const requestId = q.body.steps[0].requestId as Hex;
    expect((await authorize(s, q.body, user, 1)).status).toBe(200);
    const before = state().perpsUsd(user.address);
    const sent = await sendDeposit(s, q.body, user, 1, { amount: '2.0' });
    expect(sent.body.status).toBe('ok');
    // failure (the fill is refused) comes first, then refund once the exchange says ok.
    const done = await waitForStatus(s.url, requestId, ['success', 'refund']);
    expect(done.status).toBe('refund');
    expect(done.failReason).toBe('DEPOSITED_AMOUNT_TOO_LOW_TO_FILL');
    await until(() => (state().perpsUsd(user.address) === before - REFUND_COST ? true : undefined), 'the refund on the exchange');
  });

  it('a refund to an account its transfer emptied bears the activation fee the exchange charges the solver for it', async () => {
    // Sending everything purges the account: the refund activates it again, and the exchange charges the solver
    // 1 USDC. Refunded at the action's cost alone, each short transfer of a whole balance cost the solver 0.9 USDC.
    const key = generatePrivateKey();
    const user = privateKeyToAccount(key);
    ex().standin.credit(user.address, { perpsUsd: '3' });
    const q = await withdrawalQuote(user.address, '10000000');
    const requestId = q.body.steps[0].requestId as Hex;
    expect((await authorize(s, q.body, user, 1)).status).toBe(200);
    expect((await sendDeposit(s, q.body, user, 1, { amount: '3.0' })).body.status).toBe('ok');
    expect(state().exists(user.address)).toBe(false);
    expect(await waitForStatus(s.url, requestId, ['success', 'refund'])).toMatchObject({ status: 'refund' });
    await until(() => (state().perpsUsd(user.address) === 3_000_000n - REFUND_COST ? true : undefined), 'the refund on the exchange');
    const refund = state().ledger(user.address).at(-1)!.delta;
    expect(refund).toMatchObject({ user: s.devnet.solver, amount: '1.9', fee: '1.0' });
  });

  it('a transfer whose nonce differs from the authorization is never associated: the request waits, the transfer is refunded', async () => {
    const user = account(3);
    const q = await withdrawalQuote(user.address, '7000000');
    const requestId = q.body.steps[0].requestId as Hex;
    expect((await authorize(s, q.body, user, 1)).status).toBe(200);
    const before = state().perpsUsd(user.address);
    const nonce = q.body.steps[1].items[0].data.nonce as number;
    const sent = await sendDeposit(s, q.body, user, 1, { nonce: nonce + 1 });
    expect(sent.body.status).toBe('ok');
    expect(state().perpsUsd(user.address)).toBe(before - 7_000_000n);
    // The orphan's refund brings the funds back; the request never sees the transfer.
    await until(() => (state().perpsUsd(user.address) === before - REFUND_COST ? true : undefined), 'the orphan transfer to be refunded', 20_000);
    const status = await api(s.url, `/intents/status/v3?requestId=${requestId}`);
    expect(status.body.status).toBe('waiting');
    expect(status.body.inTxHashes).toEqual([]);
    const orphan = s.node.ledger.deposits.get(
      `${EX}:${state()
        .ledger(user.address)
        .find((u) => u.delta.nonce === nonce + 1)!
        .hash.toLowerCase()}:0`,
    )!;
    expect(orphan.request_id).not.toBe(requestId);
    expect(s.node.ledger.requests.get(orphan.request_id!)).toMatchObject({ kind: 'orphan', status: 'refund', fail_reason: 'ORPHANED_DEPOSIT_REFUND' });
  });

  it('an unauthorized transfer worth less than an exchange action is not refunded: dust cannot spend the solver action budget', async () => {
    // The exchange charges no gas, but every action the solver posts spends its address's action budget. Refunded
    // at no cost, each dust transfer anyone sends took one action from it.
    const user = account(3);
    const q = await withdrawalQuote(user.address, '7000000');
    const nonce = q.body.steps[1].items[0].data.nonce as number;
    const before = state().perpsUsd(user.address);
    const sent = await sendDeposit(s, q.body, user, 1, { nonce: nonce + 7, amount: '0.05' });
    expect(sent.body.status).toBe('ok');
    const hash = state()
      .ledger(user.address)
      .find((u) => u.delta.nonce === nonce + 7)!
      .hash.toLowerCase();
    const orphan = await until(() => s.node.ledger.deposits.get(`${EX}:${hash}:0`)?.request_id ?? undefined, 'the orphan booked', 20_000);
    const r = await until(() => {
      const row = s.node.ledger.requests.get(orphan);
      return row?.status === 'failure' ? row : undefined;
    }, 'the orphan decided');
    expect(r).toMatchObject({ kind: 'orphan', fail_reason: 'ORPHANED_DEPOSIT_REFUND', refund_fail_reason: 'AMOUNT_TOO_LOW_TO_REFUND' });
    expect(s.node.ledger.payouts.forRequest(orphan)).toEqual([]);
    expect(state().perpsUsd(user.address)).toBe(before - 50_000n);
  });

  it('a transfer sent by another wallet with the authorized nonce is not associated', async () => {
    const user = account(4);
    const other = account(0);
    const q = await withdrawalQuote(user.address, '3000000');
    const requestId = q.body.steps[0].requestId as Hex;
    expect((await authorize(s, q.body, user, 1)).status).toBe(200);
    const before = state().perpsUsd(other.address);
    expect((await sendDeposit(s, q.body, other, 1)).body.status).toBe('ok');
    await until(() => (state().perpsUsd(other.address) === before - REFUND_COST ? true : undefined), 'the stranger transfer to be refunded', 20_000);
    expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('waiting');
  });
});

describe('POST /authorize', () => {
  it('refuses a bad signature, a reused nonce, an unknown request and a request not from the exchange', async () => {
    const user = account(1);
    const q1 = await withdrawalQuote(user.address, '2000000');
    const q2 = await withdrawalQuote(user.address, '2000000');
    const nonce1 = q1.body.steps[0].items[0].data.post.body.nonce;
    expect(q2.body.steps[0].items[0].data.post.body.nonce).not.toBe(nonce1);

    // Signed by another key.
    const bad = await authorize(s, q1.body, account(2), 1);
    expect(bad.status).toBe(400);
    expect(bad.body.errorCode).toBe('INVALID_SIGNATURE');
    // Signed over another chain id than the body names.
    const wrongChain = await authorize(s, q1.body, user, 1, { body: { signatureChainId: 10 } });
    expect(wrongChain.status).toBe(400);
    expect(wrongChain.body.errorCode).toBe('INVALID_SIGNATURE');
    // Not a signature at all.
    const data = q1.body.steps[0].items[0].data;
    expect((await api(s.url, `/authorize?signature=0x1234`, { body: data.post.body })).status).toBe(400);
    expect((await api(s.url, `/authorize`, { body: data.post.body })).status).toBe(400);
    expect((await api(s.url, `/authorize?signature=0x${'11'.repeat(65)}`, { body: { ...data.post.body, type: 'other' } })).status).toBe(400);

    expect((await authorize(s, q1.body, user, 1)).status).toBe(200);
    // q2's request with q1's nonce: the nonce is taken.
    const reused = await authorize(s, q2.body, user, 1, { sign: { nonce: nonce1 }, body: { nonce: nonce1 } });
    expect(reused.status).toBe(400);
    expect(reused.body.errorCode).toBe('NONCE_ALREADY_USED');
    // q2 with a nonce it was not quoted with.
    const other = await authorize(s, q2.body, user, 1, { sign: { nonce: nonce1 + 1_000_000 }, body: { nonce: nonce1 + 1_000_000 } });
    expect(other.status).toBe(400);
    expect((await authorize(s, q2.body, user, 1)).status).toBe(200);

    const unknownId = keccak256(toHex('no such request'));
    const unknown = await authorize(s, q1.body, user, 1, { sign: { id: unknownId }, body: { id: unknownId } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.errorCode).toBe('REQUEST_NOT_FOUND');

    const evm = await api(s.url, '/quote/v2', {
      body: {
        user: user.address,
        originChainId: BASE,
        destinationChainId: EX,
        originCurrency: usdc(BASE),
        destinationCurrency: PERPS,
        amount: '2000000',
        tradeType: 'EXACT_INPUT',
        protocolVersion: 'v2',
      },
    });
    expect(evm.status).toBe(200);
    const evmId = evm.body.steps.at(-1).requestId;
    const notExchange = await authorize(s, q1.body, user, 1, { sign: { id: evmId }, body: { id: evmId } });
    expect(notExchange.status).toBe(400);
  });
});

describe('quotes from the exchange', () => {
  it('require protocolVersion v2', async () => {
    const r = await withdrawalQuote(account(1).address, '2000000', { protocolVersion: undefined });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/protocolVersion/);
    const v1 = await withdrawalQuote(account(1).address, '2000000', { protocolVersion: 'v1' });
    expect(v1.status).toBe(400);
    const bad = await withdrawalQuote(account(1).address, '2000000', { originCurrency: '0x1234' });
    expect(bad.status).toBe(400);
  });
});

describe('crash safety of the solver sendAsset', () => {
  it('a recorded action is reconciled from the solver ledger on restart: posted once if it never was, never twice', async () => {
    const recipient = account(0).address;
    const before = state().perpsUsd(recipient);
    await s.node.stop();
    const ledger = Ledger.connect({ path: join(s.dataDir, 'ledger.sqlite'), url: s.ledgerConfig.ledger?.url });
    const client = new ExchangeClient({ url: ex().url });
    const nonces: number[] = [];
    // What a crash leaves: the payout sent, its signed action recorded; posted (b) or not (a).
    const record = async (id: string, amount: string, posted: boolean) => {
      const nonce = Date.now() + nonces.length;
      nonces.push(nonce);
      const body = await signSendAsset(
        s.devnet.keys.solver,
        {
          exchangeChain: 'Mainnet',
          destination: recipient.toLowerCase(),
          sourceDex: '',
          destinationDex: '',
          token: 'USDC:0x6d1e7cde53ba9467b783cb7c530ce054',
          amount,
          fromSubAccount: '',
          nonce,
        },
        { signatureChainId: 1 },
      );
      const raw = toHex(JSON.stringify(body));
      const hash = keccak256(raw);
      ledger.tx(() => {
        ledger.payouts.insert(claimPayout(id, recipient, String(Number(amount) * 1e6)));
        ledger.payouts.insertTx({
          hash,
          payout_id: id,
          chain_id: EX,
          sender: s.devnet.solver,
          nonce,
          raw,
          gas_limit: '0',
          max_fee_per_gas: '0',
          max_priority_fee_per_gas: '0',
          created_at: Date.now(),
        });
        ledger.payouts.setState(id, 'sent', { txHash: hash });
      });
      if (posted) expect(await client.submit(body)).toEqual({ ok: true });
      return hash;
    };
    const a = await record('claim:crash-a', '3', false);
    const b = await record('claim:crash-b', '4', true);
    ledger.close();
    expect(state().perpsUsd(recipient) - before).toBe(4_000_000n);

    await s.restartNode();
    await until(
      () => (['claim:crash-a', 'claim:crash-b'].every((id) => s.node.ledger.payouts.get(id)?.state === 'success') ? true : undefined),
      'both payouts settled',
    );
    expect(s.node.ledger.payouts.get('claim:crash-a')!.tx_hash).toBe(a);
    expect(s.node.ledger.payouts.get('claim:crash-b')!.tx_hash).toBe(b);
    expect(state().perpsUsd(recipient) - before).toBe(7_000_000n);
    const sends = state()
      .ledger(s.devnet.solver)
      .filter((u) => nonces.includes(u.delta.nonce as number));
    expect(sends.map((u) => u.delta.nonce).sort()).toEqual([...nonces].sort());
    // A new payout after the restart signs with a nonce above those recorded.
    const q = await api(s.url, '/quote/v2', {
      body: {
        user: account(1).address,
        recipient,
        originChainId: BASE,
        destinationChainId: EX,
        originCurrency: usdc(BASE),
        destinationCurrency: PERPS,
        amount: '2000000',
        tradeType: 'EXACT_INPUT',
      },
    });
    await executeSteps(s, q.body, 1);
    expect((await waitForStatus(s.url, q.body.steps.at(-1).requestId, ['success', 'failure', 'refund'])).status).toBe('success');
    expect(s.node.ledger.payouts.txsOf(`fill:${q.body.steps.at(-1).requestId}`)[0]!.nonce).toBeGreaterThan(Math.max(...nonces));
  });
});

describe('@relayprotocol/relay-sdk withdrawing from the exchange', () => {
  it('executes a withdrawal quote: its signature step posts to /authorize, its transfer is signed for the exchange', async () => {
    const exchange = defineChain({
      id: EX,
      name: 'Exchange (devnet)',
      nativeCurrency: { name: 'USD Coin', symbol: 'USDC', decimals: 6 },
      rpcUrls: { default: { http: [ex().url] } },
    });
    createClient({
      baseApiUrl: s.url,
      source: 'relay-node-tests',
      chains: [...s.devnet.chains.map((c) => convertViemChainToRelayChain(devnetChain(c.id, c.rpcUrl))), convertViemChainToRelayChain(exchange)],
      pollingInterval: 100,
      maxPollingAttemptsBeforeTimeout: 300,
    });
    // The SDK posts the signed transfer to the production exchange's URL, signed under its domain
    // name: pointed at the stand-in, which verifies it under that name when asked.
    const posted: string[] = [];
    const interceptor = axios.interceptors.request.use((config) => {
      if (config.url === 'https://api.hyperliquid.xyz/exchange') config.url = `${ex().url}/exchange?domainName=HyperliquidSignTransaction`;
      posted.push(`${config.method} ${config.url}`.split('?')[0]!);
      return config;
    });
    try {
      const wallet = s.wallet(2, BASE);
      const user = wallet.account!.address;
      const quote = await getClient().actions.getQuote(
        {
          chainId: EX,
          toChainId: BASE,
          currency: PERPS,
          toCurrency: usdc(BASE),
          amount: '6000000',
          tradeType: 'EXACT_INPUT',
          wallet,
          recipient: user,
          options: { protocolVersion: 'v2' } as any,
        },
        true,
      );
      expect(quote.steps!.map((x) => x.id)).toEqual(['authorize', 'deposit']);
      const requestId = quote.steps![0]!.requestId as Hex;
      const beforeUser = state().perpsUsd(user);
      const beforeOut = await usdcBalance(user);
      await getClient().actions.execute({ quote, wallet, onProgress: () => {} });
      expect(posted).toEqual([`post ${ex().url}/exchange`]);
      // The SDK signed the authorization on the wallet's chain and posted it to /authorize.
      expect(new ExchangeNonces(s.node.ledger.db).ofRequest(requestId)).toMatchObject({
        wallet: user,
        nonce: (quote.steps![0]!.items![0]!.data as any).post.body.nonce,
      });
      expect(beforeUser - state().perpsUsd(user)).toBe(6_000_000n);
      expect((await api(s.url, `/intents/status/v3?requestId=${requestId}`)).body.status).toBe('success');
      expect((await usdcBalance(user)) - beforeOut).toBe(BigInt(quote.details!.currencyOut!.amount!));
    } finally {
      axios.interceptors.request.eject(interceptor);
    }
  });
});

// relay-node audit of chain 1337 after every flow above (issue 12, item 4): the exchange's own
// ledger of the solver's account and the books agree both ways, and its balances are explained.
describe('relay-node audit of the exchange', () => {
  it('reconciles every deposit, fill, refund and claim with the exchange, then names a transfer the books do not hold (exit 1)', async () => {
    const r = await auditStack(s);
    expect(r.differences).toEqual([]);
    expect(r.notCovered.filter((c) => c.kind === 'exchange')).toEqual([]);
    const exchange = r.chains.find((c) => c.chainId === EX)!;
    const perps = exchange.currencies.find((c) => c.currency === PERPS)!;
    expect(perps.deposits).toBeGreaterThan(0n);
    expect(perps.fills).toBeGreaterThan(0n);
    expect(perps.refunds).toBeGreaterThan(0n);
    expect(perps.claims).toBe(7_000_000n);
    expect(perps.solver.actual).toBe(perps.solver.expected);
    expect(exchange.currencies.find((c) => c.symbol === 'HYPE' && c.fills > 0n)).toBeDefined();

    // A transfer out of the solver signed outside the node: the exchange reports it, the books do not.
    const client = new ExchangeClient({ url: ex().url });
    const stranger = account(0).address;
    await client.sendAsset(
      s.devnet.keys.solver,
      {
        exchangeChain: 'Mainnet',
        destination: stranger.toLowerCase(),
        sourceDex: '',
        destinationDex: '',
        token: 'USDC:0x6d1e7cde53ba9467b783cb7c530ce054',
        amount: '1.5',
        fromSubAccount: '',
        nonce: Date.now(),
      },
      { signatureChainId: 1 },
    );
    const out = await auditCli(s);
    expect(out.code).toBe(1);
    expect(out.out, out.out).toMatch(
      new RegExp(`exchange transfer 0x[0-9a-f]{64} of 1500000 ${PERPS} out of the solver to ${stranger} is not a ledger payout`),
    );
    expect(out.out).toMatch(/solver USDC \(0x0{32}\): the exchange holds \d+, the books explain \d+ .*unexplained -1500000\b/);
  });
});

// A claim of `amount` (smallest unit) on the exchange to `recipient`, decided now.
function claimPayout(id: string, recipient: string, amount: bigint | string): NewPayout {
  return { id, kind: 'claim', request_id: null, deposit_id: null, chain_id: EX, recipient, currency: PERPS, amount: amount.toString(), decided_at: Date.now() };
}

// Last in the file: it credits the solver on the stand-in, outside the books the audit above reconciles.
// A claim of more than the solver holds on the exchange, to account 2: its first post is answered
// "Insufficient balance" and stays open.
async function claimRefusedForFunds(id: string) {
  const recipient = account(2).address;
  const solver = s.devnet.solver;
  const before = state().perpsUsd(recipient);
  const amount = state().perpsUsd(solver) + 5_000_000n;
  s.node.ledger.payouts.insert(claimPayout(id, recipient, amount));
  s.node.chains.payoutsQueued(EX);
  const first = await until(() => s.node.ledger.payouts.txsOf(id).find((t) => /insufficient/i.test(t.error ?? '')), 'the first post refused for funds');
  return { id, recipient, solver, before, amount, first };
}

describe('a sendAsset refused for funds', () => {
  it('is posted again as the same signed action once the solver holds enough: an earlier action applied late pays nothing more', async () => {
    const { id, recipient, solver, before, amount, first } = await claimRefusedForFunds('claim:refused-for-funds');

    // Enough for the payout twice: a second application would not be refused for funds.
    state().credit(solver, { perpsUsd: formatUnits(2n * amount, 6) });
    await until(() => (s.node.ledger.payouts.get(id)?.state === 'success' ? true : undefined), 'the payout paid');
    expect(state().perpsUsd(recipient) - before).toBe(amount);

    // The first signed action reaches the exchange late (a post whose answer was lost, or anyone who
    // kept the signed body): it must not pay a second time.
    const body = JSON.parse(hexToString(s.node.ledger.payouts.rawOf(first.hash)));
    await new ExchangeClient({ url: ex().url }).submit(body).catch((e) => e);
    expect(state().perpsUsd(recipient) - before).toBe(amount);
  });

  it('an action applied before the node posts it again is never failed: "duplicate nonce" is reconciled, not a refusal', async () => {
    // The exchange answers a used nonce with "Invalid nonce: duplicate nonce N". Read as a refusal, the
    // payout was failed (a fill refunded, a claim's fees owed again) though its action had paid.
    const { id, recipient, solver, before, amount, first } = await claimRefusedForFunds('claim:applied-elsewhere');
    const body = JSON.parse(hexToString(s.node.ledger.payouts.rawOf(first.hash)));
    // The node's reads of the solver's ledger do not show the action yet (an exchange that lags): it
    // posts the body again, after someone else posted it.
    const read = ExchangeClient.prototype.ledgerUpdates;
    ExchangeClient.prototype.ledgerUpdates = async function (this: ExchangeClient, ...args: Parameters<typeof read>) {
      return (await read.apply(this, args)).filter((u) => (u.delta as { nonce?: number }).nonce !== body.nonce);
    };
    try {
      state().credit(solver, { perpsUsd: formatUnits(2n * amount, 6) });
      expect(await new ExchangeClient({ url: ex().url }).submit(body)).toEqual({ ok: true });
      await until(() => s.node.ledger.payouts.txsOf(id).find((t) => /duplicate nonce/i.test(t.error ?? '')), 'the post after it refused as a duplicate');
      expect(s.node.ledger.payouts.get(id)!.state).toBe('sent');
    } finally {
      ExchangeClient.prototype.ledgerUpdates = read;
    }
    await until(() => (s.node.ledger.payouts.get(id)?.state === 'success' ? true : undefined), 'the payout found paid');
    expect(state().perpsUsd(recipient) - before).toBe(amount);
  });
});

describe('a sendAsset whose answer was lost', () => {
  it('is never failed by a later refusal for another reason than funds or its nonce: it is paid once, when the solver ledger shows it', async () => {
    // The first post applies the action but its answer is lost (unknown outcome); the exchange's reads of the
    // solver's ledger lag, so the confirm pass posts the same body again, and the exchange refuses that post
    // with a message naming neither funds nor the nonce. Read as a refusal of an action never applied, the
    // payout was failed (a fill refunded, a claim's fees owed again) though the first post had paid it.
    const recipient = account(3).address;
    const solver = s.devnet.solver;
    const id = 'claim:answer-lost';
    const amount = 2_000_000n;
    state().credit(solver, { perpsUsd: formatUnits(2n * amount, 6) });
    const before = state().perpsUsd(recipient);
    const ours = (body: { action?: { destination?: string } }) => body.action?.destination?.toLowerCase() === recipient.toLowerCase();
    const submit = ExchangeClient.prototype.submit;
    const read = ExchangeClient.prototype.ledgerUpdates;
    let posts = 0;
    ExchangeClient.prototype.submit = async function (this: ExchangeClient, body: Parameters<typeof submit>[0]) {
      if (!ours(body)) return submit.call(this, body);
      if (++posts === 1) {
        await submit.call(this, body);
        throw new Error('socket hang up');
      }
      throw new ExchangeActionError(`User or API Wallet ${solver.toLowerCase()} does not exist.`, 'exchange');
    };
    ExchangeClient.prototype.ledgerUpdates = async function (this: ExchangeClient, ...args: Parameters<typeof read>) {
      return (await read.apply(this, args)).filter((u) => (u.delta as { destination?: string }).destination?.toLowerCase() !== recipient.toLowerCase());
    };
    try {
      s.node.ledger.payouts.insert(claimPayout(id, recipient, amount));
      s.node.chains.payoutsQueued(EX);
      await until(() => s.node.ledger.payouts.txsOf(id).find((t) => /does not exist/.test(t.error ?? '')), 'the post after the lost answer refused');
      expect(posts).toBeGreaterThanOrEqual(2);
      expect(s.node.ledger.payouts.get(id)!.state).toBe('sent');
      expect(s.node.ledger.payouts.txsOf(id).map((t) => t.state)).toEqual(['broadcast']);
      expect(state().perpsUsd(recipient) - before).toBe(amount);
    } finally {
      ExchangeClient.prototype.submit = submit;
      ExchangeClient.prototype.ledgerUpdates = read;
    }
    await until(() => (s.node.ledger.payouts.get(id)?.state === 'success' ? true : undefined), 'the payout found paid');
    expect(s.node.ledger.payouts.txsOf(id)).toHaveLength(1);
    expect(state().perpsUsd(recipient) - before).toBe(amount);
  });
});
