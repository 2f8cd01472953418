// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/// @notice A sample destination-call target for the devnet: mints a token for a fixed price.
contract TestNft {
    uint256 public immutable price;
    uint256 public immutable maxSupply;
    uint256 public totalSupply;
    mapping(uint256 => address) public ownerOf;
    mapping(address => uint256) public balanceOf;

    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);

    error WrongPayment(uint256 sent, uint256 price);
    error SoldOut();

    constructor(uint256 price_, uint256 maxSupply_) {
        price = price_;
        maxSupply = maxSupply_;
    }

    function mint(address to) external payable returns (uint256 tokenId) {
        if (msg.value != price) revert WrongPayment(msg.value, price);
        if (totalSupply >= maxSupply) revert SoldOut();
        tokenId = ++totalSupply;
        ownerOf[tokenId] = to;
        balanceOf[to] += 1;
        emit Transfer(address(0), to, tokenId);
    }
}
