// The one spelling of an address per chain kind (what the ledger stores and compares), the bytes an
// order carries, and the spelling the API answers with.
import { getAddress, toHex } from 'viem';
import { describe, expect, it } from 'vitest';
import { addressBytes, apiAddress, canonicalAddress, EXCHANGE_PERPS_USD, nativeAddress, SVM_NATIVE, userAddressKind } from './address.ts';

const EVM = '0x8ba1f109551bd432803012645ac136ddd64dba72';
const SVM = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
const hexName = (s: string) => Buffer.from(s, 'utf8').toString('hex');

describe('canonicalAddress', () => {
  it('EVM: any case becomes EIP-55; what is not 20 bytes of hex is not an address', () => {
    expect(canonicalAddress('evm', EVM)).toBe(getAddress(EVM));
    expect(canonicalAddress('evm', EVM.toUpperCase().replace('0X', '0x'))).toBe(getAddress(EVM));
    expect(canonicalAddress('evm', EVM.slice(0, -2))).toBeUndefined();
    expect(canonicalAddress('evm', SVM)).toBeUndefined();
  });

  it('SVM: a base58 32-byte key stays as written (case matters); hex and bad base58 are refused', () => {
    expect(canonicalAddress('svm', SVM)).toBe(SVM);
    expect(canonicalAddress('svm', SVM.toLowerCase())).not.toBe(SVM);
    expect(canonicalAddress('svm', EVM)).toBeUndefined();
    // 0, O, I and l are not base58.
    expect(canonicalAddress('svm', `O${SVM.slice(1)}`)).toBeUndefined();
    expect(canonicalAddress('svm', 'abc')).toBeUndefined();
  });

  it('exchange: a 20-byte string is an account (EIP-55); a 16-byte token id (with a DEX name) is a currency, lower-cased', () => {
    expect(canonicalAddress('exchange', EVM)).toBe(getAddress(EVM));
    const token = `0x${'AB'.repeat(16)}`;
    expect(canonicalAddress('exchange', token)).toBe(token.toLowerCase());
    expect(canonicalAddress('exchange', token + hexName('xyz'))).toBe(token.toLowerCase() + hexName('xyz'));
    // DEX names are lower-case alphanumerics. (A 4-byte name would make 20 bytes: an account.)
    expect(canonicalAddress('exchange', token + hexName('Dex'))).toBeUndefined();
    expect(canonicalAddress('exchange', token + hexName('a-b'))).toBeUndefined();
    // Perps USD is the chain's native currency, never one of a named DEX.
    expect(canonicalAddress('exchange', EXCHANGE_PERPS_USD + hexName('xyz'))).toBeUndefined();
    expect(canonicalAddress('exchange', `0x${'ab'.repeat(15)}`)).toBeUndefined();
  });
});

describe('native currency, order bytes and API spelling', () => {
  it('names each kind native currency', () => {
    expect(nativeAddress('evm')).toBe('0x0000000000000000000000000000000000000000');
    expect(nativeAddress('svm')).toBe(SVM_NATIVE);
    expect(nativeAddress('exchange')).toBe(EXCHANGE_PERPS_USD);
  });

  it('carries EVM addresses as their lower-case hex and SVM keys as their 32 bytes', () => {
    expect(addressBytes('evm', getAddress(EVM))).toBe(EVM);
    const bytes = addressBytes('svm', SVM);
    expect(bytes).toMatch(/^0x[0-9a-f]{64}$/);
    expect(bytes).toBe(toHex(Buffer.from(bytes.slice(2), 'hex')));
    expect(addressBytes('svm', SVM_NATIVE)).toBe(`0x${'00'.repeat(32)}`);
  });

  it('answers EVM and exchange addresses in lower case, SVM keys as they are', () => {
    expect(apiAddress('evm', getAddress(EVM))).toBe(EVM);
    expect(apiAddress('exchange', getAddress(EVM))).toBe(EVM);
    expect(apiAddress('svm', SVM)).toBe(SVM);
  });

  it('exchange users hold EVM addresses', () => {
    expect(userAddressKind('exchange')).toBe('evm');
    expect(userAddressKind('svm')).toBe('svm');
  });
});
