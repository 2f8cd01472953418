// Which nonces the exchange takes at a moment of its clock (Hyperliquid's documented rule): none more than a day
// ahead of its clock, nor more than 2 days behind it. A transfer in the exchange's ledger at time T therefore carries
// a nonce within (T - NONCE_BEHIND_MS, T + NONCE_AHEAD_MS).

/** How far ahead of the exchange's clock a nonce may be. */
export const NONCE_AHEAD_MS = 24 * 60 * 60_000;
/** How far behind the exchange's clock a nonce may be. */
export const NONCE_BEHIND_MS = 2 * 24 * 60 * 60_000;
