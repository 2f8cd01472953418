// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice Runs an order's destination calls with the value it is sent, and nothing else: it holds no
/// approvals and no funds between calls, so a call can spend only what its order paid for.
contract CallExecutor {
    struct Call {
        address to;
        uint256 value;
        bytes data;
    }

    address public immutable filler;

    error OnlyFiller();
    error CallFailed(uint256 index, bytes reason);
    error NativeTransferFailed();

    constructor() {
        filler = msg.sender;
    }

    /// @notice Executes the calls in order, all or none; what they leave of msg.value goes to `rest`.
    function execute(Call[] calldata calls, address rest) external payable {
        if (msg.sender != filler) revert OnlyFiller();
        for (uint256 i = 0; i < calls.length; i++) {
            (bool ok, bytes memory ret) = calls[i].to.call{value: calls[i].value}(calls[i].data);
            if (!ok) revert CallFailed(i, ret);
        }
        uint256 left = address(this).balance;
        if (left > 0) {
            (bool sent,) = rest.call{value: left}("");
            if (!sent) revert NativeTransferFailed();
        }
    }
}
