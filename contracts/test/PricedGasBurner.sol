// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A test payout recipient that is cheap in a simulation and dear on chain: its receive returns at once when
/// the gas price is 0 (an estimate sent without fee fields), and otherwise burns all but a little of the gas it is
/// given, then accepts the payment. A batch sized from the estimate ran out of gas on chain and reverted whole.
contract PricedGasBurner {
    receive() external payable {
        if (tx.gasprice == 0) return;
        uint256 h;
        while (gasleft() > 2_000) h = uint256(keccak256(abi.encode(h)));
    }
}
