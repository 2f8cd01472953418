// The exchange deposit source over a flooded millisecond, against a client faithful to the exchange's listing (at most
// 500 updates of a time range, none past 500 of one millisecond) and to its rate limit (Hyperliquid: 1,200 weight a
// minute, 20 for each ledger read: a read past the budget answers HTTP 429 and the pass fails).
import { getAddress, keccak256, toHex, type Address } from 'viem';
import { describe, expect, it } from 'vitest';
import type { ExchangeChainConfig } from '../../config/schema.ts';
import { createLogger } from '../../log.ts';
import type { Ledger } from '../../ledger/index.ts';
import type { NonceMappingRow } from '../../ledger/exchangeNonces.ts';
import type { ExchangeAssets } from './assets.ts';
import { ExchangeHttpError, type ExchangeClient, type LedgerUpdate } from './client.ts';
import { ExchangeDepositSource } from './depositSource.ts';

const SOLVER = getAddress('0x00000000000000000000000000000000005017e2');
const T = 1_800_000_000_000;
const PAGE = 500;
const wallet = (i: number) => getAddress(toHex(0x1000 + i, { size: 20 }));
const hash = (s: string) => keccak256(toHex(s));
const send = (time: number, from: Address, nonce: number, tag: string): LedgerUpdate =>
  ({
    time,
    hash: hash(tag),
    delta: {
      type: 'send',
      user: from,
      destination: SOLVER,
      token: 'USDC',
      amount: '20.0',
      destinationDex: '',
      nonce,
      sourceDex: '',
      usdcValue: '20.0',
      fee: '0',
    },
  }) as unknown as LedgerUpdate;

/** The exchange's ledgers, and a client that lists them as the exchange does, within `budget` reads a pass. */
function exchange(ledgers: Map<string, LedgerUpdate[]>, budget: number) {
  let reads = 0;
  const client = {
    async ledgerUpdates(user: Address, start: number, end?: number, truncated?: number[]) {
      if (++reads > budget) throw new ExchangeHttpError('POST /info (userNonFundingLedgerUpdates) answered HTTP 429', 'http://exchange/info');
      const all = (ledgers.get(user) ?? []).filter((u) => u.time >= start && (end === undefined || u.time <= end));
      const out: LedgerUpdate[] = [];
      // Pages of 500, each from the last one's time: a millisecond holding a full page is never read past.
      for (let from = start; ; ) {
        const page = all.filter((u) => u.time >= from && !out.includes(u)).slice(0, PAGE);
        out.push(...page);
        if (page.length < PAGE) return out;
        const last = page[page.length - 1]!.time;
        if (last <= from) truncated?.push(from);
        from = last > from ? last : last + 1;
      }
    },
  } as unknown as ExchangeClient;
  return { client, newPass: () => (reads = 0), reads: () => reads };
}

