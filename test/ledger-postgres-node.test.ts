// A whole node on the PostgreSQL ledger (ledger.url): a bridge end to end as in test/e2e.test.ts, the status and
// the listings (whose worker threads open their own PostgreSQL connections) read back, the rows in PostgreSQL and
// no SQLite file written, the books reconciled with the chains, and the URL's password in no log line.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pgQuery } from './helpers/pgSql.ts';
import type { Address, Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditStack } from './helpers/audit.ts';
import { api, executeSteps, type Stack, startStack, until, waitForStatus, nativeBridge } from './helpers/stack.ts';

let s: Stack;
const A = 8453;
const B = 10;
const logLines: string[] = [];

beforeAll(async () => {
  // A short bound per ledger call, so the test of a silent PostgreSQL waits seconds, not the default's five each.
  s = await startStack({ ledger: 'postgres', logLines, config: { ledger: { timeoutMs: 1_000 } } });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const pgRows = <T>(sql: string, params: unknown[] = []): Promise<T[]> => pgQuery<T>(s.node.config.ledger.url!.reveal(), sql, params);

describe('a node on the PostgreSQL ledger', () => {
  let requestId: Hex;

  it('bridges native currency end to end: quote, deposit, index, fill, success', async () => {
    const recipient = '0x000000000000000000000000000000000000bEEF' as Address;
    const before = await s.publicClient(B).getBalance({ address: recipient });
    const q = await api(s.url, '/quote/v2', {
      body: nativeBridge(s.devnet.accounts[1]!.address, recipient, A, B, '100000000000000000', { protocolVersion: 'v2' }),
    });
    expect(q.status).toBe(200);
    requestId = q.body.steps[0].requestId;
    const expectedOut = BigInt(q.body.details.currencyOut.amount);
    const [txHash] = await executeSteps(s, q.body, 1);
    const done = await waitForStatus(s.url, requestId, ['success', 'failure', 'refund'], 60_000);
    expect(done.status).toBe('success');
    expect(done.inTxHashes).toEqual([txHash]);
    expect(done.txHashes).toHaveLength(1);
    expect((await s.publicClient(B).getBalance({ address: recipient })) - before).toBe(expectedOut);
  }, 120_000);

  it('keeps its books in PostgreSQL, not in a SQLite file', async () => {
    const [req] = await pgRows<{ status: string }>('SELECT status FROM requests WHERE id = $1', [requestId]);
    expect(req).toEqual({ status: 'success' });
    const payouts = await pgRows<{ kind: string; state: string }>('SELECT kind, state FROM payouts WHERE request_id = $1', [requestId]);
    expect(payouts).toEqual([{ kind: 'fill', state: 'success' }]);
    const events = await pgRows<{ status: string }>('SELECT status FROM events WHERE request_id = $1 ORDER BY seq', [requestId]);
    expect(events.map((e) => e.status)).toContain('success');
    expect(existsSync(join(s.dataDir, 'ledger.sqlite'))).toBe(false);
  });

  it('answers listings from its worker threads, each on its own PostgreSQL connection', async () => {
    const r = await api(s.url, `/requests/v2?id=${requestId}`);
    expect(r.status).toBe(200);
    expect(r.body.requests.map((x: { id: string }) => x.id)).toEqual([requestId]);
    expect(r.body.requests[0].status).toBe('success');
    const mine = await api(s.url, `/requests/v2?user=${s.devnet.accounts[1]!.address}`);
    expect(mine.status).toBe(200);
    expect(mine.body.requests.map((x: { id: string }) => x.id)).toContain(requestId);
  });

  it('reconciles its books with the chains (no difference)', async () => {
    const r = await auditStack(s);
    expect(r.differences).toEqual([]);
  }, 120_000);

  it('finds out when PostgreSQL stops answering (503 on /lives, no hang), and goes on once it answers again', async () => {
    const server = s.postgres!;
    // The whole server: the postmaster and every backend (the node's connections among them).
    const pids = [server.pid!, ...readFileSync(`/proc/${server.pid}/task/${server.pid}/children`, 'utf8').trim().split(/\s+/).map(Number)];
    for (const p of pids) process.kill(p, 'SIGSTOP');
    try {
      const lives = await api(s.url, '/lives');
      expect(lives.status).toBe(503);
      expect(lives.body).toEqual({ status: 'error' });
    } finally {
      for (const p of pids) process.kill(p, 'SIGCONT');
    }
    await until(async () => ((await api(s.url, '/lives')).status === 200 ? true : undefined), 'the ledger answering again');
    // The node works on: the status of the bridge above is read from the ledger again.
    const again = await api(s.url, `/intents/status/v3?requestId=${requestId}`);
    expect(again.body.status).toBe('success');
  }, 120_000);

  it("never writes the ledger URL's password to the log", () => {
    const password = decodeURIComponent(new URL(s.node.config.ledger.url!.reveal()).password);
    expect(password.length).toBeGreaterThan(8);
    expect(logLines.length).toBeGreaterThan(20);
    expect(logLines.join('')).not.toContain(password);
  });
});
