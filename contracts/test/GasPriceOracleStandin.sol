// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A stand-in for the OP-stack GasPriceOracle predeploy (0x420000000000000000000000000000000000000F), which
/// anvil does not have: installed there with anvil_setCode. It answers getL1FeeUpperBound with the chain's published
/// Fjord formula (the unsigned size plus 68 for a signature, fastlz's practical upper bound, the linear regression to a
/// compressed size, then the scalars over both L1 fees), from L1 fees and scalars a test sets, as the L1 block
/// attributes set them on a real chain.
contract GasPriceOracleStandin {
    uint256 public constant DECIMALS = 6;
    int256 private constant COST_INTERCEPT = -42_585_600;
    uint256 private constant COST_FASTLZ_COEF = 836_500;
    uint256 private constant MIN_TRANSACTION_SIZE = 100;

    uint256 public l1BaseFee;
    uint256 public blobBaseFee;
    uint32 public baseFeeScalar;
    uint32 public blobBaseFeeScalar;

    function setL1Fees(uint256 _l1BaseFee, uint256 _blobBaseFee, uint32 _baseFeeScalar, uint32 _blobBaseFeeScalar) external {
        l1BaseFee = _l1BaseFee;
        blobBaseFee = _blobBaseFee;
        baseFeeScalar = _baseFeeScalar;
        blobBaseFeeScalar = _blobBaseFeeScalar;
    }

    function getL1FeeUpperBound(uint256 _unsignedTxSize) external view returns (uint256) {
        uint256 txSize = _unsignedTxSize + 68;
        uint256 flzUpperBound = txSize + txSize / 255 + 16;
        int256 estimated = COST_INTERCEPT + int256(COST_FASTLZ_COEF * flzUpperBound);
        if (estimated < int256(MIN_TRANSACTION_SIZE) * 1e6) estimated = int256(MIN_TRANSACTION_SIZE) * 1e6;
        uint256 feeScaled = uint256(baseFeeScalar) * 16 * l1BaseFee + uint256(blobBaseFeeScalar) * blobBaseFee;
        return (uint256(estimated) * feeScaled) / (10 ** (DECIMALS * 2));
    }
}
