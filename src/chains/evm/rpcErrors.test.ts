import {
  type BaseError,
  ContractFunctionRevertedError,
  encodeErrorResult,
  ExecutionRevertedError,
  FeeCapTooLowError,
  InsufficientFundsError,
  InvalidInputRpcError,
  NonceTooLowError,
  RpcRequestError,
  TransactionExecutionError,
  TransactionRejectedRpcError,
  toHex,
  type Hex,
} from 'viem';
import { describe, expect, it } from 'vitest';
import { CallExecutorAbi, OrderFillerAbi } from '../../../contracts-abi/index.ts';
import { decodeRevert, errText, exceededAllowance, isAlreadyKnown, isFeeRefused, isNoFunds, isNonceTooLow, isRevert, nodeError } from './rpcErrors.ts';

const URL = 'http://127.0.0.1:8545/secret-key-in-path';

// What a node's JSON-RPC error answer becomes through viem's transport (src/chains/providers/transport.ts
// builds the RpcRequestError; viem's request layer files -32000 under InvalidInputRpcError, -32003 under
// TransactionRejectedRpcError): the shape sendRawTransaction throws.
function answer(code: number, message: string, data?: Hex): BaseError {
  const req = new RpcRequestError({ body: { method: 'eth_sendRawTransaction' }, error: { code, message, data }, url: URL });
  if (code === -32000) return new InvalidInputRpcError(req);
  if (code === -32003) return new TransactionRejectedRpcError(req);
  return req;
}

// What viem's sendTransaction throws: the node error class inside a TransactionExecutionError.
function executionError(cause: BaseError): BaseError {
  return new TransactionExecutionError(cause, { account: { address: '0x0000000000000000000000000000000000000001', type: 'json-rpc' }, chain: undefined });
}

describe('RPC errors, by viem error class', () => {
  it('nonce too low: a NonceTooLowError in the cause chain, or the raw answer viem would classify so', () => {
    expect(isNonceTooLow(executionError(new NonceTooLowError({ nonce: 3 })))).toBe(true);
    expect(isNonceTooLow(answer(-32000, 'nonce too low: next nonce 5, tx nonce 3'))).toBe(true);
    expect(nodeError(answer(-32000, 'nonce too low'))).toBeInstanceOf(NonceTooLowError);
    // Spellings viem has no class for (Nethermind, Besu).
    expect(isNonceTooLow(answer(-32010, 'NonceTooLow'))).toBe(true);
    expect(isNonceTooLow(answer(-32000, 'Nonce is lower than the account nonce'))).toBe(true);
    expect(isNonceTooLow(answer(-32000, 'insufficient funds for gas * price + value'))).toBe(false);
  });

  it('already known is not nonce too low, though viem files both under NonceTooLowError', () => {
    const known = answer(-32000, 'already known');
    expect(nodeError(known)).toBeInstanceOf(NonceTooLowError);
    expect(isAlreadyKnown(known)).toBe(true);
    expect(isNonceTooLow(known)).toBe(false);
    expect(isAlreadyKnown(answer(-32010, 'AlreadyKnown'))).toBe(true);
    expect(isAlreadyKnown(answer(-32000, 'nonce too low'))).toBe(false);
  });

  it('insufficient funds: InsufficientFundsError, and geth\'s "gas required exceeds allowance" which is no revert', () => {
    expect(isNoFunds(executionError(new InsufficientFundsError()))).toBe(true);
    expect(isNoFunds(answer(-32000, 'insufficient funds for gas * price + value: balance 0'))).toBe(true);
    const allowance = answer(-32000, 'gas required exceeds allowance (21000)');
    expect(isNoFunds(allowance)).toBe(true);
    expect(isRevert(allowance)).toBe(false);
    expect(isNoFunds(answer(-32000, 'nonce too low'))).toBe(false);
  });

  it('reads the allowance an estimate ran out of gas at, as geth and anvil write it', () => {
    expect(exceededAllowance(answer(-32000, 'gas required exceeds allowance (30000000)'))).toBe(30_000_000n);
    expect(exceededAllowance(answer(-32000, 'Out of gas: gas required exceeds allowance: 30000000'))).toBe(30_000_000n);
    expect(exceededAllowance(answer(-32000, 'insufficient funds for gas * price + value'))).toBeUndefined();
  });

  it('fee refused: FeeCapTooLowError, and the underpriced replacement viem has no class for', () => {
    expect(isFeeRefused(executionError(new FeeCapTooLowError({ maxFeePerGas: 1n })))).toBe(true);
    expect(isFeeRefused(answer(-32000, 'max fee per gas less than block base fee: maxFeePerGas: 1, baseFee: 7'))).toBe(true);
    expect(isFeeRefused(answer(-32000, 'replacement transaction underpriced'))).toBe(true);
    // The submitter matches the error text it recorded.
    expect(isFeeRefused('transaction underpriced')).toBe(true);
    expect(isFeeRefused(answer(-32000, 'already known'))).toBe(false);
  });

  it('a revert is one, with its custom error decoded; a transport failure is not', () => {
    const data = encodeErrorResult({ abi: OrderFillerAbi, errorName: OrderFillerAbi.find((x) => x.type === 'error')!.name as never });
    const reverted = answer(3, 'execution reverted', data);
    expect(isRevert(reverted)).toBe(true);
    expect(decodeRevert(reverted)).toMatch(/^\w+\(/);
    expect(isRevert(new ExecutionRevertedError({ message: 'execution reverted' }))).toBe(true);
    expect(isRevert(new ContractFunctionRevertedError({ abi: OrderFillerAbi, functionName: 'fill' as never }))).toBe(true);
    expect(isRevert(answer(-32005, 'rate limited'))).toBe(false);
    expect(isRevert(new Error('socket hang up'))).toBe(false);
  });

  it('a revert whose reason reads "insufficient funds" is a revert: a call target chose it (review-free-option)', () => {
    // Taken for want of funds, the fill was postponed for ever while its target reverted so: a free option on the price.
    const reason = encodeErrorResult({
      abi: CallExecutorAbi,
      errorName: 'CallFailed',
      args: [0n, toHex('insufficient funds')],
    });
    const reverted = answer(3, 'execution reverted: insufficient funds', reason);
    expect(isRevert(reverted)).toBe(true);
    expect(isNoFunds(reverted)).toBe(false);
    // geth's own "gas required exceeds allowance" (no revert data) is still no revert.
    expect(isRevert(answer(3, 'gas required exceeds allowance (21000)'))).toBe(false);
  });

  it("errText names the node's answer without the request or the provider's URL", () => {
    const text = errText(answer(-32000, 'nonce too low'));
    expect(text).toContain('nonce too low');
    expect(text).not.toContain('secret-key-in-path');
    expect(text).not.toContain('eth_sendRawTransaction');
  });
});
