import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { axios as sdkAxios, convertViemChainToRelayChain, createClient, getClient } from '@relayprotocol/relay-sdk';
import {
  concat,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  http,
  parseEventLogs,
  zeroAddress,
  type Address,
  type Hex,
  type SignedAuthorizationList,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { FilledOnceArmedAbi, FilledOnceArmedBytecode, OrderFillerAbi, RelayDepositoryAbi } from '../contracts-abi/index.ts';
import { CALIBUR_ADDRESS, devnetChain } from '../src/devnet/deploy.ts';
import { usdMicroCeil } from '../src/lib/money.ts';
import { sponsorHeld } from '../src/solver/appBalanceBooks.ts';
import { fundAppBalance, linkWallet } from './helpers/appBalance.ts';
import { auditStack } from './helpers/audit.ts';
import { api, holdSubmitter, startStack, until, waitForStatus, type Stack } from './helpers/stack.ts';

// POST /execute with executionKind rawCalls (the hosted gasless relay), driven by the public SDK's own
// gasless batch action (executeGaslessBatch), unchanged: it quotes, delegates a wallet holding no ETH
// to the batch executor at Calibur's address (EIP-7702), signs the batch and posts it; the node
// relays it as a type-4 transaction from its own key and charges the sponsoring key's app balance.
// The SDK sends x-api-key only to the hosted service's own hostnames, so this test adds it to the
// SDK's exported axios instance for the node's URL (what an integrator's proxy would do); every
// other byte is the SDK's.

const A = 8453;
const B = 10;
let s: Stack;
let app: { key: string; id: string };
let poor: { key: string; id: string };
let bare: { key: string; id: string };
const sponsorWallet = () => s.devnet.accounts[4]!.address;
const usdc = (chain: number) => s.devnet.chains.find((c) => c.id === chain)!.contracts.stablecoin;
// The bodies the SDK posted to /execute, as sent.
const posted: unknown[] = [];

function entries(wallet: string) {
  return s.node.ledger.db
    .prepare('SELECT kind, amount, request_id, ref, detail FROM balance_entries WHERE wallet = ? ORDER BY id')
    .safeIntegers(true)
    .all(wallet) as {
    kind: string;
    amount: bigint;
    request_id: string | null;
    ref: string;
    detail: string | null;
  }[];
}

// A wallet with no ETH at all, holding `units` of USDC on chain A.
async function walletWithoutGas(units: bigint) {
  const account = privateKeyToAccount(generatePrivateKey());
  const funder = s.wallet(1, A);
  const hash = await funder.sendTransaction({
    account: funder.account!,
    chain: funder.chain,
    to: usdc(A),
    data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [account.address, units] }),
  });
  await s.publicClient(A).waitForTransactionReceipt({ hash });
  const rpcUrl = s.devnet.chains.find((c) => c.id === A)!.rpcUrl;
  return createWalletClient({ account, chain: devnetChain(A, rpcUrl), transport: http(rpcUrl) });
}

