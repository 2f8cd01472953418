// Signs of life of this thread, in shared memory, for a thread that cannot ask it (the leader lease's renewer,
// src/lease/renewer.ts): the thread's event loop turning (a heartbeat), and the thread waiting on the ledger (the
// synchronous PostgreSQL client blocks it in `Atomics.wait` for a call bounded by its timeout). A thread doing
// neither for a while is hung, whatever its timers would say if they could run.
//
// Times are on one process-wide monotonic clock (process.hrtime, CLOCK_MONOTONIC): performance.now()'s origin
// differs from thread to thread.

/** Slots of the shared array (BigInt64Array, microseconds on `monotonicMicros`). */
export const LIFE = {
  /** The event loop turned (a timer ran) or a ledger call returned: the thread was alive then. */
  beat: 0,
  /** Inside a ledger call until then (its bound); 0 outside one. */
  callUntil: 1,
} as const;

const buffer = new SharedArrayBuffer(2 * BigInt64Array.BYTES_PER_ELEMENT);
const life = new BigInt64Array(buffer);

/** The process-wide monotonic clock, in microseconds: the same in every thread of the process. */
export function monotonicMicros(): bigint {
  return process.hrtime.bigint() / 1000n;
}

/** The process-wide monotonic clock in milliseconds (a number, for deadlines). */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** This thread's signs of life, to hand to another thread (LIFE names its slots). */
export function lifeBuffer(): SharedArrayBuffer {
  return buffer;
}

/** The event loop of this thread turned: a timer calls it. */
export function beat(): void {
  Atomics.store(life, LIFE.beat, monotonicMicros());
}

/**
 * This thread now waits on the ledger for at most `boundMs` (it is alive meanwhile, though it runs nothing); returns
 * what `ledgerCallEnded` restores.
 */
export function ledgerCallStarted(boundMs: number): bigint {
  const before = Atomics.load(life, LIFE.callUntil);
  Atomics.store(life, LIFE.callUntil, monotonicMicros() + BigInt(Math.ceil(boundMs * 1000)));
  return before;
}

/** The ledger call returned (a sign of life too); `before` is what ledgerCallStarted returned. */
export function ledgerCallEnded(before: bigint): void {
  Atomics.store(life, LIFE.beat, monotonicMicros());
  Atomics.store(life, LIFE.callUntil, before);
}
