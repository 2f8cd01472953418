import { getAddress, isAddress, isHex, type Address, type Hex, type SignedAuthorization } from 'viem';
import type { PayoutRow } from '../../ledger/types.ts';
import type { FailReason } from '../../ledger/reasons.ts';

/** A gasless relay's call: what POST /execute rawCalls asked the node to send from its own key. */
export interface RelayTerms {
  to: Address;
  data: Hex;
  value: bigint;
  /** EIP-7702 authorizations the user signed (empty: a plain call). */
  authorizationList: SignedAuthorization[];
}

/** RelayTerms as the ledger keeps them (payouts.authorization of a relay payout): JSON, integers as strings. */
export function serializeRelayTerms(t: RelayTerms): string {
  return JSON.stringify({
    to: t.to,
    data: t.data,
    value: t.value.toString(),
    authorizationList: t.authorizationList.map((a) => ({ chainId: a.chainId, address: a.address, nonce: a.nonce, yParity: a.yParity, r: a.r, s: a.s })),
  });
}

/** Reads a relay payout's terms back; throws on anything malformed (the row can never be sent). */
export function parseRelayTerms(json: string | null): RelayTerms {
  if (!json) throw new Error('no relay terms');
  const raw = JSON.parse(json) as {
    to: string;
    data: string;
    value: string;
    authorizationList?: { chainId: number; address: string; nonce: number; yParity: number; r: string; s: string }[];
  };
  if (!isAddress(raw.to, { strict: false })) throw new Error(`to ${raw.to} is not an address`);
  if (!isHex(raw.data)) throw new Error('data is not hex');
  return {
    to: getAddress(raw.to),
    data: raw.data,
    value: BigInt(raw.value),
    authorizationList: (raw.authorizationList ?? []).map((a) => ({
      chainId: a.chainId,
      address: getAddress(a.address),
      nonce: a.nonce,
      yParity: a.yParity,
      r: a.r as Hex,
      s: a.s as Hex,
    })),
  };
}

/** How long a relay may wait unsigned after its admission when its chain's config does not say (relayMaxWaitMs). */
export const DEFAULT_RELAY_MAX_WAIT_MS = 600_000;

/** Why a relay past its deadline fails: the interface's nearest value (a time to live ran out before it was sent). */
export const RELAY_EXPIRED: FailReason & 'TTL_EXPIRED' = 'TTL_EXPIRED';

/**
 * Whether a relay's payout has waited unsigned past its deadline, `maxWaitMs` after its admission (decided_at): then a
 * description of it, else undefined. It fails then (RELAY_EXPIRED, through onRelayFailed: hold released, nothing
 * charged), rather than wait for as long as the market stays above its own fee cap: the sponsor's balance stayed held,
 * the caller's request pending, and a relay sent hours later was no longer what its caller (or the call's own logic:
 * prices, deadlines) asked for. Only a queued relay none of whose transactions can still land (`openTxs`, read from the
 * ledger): one signed and not yet settled may land, and its own cap's cancel owns it; one queued again once none of its
 * transactions could land (its nonce taken by another) waits unsigned like one never sent. Everything it reads is in
 * the ledger, so a node restarted past the deadline decides alike.
 */
export function relayExpiry(payout: Pick<PayoutRow, 'kind' | 'state' | 'decided_at'>, openTxs: number, maxWaitMs: number, now: number): string | undefined {
  if (payout.kind !== 'relay' || payout.state !== 'queued' || openTxs > 0) return undefined;
  const waited = now - payout.decided_at;
  if (waited < maxWaitMs) return undefined;
  return `not signed within ${maxWaitMs} ms of its admission (waited ${waited} ms): the relay expired unsent`;
}
