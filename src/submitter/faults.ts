import type { Faults } from '../config/load.ts';

/** Where a test may kill the node in the middle of paying a fill (see `Faults`). */
export type FaultPoint = 'afterFillRecorded' | 'afterFillBroadcast' | 'afterCancelRecorded';

const FLAG: Record<FaultPoint, keyof Faults> = {
  afterFillRecorded: 'crashAfterFillRecorded',
  afterFillBroadcast: 'crashAfterFillBroadcast',
  afterCancelRecorded: 'crashAfterCancelRecorded',
};

/**
 * Kills the process (SIGKILL: no cleanup, no flush) at `point` when the faults ask for it and the payouts
 * just handled include a fill. Used by the crash tests and the chaos harness to prove a crash between
 * recording and broadcasting (or after broadcasting) pays once.
 */
export function crashPoint(faults: Faults, point: FaultPoint, payouts: readonly { kind: string }[]): void {
  if (faults[FLAG[point]] && payouts.some((p) => p.kind === 'fill')) process.kill(process.pid, 'SIGKILL');
  if (point === 'afterFillRecorded' && faults.pauseAfterFillRecorded && !paused && payouts.some((p) => p.kind === 'fill')) {
    paused = true;
    // Stops here until SIGCONT: the next statement is the broadcast of what was just recorded.
    process.kill(process.pid, 'SIGSTOP');
  }
}

let paused = false;
