// Money review of the PostgreSQL ledger with several writers. SQLite serialises every write of its one process; on
// PostgreSQL, node processes (a leader, a standby serving the API, the CLI) write through connections of their own, and
// each store's check-then-write must hold across them. Here real processes race the stores' own money functions on one
// ledger at the same instant: each one checks a balance (or a nonce, a permit) that the others are about to spend.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { zeroAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpenedLedger } from '../../src/ledger/index.ts';
import { PostgresLedger } from '../../src/ledger/postgres/ledger.ts';
import type { NewRequest } from '../../src/ledger/requests.ts';
import { MINIMAL_CHAIN } from '../helpers/minimalConfig.ts';
import { testLedgers } from '../helpers/ledgers.ts';

const CHAIN = MINIMAL_CHAIN.id;
const SPONSOR = '0x00000000000000000000000000000000000000a1';
const APP = '0x00000000000000000000000000000000000000a2';
const USER = '0x00000000000000000000000000000000000000a3';
const TOKEN = '0x00000000000000000000000000000000000000a4';
// Writers racing: separate processes, each with its own connection (as separate nodes have).
const WRITERS = 4;

const mod = (p: string) => new URL(p, import.meta.url).href;

// One writer process: opens the ledger (its own connection), says "ready", waits for "go" on stdin, then runs its job
// synchronously (as the node calls its ledger) and prints what each attempt answered, as JSON.
const CHILD = `
const { PostgresLedger } = await import(${JSON.stringify(mod('../../src/ledger/postgres/ledger.ts'))});
const { recordSignedDeposit } = await import(${JSON.stringify(mod('../../src/solver/signedDeposits.ts'))});
const { claimAppFees } = await import(${JSON.stringify(mod('../../src/solver/claims.ts'))});
const { configSchema } = await import(${JSON.stringify(mod('../../src/config/schema.ts'))});
const { Registry } = await import(${JSON.stringify(mod('../../src/config/registry.ts'))});
const job = JSON.parse(process.env.REVIEW_JOB);
const ledger = PostgresLedger.open(process.env.REVIEW_URL);
const registry = new Registry(configSchema.parse({ solverKey: { env: 'K' }, chains: [${JSON.stringify(MINIMAL_CHAIN)}] }).chains);
process.stdout.write('ready\\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
const out = [];
for (const a of job.attempts) {
  try {
    if (a.kind === 'signedDeposit') {
      const request = ledger.requests.get(a.requestId);
      recordSignedDeposit(ledger, {
        request,
        authorization: '0x',
        permit: { chainId: ${CHAIN}, token: '${TOKEN}', owner: '${USER}', nonce: BigInt(a.permitNonce), deadline: 1n },
        sponsor: a.sponsorMicro ? { wallet: '${SPONSOR}', micro: BigInt(a.sponsorMicro) } : undefined,
        gasless: true,
      });
      out.push({ ok: true });
    } else if (a.kind === 'claim') {
      // A fee accrues (a fill of this writer's), then the app claims all it is owed.
      if (a.accrue) ledger.tx(() => ledger.appFees.post({ recipient: '${APP}', chain_id: ${CHAIN}, currency: '${zeroAddress}', amount: BigInt(a.accrue), kind: 'accrual', request_id: null, ref: a.ref }));
      const p = claimAppFees(ledger, registry, { wallet: '${APP}', target: registry.native(${CHAIN}), recipient: '${APP}' }, 0n);
      out.push({ ok: true, amount: p.amount });
    } else if (a.kind === 'nonce') {
      out.push({ ok: ledger.tx(() => ledger.signatureNonces.use('claim', '${APP}', a.nonce, Date.now() + 60000)) });
    }
  } catch (e) {
    out.push({ ok: false, code: e.errorCode ?? e.name + ': ' + e.message });
  }
}
ledger.close();
process.stdout.write(JSON.stringify(out) + '\\n');
`;

type Attempt =
  | { kind: 'signedDeposit'; requestId: string; permitNonce: string; sponsorMicro?: string }
  | { kind: 'claim'; accrue: string; ref: string }
  | { kind: 'nonce'; nonce: string };
type Answer = { ok: boolean; code?: string; amount?: string };

// The writer's script, in a file of its own (a worker thread, as the ledger's connection is, inherits `-e`).
const dir = mkdtempSync(join(tmpdir(), 'review-pg-money-'));
const script = join(dir, 'writer.mjs');
writeFileSync(script, CHILD);

/** Runs one writer process per job, lets them all go at once, and returns each one's answers. */
async function race(url: string, jobs: Attempt[][]): Promise<Answer[][]> {
  const children = jobs.map((attempts) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script], {
      env: { ...process.env, REVIEW_URL: url, REVIEW_JOB: JSON.stringify({ attempts }) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        stdout += d;
        if (stdout.startsWith('ready\n')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`a writer exited (${code}) before it was ready: ${stderr}`)));
    });
    const done = new Promise<Answer[]>((resolve, reject) =>
      child.on('exit', (code) => {
        const line = stdout.split('\n').find((l) => l.startsWith('['));
        if (code !== 0 || !line) reject(new Error(`a writer exited ${code}: ${stderr}`));
        else resolve(JSON.parse(line) as Answer[]);
      }),
    );
    ready.catch(() => {});
    return { child, ready, done };
  });
  try {
    await Promise.all(children.map((c) => c.ready));
    for (const c of children) c.child.stdin.end('go\n');
    return await Promise.all(children.map((c) => c.done));
  } catch (e) {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    throw e;
  }
}

const ledgers = testLedgers();
let url: string;
let ledger: OpenedLedger;

