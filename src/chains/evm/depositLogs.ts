import { getAbiItem, getAddress, toEventSelector, zeroAddress, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../../../contracts-abi/index.ts';
import type { ChainDeposit } from '../../ledger/deposits.ts';

// The depository's deposit events, decoded straight from JSON-RPC logs. Both events have only
// static, non-indexed fields, so each is a fixed run of 32-byte words; reading them directly is
// some twenty times cheaper than a generic ABI decoder, which matters when a backfill reads
// hundreds of thousands of them.
const NATIVE = toEventSelector(getAbiItem({ abi: RelayDepositoryAbi, name: 'RelayNativeDeposit' }));
const ERC20 = toEventSelector(getAbiItem({ abi: RelayDepositoryAbi, name: 'RelayErc20Deposit' }));

export interface RpcLog {
  topics: Hex[];
  data: Hex;
  blockNumber: Hex;
  blockHash: Hex;
  transactionHash: Hex;
  logIndex: Hex;
  removed?: boolean;
  /** The block's time (seconds), where the provider names it (geth, reth, anvil). */
  blockTimestamp?: Hex;
}

/** A deposit, with when its block was made (ms) where the log names it: seen_at is the chain's time, not the read's. */
export type DecodedDeposit = ChainDeposit & { seen_at?: number };

const word = (data: Hex, i: number) => data.slice(2 + 64 * i, 66 + 64 * i);

// Checksumming hashes the address; depositors repeat, so remember the spellings (bounded).
const checksums = new Map<string, string>();
function address(w: string): string {
  const raw = `0x${w.slice(24)}`;
  let a = checksums.get(raw);
  if (a === undefined) {
    if (checksums.size > 50_000) checksums.clear();
    a = getAddress(raw);
    checksums.set(raw, a);
  }
  return a;
}

/** Undefined for any other event, or a log whose shape is not the event's (never trusted). */
export function decodeDepositLog(l: RpcLog): DecodedDeposit | undefined {
  if (l.removed) return undefined;
  const topic = l.topics[0];
  const words = topic === NATIVE ? 3 : topic === ERC20 ? 4 : 0;
  if (!words || l.topics.length !== 1 || l.data.length !== 2 + 64 * words) return undefined;
  if (words === 4 && !/^0{24}/.test(word(l.data, 1))) return undefined;
  if (!/^0{24}/.test(word(l.data, 0))) return undefined;
  return {
    tx_hash: l.transactionHash,
    log_index: Number(l.logIndex),
    block_number: Number(l.blockNumber),
    block_hash: l.blockHash,
    depositor: address(word(l.data, 0)),
    currency: words === 4 ? address(word(l.data, 1)) : zeroAddress,
    amount: BigInt(`0x${word(l.data, words - 2)}`).toString(),
    order_ref: `0x${word(l.data, words - 1)}`,
    // A deposit made in its quote's life is judged so however late it is read (the node down, the indexer behind):
    // read-time, it was refunded as ORDER_EXPIRED, less the refund's gas.
    seen_at: l.blockTimestamp ? Number(l.blockTimestamp) * 1000 : undefined,
  };
}
