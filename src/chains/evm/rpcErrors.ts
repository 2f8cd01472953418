import { BaseError, ContractFunctionRevertedError, decodeErrorResult, erc20Abi, ExecutionRevertedError, RpcRequestError, type Abi, type Hex } from 'viem';
import { CallExecutorAbi, OrderFillerAbi, RelayDepositoryAbi } from '../../../contracts-abi/index.ts';

// What an RPC error means for a transaction: a revert of the call itself, a transaction the node
// already has, a nonce already used, a fee refused, or no funds for gas.

export { errText } from '../../lib/errors.ts';

export function fullText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// The call itself reverts (as opposed to the RPC failing, or the sender lacking funds for gas).
export function isRevert(err: unknown): boolean {
  if (!(err instanceof BaseError)) return false;
  const found = err.walk(
    (e) =>
      e instanceof ContractFunctionRevertedError ||
      e instanceof ExecutionRevertedError ||
      (e instanceof RpcRequestError && e.code === 3),
  );
  if (!found) return false;
  // geth reports an out-of-funds estimate as "gas required exceeds allowance": not a revert.
  return !/gas required exceeds allowance|insufficient funds/i.test(fullText(err));
}

function revertData(err: unknown): Hex | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const e = err.walk((x) => typeof (x as { data?: unknown }).data === 'string' && String((x as { data: string }).data).startsWith('0x'));
  return (e as { data?: Hex } | null)?.data;
}

export function decodeRevert(err: unknown): string | undefined {
  const data = revertData(err);
  if (!data || data === '0x') return undefined;
  for (const abi of [OrderFillerAbi, CallExecutorAbi, RelayDepositoryAbi, erc20Abi] as Abi[]) {
    try {
      const d = decodeErrorResult({ abi, data });
      return `${d.errorName}(${(d.args ?? []).map(String).join(', ')})`;
    } catch {
      // not this ABI
    }
  }
  return data.slice(0, 10);
}


export const ALREADY_KNOWN = /already known|already imported|known transaction|alreadyknown|already exists/i;
export const NONCE_TOO_LOW = /nonce too low|noncetoolow|nonce.*(lower|less) than/i;
// The node refused the transaction over its fees: its replacement countdown starts anyway.
export const FEE_REFUSED = /underpriced|fee too low|less than (the )?(block )?base fee|fee cap|feecap|max fee per gas less/i;
export const NO_FUNDS = /insufficient funds|gas required exceeds allowance/i;
