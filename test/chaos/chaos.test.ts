// The short form of the chaos harness (the long form: `npm run chaos -- --orders N ...`, see run.ts).
//  - a node process under seeded load on every chain kind (the two EVM chains, the SVM chain and the
//    exchange, orders to and from each), killed twice and restarted, through proxies injecting faults
//    (EVM RPC faults; SVM dropped and expired transactions and a lagging slot; exchange posts whose
//    outcome is lost either way), with a reorg removing a deposit before its confirmations: every
//    deposit ends success or refund, nothing paid twice on any chain, the ledger and the chains agree
//    to the smallest unit, and relay-node audit finds no difference on any chain;
//  - a seeded fuzzer over every endpoint: no 5xx, the node stays up, rejected calls write nothing;
//  - the auth matrix of every authenticated endpoint;
//  - a run at debug level whose whole log and every answer are scanned for every secret it used.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, keccak256, toHex, zeroAddress, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../../contracts-abi/index.ts';
import { api, executeSteps, startStack, waitForStatus, type Stack } from '../helpers/stack.ts';
import { authMatrix, discoverRoutes, fuzz, ledgerDigest, send, type Route } from './fuzz.ts';
import { printResult, runChaos } from './run.ts';

const SRC = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..', 'src');

describe('chaos: crashes, RPC faults and a reorg under load', () => {
  it('loses nothing and pays nothing twice, on every chain kind', async () => {
    const lines: string[] = [];
    const r = await runChaos({
      orders: 16,
      crashes: 2,
      faults: 0.02,
      seed: 11,
      rate: 6,
      accounts: 4,
      kinds: ['svm', 'exchange'],
      // So that each kind of fault meets the few payouts of a short run: the first SVM payout's
      // transaction never lands (its blockhash expires: it costs that payout a blockhash's lifetime),
      // later sends are dropped half the time, lag episodes; the first POST /exchange is applied
      // and its answer lost, then half are lost without being applied.
      svmFaults: { dropTx: 0.5, expireTx: 1, lag: 0.02, http500: 0.01, rpcError: 0.01 },
      svmFaultLimits: { expireTx: 1 },
      exchangeFaults: { appliedLost: 1, notApplied: 0.5, infoError: 0.01 },
      exchangeFaultLimits: { appliedLost: 1 },
      confirmations: 2,
      reorgsBefore: 1,
      // One each: after the fill was paid, while it was queued, and with the deposit included again.
      reorgsAfter: 3,
      // A timeout costs the node's RPC client 10 s: the long form has them, the short one not.
      maxTimeouts: 0,
      settleMs: 40_000,
      resultsDir: '',
      say: (l) => lines.push(l),
    });
    printResult(r, (l) => lines.push(l));
    if (!r.ok || process.env.CHAOS_VERBOSE) console.log(lines.join('\n'));
    expect(r.invariants.failures).toEqual([]);
    expect(r.deposits).toBeGreaterThanOrEqual(13);
    // Orders to and from each kind, and each kind's faults, happened.
    const routes = r.invariants.figures.routes;
    for (const route of ['evm', 'to-svm', 'from-svm', 'to-exchange', 'from-exchange']) expect(routes[route]?.deposits ?? 0, route).toBeGreaterThanOrEqual(1);
    expect(r.invariants.figures.svm!.fills).toBeGreaterThanOrEqual(1);
    expect(r.invariants.figures.exchange!.fills).toBeGreaterThanOrEqual(1);
    expect(r.svmFaults!.expireTx).toBe(1);
    expect(r.svmFaults!.lag).toBeGreaterThanOrEqual(1);
    expect(r.exchangeFaults!.appliedLost).toBe(1);
    // The audit covered every chain (a chain it does not reconcile would be a failure above).
    expect(r.invariants.figures.audit.join('\n')).toMatch(/chain 792703809[\s\S]*no differences/);
    expect(r.invariants.figures.audit.join('\n')).toContain('chain 1337');
    expect(r.invariants.figures.notTerminal).toBe(0);
    expect(r.invariants.figures.doubleFills).toBe(0);
    expect(r.invariants.figures.filledAndRefunded).toBe(0);
    expect(r.crashes.sigkill + r.crashes.faultPoint).toBeGreaterThanOrEqual(2);
    expect(r.reorgs.before).toHaveLength(1);
    expect(r.reorgs.before[0]!.status).toBe('waiting');
    expect(r.reorgs.after.map((x) => [x.mode, x.status, x.failReason, x.secondPayout])).toEqual([
      ['paid', 'success', 'DEPOSIT_REORGED', null],
      ['queued', 'failure', 'DEPOSIT_REORGED', null],
      ['reincluded', 'success', null, null],
    ]);
    expect(r.reorgs.extraNotEnded).toEqual([]);
    expect(r.secretsInLog).toEqual([]);
    expect(r.ok).toBe(true);
  }, 420_000);
});

