// The gas the node prices its own transactions at, and bounds a payout's recipient to.

/**
 * Gas the quote charges for the node's own transactions. Measured on the node's contracts (see
 * test/evm-adapter.test.ts); the submitter estimates each real transaction and adds a margin.
 */
export const GAS = {
  fill: { native: 60_000n, erc20: 75_000n },
  refund: { native: 80_000n, erc20: 95_000n },
  // The user's own deposit, for the quote's `fees.gas`.
  deposit: { native: 45_000n, erc20: 75_000n },
  // A permit deposit the node submits: permit, transferFrom and the event.
  permitDeposit: 130_000n,
  // A deposit address's sweep: the clone's creation, its transfer into the depository and the
  // event (an ERC-20 sweep measured 207,066 on the devnet; test/adversarial/deposit-addresses).
  sweep: 220_000n,
  // The most gas a payout's recipient may take beyond what its payout was priced at (the filler and the
  // depository forward all of a transaction's gas to it): a contract whose receive burns gas would
  // otherwise have the solver pay for it. As much as a batched fill gives each recipient (the filler's
  // BATCH_CALL_GAS); a smart wallet's receive takes a few thousand.
  recipient: 100_000n,
};
