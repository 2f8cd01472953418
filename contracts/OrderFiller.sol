// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

import {CallExecutor} from "./CallExecutor.sol";

/// @title OrderFiller
/// @notice The contract through which solvers pay out fills. Each order id can be filled once, and only
///         by an authorized solver, so nobody can grief an order by filling it with dust.
contract OrderFiller {
    error Unauthorized();
    error NotSolver(address caller);
    error AddressCannotBeZero();
    error OrderAlreadyFilled(bytes32 orderId);
    error NativeTransferFailed();
    error TransferFromFailed();

    event OwnershipTransferred(address indexed oldOwner, address indexed newOwner);
    event SolverUpdated(address indexed solver, bool enabled);
    event GasTopUp(bytes32 indexed orderId, address indexed recipient, uint256 amount);
    event OrderFilled(
        bytes32 indexed orderId, address indexed solver, address indexed recipient, address token, uint256 amount
    );
    /// @notice An order of a batch that was not paid, with the error that stopped it (ABI-encoded).
    event FillSkipped(bytes32 indexed orderId, bytes reason);

    /// @notice One order of a batch: `token` zero pays `amount` in the native currency (out of msg.value).
    struct Fill {
        bytes32 orderId;
        address token;
        address recipient;
        uint256 amount;
    }

    /// @notice Gas each payment of a batch may use: a recipient (or token) that burns gas can only
    /// spoil its own order, never the rest of the batch.
    uint256 public constant BATCH_CALL_GAS = 100_000;

    address public owner;
    mapping(address => bool) public solvers;
    mapping(bytes32 => bool) public filled;
    /// @notice Where destination calls run: never this contract, which holds the solver's approvals.
    CallExecutor public immutable executor = new CallExecutor();

    constructor(address _owner, address _solver) {
        if (_owner == address(0) || _solver == address(0)) revert AddressCannotBeZero();
        owner = _owner;
        emit OwnershipTransferred(address(0), _owner);
        solvers[_solver] = true;
        emit SolverUpdated(_solver, true);
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert Unauthorized();
        _;
    }

    modifier onlySolver() {
        if (!solvers[msg.sender]) revert NotSolver(msg.sender);
        _;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert AddressCannotBeZero();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    function addSolver(address solver) external onlyOwner {
        if (solver == address(0)) revert AddressCannotBeZero();
        solvers[solver] = true;
        emit SolverUpdated(solver, true);
    }

    function removeSolver(address solver) external onlyOwner {
        solvers[solver] = false;
        emit SolverUpdated(solver, false);
    }

    /// @notice Forward msg.value to `recipient` as the fill of `orderId`.
    function fillNative(bytes32 orderId, address recipient) external payable onlySolver {
        if (recipient == address(0)) revert AddressCannotBeZero();
        _markFilled(orderId);
        if (!_send(recipient, msg.value, gasleft())) revert NativeTransferFailed();
        emit OrderFilled(orderId, msg.sender, recipient, address(0), msg.value);
    }

    /// @notice Move `amount` of `token` from the solver to `recipient` (the solver approves this contract).
    /// Any msg.value goes to `recipient` too: a gas top-up delivered with the fill, in the same transaction.
    function fillErc20(bytes32 orderId, address token, address recipient, uint256 amount) external payable onlySolver {
        if (recipient == address(0) || token == address(0)) revert AddressCannotBeZero();
        _markFilled(orderId);
        (bool ok, bytes memory ret) =
            token.call(abi.encodeWithSelector(0x23b872dd, msg.sender, recipient, amount)); // transferFrom
        if (!ok || (ret.length == 0 ? token.code.length == 0 : (ret.length < 32 || !abi.decode(ret, (bool))))) {
            revert TransferFromFailed();
        }
        if (msg.value > 0) {
            if (!_send(recipient, msg.value, gasleft())) revert NativeTransferFailed();
            emit GasTopUp(orderId, recipient, msg.value);
        }
        emit OrderFilled(orderId, msg.sender, recipient, token, amount);
    }

    /// @notice Fills an order whose output is contract calls: msg.value funds them, all run or none
    /// (a failing call reverts the fill with CallExecutor.CallFailed), and what they leave goes to `recipient`.
    function fillCalls(bytes32 orderId, address recipient, CallExecutor.Call[] calldata calls) external payable onlySolver {
        if (recipient == address(0)) revert AddressCannotBeZero();
        _markFilled(orderId);
        executor.execute{value: msg.value}(calls, recipient);
        emit OrderFilled(orderId, msg.sender, recipient, address(0), msg.value);
    }

    /// @notice Pays several orders in one transaction, each on its own: an order that cannot be paid (filled
    /// already, even earlier in this batch; a zero address; a recipient or token that refuses) is skipped with
    /// FillSkipped and the others are paid. msg.value covers the native fills; what they leave goes back to
    /// the solver.
    function fillBatch(Fill[] calldata fills) external payable onlySolver {
        uint256 left = msg.value;
        for (uint256 i; i < fills.length; ++i) {
            Fill calldata f = fills[i];
            bytes memory reason = _fillOne(f, left);
            if (reason.length != 0) {
                emit FillSkipped(f.orderId, reason);
                continue;
            }
            if (f.token == address(0)) left -= f.amount;
            emit OrderFilled(f.orderId, msg.sender, f.recipient, f.token, f.amount);
        }
        if (left > 0) {
            (bool ok,) = msg.sender.call{value: left}("");
            if (!ok) revert NativeTransferFailed();
        }
    }

    // One order of a batch: empty on success, else the error that stopped it (and the order stays unfilled).
    function _fillOne(Fill calldata f, uint256 available) private returns (bytes memory) {
        if (f.recipient == address(0)) return abi.encodeWithSelector(AddressCannotBeZero.selector);
        if (filled[f.orderId]) return abi.encodeWithSelector(OrderAlreadyFilled.selector, f.orderId);
        filled[f.orderId] = true;
        if (f.token == address(0)) {
            bool sent;
            if (f.amount <= available) sent = _send(f.recipient, f.amount, BATCH_CALL_GAS);
            if (sent) return "";
            filled[f.orderId] = false;
            return abi.encodeWithSelector(NativeTransferFailed.selector);
        }
        (bool ok, bytes memory ret) =
            f.token.call{gas: BATCH_CALL_GAS}(abi.encodeWithSelector(0x23b872dd, msg.sender, f.recipient, f.amount));
        if (!ok || (ret.length == 0 ? f.token.code.length == 0 : (ret.length < 32 || !abi.decode(ret, (bool))))) {
            filled[f.orderId] = false;
            return abi.encodeWithSelector(TransferFromFailed.selector);
        }
        return "";
    }

    // Sends native currency with at most `gasLimit` gas and never copies what the recipient returns: copied into this
    // contract's memory, a recipient's return data cost gas outside its allowance (the batch's BATCH_CALL_GAS), and two
    // recipients returning 180 KiB each ran a batch out of gas whole, its honest fills' share burned. A lone fill
    // copying it with the 1/64 of the gas it kept ran out of gas at any limit, an estimate no revert.
    function _send(address to, uint256 amount, uint256 gasLimit) private returns (bool ok) {
        assembly ("memory-safe") {
            ok := call(gasLimit, to, amount, 0, 0, 0, 0)
        }
    }

    function _markFilled(bytes32 orderId) private {
        if (filled[orderId]) revert OrderAlreadyFilled(orderId);
        filled[orderId] = true;
    }
}
