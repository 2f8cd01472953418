// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A test EIP-7702 delegate and call target whose work depends on whether it runs in an estimate (sent without
/// fee fields: gas price 0) or on chain: estimated, it burns `rounds` hashes, a number its owner raises after a quote or
/// a relay's admission; on chain, it burns all but a little of the gas it is given.
contract GrowingBurner {
    uint256 public rounds;

    function setRounds(uint256 r) external {
        rounds = r;
    }

    fallback() external payable {
        uint256 h;
        if (tx.gasprice == 0) {
            uint256 n = rounds;
            for (uint256 i; i < n; ++i) h = uint256(keccak256(abi.encode(h, i)));
        } else {
            while (gasleft() > 3_000) h = uint256(keccak256(abi.encode(h)));
        }
        if (h == 1) revert();
    }
}
