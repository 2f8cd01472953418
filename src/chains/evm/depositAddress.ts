import { concat, encodeAbiParameters, getContractAddress, keccak256, type Address, type Hex } from 'viem';

/**
 * Where a deposit address lives, computed as DepositAddressFactory computes it: a CREATE2 EIP-1167
 * clone of the factory's forwarder (the factory's first creation, nonce 1), salted by depositor and id.
 */
export function depositAddressOf(factory: Address, depositor: Address, id: Hex): Address {
  const implementation = getContractAddress({ from: factory, nonce: 1n });
  const cloneCode = concat(['0x3d602d80600a3d3981f3363d3d373d3d3d363d73', implementation, '0x5af43d82803e903d91602b57fd5bf3']);
  return getContractAddress({ opcode: 'CREATE2', from: factory, salt: depositSalt(depositor, id), bytecode: cloneCode });
}

export function depositSalt(depositor: Address, id: Hex): Hex {
  return keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'bytes32' }], [depositor, id]));
}
