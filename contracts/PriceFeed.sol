// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A Chainlink-style price aggregator for the devnet: the owner posts answers, readers call
/// the same latestRoundData() as on a real feed.
contract PriceFeed {
    uint8 public immutable decimals;
    string public description;
    address public owner;

    uint80 private _round;
    int256 private _answer;
    uint256 private _updatedAt;

    error Unauthorized();

    constructor(uint8 decimals_, string memory description_, int256 answer) {
        decimals = decimals_;
        description = description_;
        owner = msg.sender;
        _post(answer, block.timestamp);
    }

    function post(int256 answer) external {
        if (msg.sender != owner) revert Unauthorized();
        _post(answer, block.timestamp);
    }

    /// @notice Posts an answer with an explicit time (to simulate a feed that stopped updating).
    function postAt(int256 answer, uint256 updatedAt) external {
        if (msg.sender != owner) revert Unauthorized();
        _post(answer, updatedAt);
    }

    function latestRoundData() external view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound) {
        return (_round, _answer, _updatedAt, _updatedAt, _round);
    }

    function _post(int256 answer, uint256 updatedAt) private {
        _round += 1;
        _answer = answer;
        _updatedAt = updatedAt;
    }
}