const request = (id: string, over: Partial<NewRequest> = {}): NewRequest => ({
  id: id as NewRequest['id'],
  parent_id: null,
  kind: 'order',
  request_type: 'deposit',
  status: 'waiting',
  user: USER,
  recipient: USER,
  refund_to: USER,
  origin_chain_id: CHAIN,
  destination_chain_id: CHAIN,
  origin_currency: TOKEN,
  destination_currency: zeroAddress,
  trade_type: null,
  amount_in: '1000000',
  amount_out: '1',
  min_amount_out: '1',
  pricing: null,
  order_data: null,
  quote: null,
  expires_at: null,
  fill_deadline: null,
  created_at: Date.now(),
  money: JSON.stringify({ sponsor: { wallet: SPONSOR, apiKeyId: 'key_review' }, appFees: [], topUpNative: null }),
  features: '[]',
  api_key_id: null,
  referrer: null,
  ...over,
});
const requestId = (tag: string, i: number) => `0x${tag.padStart(8, '0')}${i.toString(16).padStart(56, '0')}`;
const count = (sql: string, ...args: unknown[]) => Number((ledger.db.prepare(sql).get(...args) as { n: number | string }).n);

beforeAll(async () => {
  url = await (await ledgers.server()).createDatabase();
  ledger = PostgresLedger.open(url);
}, 120_000);
afterAll(() => {
  ledger?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('writer processes racing on one PostgreSQL ledger', () => {
  it('a sponsor balance is held no further than it goes, however many processes record signed deposits against it at once', { timeout: 120_000 }, async () => {
    ledger.balances.post({ wallet: SPONSOR, kind: 'credit', amount: 1_000_000n, request_id: null, ref: 'credit:review-pg-money' });
    const rounds = 5;
    const jobs: Attempt[][] = Array.from({ length: WRITERS }, (_, w) =>
      Array.from({ length: rounds }, (_, r) => {
        const id = requestId('d1', r * WRITERS + w);
        ledger.requests.insert(request(id));
        return { kind: 'signedDeposit', requestId: id, permitNonce: String(r * WRITERS + w), sponsorMicro: String(1_000_000 / rounds) };
      }),
    );
    // Each ask holds a fifth of the balance: of the 20 asks (4 writers × 5), 5 fit. Each writer checks the available
    // balance and holds in one transaction; with BEGIN alone (no writer's lock), a trial held 8: 1.6 times the balance.
    const answers = (await race(url, jobs)).flat();
    expect(answers.filter((a) => !a.ok && a.code !== 'SPONSOR_BALANCE_TOO_LOW')).toEqual([]);
    expect(answers.filter((a) => a.ok)).toHaveLength(rounds);
    expect(ledger.balances.summary(SPONSOR)).toEqual({ balance: 1_000_000n, held: 1_000_000n, available: 0n });
    expect(count(`SELECT COUNT(*) AS n FROM balance_entries WHERE wallet = ? AND kind = 'hold'`, SPONSOR)).toBe(rounds);
    expect(ledger.balances.totalsDrift()).toEqual([]);
  });

  it('one permit funds one request, however many processes post it for different requests at once', { timeout: 120_000 }, async () => {
    const jobs: Attempt[][] = Array.from({ length: WRITERS }, (_, w) => {
      const id = requestId('d2', w);
      ledger.requests.insert(request(id, { money: null }));
      return [{ kind: 'signedDeposit', requestId: id, permitNonce: '777' }];
    });
    const answers = (await race(url, jobs)).flat();
    expect(answers.filter((a) => a.ok)).toHaveLength(1);
    expect(answers.filter((a) => !a.ok).map((a) => a.code)).toEqual(Array(WRITERS - 1).fill('PERMIT_ALREADY_USED'));
    expect(count(`SELECT COUNT(*) AS n FROM payouts WHERE kind = 'deposit' AND request_id LIKE '0x000000d2%'`)).toBe(1);
  });

  it("an app's fees are paid out once, however many processes accrue and claim them at once", { timeout: 120_000 }, async () => {
    const fee = 10n ** 15n;
    const rounds = 10;
    const jobs: Attempt[][] = Array.from({ length: WRITERS }, (_, w) =>
      Array.from({ length: rounds }, (_, r) => ({ kind: 'claim', accrue: fee.toString(), ref: `app_fee:review:${w}:${r}` })),
    );
    const answers = (await race(url, jobs)).flat();
    expect(answers.filter((a) => !a.ok && a.code !== 'NOTHING_TO_CLAIM')).toEqual([]);
    // Every fee accrued is paid by exactly one claim: the claims' payouts add up to what accrued, nothing is owed
    // (claimed twice, the balance would be below zero and the payouts above the fees).
    const paid = answers.filter((a) => a.ok).reduce((sum, a) => sum + BigInt(a.amount!), 0n);
    expect(paid).toBe(fee * BigInt(WRITERS * rounds));
    const sum = ledger.db.prepare(`SELECT COALESCE(SUM(CAST(amount AS NUMERIC)), 0) AS n FROM payouts WHERE kind = 'claim'`).get() as { n: number | string };
    expect(BigInt(sum.n)).toBe(paid);
    expect(ledger.appFees.balances(APP)).toEqual([{ chainId: CHAIN, currency: zeroAddress, amount: 0n }]);
  });

  it("a wallet's signature nonce is used once, however many processes use it at once", { timeout: 120_000 }, async () => {
    const answers = (await race(url, Array(WRITERS).fill([{ kind: 'nonce', nonce: 'review0123456789abcdef' }]))).flat();
    expect(answers.map((a) => a.ok).sort()).toEqual([false, false, false, true]);
  });
});
