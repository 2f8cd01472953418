// A chain pause must hold every payout queued on that chain, not only the solver's new decisions:
// a fast fill, a refund or a claim queued before or during the pause is not handed to the submitter.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pause, resume, stuck } from './actions.ts';
import { depositFor, hex } from '../../test/helpers/statusFixtures.ts';
import { Ledger } from '../ledger/index.ts';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('payouts on a paused chain', () => {
  it('are not handed to the submitter while the chain is paused, and are once it resumes', () => {
    dir = mkdtempSync(join(tmpdir(), 'pause-'));
    const ledger = Ledger.open(join(dir, 'ledger.db'));
    try {
      const who = { actor: 'test', reason: 'incident' };
      ledger.payouts.insert({
        id: 'refund:x',
        kind: 'refund',
        request_id: null,
        deposit_id: null,
        chain_id: 10,
        recipient: '0x0000000000000000000000000000000000000001',
        currency: '0x0000000000000000000000000000000000000000',
        amount: '1',
        decided_at: 1,
      });
      expect(ledger.payouts.queued(10).map((p) => p.id)).toEqual(['refund:x']);
      pause(ledger, { scope: 'chain', chainId: 10 }, who);
      expect(ledger.payouts.queued(10)).toEqual([]);
      // Another chain's pause does not hold it.
      resume(ledger, { scope: 'chain', chainId: 10 }, who);
      pause(ledger, { scope: 'chain', chainId: 8453 }, who);
      expect(ledger.payouts.queued(10).map((p) => p.id)).toEqual(['refund:x']);
    } finally {
      ledger.close();
    }
  });
});

describe('deposits on a chain taken out of the config', () => {
  it('are listed for the operator while unconfirmed: no indexer confirms them any more, and nothing else showed them', () => {
    const ledger = Ledger.open(':memory:');
    try {
      const d = { ...depositFor(1, 0, 5, hex(77)), id: `999:${hex(1)}:0`, chain_id: 999 };
      ledger.deposits.record(999, [d]);
      ledger.deposits.record(8453, [depositFor(2, 0, 5, hex(78))]);
      // Chain 999 is not configured; 8453 is, and its unconfirmed deposit is its indexer's to confirm.
      const listed = stuck(ledger, 10_000, new Set([8453, 10]));
      expect(listed).toEqual([
        {
          state: 'waiting',
          reason: 'CHAIN_NOT_CONFIGURED',
          requestId: hex(77),
          depositId: d.id,
          payoutId: null,
          chainId: 999,
          amount: '100',
          currency: d.currency,
          ageMs: 10_000 - d.seen_at,
        },
      ]);
    } finally {
      ledger.close();
    }
  });
});

describe('a payout sent long ago and not yet settled', () => {
  // An SVM payout whose expiry cannot be proven (a provider pruned or behind) is held sent for good, as is an exchange
  // action held for funds or a transaction waiting at the fee cap unreplaced: only a log line and a gauge showed them.
  it('is listed for the operator once it has waited 10 minutes, and not before', () => {
    const ledger = Ledger.open(':memory:');
    try {
      ledger.payouts.insert({
        id: 'fill:x',
        kind: 'fill',
        request_id: null,
        deposit_id: null,
        chain_id: 10,
        recipient: '0x0000000000000000000000000000000000000001',
        currency: '0x0000000000000000000000000000000000000000',
        amount: '7',
        decided_at: 1_000,
      });
      ledger.payouts.setState('fill:x', 'sent', { txHash: hex(5) }, 2_000);
      expect(stuck(ledger, 2_000 + 9 * 60_000)).toEqual([]);
      expect(stuck(ledger, 2_000 + 10 * 60_000)).toEqual([
        {
          state: 'waiting',
          reason: 'SENT_UNSETTLED',
          requestId: null,
          depositId: null,
          payoutId: 'fill:x',
          chainId: 10,
          amount: '7',
          currency: '0x0000000000000000000000000000000000000000',
          ageMs: 2_000 + 10 * 60_000 - 1_000,
        },
      ]);
    } finally {
      ledger.close();
    }
  });
});

describe('a queued payout its deposit chain holds back', () => {
  // The pipeline signs no payout out of a deposit its chain's indexer does not hold as canonical (a reorg being decided,
  // the indexer not read since the start, or stopped on a reorg deeper than its window): such payouts sat queued with
  // nothing in the operator's listing.
  it('is listed for the operator as waiting, DEPOSIT_UNCHECKED', () => {
    const ledger = Ledger.open(':memory:');
    try {
      const payout = (id: string) => ({
        id,
        kind: 'fill' as const,
        request_id: null,
        deposit_id: null,
        chain_id: 10,
        recipient: '0x0000000000000000000000000000000000000001',
        currency: '0x0000000000000000000000000000000000000000',
        amount: '3',
        decided_at: 1_000,
      });
      ledger.payouts.insert(payout('fill:held'));
      ledger.payouts.insert(payout('fill:free'));
      const listed = stuck(ledger, 5_000, undefined, (p) => p.id !== 'fill:held');
      expect(listed.map((i) => [i.payoutId, i.state, i.reason])).toEqual([['fill:held', 'waiting', 'DEPOSIT_UNCHECKED']]);
    } finally {
      ledger.close();
    }
  });
});
