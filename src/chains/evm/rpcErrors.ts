import {
  BaseError,
  ContractFunctionRevertedError,
  decodeErrorResult,
  erc20Abi,
  ExecutionRevertedError,
  FeeCapTooLowError,
  InsufficientFundsError,
  NonceTooLowError,
  RpcRequestError,
  type Abi,
  type Hex,
} from 'viem';
import { getNodeError } from 'viem/utils';
import { CallExecutorAbi, OrderFillerAbi, RelayDepositoryAbi } from '../../../contracts-abi/index.ts';

// What an RPC error means for a transaction: a revert of the call itself, a transaction the node
// already has, a nonce already used, a fee refused, or no funds for gas.

export { errText } from '../../lib/errors.ts';

/** The whole message of an error (viem's include the request): for matching, never for a log. */
export function fullText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The call itself reverts (as opposed to the RPC failing, or the sender lacking funds for gas). */
export function isRevert(err: unknown): boolean {
  if (!(err instanceof BaseError)) return false;
  const found = err.walk(
    (e) => e instanceof ContractFunctionRevertedError || e instanceof ExecutionRevertedError || (e instanceof RpcRequestError && e.code === 3),
  );
  if (!found) return false;
  // geth reports an out-of-funds estimate as "gas required exceeds allowance", which viem files
  // under ExecutionRevertedError: not a revert. One with revert data is: its reason is the contract's, whatever its text
  // (a call target reverting with "insufficient funds" was taken for the solver lacking them, and postponed for ever).
  return hasRevertData(err) || !isNoFunds(err);
}

function hasRevertData(err: unknown): boolean {
  const data = revertData(err);
  return data !== undefined && data !== '0x';
}

function revertData(err: unknown): Hex | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const e = err.walk((x) => typeof (x as { data?: unknown }).data === 'string' && String((x as { data: string }).data).startsWith('0x'));
  return (e as { data?: Hex } | null)?.data;
}

/** The revert's custom error, decoded against the node's contracts and ERC-20 (`Name(args)`), or its selector. */
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

// What the node answered about a transaction, as viem's error classes name it. Errors of viem's
// sendTransaction, estimateGas and call already carry the class in their cause chain; those of
// sendRawTransaction (the submitter's broadcast) carry only the node's message, which viem's own
// getNodeError classifies as its sendTransaction would. A regex stays only where viem has no class.

/** viem's node error for an RPC error (NonceTooLowError, InsufficientFundsError, FeeCapTooLowError...), or undefined. */
export function nodeError(err: unknown): BaseError | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const known = err.walk((e) => e instanceof NonceTooLowError || e instanceof InsufficientFundsError || e instanceof FeeCapTooLowError);
  if (known instanceof BaseError) return known;
  return getNodeError(err, {});
}

/**
 * viem has no class for a transaction the node already holds: its NonceTooLowError lumps "already
 * known" in with "nonce too low". Spellings: geth "already known"; "already imported" and "known
 * transaction" (Parity/OpenEthereum, Besu); "alreadyknown" (Nethermind's AlreadyKnown); "already exists".
 */
export const ALREADY_KNOWN = /already known|already imported|known transaction|alreadyknown|already exists/i;
/**
 * Beyond viem's NonceTooLowError ("nonce too low"): Nethermind's NonceTooLow, and "nonce ... lower/less
 * than" (Besu, Erigon). Kept for the submitter, which matches the recorded error text.
 */
export const NONCE_TOO_LOW = /nonce too low|noncetoolow|nonce.*(lower|less) than/i;
/**
 * The node refused the transaction over its fees: its replacement countdown starts anyway. viem's
 * FeeCapTooLowError covers "fee cap less than block base fee"; it has no class for geth's
 * "(replacement) transaction underpriced" nor the other spellings below.
 */
export const FEE_REFUSED = /underpriced|fee too low|less than (the )?(block )?base fee|fee cap|feecap|max fee per gas less/i;
/**
 * viem's InsufficientFundsError covers "insufficient funds"; geth's estimateGas says "gas required
 * exceeds allowance" when the sender cannot pay for the gas (viem files it as a revert).
 */
export const NO_FUNDS = /insufficient funds|gas required exceeds allowance/i;

/** The node already has this transaction (a rebroadcast): it counts as accepted. */
export function isAlreadyKnown(err: unknown): boolean {
  return ALREADY_KNOWN.test(fullText(err));
}

/** The transaction's nonce is used already (by one of ours or something else); not a transaction the node already has. */
export function isNonceTooLow(err: unknown): boolean {
  if (isAlreadyKnown(err)) return false;
  return nodeError(err) instanceof NonceTooLowError || NONCE_TOO_LOW.test(fullText(err));
}

/** The node refused the transaction's fees (under the base fee, or an underpriced replacement). */
export function isFeeRefused(err: unknown): boolean {
  return nodeError(err) instanceof FeeCapTooLowError || FEE_REFUSED.test(fullText(err));
}

/** The sender cannot pay for the transaction's value and gas. */
export function isNoFunds(err: unknown): boolean {
  if (hasRevertData(err)) return false;
  return nodeError(err) instanceof InsufficientFundsError || NO_FUNDS.test(fullText(err));
}

/**
 * The allowance an estimate ran out of gas at ("gas required exceeds allowance (N)" from geth, "...: N" from anvil), or
 * undefined. Capped by the sender's balance only when the estimate names a fee; the node's name none, so theirs is
 * the chain's own limit, and a call that needs more than that never runs, whatever the solver holds.
 */
export function exceededAllowance(err: unknown): bigint | undefined {
  const m = /gas required exceeds allowance\D{0,4}(\d+)/i.exec(fullText(err));
  return m ? BigInt(m[1]!) : undefined;
}
