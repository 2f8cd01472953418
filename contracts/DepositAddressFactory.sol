// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

interface IRelayDepository {
    function depositNative(address depositor, bytes32 id) external payable;
    function depositErc20(address depositor, address token, uint256 amount, bytes32 id) external;
}

interface IERC20Min {
    function balanceOf(address who) external view returns (uint256);
    function approve(address spender, uint256 amount) external returns (bool);
}

/// @title DepositForwarder
/// @notice The code behind every deposit address (as EIP-1167 clones): it receives a user's plain
///         transfer and, when the factory sweeps it, deposits everything it holds into the depository
///         for its depositor and id. Nobody but the factory can move its funds.
contract DepositForwarder {
    error Unauthorized();
    error AlreadyInitialized();

    address public factory;
    IRelayDepository public depository;
    address public depositor;
    bytes32 public id;

    /// @dev Called by the factory in the transaction that creates the clone.
    function initialize(IRelayDepository depository_, address depositor_, bytes32 id_) external {
        if (factory != address(0)) revert AlreadyInitialized();
        factory = msg.sender;
        depository = depository_;
        depositor = depositor_;
        id = id_;
    }

    function sweep(address token) external returns (uint256 amount) {
        if (msg.sender != factory) revert Unauthorized();
        if (token == address(0)) {
            amount = address(this).balance;
            if (amount > 0) depository.depositNative{value: amount}(depositor, id);
        } else {
            amount = IERC20Min(token).balanceOf(address(this));
            if (amount > 0) {
                IERC20Min(token).approve(address(depository), amount);
                depository.depositErc20(depositor, token, amount, id);
            }
        }
    }

    receive() external payable {}
}

/// @title DepositAddressFactory
/// @notice Deposit addresses: CREATE2 clones of one DepositForwarder, at an address fixed by the salt
///         before anything is deployed, so a user can pay it with a plain transfer. The solver sweeps
///         what arrives into the depository, where the node indexes it as a deposit for the order.
contract DepositAddressFactory {
    error Unauthorized();

    event Swept(address indexed depositAddress, bytes32 indexed salt, address token, uint256 amount);

    DepositForwarder public immutable implementation = new DepositForwarder();
    IRelayDepository public immutable depository;
    address public immutable sweeper;

    constructor(IRelayDepository depository_, address sweeper_) {
        depository = depository_;
        sweeper = sweeper_;
    }

    /// @notice The salt binds the address to its depositor and id: a clone can only ever deposit for them.
    function saltOf(address depositor, bytes32 id) public pure returns (bytes32) {
        return keccak256(abi.encode(depositor, id));
    }

    function addressOf(address depositor, bytes32 id) public view returns (address) {
        bytes32 hash = keccak256(abi.encodePacked(bytes1(0xff), address(this), saltOf(depositor, id), keccak256(_cloneCode())));
        return address(uint160(uint256(hash)));
    }

    function sweep(address depositor, bytes32 id, address token) external returns (uint256 amount) {
        if (msg.sender != sweeper) revert Unauthorized();
        address payable at = payable(addressOf(depositor, id));
        if (at.code.length == 0) {
            bytes memory code = _cloneCode();
            bytes32 salt = saltOf(depositor, id);
            address created;
            assembly {
                created := create2(0, add(code, 0x20), mload(code), salt)
            }
            require(created == at, "create2");
            DepositForwarder(at).initialize(depository, depositor, id);
        }
        amount = DepositForwarder(at).sweep(token);
        emit Swept(at, saltOf(depositor, id), token, amount);
    }

    /// @dev EIP-1167 minimal proxy creation code for `implementation`.
    function _cloneCode() private view returns (bytes memory) {
        return abi.encodePacked(hex"3d602d80600a3d3981f3363d3d373d3d3d363d73", address(implementation), hex"5af43d82803e903d91602b57fd5bf3");
    }
}
