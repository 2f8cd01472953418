// Ledger reads run on a timer, whose plans on a fresh SQLite ledger (the node never runs ANALYZE) read what the ledger
// ever held rather than what they ask for:
// - a sender's transactions on a chain (the loss breaker's fees on every check, the audit's difference's costs and
//   hashes on every check): transactions_nonce (chain_id=?), every transaction of the chain, of every sender;
// - the quote pruner's pass (every 300 s): requests_status (status=?), every waiting request read and sorted before
//   the LIMIT, and a full scan of app_fee_entries per candidate;
// - an open withdrawal of a chain's currency (the solver's inventory check): payouts_outflow (chain_id=? AND kind=?),
//   every withdrawal the chain ever had.
// Each now seeks an index that bounds what it reads (migration 40), and still returns exactly what it returned.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LEDGER_KINDS, testLedgers } from '../../test/helpers/ledgers.ts';
import { Ledger, type OpenedLedger } from './index.ts';
import { FEES_OF_SENDER, HASHES_OF_SENDER, OPEN_WITHDRAWAL, TX_COSTS_OF_SENDER } from './payouts.ts';
import { UNUSED } from './quotePruner.ts';
import type { NewRequest } from './requests.ts';
import type { PayoutKind, PayoutState, TxState } from './types.ts';

const now = 1_700_000_000_000;
const hex = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as `0x${string}`;
const CHAIN = 10;
const OTHER_CHAIN = 8453;
// A checksummed address: the sender is recorded as the signer gave it, and compared case-insensitively.
const SENDER = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
const OTHER_SENDER = '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359';
const USDC = '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48';
const WETH = '0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2';
const upper = (a: string) => `0x${a.slice(2).toUpperCase()}`;

type Plan = string[];
const planOf = (l: OpenedLedger, sql: string, ...args: unknown[]): Plan =>
  (l.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as { detail: string }[]).map((r) => r.detail);
/** An index's key columns, an expression as <expr>. */
const keysOf = (l: OpenedLedger, index: string) =>
  (l.db.prepare('SELECT name FROM pragma_index_xinfo(?) WHERE key = 1 ORDER BY seqno').all(index) as { name: string | null }[]).map((k) => k.name ?? '<expr>');
const sqlOf = (l: OpenedLedger, index: string) => (l.db.prepare('SELECT sql FROM sqlite_master WHERE name = ?').get(index) as { sql: string }).sql;
const SEARCH = (table: string) => new RegExp(`^SEARCH ${table} USING (?:COVERING )?INDEX (\\w+) \\((.*)\\)$`);

