/**
 * Whether this node may broadcast now. Every sender asks right before it sends anything signed to a
 * chain (a transaction, a rebroadcast, an exchange action): an active/standby node may only while it
 * holds the leader lease and its own deadline has not passed (src/lease/leadership.ts).
 */
export interface BroadcastGate {
  /** Throws (LeaseLostError) when this node must not broadcast. */
  check(): void;
}

/** A single node (no lease): always open. */
export const OPEN_GATE: BroadcastGate = { check() {} };
