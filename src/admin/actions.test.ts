// A chain pause must hold every payout queued on that chain, not only the solver's new decisions:
// a fast fill, a refund or a claim queued before or during the pause is not handed to the submitter.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pause, resume } from './actions.ts';
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
