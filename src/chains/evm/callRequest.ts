// EIP-712 call requests for the RelayDepository: the allocator signs a CallRequest, and anyone (the node,
// from its solver key) submits it with `execute(request, signature)`. Refunds and withdrawals out of the
// depository are built from these helpers.

import { randomBytes } from 'node:crypto';
import { encodeFunctionData, erc20Abi, hashStruct, hashTypedData, type Address, type Hex, type LocalAccount, type TypedDataDomain } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

/** EIP-712 types of the depository's call request (same layout as the public RelayDepository). */
export const callRequestTypes = {
  CallRequest: [
    { name: 'calls', type: 'Call[]' },
    { name: 'nonce', type: 'uint256' },
    { name: 'expiration', type: 'uint256' },
  ],
  Call: [
    { name: 'to', type: 'address' },
    { name: 'data', type: 'bytes' },
    { name: 'value', type: 'uint256' },
    { name: 'allowFailure', type: 'bool' },
  ],
} as const;

export const DEPOSITORY_DOMAIN_NAME = 'RelayDepository';
export const DEPOSITORY_DOMAIN_VERSION = '1';

export interface Call {
  to: Address;
  data: Hex;
  value: bigint;
  allowFailure: boolean;
}

export interface CallRequest {
  calls: readonly Call[];
  nonce: bigint;
  /** Unix seconds; the depository rejects the request once block.timestamp > expiration. */
  expiration: bigint;
}

export function callRequestDomain(chainId: number, depository: Address) {
  return {
    name: DEPOSITORY_DOMAIN_NAME,
    version: DEPOSITORY_DOMAIN_VERSION,
    chainId,
    verifyingContract: depository,
  } as const satisfies TypedDataDomain;
}

/** The request's struct hash: its id in `RelayCallExecuted` and the key of `callRequests(bytes32)`. */
export function callRequestId(request: CallRequest): Hex {
  return hashStruct({ types: callRequestTypes, primaryType: 'CallRequest', data: request });
}

/** The EIP-712 digest the allocator signs. */
export function callRequestDigest(opts: { chainId: number; depository: Address; request: CallRequest }): Hex {
  return hashTypedData({
    domain: callRequestDomain(opts.chainId, opts.depository),
    types: callRequestTypes,
    primaryType: 'CallRequest',
    message: opts.request,
  });
}

export type SignCallRequestOptions = {
  chainId: number;
  depository: Address;
  request: CallRequest;
} & ({ allocatorKey: Hex; account?: never } | { account: LocalAccount; allocatorKey?: never });

/** Sign a call request as the allocator (65-byte r‖s‖v signature, low s). */
export async function signCallRequest(opts: SignCallRequestOptions): Promise<Hex> {
  const account = opts.account ?? privateKeyToAccount(opts.allocatorKey!);
  return account.signTypedData({
    domain: callRequestDomain(opts.chainId, opts.depository),
    types: callRequestTypes,
    primaryType: 'CallRequest',
    message: opts.request,
  });
}

/** Send `value` wei of the depository's native balance to `to`. */
export function nativeTransferCall(to: Address, value: bigint, allowFailure = false): Call {
  return { to, data: '0x', value, allowFailure };
}

/** Transfer `amount` of `token` held by the depository to `to`. */
export function erc20TransferCall(token: Address, to: Address, amount: bigint, allowFailure = false): Call {
  return {
    to: token,
    data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] }),
    value: 0n,
    allowFailure,
  };
}

/** A random 256-bit nonce, so two requests with the same calls and expiration still differ. */
export function randomCallRequestNonce(): bigint {
  return BigInt(`0x${randomBytes(32).toString('hex')}`);
}
