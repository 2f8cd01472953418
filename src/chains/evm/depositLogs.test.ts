import { describe, expect, it } from 'vitest';
import { encodeAbiParameters, encodeEventTopics, getAddress, zeroAddress, type Hex } from 'viem';
import { RelayDepositoryAbi } from '../../../contracts-abi/index.ts';
import { decodeDepositLog, type RpcLog } from './depositLogs.ts';

const from = getAddress('0x1111111111111111111111111111111111111111');
const token = getAddress('0x2222222222222222222222222222222222222222');
const id = `0x${'ab'.repeat(32)}` as Hex;
const base = { blockNumber: '0x10', blockHash: `0x${'cd'.repeat(32)}`, transactionHash: `0x${'ef'.repeat(32)}`, logIndex: '0x3' } as const;

function log(name: 'RelayNativeDeposit' | 'RelayErc20Deposit', data: Hex): RpcLog {
  return { ...base, topics: encodeEventTopics({ abi: RelayDepositoryAbi, eventName: name }) as Hex[], data } as RpcLog;
}

describe('decodeDepositLog', () => {
  it('reads native and ERC-20 deposits word by word, as the ABI encodes them', () => {
    const native = log('RelayNativeDeposit', encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }, { type: 'bytes32' }], [from, 10n ** 30n, id]));
    expect(decodeDepositLog(native)).toEqual({
      tx_hash: base.transactionHash,
      log_index: 3,
      block_number: 16,
      block_hash: base.blockHash,
      depositor: from,
      currency: zeroAddress,
      amount: (10n ** 30n).toString(),
      order_ref: id,
    });
    const erc20 = log(
      'RelayErc20Deposit',
      encodeAbiParameters([{ type: 'address' }, { type: 'address' }, { type: 'uint256' }, { type: 'bytes32' }], [from, token, 5n, id]),
    );
    expect(decodeDepositLog(erc20)).toMatchObject({ depositor: from, currency: token, amount: '5', order_ref: id });
  });

  it('refuses logs that are not exactly the event: other topics, lengths, dirty address words, removed', () => {
    const good = log('RelayNativeDeposit', encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }, { type: 'bytes32' }], [from, 1n, id]));
    expect(decodeDepositLog({ ...good, topics: [`0x${'00'.repeat(32)}`] })).toBeUndefined();
    expect(decodeDepositLog({ ...good, topics: [...good.topics, id] })).toBeUndefined();
    expect(decodeDepositLog({ ...good, data: `${good.data}00` as Hex })).toBeUndefined();
    expect(decodeDepositLog({ ...good, data: `0xff${good.data.slice(4)}` as Hex })).toBeUndefined();
    expect(decodeDepositLog({ ...good, removed: true })).toBeUndefined();
  });
});
