// One "node" of an active/standby pair inside a test process: its ledger, the acting (fenced) ledger and its
// Leadership, recording the epochs it led and the leases it lost.
import { fencedLedger } from '../../src/ledger/fenced.ts';
import type { Ledger } from '../../src/ledger/index.ts';
import type { LeaseLostError } from '../../src/ledger/leases.ts';
import { Leadership, type LeadershipOptions } from '../../src/lease/leadership.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';

/** A Leadership on `ledger` as a node builds it (silent log, its own metrics); not started. */
export function leaseNode(ledger: Ledger, o: Pick<LeadershipOptions, 'nodeId' | 'leaseMs' | 'renewMs' | 'renewFrom'>) {
  const state = { led: [] as number[], lost: [] as LeaseLostError[] };
  let leadership: Leadership | undefined;
  const acting = fencedLedger(ledger, (e) => leadership?.lost(e));
  leadership = new Leadership({
    ...o,
    ledger,
    acting,
    log: createLogger('silent'),
    metrics: createMetrics(),
    onLead: async (epoch) => void state.led.push(epoch),
    onLost: (e) => void state.lost.push(e),
  });
  return { ledger, acting, leadership, state };
}
