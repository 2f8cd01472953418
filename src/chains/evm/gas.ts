// The gas the node prices its own transactions at, and bounds a payout's recipient to.

/**
 * Gas the quote charges for the node's own transactions, measured on the node's contracts on the
 * devnet; the submitter estimates each real transaction and adds a margin.
 */
export const GAS = {
  // A native fill or refund to an empty account pays its creation (25,000): 83,682 and 95,714 measured.
  fill: { native: 85_000n, erc20: 75_000n },
  refund: { native: 100_000n, erc20: 95_000n },
  // A gas top-up delivered with an ERC-20 fill: native currency sent to the recipient in the same
  // transaction, an empty account's creation included.
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
