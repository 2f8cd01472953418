// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// A call the depository makes when it executes an allocator-signed request.
struct Call {
    address to;
    bytes data;
    uint256 value;
    bool allowFailure;
}

/// A batch of calls signed (EIP-712) by the allocator.
struct CallRequest {
    Call[] calls;
    uint256 nonce;
    uint256 expiration;
}

/// Outcome of one executed call.
struct CallResult {
    bool success;
    bytes returnData;
}

/// @title RelayDepository
/// @notice Holds user deposits (native and ERC-20) and releases them only through call requests signed
///         by the allocator. Interface-compatible with the public Relay depository.
contract RelayDepository {
    // ---------------------------------------------------------------- errors

    error Unauthorized();
    error AddressCannotBeZero();
    error InvalidSignature();
    error CallRequestExpired();
    error CallRequestAlreadyUsed();
    error CallFailed(bytes returnData);
    error TransferFromFailed();

    // ---------------------------------------------------------------- events

    event OwnershipTransferred(address indexed oldOwner, address indexed newOwner);
    event AllocatorUpdated(address indexed oldAllocator, address indexed newAllocator);
    event RelayerUpdated(address indexed relayer, bool enabled);
    event RelayNativeDeposit(address from, uint256 amount, bytes32 id);
    event RelayErc20Deposit(address from, address token, uint256 amount, bytes32 id);
    /// @notice Emitted for every successful call of an executed request; `id` is the request's struct hash.
    event RelayCallExecuted(bytes32 id, Call call);

    // ---------------------------------------------------------------- EIP-712

    bytes32 public constant _CALL_TYPEHASH =
        keccak256("Call(address to,bytes data,uint256 value,bool allowFailure)");

    bytes32 public constant _CALL_REQUEST_TYPEHASH = keccak256(
        "CallRequest(Call[] calls,uint256 nonce,uint256 expiration)Call(address to,bytes data,uint256 value,bool allowFailure)"
    );

    bytes32 private constant _DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant _NAME_HASH = keccak256("RelayDepository");
    bytes32 private constant _VERSION_HASH = keccak256("1");

    /// secp256k1n / 2: signatures with a larger s are malleable twins and are rejected.
    uint256 private constant _HALF_CURVE_ORDER =
        0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    uint256 private immutable _cachedChainId;
    bytes32 private immutable _cachedDomainSeparator;

    // ---------------------------------------------------------------- state

    address public owner;
    address public allocator;

    /// @notice Struct hashes of executed call requests.
    mapping(bytes32 => bool) public callRequests;

    /// @notice Who may submit depositors' permit deposits (the node's key).
    mapping(address => bool) public relayers;

    constructor(address _owner, address _allocator) {
        if (_owner == address(0) || _allocator == address(0)) revert AddressCannotBeZero();
        owner = _owner;
        allocator = _allocator;
        _cachedChainId = block.chainid;
        _cachedDomainSeparator = _buildDomainSeparator();
        emit OwnershipTransferred(address(0), _owner);
        emit AllocatorUpdated(address(0), _allocator);
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert Unauthorized();
        _;
    }

    // ---------------------------------------------------------------- admin

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert AddressCannotBeZero();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    function setRelayer(address relayer, bool enabled) external onlyOwner {
        if (relayer == address(0)) revert AddressCannotBeZero();
        relayers[relayer] = enabled;
        emit RelayerUpdated(relayer, enabled);
    }

    function setAllocator(address _allocator) external onlyOwner {
        if (_allocator == address(0)) revert AddressCannotBeZero();
        emit AllocatorUpdated(allocator, _allocator);
        allocator = _allocator;
    }

    // ---------------------------------------------------------------- deposits

    /// @param depositor credited depositor; address(0) credits msg.sender
    function depositNative(address depositor, bytes32 id) external payable {
        emit RelayNativeDeposit(_depositorOrSender(depositor), msg.value, id);
    }

    /// @notice Pull `amount` of `token` from msg.sender. The event carries the amount actually received.
    function depositErc20(address depositor, address token, uint256 amount, bytes32 id) public {
        uint256 received = _pullErc20(token, msg.sender, amount);
        emit RelayErc20Deposit(_depositorOrSender(depositor), token, received, id);
    }

    /// @notice A deposit the depositor authorized with an EIP-2612 permit, submitted by a relayer who
    ///         pays the gas. Only relayers may submit: the permit does not bind the order id, so the
    ///         relayer is who ties the signature to the request it was given for. A permit spent by
    ///         someone else first leaves the allowance in place, and the deposit still goes through.
    function depositErc20WithPermit(
        address depositor,
        address token,
        uint256 amount,
        bytes32 id,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        if (!relayers[msg.sender]) revert Unauthorized();
        if (_allowance(token, depositor, address(this)) < amount) {
            (bool ok,) = token.call(
                abi.encodeWithSelector(0xd505accf, depositor, address(this), amount, deadline, v, r, s) // permit
            );
            if (!ok) revert InvalidSignature();
        }
        uint256 received = _pullErc20(token, depositor, amount);
        emit RelayErc20Deposit(depositor, token, received, id);
    }

    /// @notice Pull msg.sender's whole allowance to this contract.
    function depositErc20(address depositor, address token, bytes32 id) external {
        uint256 amount = _allowance(token, msg.sender, address(this));
        depositErc20(depositor, token, amount, id);
    }

    // ---------------------------------------------------------------- withdrawals

    /// @notice Execute a call request signed by the allocator. Anyone may submit it.
    function execute(CallRequest calldata request, bytes calldata signature)
        external
        returns (CallResult[] memory results)
    {
        if (block.timestamp > request.expiration) revert CallRequestExpired();

        (bytes32 structHash, bytes32 digest) = _hashCallRequest(request);

        address signer = _recover(digest, signature);
        if (signer == address(0) || signer != allocator) revert InvalidSignature();

        if (callRequests[structHash]) revert CallRequestAlreadyUsed();
        callRequests[structHash] = true;

        results = _executeCalls(structHash, request.calls);
    }

    /// @notice The request's struct hash (its id) and the EIP-712 digest the allocator signs.
    function hashCallRequest(CallRequest calldata request)
        external
        view
        returns (bytes32 structHash, bytes32 digest)
    {
        return _hashCallRequest(request);
    }

    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return block.chainid == _cachedChainId ? _cachedDomainSeparator : _buildDomainSeparator();
    }

    /// @notice EIP-5267 domain description.
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        return (hex"0f", "RelayDepository", "1", block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    // ---------------------------------------------------------------- internals

    function _depositorOrSender(address depositor) private view returns (address) {
        return depositor == address(0) ? msg.sender : depositor;
    }

    function _executeCalls(bytes32 id, Call[] calldata calls) private returns (CallResult[] memory results) {
        uint256 length = calls.length;
        results = new CallResult[](length);
        for (uint256 i; i < length; ++i) {
            Call calldata c = calls[i];
            (bool success, bytes memory data) = c.to.call{value: c.value}(c.data);
            if (!success && !c.allowFailure) revert CallFailed(data);
            results[i] = CallResult({success: success, returnData: data});
            if (success) emit RelayCallExecuted(id, c);
        }
    }

    function _hashCallRequest(CallRequest calldata request)
        private
        view
        returns (bytes32 structHash, bytes32 digest)
    {
        uint256 length = request.calls.length;
        bytes32[] memory callHashes = new bytes32[](length);
        for (uint256 i; i < length; ++i) {
            Call calldata c = request.calls[i];
            callHashes[i] = keccak256(abi.encode(_CALL_TYPEHASH, c.to, keccak256(c.data), c.value, c.allowFailure));
        }
        structHash = keccak256(
            abi.encode(
                _CALL_REQUEST_TYPEHASH, keccak256(abi.encodePacked(callHashes)), request.nonce, request.expiration
            )
        );
        digest = keccak256(abi.encodePacked(hex"1901", DOMAIN_SEPARATOR(), structHash));
    }

    function _buildDomainSeparator() private view returns (bytes32) {
        return keccak256(abi.encode(_DOMAIN_TYPEHASH, _NAME_HASH, _VERSION_HASH, block.chainid, address(this)));
    }

    /// @dev 65-byte (r, s, v) signatures only; rejects high-s and invalid v. Returns address(0) on failure.
    function _recover(bytes32 digest, bytes calldata signature) private pure returns (address) {
        if (signature.length != 65) return address(0);
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (v < 27) v += 27;
        if (v != 27 && v != 28) return address(0);
        if (uint256(s) > _HALF_CURVE_ORDER) return address(0);
        return ecrecover(digest, v, r, s);
    }

    /// @dev transferFrom(from -> this) tolerant of tokens that return nothing; returns the balance delta.
    function _pullErc20(address token, address from, uint256 amount) private returns (uint256) {
        uint256 before = _balanceOf(token, address(this));
        (bool ok, bytes memory ret) =
            token.call(abi.encodeWithSelector(0x23b872dd, from, address(this), amount)); // transferFrom
        if (!ok || !_returnedTrue(token, ret)) revert TransferFromFailed();
        return _balanceOf(token, address(this)) - before;
    }

    function _returnedTrue(address token, bytes memory ret) private view returns (bool) {
        if (ret.length == 0) return token.code.length > 0;
        return ret.length >= 32 && abi.decode(ret, (bool));
    }

    function _balanceOf(address token, address account) private view returns (uint256) {
        (bool ok, bytes memory ret) = token.staticcall(abi.encodeWithSelector(0x70a08231, account)); // balanceOf
        if (!ok || ret.length < 32) revert TransferFromFailed();
        return abi.decode(ret, (uint256));
    }

    function _allowance(address token, address holder, address spender) private view returns (uint256) {
        (bool ok, bytes memory ret) = token.staticcall(abi.encodeWithSelector(0xdd62ed3e, holder, spender)); // allowance
        if (!ok || ret.length < 32) revert TransferFromFailed();
        return abi.decode(ret, (uint256));
    }
}