describe('chaos: two nodes on a PostgreSQL ledger, the leader killed and cut off', () => {
  it("takes over each time, loses nothing, pays nothing twice, every payout under its epoch; an API replica ends with the ledger's records", async () => {
    const lines: string[] = [];
    const r = await runChaos({
      orders: 14,
      crashes: 2,
      faults: 0.01,
      seed: 5,
      rate: 4,
      accounts: 4,
      kinds: ['svm', 'exchange'],
      ledger: 'postgres',
      nodes: 2,
      leaseMs: 3_000,
      renewMs: 750,
      // One SIGKILL of the leader, then the leader cut off from PostgreSQL (longer than its lease).
      haEvents: ['kill-leader', 'cut-leader'],
      maxTimeouts: 0,
      reorgsBefore: 0,
      reorgsAfter: 0,
      settleMs: 60_000,
      resultsDir: '',
      say: (l) => lines.push(l),
    });
    printResult(r, (l) => lines.push(l));
    if (!r.ok || process.env.CHAOS_VERBOSE) console.log(lines.join('\n'));
    expect(r.invariants.failures).toEqual([]);
    expect(r.deposits).toBeGreaterThanOrEqual(10);
    expect(r.invariants.figures.notTerminal).toBe(0);
    expect(r.invariants.figures.doubleFills).toBe(0);
    expect(r.invariants.figures.filledAndRefunded).toBe(0);
    // Both events happened, each followed by a takeover by the other node under a higher epoch.
    expect(r.ha!.events.map((e) => e.kind)).toEqual(['kill-leader', 'cut-leader']);
    for (const e of r.ha!.events) {
      expect(e.newLeader, e.kind).not.toBeNull();
      expect(e.newLeader, e.kind).not.toBe(e.leader);
      expect(e.epochAfter!, e.kind).toBeGreaterThan(e.epochBefore);
    }
    // The cut-off leader lost its lease and exited 75 (crash-only: the supervisor started it again).
    expect(r.ha!.events[1]!.exitedLeaseLost).toBe(true);
    expect(r.ha!.leaseLostExits).toBeGreaterThanOrEqual(1);
    // Every payout carries its epoch, and payouts were made.
    expect(r.ha!.payoutsChecked).toBeGreaterThanOrEqual(10);
    // relay-node audit (the CLI, over the PostgreSQL ledger) found no difference.
    expect(r.cliAudit!.code).toBe(0);
    // An API replica read records all along (keeping them an hour), and every one matches the ledger's at the end.
    expect(r.replica!.reads).toBeGreaterThan(0);
    expect(r.replica!.compared).toBeGreaterThanOrEqual(r.deposits);
    expect(r.replica!.differed).toEqual([]);
    expect(r.secretsInLog).toEqual([]);
    expect(r.ok).toBe(true);
  }, 600_000);

  it('refuses two nodes on a SQLite ledger, naming why', async () => {
    await expect(runChaos({ orders: 1, crashes: 0, faults: 0, seed: 1, nodes: 2, resultsDir: '' })).rejects.toThrow(/--nodes 2 needs --ledger postgres/);
  });
});

