// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A minimal EIP-7702 batch executor with the interface and EIP-712 messages of Calibur
/// (Uniswap's executor, which the public SDK's gasless batch delegates to by default). A wallet
/// delegates to it; anyone may then submit a batch of calls the wallet's own key signed, each
/// signature usable once (a per-key sequence number). On the devnet its code is placed at
/// Calibur's address, so the SDK's default executor works unchanged.
/// Only the root key (keyHash 0, the wallet's own key) and no hooks: what the SDK sends.
contract BatchExecutor {
    struct Call {
        address to;
        uint256 value;
        bytes data;
    }

    struct BatchedCall {
        Call[] calls;
        bool revertOnFailure;
    }

    struct SignedBatchedCall {
        BatchedCall batchedCall;
        uint256 nonce;
        bytes32 keyHash;
        address executor;
        uint256 deadline;
    }

    // Calibur's address, the EIP-712 domain salt (left-padded): signatures made for Calibur verify here.
    bytes32 internal constant SALT = bytes32(uint256(uint160(0x000000009B1D0aF20D8C6d0A44e162d11F9b8f00)));
    bytes32 internal constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract,bytes32 salt)");
    bytes32 internal constant CALL_TYPEHASH = keccak256("Call(address to,uint256 value,bytes data)");
    bytes32 internal constant BATCHED_CALL_TYPEHASH =
        keccak256("BatchedCall(Call[] calls,bool revertOnFailure)Call(address to,uint256 value,bytes data)");
    bytes32 internal constant SIGNED_BATCHED_CALL_TYPEHASH = keccak256(
        "SignedBatchedCall(BatchedCall batchedCall,uint256 nonce,bytes32 keyHash,address executor,uint256 deadline)BatchedCall(Call[] calls,bool revertOnFailure)Call(address to,uint256 value,bytes data)"
    );
    // Sequence numbers live in the delegating wallet's storage, at a slot of their own.
    bytes32 internal constant SEQ_SLOT = keccak256("relay-node.BatchExecutor.seq");

    error InvalidSignature();
    error InvalidNonce();
    error UnsupportedKey();
    error WrongExecutor();
    error SignatureExpired();
    error CallFailed(uint256 index, bytes reason);

    /// @notice The next sequence number of nonce key `key` (the nonce is key << 64 | seq).
    function getSeq(uint256 key) external view returns (uint256) {
        return _seqs()[key];
    }

    /// @notice Runs a batch the wallet signed: once (its nonce), by anyone or the named executor, before its deadline.
    function execute(SignedBatchedCall calldata signed, bytes calldata wrappedSignature) external payable {
        if (signed.keyHash != bytes32(0)) revert UnsupportedKey();
        if (signed.executor != address(0) && signed.executor != msg.sender) revert WrongExecutor();
        if (signed.deadline != 0 && block.timestamp > signed.deadline) revert SignatureExpired();
        mapping(uint256 => uint256) storage seqs = _seqs();
        uint256 key = signed.nonce >> 64;
        if (seqs[key] != uint64(signed.nonce)) revert InvalidNonce();
        seqs[key] = uint64(signed.nonce) + 1;

        (bytes memory signature,) = abi.decode(wrappedSignature, (bytes, bytes));
        if (_recover(_digest(signed), signature) != address(this)) revert InvalidSignature();

        Call[] calldata calls = signed.batchedCall.calls;
        for (uint256 i = 0; i < calls.length; i++) {
            address to = calls[i].to == address(0) ? address(this) : calls[i].to;
            (bool ok, bytes memory ret) = to.call{value: calls[i].value}(calls[i].data);
            if (!ok && signed.batchedCall.revertOnFailure) revert CallFailed(i, ret);
        }
    }

    receive() external payable {}

    function _digest(SignedBatchedCall calldata signed) internal view returns (bytes32) {
        Call[] calldata calls = signed.batchedCall.calls;
        bytes32[] memory hashes = new bytes32[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            hashes[i] = keccak256(abi.encode(CALL_TYPEHASH, calls[i].to, calls[i].value, keccak256(calls[i].data)));
        }
        bytes32 batched = keccak256(abi.encode(BATCHED_CALL_TYPEHASH, keccak256(abi.encodePacked(hashes)), signed.batchedCall.revertOnFailure));
        bytes32 structHash =
            keccak256(abi.encode(SIGNED_BATCHED_CALL_TYPEHASH, batched, signed.nonce, signed.keyHash, signed.executor, signed.deadline));
        bytes32 domain =
            keccak256(abi.encode(DOMAIN_TYPEHASH, keccak256("Calibur"), keccak256("1.0.0"), block.chainid, address(this), SALT));
        return keccak256(abi.encodePacked("\x19\x01", domain, structHash));
    }

    function _recover(bytes32 digest, bytes memory signature) internal pure returns (address) {
        if (signature.length != 65) revert InvalidSignature();
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := mload(add(signature, 0x20))
            s := mload(add(signature, 0x40))
            v := byte(0, mload(add(signature, 0x60)))
        }
        if (v < 27) v += 27;
        address signer = ecrecover(digest, v, r, s);
        if (signer == address(0)) revert InvalidSignature();
        return signer;
    }

    function _seqs() internal pure returns (mapping(uint256 => uint256) storage seqs) {
        bytes32 slot = SEQ_SLOT;
        assembly {
            seqs.slot := slot
        }
    }
}
