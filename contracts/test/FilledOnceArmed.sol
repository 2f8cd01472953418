// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A test wallet delegate (EIP-7702) whose `spring` passes until someone calls `arm`, then reverts
/// with the filler's own `OrderAlreadyFilled` error: a relayed call admitted while it passed that the
/// node's later simulation sees revert with the selector by which the filler says an order is paid.
contract FilledOnceArmed {
    error OrderAlreadyFilled(bytes32 orderId);

    bool public armed;

    function arm() external {
        armed = true;
    }

    function spring() external {
        if (armed) revert OrderAlreadyFilled(bytes32(uint256(1)));
    }
}
