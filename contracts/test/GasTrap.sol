// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A test destination-call target that passes its estimate and then reverts on chain: `spring`
/// burns gas, then reverts once someone has called `arm` (sent in the same block, ahead of the fill).
contract GasTrap {
    bool public armed;
    bytes32 public sink;

    error Sprung();

    function arm() external {
        armed = true;
    }

    function spring(uint256 rounds) external payable {
        bytes32 h = sink;
        for (uint256 i = 0; i < rounds; i++) h = keccak256(abi.encode(h, i));
        if (armed) revert Sprung();
        sink = h;
    }
}
