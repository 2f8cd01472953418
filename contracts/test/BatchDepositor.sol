// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

interface INativeDepository {
    function depositNative(address depositor, bytes32 id) external payable;
}

/// @notice Benchmark helper: many native deposits in one transaction, so that a chain with
/// 100,000 deposit events can be built in a few hundred blocks.
contract BatchDepositor {
    function depositMany(INativeDepository depository, uint256 count, uint256 amountEach, bytes32 seed) external payable {
        require(msg.value == count * amountEach, "value");
        for (uint256 i = 0; i < count; i++) {
            depository.depositNative{value: amountEach}(msg.sender, keccak256(abi.encode(seed, i)));
        }
    }
}
