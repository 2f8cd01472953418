// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A test payout recipient whose receive burns the gas it is given (about 0.6M): paid with
/// all the gas of the payer's transaction, it makes the payer pay for its work.
contract GasBurner {
    bytes32 public sink;

    receive() external payable {
        bytes32 h = sink;
        for (uint256 i = 0; i < 4_000; i++) h = keccak256(abi.encode(h, i));
        sink = h;
    }
}
