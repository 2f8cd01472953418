// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

// solc: viaIR
// (the legacy code generator runs out of stack ABI-decoding the nested calldata Order)

/// @title OrderHashProbe
/// @notice Test helper: the EIP-712 struct hash (no domain) of the v2 Order, computed in Solidity so tests
///         can check the TypeScript order id against it.
contract OrderHashProbe {
    struct InputPayment {
        string chainId;
        bytes currency;
        uint256 amount;
        uint256 weight;
    }

    struct InputRefund {
        string chainId;
        bytes recipient;
        bytes currency;
        uint256 minimumAmount;
        uint32 deadline;
        bytes extraData;
    }

    struct Input {
        InputPayment payment;
        InputRefund[] refunds;
    }

    struct OutputPayment {
        bytes recipient;
        bytes currency;
        uint256 minimumAmount;
        uint256 expectedAmount;
    }

    struct Output {
        string chainId;
        OutputPayment[] payments;
        uint32 deadline;
        bytes[] calls;
        bytes extraData;
    }

    struct Fee {
        string recipientChainId;
        bytes recipient;
        string currencyChainId;
        bytes currency;
        uint256 amount;
    }

    struct Order {
        string version;
        string solverChainId;
        address solver;
        uint256 salt;
        Input[] inputs;
        Output output;
        Fee[] fees;
    }

    // Member type strings; a struct's full type string appends the types it references, sorted by name.
    string private constant FEE = "Fee(string recipientChainId,bytes recipient,string currencyChainId,bytes currency,uint256 amount)";
    string private constant INPUT = "Input(InputPayment payment,InputRefund[] refunds)";
    string private constant INPUT_PAYMENT = "InputPayment(string chainId,bytes currency,uint256 amount,uint256 weight)";
    string private constant INPUT_REFUND =
        "InputRefund(string chainId,bytes recipient,bytes currency,uint256 minimumAmount,uint32 deadline,bytes extraData)";
    string private constant OUTPUT = "Output(string chainId,OutputPayment[] payments,uint32 deadline,bytes[] calls,bytes extraData)";
    string private constant OUTPUT_PAYMENT =
        "OutputPayment(bytes recipient,bytes currency,uint256 minimumAmount,uint256 expectedAmount)";
    string private constant ORDER =
        "Order(string version,string solverChainId,address solver,uint256 salt,Input[] inputs,Output output,Fee[] fees)";

    bytes32 public constant ORDER_TYPEHASH =
        keccak256(abi.encodePacked(ORDER, FEE, INPUT, INPUT_PAYMENT, INPUT_REFUND, OUTPUT, OUTPUT_PAYMENT));
    bytes32 public constant INPUT_TYPEHASH = keccak256(abi.encodePacked(INPUT, INPUT_PAYMENT, INPUT_REFUND));
    bytes32 public constant INPUT_PAYMENT_TYPEHASH = keccak256(bytes(INPUT_PAYMENT));
    bytes32 public constant INPUT_REFUND_TYPEHASH = keccak256(bytes(INPUT_REFUND));
    bytes32 public constant OUTPUT_TYPEHASH = keccak256(abi.encodePacked(OUTPUT, OUTPUT_PAYMENT));
    bytes32 public constant OUTPUT_PAYMENT_TYPEHASH = keccak256(bytes(OUTPUT_PAYMENT));
    bytes32 public constant FEE_TYPEHASH = keccak256(bytes(FEE));

    /// @notice The EIP-712 struct hash of `order` (the v2 order id).
    function hashOrder(Order calldata order) external pure returns (bytes32) {
        return keccak256(
            abi.encode(
                ORDER_TYPEHASH,
                keccak256(bytes(order.version)),
                keccak256(bytes(order.solverChainId)),
                order.solver,
                order.salt,
                _hashInputs(order.inputs),
                _hashOutput(order.output),
                _hashFees(order.fees)
            )
        );
    }

    function _hashInputs(Input[] calldata inputs) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](inputs.length);
        for (uint256 i; i < inputs.length; ++i) {
            hashes[i] = keccak256(
                abi.encode(INPUT_TYPEHASH, _hashInputPayment(inputs[i].payment), _hashRefunds(inputs[i].refunds))
            );
        }
        return keccak256(abi.encodePacked(hashes));
    }

    function _hashInputPayment(InputPayment calldata p) private pure returns (bytes32) {
        return keccak256(
            abi.encode(INPUT_PAYMENT_TYPEHASH, keccak256(bytes(p.chainId)), keccak256(p.currency), p.amount, p.weight)
        );
    }

    function _hashRefunds(InputRefund[] calldata refunds) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](refunds.length);
        for (uint256 i; i < refunds.length; ++i) {
            InputRefund calldata r = refunds[i];
            hashes[i] = keccak256(
                abi.encode(
                    INPUT_REFUND_TYPEHASH,
                    keccak256(bytes(r.chainId)),
                    keccak256(r.recipient),
                    keccak256(r.currency),
                    r.minimumAmount,
                    r.deadline,
                    keccak256(r.extraData)
                )
            );
        }
        return keccak256(abi.encodePacked(hashes));
    }

    function _hashOutput(Output calldata o) private pure returns (bytes32) {
        return keccak256(
            abi.encode(
                OUTPUT_TYPEHASH,
                keccak256(bytes(o.chainId)),
                _hashOutputPayments(o.payments),
                o.deadline,
                _hashBytesArray(o.calls),
                keccak256(o.extraData)
            )
        );
    }

    function _hashOutputPayments(OutputPayment[] calldata payments) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](payments.length);
        for (uint256 i; i < payments.length; ++i) {
            OutputPayment calldata p = payments[i];
            hashes[i] = keccak256(
                abi.encode(
                    OUTPUT_PAYMENT_TYPEHASH, keccak256(p.recipient), keccak256(p.currency), p.minimumAmount, p.expectedAmount
                )
            );
        }
        return keccak256(abi.encodePacked(hashes));
    }

    function _hashBytesArray(bytes[] calldata items) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](items.length);
        for (uint256 i; i < items.length; ++i) {
            hashes[i] = keccak256(items[i]);
        }
        return keccak256(abi.encodePacked(hashes));
    }

    function _hashFees(Fee[] calldata fees) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](fees.length);
        for (uint256 i; i < fees.length; ++i) {
            Fee calldata f = fees[i];
            hashes[i] = keccak256(
                abi.encode(
                    FEE_TYPEHASH,
                    keccak256(bytes(f.recipientChainId)),
                    keccak256(f.recipient),
                    keccak256(bytes(f.currencyChainId)),
                    keccak256(f.currency),
                    f.amount
                )
            );
        }
        return keccak256(abi.encodePacked(hashes));
    }
}