describe('ExchangeDepositSource, a millisecond of the solver ledger flooded', () => {
  it('reads the wallets that may hold a transfer in it a few a pass, books what comes after it meanwhile, and holds its cursor until all are read', async () => {
    // 500 dust transfers to the solver at T hide a user's transfer (wallet 0, nonce T - 1). 39 other wallets (an
    // attacker's, free to authorize) hold authorized requests whose nonces the exchange could take at T.
    const solverLedger: LedgerUpdate[] = Array.from({ length: PAGE }, (_, i) => ({
      time: T,
      hash: hash(`dust ${i}`),
      delta: { type: 'internalTransfer', user: wallet(999), destination: SOLVER, usdc: '0.01', fee: '0' },
    })) as unknown as LedgerUpdate[];
    const hidden = send(T, wallet(0), T - 1, 'the user');
    solverLedger.push(hidden);
    const mappings: NonceMappingRow[] = Array.from({ length: 40 }, (_, i) => ({
      wallet: wallet(i),
      nonce: T - 1 - i,
      request_id: hash(`request ${i}`),
      signature: '0x',
      created_at: T - 60_000,
    }));
    const ledgers = new Map<string, LedgerUpdate[]>([[SOLVER, solverLedger]]);
    for (const m of mappings) ledgers.set(m.wallet, m.wallet === wallet(0) ? [hidden] : []);
    // A later user's transfer, after the flood: it must not wait for the 40 reads.
    const later = send(T + 5, wallet(0), T + 4, 'a later transfer');
    solverLedger.push(later);
    const booked = new Set<string>();
    const nonces = {
      get: (w: string, n: number) =>
        mappings.find((m) => m.wallet === w && m.nonce === n) ?? (n === T + 4 ? { ...mappings[0]!, nonce: T + 4, request_id: hash('later') } : undefined),
      awaiting: () => mappings.filter((m) => !booked.has(m.request_id)),
    } as unknown as Ledger['exchangeNonces'];
    const assets = { ofTransfer: async () => ({ currency: '0x', decimals: 6 }) } as unknown as ExchangeAssets;
    const chain = { id: 1337, orphanGraceMs: 60_000 } as ExchangeChainConfig;
    // Well past the orphan grace: only the unread wallets hold the cursor.
    const realNow = Date.now;
    Date.now = () => T + 10 * 60_000;
    try {
      // The budget of a pass: the solver's listing (2 pages) and 10 more reads.
      const ex = exchange(ledgers, 12);
      const source = new ExchangeDepositSource(chain, ex.client, assets, nonces, SOLVER, () => false, createLogger('silent'));
      const passes: { deposits: string[]; upTo: number | undefined }[] = [];
      for (let i = 0; i < 10 && !passes.some((p) => p.upTo !== undefined && p.upTo > T); i++) {
        ex.newPass();
        // Before: the first pass read all 40 wallets, passed the budget, and failed whole (HTTP 429), every time.
        const read = await source.deposits(T + 1, T + 10);
        passes.push({ deposits: read.deposits.map((d) => d.order_ref), upTo: read.upTo });
        for (const d of read.deposits) booked.add(d.order_ref);
        expect(ex.reads()).toBeLessThanOrEqual(12);
      }
      // The later transfer on the first pass; the hidden one once its wallet was read; the cursor past T once all were.
      expect(passes[0]!.deposits).toContain(hash('later'));
      expect(passes.flatMap((p) => p.deposits)).toContain(hash('request 0'));
      expect(passes.slice(0, -1).every((p) => p.upTo === T)).toBe(true);
      expect(passes.at(-1)!.upTo).toBeGreaterThan(T);
      expect(passes.length).toBeGreaterThan(1);
    } finally {
      Date.now = realNow;
    }
  });

  it('lets the flooded millisecond go once the transfers its wallets hold there are booked, however many such wallets still wait for another transfer', async () => {
    // Six wallets each send the solver a transfer at T, behind 500 dust transfers, for one authorized request, and hold
    // another authorized request still waiting: read again for ever, they held the cursor at T for good.
    const solverLedger = Array.from({ length: PAGE }, (_, i) => ({
      time: T,
      hash: hash(`dust ${i}`),
      delta: { type: 'internalTransfer', user: wallet(999), destination: SOLVER, usdc: '0.01', fee: '0' },
    })) as unknown as LedgerUpdate[];
    const mappings: NonceMappingRow[] = [];
    const ledgers = new Map<string, LedgerUpdate[]>([[SOLVER, solverLedger]]);
    for (let i = 0; i < 6; i++) {
      const paid = send(T, wallet(i), T - 10 - i, `paid ${i}`);
      solverLedger.push(paid);
      ledgers.set(wallet(i), [paid]);
      mappings.push({ wallet: wallet(i), nonce: T - 10 - i, request_id: hash(`paid ${i}`), signature: '0x', created_at: T - 60_000 });
      mappings.push({ wallet: wallet(i), nonce: T + 100 + i, request_id: hash(`open ${i}`), signature: '0x', created_at: T - 60_000 });
    }
    // Something after the flood, for the cursor to move to.
    solverLedger.push({ time: T + 5, hash: hash('after'), delta: { type: 'accountClassTransfer', usdc: '1', toPerp: true } } as unknown as LedgerUpdate);
    const booked = new Set<string>();
    const nonces = {
      get: (w: string, n: number) => mappings.find((m) => m.wallet === w && m.nonce === n),
      // The paid requests leave 'waiting' once their deposit is booked; the open ones stay.
      awaiting: () => mappings.filter((m) => !booked.has(m.request_id)),
    } as unknown as Ledger['exchangeNonces'];
    const known = new Set<string>();
    const assets = { ofTransfer: async () => ({ currency: '0x', decimals: 6 }) } as unknown as ExchangeAssets;
    const chain = { id: 1337, orphanGraceMs: 60_000 } as ExchangeChainConfig;
    const realNow = Date.now;
    Date.now = () => T + 10 * 60_000;
    try {
      const ex = exchange(ledgers, 12);
      const source = new ExchangeDepositSource(chain, ex.client, assets, nonces, SOLVER, (id) => known.has(id), createLogger('silent'));
      let upTo: number | undefined = T;
      const refs = new Set<string>();
      for (let i = 0; i < 8 && upTo === T; i++) {
        ex.newPass();
        const read = await source.deposits(T + 1, T + 10);
        // The driver commits what the pass found: the ledger holds it, its request leaves 'waiting'.
        for (const d of read.deposits) {
          known.add(`1337:${d.tx_hash}:0`);
          booked.add(d.order_ref);
          // The dust, orphans naming no request, aside.
          if (!/^0x0+$/.test(d.order_ref)) refs.add(d.order_ref);
        }
        upTo = read.upTo;
      }
      expect([...refs].sort()).toEqual(Array.from({ length: 6 }, (_, i) => hash(`paid ${i}`)).sort());
      // Before: still T after every pass.
      expect(upTo).toBe(T + 5);
    } finally {
      Date.now = realNow;
    }
  });
});