beforeAll(async () => {
  s = await startStack();
  app = s.node.ledger.apiKeys.create('gasless app');
  poor = s.node.ledger.apiKeys.create('poor app');
  bare = s.node.ledger.apiKeys.create('bare app');
  await linkWallet(s, app, 4);
  await linkWallet(s, poor, 3);
  await fundAppBalance(s, 1, sponsorWallet(), 50_000_000n);
  createClient({
    baseApiUrl: s.url,
    apiKey: app.key,
    source: 'relay-node-tests',
    chains: s.devnet.chains.map((c) => convertViemChainToRelayChain(devnetChain(c.id, c.rpcUrl))),
    pollingInterval: 100,
    maxPollingAttemptsBeforeTimeout: 300,
  });
  sdkAxios.interceptors.request.use((config) => {
    if (config.url?.startsWith(s.url)) {
      config.headers.set('x-api-key', app.key);
      if (config.url === `${s.url}/execute`) posted.push(config.data);
    }
    return config;
  });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

describe('POST /execute rawCalls (gasless relay)', () => {
  let relayed: { requestId: string; body: any; user: Address };

  it("relays the SDK's gasless batch for a wallet with no ETH: delegated, deposited, bridged, the gas charged to the app", async () => {
    const wallet = await walletWithoutGas(5_000_000n);
    const user = wallet.account.address;
    expect(await s.publicClient(A).getBalance({ address: user })).toBe(0n);
    const before = s.node.ledger.balances.summary(sponsorWallet());

    const quote = await getClient().actions.getQuote(
      { chainId: A, toChainId: B, currency: usdc(A), toCurrency: usdc(B), amount: '5000000', tradeType: 'EXACT_INPUT', wallet },
      true,
    );
    expect(quote.steps!.map((x) => x.id)).toEqual(['approve', 'deposit']);
    const { requestId } = await getClient().actions.executeGaslessBatch({ quote, walletClient: wallet, subsidizeFees: true });
    expect(requestId).toMatch(/^0x[0-9a-f]{64}$/);
    relayed = { requestId, body: posted.at(-1), user };
    const body = typeof relayed.body === 'string' ? JSON.parse(relayed.body) : relayed.body;
    relayed.body = body;
    expect(body.executionKind).toBe('rawCalls');
    expect(body.data.authorizationList).toHaveLength(1);

    // Delegated to the batch executor, the USDC deposited, the wallet still without ETH.
    expect(await s.publicClient(A).getCode({ address: user })).toBe(concat(['0xef0100', CALIBUR_ADDRESS.toLowerCase() as Hex]));
    expect(await s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [user] })).toBe(0n);
    expect(await s.publicClient(A).getBalance({ address: user })).toBe(0n);
    // The bridge it deposited for is filled on B.
    await waitForStatus(s.url, quote.steps![1]!.requestId!, ['success']);

    // The relay: a request with the gasless_execution feature, its status success, its tx a type-4
    // transaction sent by the solver.
    const status = await api(s.url, `/intents/status/v3?requestId=${requestId}`);
    expect(status.body.status).toBe('success');
    const r = s.node.ledger.requests.get(requestId)!;
    expect(JSON.parse(r.features)).toContain('gasless_execution');
    const [payout] = s.node.ledger.payouts.forRequest(requestId);
    expect(payout!.kind).toBe('relay');
    expect(payout!.state).toBe('success');
    const txHash = payout!.tx_hash as Hex;
    expect(status.body.txHashes).toContain(txHash);
    const tx = await s.publicClient(A).getTransaction({ hash: txHash });
    expect(tx.type).toBe('eip7702');
    expect(tx.from.toLowerCase()).toBe(s.devnet.solver.toLowerCase());
    const receipt = await s.publicClient(A).getTransactionReceipt({ hash: txHash });
    expect(parseEventLogs({ abi: erc20Abi, logs: receipt.logs, eventName: 'Transfer' }).some((l) => l.args.from === user)).toBe(true);

    // Charged once, the gas the transaction used at the admitted ETH price, in an entry naming it;
    // the hold released.
    const price = (JSON.parse(r.money!) as { relay: { nativeUsdPrice: string } }).relay.nativeUsdPrice;
    const charge = s.node.ledger.balances.get(`sponsorship:${requestId}`)!;
    expect(charge.detail).toBe(txHash);
    expect(BigInt(charge.amount)).toBe(-usdMicroCeil(receipt.gasUsed * receipt.effectiveGasPrice, 18, price));
    expect(s.node.ledger.balances.get(`sponsor_hold_release:${requestId}`)).toBeDefined();
    const after = s.node.ledger.balances.summary(sponsorWallet());
    expect(after.held).toBe(before.held);
    expect(after.balance).toBe(before.balance + BigInt(charge.amount));
  });

  it('refuses a replay of the same body, and of the same authorization in another call; nothing charged', async () => {
    const before = entries(sponsorWallet()).length;
    const again = await api(s.url, '/execute', { body: relayed.body, apiKey: app.key });
    expect(again.status).toBe(409);
    expect(again.body.errorCode).toBe('ALREADY_SUBMITTED');
    expect(again.body.error).toMatch(/replay/);
    // The same signed authorization carried by another call: its nonce is spent.
    const other = { ...relayed.body, data: { ...relayed.body.data, data: '0x' } };
    const reused = await api(s.url, '/execute', { body: other, apiKey: app.key });
    expect(reused.status).toBe(409);
    expect(reused.body.errorCode).toBe('AUTHORIZATION_USED');
    expect(entries(sponsorWallet()).length).toBe(before);
  });

  it('refuses a call that reverts in simulation with a 4xx, recording and charging nothing', async () => {
    const before = entries(sponsorWallet()).length;
    const requests = s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM requests').get() as { n: number };
    // The wallet delegated above, called with a selector its executor does not have: it reverts.
    const res = await api(s.url, '/execute', {
      apiKey: app.key,
      body: {
        executionKind: 'rawCalls',
        data: { chainId: A, to: relayed.user, data: '0xdeadbeef', value: '0' },
        executionOptions: { referrer: 'tests', subsidizeFees: true },
      },
    });
    expect(res.status).toBe(400);
    expect(res.body.errorCode).toBe('SIMULATION_FAILED');
    expect(res.body.error).toMatch(/revert/);
    expect(entries(sponsorWallet()).length).toBe(before);
    expect((s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM requests').get() as { n: number }).n).toBe(requests.n);
  });

  it("refuses a call that would act with the solver's authority: a token it holds, the filler, any contract that is not a wallet", async () => {
    const before = entries(sponsorWallet()).length;
    const chain = s.devnet.chains.find((c) => c.id === A)!.contracts;
    const attacker = privateKeyToAccount(generatePrivateKey()).address;
    const solverUsdc = () => s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'balanceOf', args: [s.devnet.solver] });
    const held = await solverUsdc();
    const attempts = [
      { to: usdc(A), data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [attacker, 1_000_000n] }) },
      { to: usdc(A), data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [attacker, 2n ** 255n] }) },
      {
        to: chain.filler,
        data: encodeFunctionData({ abi: OrderFillerAbi, functionName: 'fillErc20', args: [`0x${'ab'.repeat(32)}`, usdc(A), attacker, 1_000_000n] }),
      },
      { to: chain.testNft, data: '0x' },
    ];
    for (const a of attempts) {
      const res = await api(s.url, '/execute', {
        apiKey: app.key,
        body: { executionKind: 'rawCalls', data: { chainId: A, ...a, value: '0' }, executionOptions: { referrer: 'tests', subsidizeFees: true } },
      });
      expect(res.status, a.to).toBe(400);
      expect(res.body.errorCode).toBe('TARGET_NOT_ALLOWED');
    }
    expect(await solverUsdc()).toBe(held);
    expect(await s.publicClient(A).readContract({ address: usdc(A), abi: erc20Abi, functionName: 'allowance', args: [s.devnet.solver, attacker] })).toBe(0n);
    expect(entries(sponsorWallet()).length).toBe(before);
  });

  const plainCall = () => ({
    executionKind: 'rawCalls',
    data: { chainId: A, to: privateKeyToAccount(generatePrivateKey()).address, data: '0x', value: '0' },
    executionOptions: { referrer: 'tests', subsidizeFees: true },
  });

  it('answers 402 when the sponsoring app balance cannot cover the gas, holding nothing', async () => {
    const res = await api(s.url, '/execute', { apiKey: poor.key, body: plainCall() });
    expect(res.status).toBe(402);
    expect(res.body.errorCode).toBe('INSUFFICIENT_APP_BALANCE');
    expect(res.body.error).toMatch(/available/);
    expect(entries(s.devnet.accounts[3]!.address).filter((e) => e.kind === 'hold')).toHaveLength(0);
    // A key with no sponsor wallet at all.
    const none = await api(s.url, '/execute', { apiKey: bare.key, body: plainCall() });
    expect(none.status).toBe(403);
    expect(none.body.error).toBeTruthy();
  });

  it('answers 503 while the operator pauses the chain, recording and holding nothing', async () => {
    const before = entries(sponsorWallet()).length;
    s.node.ledger.operations.switchOn(`pause:chain:${A}`, 'test', 'maintenance');
    try {
      const res = await api(s.url, '/execute', { apiKey: app.key, body: plainCall() });
      expect(res.status).toBe(503);
      expect(res.body.errorCode).toBe('PAUSED');
      expect(entries(sponsorWallet()).length).toBe(before);
    } finally {
      s.node.ledger.operations.switchOff(`pause:chain:${A}`);
    }
  });

  it('answers 401 without x-api-key, and a 400 naming the field of a malformed body', async () => {
    const res = await api(s.url, '/execute', { body: plainCall() });
    expect(res.status).toBe(401);
    expect(res.body.error).toMatch(/API key/);
    // Refused before the route (the key check): the published error field all the same.
    const unknownKey = await api(s.url, '/execute', { apiKey: 'rn_not-a-key', body: plainCall() });
    expect([unknownKey.status, unknownKey.body.error]).toEqual([403, unknownKey.body.message]);
    const body = plainCall() as any;
    delete body.data.to;
    const bad = await api(s.url, '/execute', { apiKey: app.key, body });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/data\.to/);
    const empty = plainCall() as any;
    empty.data.authorizationList = [];
    const noAuth = await api(s.url, '/execute', { apiKey: app.key, body: empty });
    expect(noAuth.status).toBe(400);
    expect(noAuth.body.error).toMatch(/authorizationList: cannot be empty/);
  });

  it('relays a plain call (no authorization) and charges its gas', async () => {
    const res = await api(s.url, '/execute', { apiKey: app.key, body: plainCall() });
    expect(res.status).toBe(200);
    expect(res.body.message).toBeTruthy();
    const done = await waitForStatus(s.url, res.body.requestId, ['success']);
    expect(done.status).toBe('success');
    const [payout] = s.node.ledger.payouts.forRequest(res.body.requestId);
    const charge = await until(() => s.node.ledger.balances.get(`sponsorship:${res.body.requestId}`), 'the charge');
    expect(charge.detail).toBe(payout!.tx_hash);
    expect(BigInt(charge.amount)).toBeLessThan(0n);
    // Its record, as the key's request listing serves it.
    const rec = await api(s.url, `/requests/v3?id=${res.body.requestId}`, { apiKey: app.key });
    expect(rec.status).toBe(200);
    expect(rec.body.requests[0]).toMatchObject({ id: res.body.requestId, status: 'success' });
    expect(rec.body.requests[0].data.outTxs.map((t: { txHash: string }) => t.txHash)).toContain(payout!.tx_hash);
  });

  it("a deposit naming a relay's request id is an orphan: it neither fails the relay nor releases its hold", async () => {
    // Matched as the relay's deposit, a wrong-chain deposit failed the relay's request and released the
    // sponsor's hold while the relay was still queued: relayed later, its cost was charged to a balance
    // that had spent that money again on other relays.
    const release = holdSubmitter(s, A);
    let requestId: Hex;
    try {
      const res = await api(s.url, '/execute', { apiKey: app.key, body: plainCall() });
      expect(res.status).toBe(200);
      requestId = res.body.requestId as Hex;
      const held = sponsorHeld(s.node.ledger, requestId);
      expect(held).toBeGreaterThan(0n);
      const w = s.wallet(1, B);
      await s.publicClient(B).waitForTransactionReceipt({
        hash: await w.sendTransaction({
          account: w.account!,
          chain: w.chain,
          to: s.devnet.chains.find((c) => c.id === B)!.contracts.depository,
          data: encodeFunctionData({ abi: RelayDepositoryAbi, functionName: 'depositNative', args: [w.account!.address, requestId] }),
          value: 10n ** 15n,
        }),
      });
      const d = await until(() => {
        const x = s.node.ledger.deposits.byOrderRef(requestId).find((y) => y.chain_id === B);
        return x?.state === 'handled' ? x : undefined;
      }, 'the deposit decided');
      expect(d.request_id).not.toBe(requestId);
      expect(s.node.ledger.requests.get(d.request_id!)!.fail_reason).toBe('ORPHANED_DEPOSIT_REFUND');
      expect(s.node.ledger.requests.get(requestId)).toMatchObject({ status: 'waiting', fail_reason: null });
      expect(sponsorHeld(s.node.ledger, requestId)).toBe(held);
    } finally {
      release();
    }
    expect((await waitForStatus(s.url, requestId, ['success'])).status).toBe('success');
  });

  it("refuses a relay that needs more gas than the chain's maxCallGas, holding and recording nothing", async () => {
    // Unbounded, a call needing more gas than a block holds was signed, refused by the chain's nodes
    // for ever, and every payout at a later nonce of the solver's waited behind it.
    const cfg = s.node.config.chains.find((c) => c.id === A)!;
    if (cfg.kind !== 'evm') throw new Error('chain A is EVM');
    const saved = cfg.maxCallGas;
    cfg.maxCallGas = 21_000;
    try {
      const holds = entries(sponsorWallet()).length;
      const requests = s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM requests').get() as { n: number };
      const res = await api(s.url, '/execute', { apiKey: app.key, body: plainCall() });
      expect([res.status, res.body.errorCode]).toEqual([400, 'GAS_LIMIT_EXCEEDED']);
      expect(res.body.error).toMatch(/maxCallGas 21000/);
      expect(entries(sponsorWallet()).length).toBe(holds);
      expect((s.node.ledger.db.prepare('SELECT COUNT(*) AS n FROM requests').get() as { n: number }).n).toBe(requests.n);
    } finally {
      cfg.maxCallGas = saved;
    }
    expect((await api(s.url, '/execute', { apiKey: app.key, body: plainCall() })).status).toBe(200);
  });

  it("refuses a relay whose value is above the chain's cap (maxTopupGasUsd), holding and sending nothing; a small value still relays", async () => {
    // The sponsor can pay for it: only the cap stands between it and the solver's ETH (50 USD at
    // 3000 USD/ETH is about 0.0167 ETH; this is 0.02 ETH).
    await fundAppBalance(s, 1, sponsorWallet(), 100_000_000n);
    const before = entries(sponsorWallet()).length;
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const res = await api(s.url, '/execute', { apiKey: app.key, body: { ...plainCall(), data: { chainId: A, to, data: '0x', value: '20000000000000000' } } });
    expect(res.status).toBe(400);
    expect(res.body.errorCode).toBe('RELAY_VALUE_TOO_HIGH');
    expect(res.body.error).toMatch(/data\.value/);
    expect(res.body.error).toMatch(/maxTopupGasUsd/);
    expect(entries(sponsorWallet()).length).toBe(before);
    // Nothing recorded, so nothing the submitter could send.
    expect(s.node.ledger.db.prepare('SELECT count(*) AS n FROM payouts WHERE lower(recipient) = lower(?)').get(to)).toEqual({ n: 0 });
    const small = await api(s.url, '/execute', { apiKey: app.key, body: { ...plainCall(), data: { chainId: A, to, data: '0x', value: '1000' } } });
    expect(small.status).toBe(200);
    await waitForStatus(s.url, small.body.requestId, ['success']);
    expect(await s.publicClient(A).getBalance({ address: to })).toBe(1000n);
  });

  it("refuses a relay that would take the native balance the solver's queued payouts need (409), holding and recording nothing", async () => {
    const before = entries(sponsorWallet()).length;
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const held = await s.publicClient(A).getBalance({ address: s.devnet.solver });
    // The ledger promises all of the solver's ETH on chain A but 1000 wei to payouts not yet sent.
    const payouts = s.node.ledger.payouts;
    const reservedOn = payouts.reservedOn.bind(payouts);
    payouts.reservedOn = (chain: number) => {
      const m = reservedOn(chain);
      if (chain === A) m.set(zeroAddress, (m.get(zeroAddress) ?? 0n) + held - 1000n);
      return m;
    };
    try {
      const res = await api(s.url, '/execute', { apiKey: app.key, body: { ...plainCall(), data: { chainId: A, to, data: '0x', value: '1000' } } });
      expect(res.status).toBe(409);
      expect(res.body.errorCode).toBe('SOLVER_BALANCE_TOO_LOW');
      expect(res.body.error).toMatch(/solver's native balance on chain 8453/);
    } finally {
      payouts.reservedOn = reservedOn;
    }
    expect(entries(sponsorWallet()).length).toBe(before);
    expect(s.node.ledger.db.prepare('SELECT count(*) AS n FROM payouts WHERE lower(recipient) = lower(?)').get(to)).toEqual({ n: 0 });
  });

  it("a relayed call that reverts with the filler's OrderAlreadyFilled selector after admission fails; it is not taken for a payment made", async () => {
    // The filler's OrderAlreadyFilled revert means "this payout was made" to the submitter, which waits for
    // the payment to show rather than failing (and refunding) a paid fill. A relay runs the caller's wallet
    // code, which can revert with any selector: taken for a payment, such a relay was retried for ever,
    // its sponsor's hold never released nor charged.
    const funder = s.wallet(1, A);
    const deployed = await funder.deployContract({ account: funder.account!, chain: funder.chain, abi: FilledOnceArmedAbi, bytecode: FilledOnceArmedBytecode });
    const delegate = (await s.publicClient(A).waitForTransactionReceipt({ hash: deployed })).contractAddress!;
    const wallet = privateKeyToAccount(generatePrivateKey());
    // The funder calls the wallet (delegating it first, with its authorization).
    const callWallet = async (functionName: 'armed' | 'arm', authorizationList?: SignedAuthorizationList) =>
      s.publicClient(A).waitForTransactionReceipt({
        hash: await funder.sendTransaction({
          account: funder.account!,
          chain: funder.chain,
          to: wallet.address,
          data: encodeFunctionData({ abi: FilledOnceArmedAbi, functionName }),
          authorizationList,
        }),
      });
    await callWallet('armed', [await funder.signAuthorization({ account: wallet, contractAddress: delegate, chainId: A, nonce: 0 })]);
    const release = holdSubmitter(s, A);
    let requestId: Hex;
    try {
      const body = {
        ...plainCall(),
        data: { chainId: A, to: wallet.address, data: encodeFunctionData({ abi: FilledOnceArmedAbi, functionName: 'spring' }), value: '0' },
      };
      const res = await api(s.url, '/execute', { apiKey: app.key, body });
      expect(res.status).toBe(200);
      requestId = res.body.requestId as Hex;
      expect(sponsorHeld(s.node.ledger, requestId)).toBeGreaterThan(0n);
      // Admitted; now the wallet's code reverts with the filler's selector.
      await callWallet('arm');
    } finally {
      release();
    }
    const [payout] = await until(() => {
      const p = s.node.ledger.payouts.forRequest(requestId);
      return p[0]?.state === 'failed' ? p : undefined;
    }, 'the relay failed');
    expect(payout).toMatchObject({ kind: 'relay', fail_reason: 'TRANSACTION_REVERTED', tx_hash: null });
    expect(s.node.ledger.payouts.txsOf(payout!.id)).toEqual([]);
    expect(sponsorHeld(s.node.ledger, requestId)).toBe(0n);
    expect(s.node.ledger.balances.get(`sponsorship:${requestId}`)).toBeUndefined();
  });

  it('relays a call with value, charges the value as a swap (with the spread) and the gas, and the books reconcile with the chains', async () => {
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const body = { ...plainCall(), data: { chainId: A, to, data: '0x', value: '1000000000000000' } };
    const res = await api(s.url, '/execute', { apiKey: app.key, body });
    expect(res.status).toBe(200);
    await waitForStatus(s.url, res.body.requestId, ['success']);
    expect(await s.publicClient(A).getBalance({ address: to })).toBe(1_000_000_000_000_000n);
    const [payout] = s.node.ledger.payouts.forRequest(res.body.requestId);
    const receipt = await s.publicClient(A).getTransactionReceipt({ hash: payout!.tx_hash as Hex });
    const price = (JSON.parse(s.node.ledger.requests.get(res.body.requestId)!.money!) as { relay: { nativeUsdPrice: string } }).relay.nativeUsdPrice;
    const charge = s.node.ledger.balances.get(`sponsorship:${res.body.requestId}`)!;
    // The value is native currency bought with the app balance, a swap: charged with the node's spread (30 bps), where at
    // the mid price any sponsor had a swap and a bridge (to any chain it relays on) without one.
    const value = usdMicroCeil(1_000_000_000_000_000n, 18, price);
    const gas = usdMicroCeil(receipt.gasUsed * receipt.effectiveGasPrice, 18, price);
    expect(BigInt(charge.amount)).toBe(-(gas + (value * 10_030n + 9_999n) / 10_000n));
    // The solver's ETH: every relay's gas and value explained by the ledger.
    const audit = await auditStack(s);
    expect(audit.differences).toEqual([]);
  }, 120_000);
});
