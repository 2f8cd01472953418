import { getAddress, isAddress, isHex, type Address, type Hex, type SignedAuthorization } from 'viem';

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