describe('hostile input and secrets', () => {
  let s: Stack;
  const logLines: string[] = [];
  // Every answer of this describe's calls, scanned for secrets at the end.
  const answers: string[] = [];
  let routes: Route[];
  let valid: { id: string; key: string };
  let revoked: { id: string; key: string };
  const call = async (path: string, init?: Parameters<typeof api>[2]) => {
    const r = await api(s.url, path, init);
    answers.push(typeof r.body === 'string' ? r.body : JSON.stringify(r.body));
    return r;
  };

  beforeAll(async () => {
    s = await startStack({ logLines });
    valid = s.node.ledger.apiKeys.create('chaos valid');
    revoked = s.node.ledger.apiKeys.create('chaos revoked');
    s.node.ledger.apiKeys.revoke(revoked.id);
    // The admin API listens on its own address (test/admin.test.ts covers its auth).
    routes = discoverRoutes(SRC).filter((r) => !r.path.includes('/ws') && !r.path.startsWith('/admin'));
  }, 90_000);
  afterAll(async () => {
    await s?.stop();
  });

  it('finds every route in the sources on the running server', () => {
    expect(routes.length).toBeGreaterThan(20);
    for (const r of routes) expect(s.node.api.hasRoute({ method: r.method, url: r.path }), `${r.method} ${r.path}`).toBe(true);
  });

  it('survives a seeded fuzzer over every endpoint: no 5xx, stays up, rejected calls write nothing', async () => {
    const secrets = [s.devnet.keys.solver, s.devnet.keys.solver.slice(2), s.devnet.keys.allocator, s.devnet.keys.allocator.slice(2), valid.key, revoked.key];
    const total = {
      sent: 0,
      fiveHundreds: [] as unknown[],
      ledgerChanged: [] as unknown[],
      healthFailures: 0,
      healthAnswers: [] as string[],
      byStatus: [] as unknown[],
      leaked: [] as unknown[],
    };
    for (const seed of [1, 2, 3]) {
      const rep = await fuzz({ url: () => s.url, ledger: s.node.ledger, routes, key: valid.key, user: s.devnet.accounts[1]!.address, secrets }, seed, 3);
      total.sent += rep.sent;
      total.fiveHundreds.push(...rep.fiveHundreds);
      total.ledgerChanged.push(...rep.ledgerChanged);
      total.healthFailures += rep.healthFailures;
      total.healthAnswers.push(...rep.healthAnswers);
      total.byStatus.push(rep.byStatus);
      total.leaked.push(...rep.leaked);
    }
    expect(total.sent).toBeGreaterThan(routes.length * 8);
    if (process.env.CHAOS_VERBOSE) console.log(JSON.stringify(total.byStatus), total.sent);
    expect(total.fiveHundreds).toEqual([]);
    expect(total.ledgerChanged).toEqual([]);
    expect(total.healthAnswers).toEqual([]);
    expect(total.healthFailures).toBe(0);
    expect(total.leaked).toEqual([]);
    expect((await send(s.url, { method: 'GET', path: '/health' })).status).toBe(200);
  }, 60_000);

  it('enforces API keys on every authenticated endpoint (none, unknown, revoked, valid)', async () => {
    // Authenticated by the source (requireCaller), and by the answer without a key.
    const found = new Map(routes.filter((r) => r.authenticated).map((r) => [`${r.method} ${r.path}`, r]));
    for (const r of routes) {
      if (found.has(`${r.method} ${r.path}`)) continue;
      const path = r.path.replace(/:(\w+)/g, (_m, n: string) => (n === 'wallet' ? s.devnet.accounts[1]!.address : 'x'));
      const a = await send(s.url, { method: r.method, path, ...(r.method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: '{}' } : {}) });
      if (a.status === 401) found.set(`${r.method} ${r.path}`, r);
    }
    const authed = [...found.values()];
    expect(authed.map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining(['GET /requests/v3', 'POST /fast-fill', 'POST /app-balance/link', 'POST /execute']),
    );
    const before = ledgerDigest(s.node.ledger);
    const rows = await authMatrix(
      s.url,
      authed,
      { valid: valid.key, revoked: revoked.key },
      { wallet: s.devnet.accounts[1]!.address, id: 'wh_does_not_exist' },
    );
    expect(rows.filter((r) => !r.ok)).toEqual([]);
    // The refused calls wrote nothing; the accepted ones had empty bodies and were refused too (4xx).
    expect(ledgerDigest(s.node.ledger).hash).toBe(before.hash);
  });

  it('never writes a secret it used to the log or an answer, at debug level', async () => {
    // A fill, both ways, native and stablecoin.
    const q1 = await call('/quote', {
      body: {
        user: s.devnet.accounts[1]!.address,
        originChainId: 8453,
        destinationChainId: 10,
        originCurrency: zeroAddress,
        destinationCurrency: zeroAddress,
        amount: '20000000000000000',
        tradeType: 'EXACT_INPUT',
      },
      apiKey: valid.key,
    });
    expect(q1.status).toBe(200);
    const usdc = (id: number) => s.devnet.chains.find((c) => c.id === id)!.contracts.stablecoin;
    const q2 = await call('/quote', {
      body: {
        user: s.devnet.accounts[2]!.address,
        originChainId: 10,
        destinationChainId: 8453,
        originCurrency: usdc(10),
        destinationCurrency: usdc(8453),
        amount: '20000000',
        tradeType: 'EXACT_INPUT',
      },
      headers: { authorization: `Bearer ${valid.key}` },
    });
    expect(q2.status).toBe(200);
    const [h1] = await executeSteps(s, q1.body, 1);
    await call('/transactions/index', { body: { txHash: h1, chainId: 8453 } });
    await executeSteps(s, q2.body, 2);
    // A refund: a deposit to no order.
    const w = s.wallet(3, 8453);
    const orphan = await w.sendTransaction({
      account: w.account!,
      chain: w.chain,
      to: s.devnet.chains.find((c) => c.id === 8453)!.contracts.depository,
      value: 10n ** 16n,
      data: encodeFunctionData({
        abi: RelayDepositoryAbi,
        functionName: 'depositNative',
        args: [s.devnet.accounts[3]!.address, keccak256(toHex('chaos secrets orphan'))],
      }),
    });
    const receipt = await s.publicClient(8453).waitForTransactionReceipt({ hash: orphan });
    const orphanId = keccak256(toHex(`deposit:8453:${orphan}:${receipt.logs[0]!.logIndex}`)) as Hex;
    for (const [id, want] of [
      [q1.body.steps.at(-1).requestId, 'success'],
      [q2.body.steps.at(-1).requestId, 'success'],
      [orphanId, 'refund'],
    ] as const) {
      // An orphan is `failure` (ORPHANED_DEPOSIT_REFUND) until its refund is paid, then `refund`.
      expect((await waitForStatus(s.url, id, [want])).status).toBe(want);
      answers.push(JSON.stringify((await call(`/intents/status/v3?requestId=${id}`)).body));
    }
    // The keys in use: listing with them, refused with the revoked one.
    expect((await call('/requests/v3?limit=5', { apiKey: valid.key })).status).toBe(200);
    expect((await call('/requests/v3', { apiKey: revoked.key })).status).toBe(403);
    expect((await call('/requests/v3', { headers: { authorization: `Bearer ${revoked.key}` } })).status).toBe(403);
    // Keys created (and one revoked) while the node runs, then used.
    const late = s.node.ledger.apiKeys.create('chaos late');
    expect((await call('/requests/v3', { apiKey: late.key })).status).toBe(200);
    s.node.ledger.apiKeys.revoke(late.id);
    expect((await call('/requests/v3', { apiKey: late.key })).status).toBe(403);
    for (const path of ['/chains', '/metrics', '/config/v2?originChainId=8453&destinationChainId=10', '/ready'])
      answers.push(JSON.stringify((await call(path)).body));

    const log = logLines.join('').toLowerCase();
    const everything = answers.join('\n').toLowerCase();
    expect(logLines.length).toBeGreaterThan(50);
    expect(log).toContain('fill queued');
    const secrets: [string, string][] = [
      ['solver key', s.devnet.keys.solver],
      ['allocator key', s.devnet.keys.allocator],
      ['valid API key', valid.key],
      ['revoked API key', revoked.key],
      ['late API key', late.key],
    ];
    for (const [name, secret] of secrets) {
      for (const form of [secret, secret.replace(/^0x/, '')]) {
        expect(log.includes(form.toLowerCase()), `${name} in the log`).toBe(false);
        expect(everything.includes(form.toLowerCase()), `${name} in an answer`).toBe(false);
      }
    }
  }, 60_000);
});
