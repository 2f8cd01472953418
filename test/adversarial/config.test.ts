// Configs that put money at risk: one hot key that is both solver and allocator, and a zero
// price (free currency, and an EXACT_OUTPUT search that never ends).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { privateKeyToAccount } from 'viem/accounts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildConfig } from '../../src/config/load.ts';
import type { Pricing } from '../../src/ledger/types.ts';
import { QuoteError } from '../../src/lib/quoteError.ts';
import { inputFor } from '../../src/quote/fillAmount.ts';

const SOLVER = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const ALLOCATOR = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a';
const chain = {
  id: 8453,
  name: 'Base',
  rpcUrl: 'http://127.0.0.1:1',
  depository: '0x0000000000000000000000000000000000000001',
  filler: '0x0000000000000000000000000000000000000002',
  nativeCurrency: { symbol: 'ETH', name: 'Ether', decimals: 18, usdPrice: '3000' },
};

function start(config: Record<string, unknown>, env: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'relay-adv-config-'));
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify({ dataDir: join(dir, 'data'), ...config }));
  const r = spawnSync(process.execPath, ['bin/relay-node.js', 'start', '--config', path], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 90_000,
  });
  return { code: r.status, out: r.stdout + r.stderr };
}

describe('relay-node start and the allocator key', () => {
  it('refuses a config without allocatorKey', () => {
    const r = start({ solverKey: { env: 'S' }, chains: [chain] }, { S: SOLVER });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/allocatorKey: is required/);
    expect(r.out).not.toContain(SOLVER.slice(2));
  }, 120_000);

  it('refuses an allocatorKey equal to the solverKey, from another variable or a file', () => {
    const r = start({ solverKey: { env: 'S' }, allocatorKey: { env: 'A' }, chains: [chain] }, { S: SOLVER, A: SOLVER.toUpperCase().replace('0X', '0x') });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/allocatorKey: must not be the solver key/);
    expect(r.out).not.toContain(SOLVER.slice(2));
    expect(r.out).not.toContain(SOLVER.slice(2).toUpperCase());
  }, 120_000);

  it('still builds the config of the read-only tools and the devnet with their own keys', () => {
    expect(buildConfig({ solverKey: { env: 'S' }, allocatorKey: { env: 'A' }, chains: [chain] }, { S: SOLVER, A: ALLOCATOR }).allocatorSigner.address).toBe(
      privateKeyToAccount(ALLOCATOR).address,
    );
  });
});

describe('prices must be positive', () => {
  it.each([['0'], ['0.0'], ['0.000000']])('refuses usdPrice "%s", naming the key', (price) => {
    const native = { ...chain, nativeCurrency: { ...chain.nativeCurrency, usdPrice: price } };
    expect(() => buildConfig({ solverKey: { env: 'S' }, chains: [native] }, { S: SOLVER })).toThrow(/chains\.0\.nativeCurrency\.usdPrice: must be a positive/);
    const token = {
      ...chain,
      currencies: [{ address: '0x0000000000000000000000000000000000000003', symbol: 'USDC', name: 'USD Coin', decimals: 6, usdPrice: price }],
    };
    expect(() => buildConfig({ solverKey: { env: 'S' }, chains: [token] }, { S: SOLVER })).toThrow(/chains\.0\.currencies\.0\.usdPrice: must be a positive/);
  });

  it('ends the EXACT_OUTPUT search when no deposit can pay the output (a zero rate), with a QuoteError', () => {
    const zero: Pricing = { rateNum: '0', rateDen: '1', serviceBps: 10, gasFeeOut: '0', gasFeeUsd: '0' };
    expect(() => inputFor(1_000_000n, zero)).toThrow(QuoteError);
    // A rate so low that the input would exceed uint256: also refused rather than searched for ever.
    const tiny: Pricing = { rateNum: '1', rateDen: (10n ** 80n).toString(), serviceBps: 10, gasFeeOut: '0', gasFeeUsd: '0' };
    expect(() => inputFor(1_000_000n, tiny)).toThrow(/amount/);
    // An ordinary rate still finds the exact input.
    const one: Pricing = { rateNum: '1', rateDen: '1', serviceBps: 0, gasFeeOut: '5', gasFeeUsd: '0' };
    expect(inputFor(100n, one)).toBe(105n);
  });
});
