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
            (bool ok, bytes memory reason) = _call(calls[i].to, calls[i].value, calls[i].data);
            if (!ok) revert CallFailed(i, reason);
        }
        uint256 left = address(this).balance;
        if (left > 0) {
            bool sent;
            assembly ("memory-safe") {
                sent := call(gas(), rest, left, 0, 0, 0, 0)
            }
            if (!sent) revert NativeTransferFailed();
        }
    }

    // Makes a call and keeps at most the first 1,024 bytes of a failure's reason, and nothing of a success's return
    // data. Copied whole, a reason of 512 KiB was copied here and again by the filler to bubble it, with the 1/64 of the
    // gas each kept: at a gas bound its owner tuned, the fill ran out of gas at any limit (an estimate that is no revert,
    // taken for the solver lacking funds, and the fill held until its caller chose to let it through).
    function _call(address to, uint256 value, bytes calldata data) private returns (bool ok, bytes memory reason) {
        assembly ("memory-safe") {
            let ptr := mload(0x40)
            calldatacopy(ptr, data.offset, data.length)
            ok := call(gas(), to, value, ptr, data.length, 0, 0)
            if iszero(ok) {
                let size := returndatasize()
                if gt(size, 1024) { size := 1024 }
                reason := ptr
                mstore(reason, size)
                returndatacopy(add(reason, 0x20), 0, size)
                mstore(0x40, add(add(reason, 0x20), and(add(size, 31), not(31))))
            }
        }
    }
}