describe('plans on a fresh SQLite ledger', () => {
  let ledger: OpenedLedger | undefined;
  afterEach(() => ledger?.close());
  const open = () => (ledger = Ledger.open(join(mkdtempSync(join(tmpdir(), 'relay-periodic-')), 'ledger.sqlite')));

  it.each([
    ['FEES_OF_SENDER', FEES_OF_SENDER],
    ['TX_COSTS_OF_SENDER', TX_COSTS_OF_SENDER],
    ['HASHES_OF_SENDER', HASHES_OF_SENDER],
  ])("%s seeks the chain and the sender's lower case, not the chain alone", (_, sql) => {
    const l = open();
    const plan = planOf(l, sql, CHAIN, SENDER);
    const reads = plan.filter((d) => / transactions /.test(` ${d} `));
    expect(reads, plan.join('\n')).toHaveLength(1);
    const detail = reads[0]!;
    expect(detail).not.toMatch(/^SCAN/);
    expect(detail).not.toContain('transactions_nonce');
    const m = SEARCH('transactions').exec(detail);
    expect(m, detail).not.toBeNull();
    expect(m![2]).toBe('chain_id=? AND <expr>=?');
    expect(keysOf(l, m![1]!).slice(0, 2)).toEqual(['chain_id', '<expr>']);
    expect(sqlOf(l, m![1]!).replace(/\s+/g, '')).toContain('(chain_id,lower(sender)');
  });

  it("the quote pruner's pass seeks requests_prunable in expiry order, and app_fee_entries by request id", () => {
    const l = open();
    // The statement as the pass runs it (its first call creates the temporary table).
    expect(l.requests.pruneUnusedQuotes(now)).toBe(0);
    const plan = planOf(l, `INSERT INTO prune_ids ${UNUSED}`, { before: now, limit: 1_000 });
    const text = plan.join('\n');
    // The candidates: the partial index built for them, already in ORDER BY order (no sort of every waiting request).
    const r = plan.filter((d) => / r /.test(` ${d} `) && /^(SEARCH|SCAN) r /.test(d));
    expect(r, text).toHaveLength(1);
    expect(r[0]).toMatch(/^SEARCH r USING (?:COVERING )?INDEX requests_prunable \(/);
    expect(text).not.toContain('USE TEMP B-TREE FOR ORDER BY');
    // Each NOT EXISTS seeks; app fees by the request's id.
    const a = plan.filter((d) => /^(SEARCH|SCAN) a\b/.test(d));
    expect(a, text).toHaveLength(1);
    const m = SEARCH('a').exec(a[0]!);
    expect(m, a[0]).not.toBeNull();
    expect(m![2]).toBe('request_id=?');
    expect(
      plan.filter((d) => /^SCAN/.test(d)),
      text,
    ).toEqual([]);
  });

  it('an open withdrawal of a currency seeks the currency or the state, not every withdrawal of the chain', () => {
    const l = open();
    const plan = planOf(l, OPEN_WITHDRAWAL, CHAIN, USDC);
    expect(plan).toHaveLength(1);
    const detail = plan[0]!;
    expect(detail).not.toMatch(/^SCAN/);
    const m = SEARCH('payouts').exec(detail);
    expect(m, detail).not.toBeNull();
    expect(m![2]).toContain('chain_id=?');
    expect(m![2], detail).toMatch(/state=\?|<expr>=\?|currency=\?/);
  });
});

const ledgers = testLedgers();

describe.each(LEDGER_KINDS)("a sender's transactions on a chain (%s)", (kind) => {
  let ledger: OpenedLedger;
  beforeEach(async () => {
    ledger = await ledgers.open(kind);
  });

  it('are exactly its rows, whatever the case of the sender recorded or asked', () => {
    type Tx = { hash: string; payout: string; chain: number; sender: string; state: TxState; gas: bigint; cap: bigint; fee?: bigint };
    const txs: Tx[] = [];
    let n = 0;
    const payout = (chain: number) => {
      const id = `p${++n}`;
      ledger.payouts.insert({
        id,
        kind: 'fill',
        request_id: null,
        deposit_id: null,
        chain_id: chain,
        recipient: OTHER_SENDER,
        currency: USDC,
        amount: '1',
        decided_at: n,
      });
      return id;
    };
    const tx = (t: Omit<Tx, 'payout' | 'hash'> & { hash?: string; payout?: string }) => {
      const row: Tx = { ...t, payout: t.payout ?? payout(t.chain), hash: t.hash ?? `0x${(++n).toString(16).padStart(64, '0')}` };
      ledger.payouts.insertTx({
        hash: row.hash as `0x${string}`,
        payout_id: row.payout,
        chain_id: row.chain,
        sender: row.sender,
        nonce: n,
        raw: '0x',
        gas_limit: row.gas.toString(),
        max_fee_per_gas: row.cap.toString(),
        max_priority_fee_per_gas: '1',
        created_at: n,
      });
      if (row.state !== 'signed' || row.fee !== undefined) ledger.payouts.setTxState(row.hash, row.state, row.fee === undefined ? {} : { fee: row.fee });
      txs.push(row);
    };
    const states: TxState[] = ['signed', 'broadcast', 'included', 'reverted', 'replaced', 'dropped'];
    const spellings = [SENDER, SENDER.toLowerCase(), upper(SENDER)];
    for (let i = 0; i < 24; i++) {
      const state = states[i % states.length]!;
      const fee = state === 'included' || state === 'reverted' ? 2n ** 66n + BigInt(21_000 * i) : undefined;
      tx({ chain: CHAIN, sender: spellings[i % spellings.length]!, state, gas: 21_000n + BigInt(i), cap: 10n ** 12n + BigInt(i), fee });
      // Another sender on the chain, and the sender on another chain: never counted.
      tx({ chain: CHAIN, sender: OTHER_SENDER, state, gas: 50_000n, cap: 10n ** 9n, fee: fee === undefined ? undefined : 7n });
      tx({ chain: OTHER_CHAIN, sender: spellings[i % spellings.length]!, state, gas: 60_000n, cap: 10n ** 10n, fee: fee === undefined ? undefined : 9n });
    }
    // A batch: one transaction carrying two payouts, a row each (the fees count per row, the costs and hashes per hash).
    const batch = `0x${'ba7c'.repeat(16)}`;
    tx({ chain: CHAIN, sender: SENDER.toLowerCase(), state: 'broadcast', gas: 90_000n, cap: 3n * 10n ** 12n, hash: batch });
    tx({ chain: CHAIN, sender: SENDER.toLowerCase(), state: 'broadcast', gas: 90_000n, cap: 3n * 10n ** 12n, hash: batch });

    const mine = txs.filter((t) => t.chain === CHAIN && t.sender.toLowerCase() === SENDER.toLowerCase());
    const fees = mine.reduce((s, t) => s + (t.fee ?? 0n), 0n);
    const openCost = mine.reduce((s, t) => s + (t.fee === undefined && (t.state === 'signed' || t.state === 'broadcast') ? t.gas * t.cap : 0n), 0n);
    const byHash = new Map(mine.map((t) => [t.hash, t]));
    const costs = [...byHash.values()]
      .map((t) => ({ hash: t.hash, state: t.state, fee: t.fee?.toString() ?? null, gas_limit: t.gas.toString(), max_fee_per_gas: t.cap.toString() }))
      .sort((a, b) => a.hash.localeCompare(b.hash));
    expect(mine.length).toBe(26);
    expect(byHash.size).toBe(25);
    expect(fees > 2n ** 64n && openCost > 0n).toBe(true);

    for (const asked of [...spellings, ` ${SENDER}`.trim()]) {
      const sums = ledger.payouts.outflowSums(CHAIN, asked);
      expect({ fees: sums.fees, openCost: sums.openCost }).toEqual({ fees, openCost });
      expect([...ledger.payouts.txCostsOfSender(CHAIN, asked)].sort((a, b) => a.hash.localeCompare(b.hash))).toEqual(costs);
      expect(ledger.payouts.hashesOfSender(CHAIN, asked).sort()).toEqual([...byHash.keys()].sort());
    }
    // A sender with nothing on the chain, and a chain with nothing of the sender.
    const nobody = '0x000000000000000000000000000000000000dEaD';
    expect(ledger.payouts.outflowSums(CHAIN, nobody)).toMatchObject({ fees: 0n, openCost: 0n });
    expect(ledger.payouts.txCostsOfSender(CHAIN, nobody)).toEqual([]);
    expect(ledger.payouts.hashesOfSender(CHAIN, nobody)).toEqual([]);
    expect(ledger.payouts.hashesOfSender(1, SENDER)).toEqual([]);
    expect(ledger.payouts.hashesOfSender(OTHER_CHAIN, upper(SENDER)).length).toBe(24);
  });
});

describe.each(LEDGER_KINDS)('an open withdrawal of a currency (%s)', (kind) => {
  let ledger: OpenedLedger;
  beforeEach(async () => {
    ledger = await ledgers.open(kind);
  });

  it('is a withdrawal of the chain and currency (any case) queued or sent, and nothing else', () => {
    let n = 0;
    const payout = (k: PayoutKind, chain: number, currency: string, state: PayoutState = 'queued') => {
      const id = `w${++n}`;
      ledger.payouts.insert({
        id,
        kind: k,
        request_id: null,
        deposit_id: null,
        chain_id: chain,
        recipient: SENDER,
        currency,
        amount: '5',
        decided_at: n,
      });
      if (state !== 'queued') ledger.payouts.setState(id, state);
      return id;
    };
    const open = (chain = CHAIN, currency = USDC) => ledger.payouts.hasOpenWithdrawal(chain, currency);
    // None of these is an open withdrawal of USDC on the chain.
    payout('withdrawal', CHAIN, USDC, 'success');
    payout('withdrawal', CHAIN, USDC, 'failed');
    payout('fill', CHAIN, USDC, 'queued');
    payout('claim', CHAIN, USDC, 'sent');
    payout('withdrawal', OTHER_CHAIN, USDC, 'queued');
    payout('withdrawal', CHAIN, WETH, 'sent');
    expect(open()).toBe(false);
    expect(open(CHAIN, USDC.toLowerCase())).toBe(false);
    expect(open(OTHER_CHAIN)).toBe(true);
    expect(open(CHAIN, upper(WETH))).toBe(true);
    expect(open(1)).toBe(false);
    // One recorded in lower case: queued, then sent, it is open whatever the case asked; settled, it is not.
    const w = payout('withdrawal', CHAIN, USDC.toLowerCase());
    for (const asked of [USDC, USDC.toLowerCase(), upper(USDC)]) expect(open(CHAIN, asked)).toBe(true);
    ledger.payouts.setState(w, 'sent');
    expect(open()).toBe(true);
    ledger.payouts.setState(w, 'success');
    expect(open()).toBe(false);
    ledger.payouts.setState(w, 'failed');
    expect(open(CHAIN, upper(USDC))).toBe(false);
  });
});

describe.each(LEDGER_KINDS)("the quote pruner's pass (%s)", (kind) => {
  let ledger: OpenedLedger;
  beforeEach(async () => {
    ledger = await ledgers.open(kind);
  });

  const request = (n: number, over: Partial<NewRequest> = {}): NewRequest => ({
    id: hex(n),
    parent_id: null,
    kind: 'order',
    request_type: 'Bridge',
    user: SENDER,
    recipient: SENDER,
    refund_to: null,
    origin_chain_id: 1,
    destination_chain_id: CHAIN,
    origin_currency: USDC,
    destination_currency: USDC,
    trade_type: 'EXACT_INPUT',
    amount_in: '1000',
    amount_out: '990',
    min_amount_out: '990',
    pricing: '{"kind":"bridge"}',
    order_data: null,
    quote: '{"steps":[]}',
    expires_at: now + 60_000,
    fill_deadline: null,
    created_at: now,
    ...over,
  });

  it('deletes the unused quotes past their expiry, soonest expired first, and keeps every other request', () => {
    const before = now + 120_000;
    const db = ledger.db;
    const insert = (r: NewRequest) => ledger.tx(() => ledger.requests.insert(r));
    // Unused, expired: pruned (2 expired first).
    insert(request(1));
    insert(request(2, { expires_at: now + 30_000 }));
    // Kept: not expired before `before`, no expiry.
    insert(request(10, { expires_at: before }));
    insert(request(11, { expires_at: null }));
    // Kept: no longer waiting; not an order; a deposit-address request; a parent of a request.
    insert(request(12));
    ledger.tx(() => ledger.requests.setStatus(hex(12), 'pending', {}, now + 1));
    insert(request(13, { kind: 'orphan' }));
    insert(request(14, { deposit_address: OTHER_SENDER }));
    insert(request(15));
    insert(request(16, { kind: 'extra', parent_id: hex(15) }));
    // Kept: something happened to it.
    for (const n of [20, 21, 22, 23, 24, 25, 26]) insert(request(n));
    db.prepare(`INSERT INTO deposits (id, chain_id, tx_hash, log_index, block_number, block_hash, depositor, currency, amount, order_ref, state, seen_at, request_id)
      VALUES ('d20', 1, '0xd20', 0, 1, '0xb', ?, ?, '1000', ?, 'handled', ?, ?)`).run(SENDER, USDC, hex(20), now, hex(20));
    // A deposit naming it by its order ref, not decided yet (no request id).
    db.prepare(`INSERT INTO deposits (id, chain_id, tx_hash, log_index, block_number, block_hash, depositor, currency, amount, order_ref, state, seen_at)
      VALUES ('d21', 1, '0xd21', 0, 1, '0xb', ?, ?, '1000', ?, 'unconfirmed', ?)`).run(SENDER, USDC, hex(21), now);
    ledger.payouts.insert({
      id: 'p22',
      kind: 'refund',
      request_id: hex(22),
      deposit_id: null,
      chain_id: 1,
      recipient: SENDER,
      currency: USDC,
      amount: '1000',
      decided_at: now,
    });
    db.prepare('INSERT INTO exchange_nonces (nonce, wallet, request_id, signature, created_at) VALUES (1, ?, ?, ?, ?)').run(SENDER, hex(23), '0x5167', now);
    db.prepare(`INSERT INTO balance_entries (wallet, kind, amount, request_id, ref, created_at) VALUES (?, 'credit', 5, ?, 'b24', ?)`).run(
      SENDER,
      hex(24),
      now,
    );
    db.prepare(`INSERT INTO app_fee_entries (recipient, chain_id, currency, amount, kind, request_id, ref, created_at)
      VALUES (?, ?, ?, '3', 'accrual', ?, 'a25', ?)`).run(SENDER, CHAIN, USDC, hex(25), now);
    db.prepare(`INSERT INTO events (id, request_id, type, status, payload, created_at) VALUES ('e26', ?, 'request.status.updated', 'pending', '{}', ?)`).run(
      hex(26),
      now,
    );
    const kept = [10, 11, 12, 13, 14, 15, 16, 20, 21, 22, 23, 24, 25, 26].map(hex);
    const ids = () =>
      (db.prepare('SELECT id FROM requests ORDER BY id').all() as { id: string }[]).map((r) => r.id).filter((id) => id !== hex(1) && id !== hex(2));

    // Nothing expired before now.
    expect(ledger.tx(() => ledger.requests.pruneUnusedQuotes(now))).toBe(0);
    // A batch of one: the one expired first.
    expect(ledger.tx(() => ledger.requests.pruneUnusedQuotes(before, 1))).toBe(1);
    expect(ledger.requests.get(hex(2))).toBeUndefined();
    expect(ledger.requests.get(hex(1))).toBeDefined();
    expect(ledger.tx(() => ledger.requests.pruneUnusedQuotes(before))).toBe(1);
    expect(ledger.requests.get(hex(1))).toBeUndefined();
    expect(ledger.requests.quoteOf(hex(1))).toBeUndefined();
    expect(ledger.events.forRequest(hex(1))).toEqual([]);
    expect(ledger.tx(() => ledger.requests.pruneUnusedQuotes(before))).toBe(0);
    expect(ids()).toEqual(kept);
    // Their quotes and 'waiting' events are untouched.
    expect(ledger.requests.quoteOf(hex(25))).toBe('{"steps":[]}');
    expect(ledger.events.forRequest(hex(25)).length).toBeGreaterThan(0);
  });
});
