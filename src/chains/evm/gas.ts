// The gas the node prices its own transactions at, and bounds a payout's recipient to.

/**
 * Gas the quote charges for the node's own transactions, measured on the node's contracts on the
 * devnet; the submitter estimates each real transaction and adds a margin.
 */
export const GAS = {
  // What each costs to a fresh recipient (an empty account pays its creation, 25,000; a new holder's balance slot
  // written from zero, 20,000), plus at least 5%: room for a chain whose schedule charges a little more than the
  // devnet's, or a cold access the devnet does not make. Estimated on the devnet (test/adversarial/
  // review-gas-prices): a native fill 83,844; an ERC-20 fill 85,635 (USDC) to 85,952 (WETH), 68,523-68,840 to an
  // existing holder; a native refund 95,906, an ERC-20 refund 95,498 (USDC) to 95,926 (WETH). At 85,000 and 75,000
  // an ERC-20 fill to a new holder cost the solver 10,600 gas it did not charge, and a native fill's bound was 1.4%
  // above its cost. A token costlier than the devnet's (a proxy, a blocklist) may need more: measure it.
  fill: { native: 90_000n, erc20: 92_000n },
  refund: { native: 102_000n, erc20: 102_000n },
  // A gas top-up delivered with an ERC-20 fill: native currency sent to the recipient in the same
  // transaction, an empty account's creation included (about 36,200: 122,157 with a WETH fill to a new holder).
  topUp: 40_000n,
  // The user's own deposit, for the quote's `fees.gas`.
  deposit: { native: 45_000n, erc20: 75_000n },
  // A permit deposit the node submits: permit, transferFrom and the event.
  permitDeposit: 130_000n,
  // A deposit address's sweep: the clone's creation, its transfer into the depository and the
  // event (an ERC-20 sweep measured 207,066 on the devnet; test/adversarial/deposit-addresses).
  sweep: 220_000n,
  // The most gas a payout's recipient may take beyond what its payout was priced at (the filler and the
  // depository forward all of a transaction's gas to it): a contract whose receive burns gas would
  // otherwise have the solver pay for it. A smart wallet's receive takes a few thousand.
  recipient: 40_000n,
};

/** The gas a plain fill is priced at (what its quote charges): of native currency or an ERC-20, with or without a gas top-up. */
export const fillGas = (native: boolean, topUp: boolean): bigint => (native ? GAS.fill.native : GAS.fill.erc20) + (topUp ? GAS.topUp : 0n);

// What a plain fill to a recipient with no code may take beyond its price, in basis points of it: a chain's schedule,
// or a token, a little costlier than the devnet's measure are still paid; a recipient given code after its quote (a
// deployment, an EIP-7702 delegation) burns at most this much uncharged (GAS.recipient, 40,000, before).
const PLAIN_FILL_ALLOWANCE_BPS = 500n;

/**
 * The most gas a plain fill priced at `priced` is sent with when its recipient ran no code at its quote (the
 * order's maxGas): its price plus 5%. Over it the fill is refused (QUOTED_GAS_LIMIT_EXCEEDED) and refunded.
 */
export const plainFillBound = (priced: bigint): bigint => priced + (priced * PLAIN_FILL_ALLOWANCE_BPS) / 10_000n;

/** The gas one transfer back is priced at: a refund's (what it is charged), an excess's or a claim's. */
export const refundGas = (native: boolean): bigint => (native ? GAS.refund.native : GAS.refund.erc20);

/** EIP-7825 (Osaka): the most gas one transaction may carry, 2^24. Applied on every chain: a fill needs far less. */
export const TX_GAS_CAP = 16_777_216n;

/**
 * A transaction's gas limit: the estimate plus `marginBps`, rounded up, but never above `cap` (what one
 * transaction may carry on the chain). A limit over it is refused by every node, for good: signed and
 * recorded, it would hold its nonce and every payout after it. Undefined when the estimate alone is over.
 */
export function gasLimitWithin(estimate: bigint, marginBps: number, cap: bigint): bigint | undefined {
  if (estimate > cap) return undefined;
  const gas = (estimate * BigInt(10_000 + marginBps) + 9_999n) / 10_000n;
  return gas < cap ? gas : cap;
}
