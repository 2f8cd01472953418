// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A test refund address that takes the first ether sent to it and refuses every later one.
contract AcceptOnce {
    bool public received;

    receive() external payable {
        require(!received, "once");
        received = true;
    }
}
