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
        (bool ok,) = recipient.call{value: msg.value}("");
        if (!ok) revert NativeTransferFailed();
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
            (bool sent,) = recipient.call{value: msg.value}("");
            if (!sent) revert NativeTransferFailed();
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

    function _markFilled(bytes32 orderId) private {
        if (filled[orderId]) revert OrderAlreadyFilled(orderId);
        filled[orderId] = true;
    }
}
