import { describe, expect, it } from 'vitest';
import { addressBytes, apiAddress, canonicalAddress, nativeAddress } from '../../src/chains/address.ts';
import { buildConfig } from '../../src/config/load.ts';
import { Registry } from '../../src/config/registry.ts';

const KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const PERPS = `0x${'0'.repeat(32)}`;
const HYPE = '0x0d01dc56dcaaca66ad901c959b4011ec';
const exchange = {
  id: 1337,
  name: 'Exchange',
  kind: 'exchange',
  exchangeUrl: 'http://127.0.0.1:3001',
  currencies: [{ address: HYPE.toUpperCase().replace('0X', '0x'), symbol: 'HYPE', name: 'Hyperliquid', decimals: 8, usdPrice: '25' }],
};
const base = { solverKey: { env: 'K' }, chains: [exchange] };
const env = { K: KEY };

describe('chain kind exchange', () => {
  it('fills defaults: perps USD is the native currency (32 hex zeros, 6 decimals)', () => {
    const c = buildConfig(base, env);
    expect(c.chains[0]).toMatchObject({
      kind: 'exchange',
      exchangeChain: 'Mainnet',
      signatureChainId: 1,
      orphanGraceMs: 60_000,
      currencies: [{ address: HYPE }],
    });
    const r = new Registry(c.chains);
    expect(r.native(1337)).toMatchObject({ address: PERPS, decimals: 6, symbol: 'USDC', native: true, kind: 'exchange' });
    expect(r.currency(1337, HYPE.toUpperCase().replace('0X', '0x'))?.symbol).toBe('HYPE');
    expect(r.currency(1337, `${HYPE}78797a`)).toBeUndefined();
  });

  it.each([
    [{ ...exchange, exchangeUrl: 'nope' }, /chains\.0\.exchangeUrl/],
    [{ ...exchange, currencies: [{ ...exchange.currencies[0], address: PERPS }] }, /chains\.0\.currencies\.0\.address: must be a spot currency/],
    [{ ...exchange, currencies: [{ ...exchange.currencies[0], address: '0x1234' }] }, /chains\.0\.currencies\.0\.address/],
    [{ ...exchange, signatureChainId: 0 }, /chains\.0\.signatureChainId/],
    [{ ...exchange, depository: '0x0000000000000000000000000000000000000001' }, /Unrecognized key.*depository/],
  ])('rejects a bad value and names the key (%#)', (chain, message) => {
    expect(() => buildConfig({ ...base, chains: [chain] }, env)).toThrow(message);
  });

  it('canonical addresses: accounts are EVM addresses; currencies are token ids with an optional hex DEX name', () => {
    const user = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
    expect(canonicalAddress('exchange', user)).toBe('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
    expect(canonicalAddress('exchange', PERPS)).toBe(PERPS);
    expect(canonicalAddress('exchange', HYPE.toUpperCase().replace('0X', '0x'))).toBe(HYPE);
    expect(canonicalAddress('exchange', `${HYPE}78797A`)).toBe(`${HYPE}78797a`);
    // 20 bytes (a token id and a 4-letter DEX name) always read as an account: its EIP-55 spelling.
    expect(canonicalAddress('exchange', `${HYPE}73706f74`)).toBe(canonicalAddress('evm', `${HYPE}73706f74`));
    expect(canonicalAddress('exchange', `${HYPE}73706f7400`)).toBeUndefined(); // not a DEX name
    expect(canonicalAddress('exchange', `${PERPS}78797a`)).toBeUndefined(); // perps USD has no DEX
    expect(canonicalAddress('exchange', '0x1234')).toBeUndefined();
    expect(canonicalAddress('exchange', 'not hex')).toBeUndefined();
    expect(nativeAddress('exchange')).toBe(PERPS);
    expect(apiAddress('exchange', '0x70997970C51812dc3A010C7d01b50e0d17dc79C8')).toBe(user);
    expect(addressBytes('exchange', HYPE)).toBe(HYPE);
  });
});
