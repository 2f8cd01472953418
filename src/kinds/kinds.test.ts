// Each kind's codec: what the API and the quote read addresses and transaction ids with.
import { describe, expect, it } from 'vitest';
import { codecOf, EXCHANGE_PERPS_USD, SVM_NATIVE } from './index.ts';
import { base58Encode } from './svm.ts';

const EVM_USER = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const HASH = `0x${'ab'.repeat(32)}`;
const SIG = base58Encode(new Uint8Array(64).fill(7));
const KEY = 'Vote111111111111111111111111111111111111111';

describe('address codecs', () => {
  it('reads each kind of chain as its own: addresses, tx ids, native currency, the user wallet kind', () => {
    const evm = codecOf('evm');
    const svm = codecOf('svm');
    const exchange = codecOf('exchange');
    expect(evm.canonical(EVM_USER.toLowerCase())).toBe(EVM_USER);
    expect(evm.canonical(KEY)).toBeUndefined();
    expect(evm.api(EVM_USER)).toBe(EVM_USER.toLowerCase());
    expect(evm.parseTxId(HASH.toUpperCase().replace('0X', '0x'))).toBe(HASH);
    expect(evm.parseTxId(SIG)).toBeUndefined();
    expect(svm.canonical(KEY)).toBe(KEY);
    expect(svm.canonical(EVM_USER)).toBeUndefined();
    expect(svm.api(KEY)).toBe(KEY);
    expect(svm.parseTxId(SIG)).toBe(SIG);
    expect(svm.parseTxId(HASH)).toBeUndefined();
    expect(svm.bytes(SVM_NATIVE)).toBe(`0x${'00'.repeat(32)}`);
    expect(exchange.native).toBe(EXCHANGE_PERPS_USD);
    expect(exchange.parseTxId(HASH)).toBe(HASH);
    // Exchange accounts are EVM wallets: a recipient defaults to the user across the two.
    expect([evm.userKind, svm.userKind, exchange.userKind]).toEqual(['evm', 'svm', 'evm']);
  });
});
