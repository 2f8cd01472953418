import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { buildConfig, loadConfigFile } from './load.ts';
import { privateKeyToAccount } from 'viem/accounts';
import { Keypair } from '@solana/web3.js';
import { base58Encode } from '../kinds/svm.ts';
import { MINIMAL_CHAIN, MINIMAL_CONFIG } from '../../test/helpers/minimalConfig.ts';

const KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const chain = MINIMAL_CHAIN;
const base = MINIMAL_CONFIG;
const env = { K: KEY };

describe('config', () => {
  it('api: trusts no proxy by default, only listed addresses or CIDRs; bounds receiving a request', () => {
    const api = (a: Record<string, unknown>) => buildConfig({ ...base, api: a }, env).api;
    expect(api({ trustProxy: ['10.0.0.0/8', '127.0.0.1', '::1', 'fd00::/8'] }).trustProxy).toEqual(['10.0.0.0/8', '127.0.0.1', '::1', 'fd00::/8']);
    for (const bad of [true, 1, [], ['not-an-ip'], ['10.0.0.0/33'], ['::1/129'], ['10.0.0.1/8/1'], ['fe80::1%eth0'], '127.0.0.1']) {
      expect(() => api({ trustProxy: bad })).toThrow(/api\.trustProxy/);
    }
    expect(api({ headersTimeoutMs: 5_000, requestTimeoutMs: 5_000 })).toMatchObject({ headersTimeoutMs: 5_000, requestTimeoutMs: 5_000 });
    expect(() => api({ headersTimeoutMs: 20_000, requestTimeoutMs: 10_000 })).toThrow(
      /api\.headersTimeoutMs: is 20000: must be at most api\.requestTimeoutMs \(10000\)/,
    );
    expect(() => api({ requestTimeoutMs: 0 })).toThrow(/api\.requestTimeoutMs/);
  });

  it('active/standby: disabled by default; a renewal interval above a third of the lease is refused', () => {
    expect(buildConfig(base, env).ha).toEqual({ enabled: false, leaseMs: 15_000, renewMs: 3_000 });
    expect(buildConfig({ ...base, ha: { enabled: true, leaseMs: 3_000, renewMs: 1_000, nodeId: 'a' } }, env).ha).toMatchObject({ enabled: true, nodeId: 'a' });
    expect(() => buildConfig({ ...base, ha: { enabled: true, leaseMs: 3_000, renewMs: 1_001 } }, env)).toThrow(
      /ha\.renewMs: is 1001: must be at most a third of ha\.leaseMs/,
    );
  });

  it('ledger.url from the environment or a file, so the database password stays out of the config; never printed', () => {
    const url = 'postgres://relay:s3cret-pw@127.0.0.1:5432/relay';
    const dir = mkdtempSync(join(tmpdir(), 'relay-config-'));
    writeFileSync(join(dir, 'url'), `${url}\n`);
    for (const source of [{ env: 'DB' }, { file: join(dir, 'url') }]) {
      const c = buildConfig({ ...base, ledger: { url: source } }, { ...env, DB: url });
      expect(c.ledger.url?.reveal()).toBe(url);
      expect(JSON.stringify(c)).not.toContain('s3cret-pw');
      expect(inspect(c, { depth: 10 })).not.toContain('s3cret-pw');
    }
    expect(() => buildConfig({ ...base, ledger: { url: { env: 'NOPE' } } }, env)).toThrow(/ledger\.url\.env: environment variable NOPE is not set/);
    expect(() => buildConfig({ ...base, ledger: { url: { env: 'DB', file: 'x' } } }, { ...env, DB: url })).toThrow(/ledger\.url: give a postgres:\/\/ URL/);
    const bad = () => buildConfig({ ...base, ledger: { url: { env: 'DB' } } }, { ...env, DB: 'mysql://u:s3cret-pw@h/db' });
    expect(bad).toThrow(/ledger\.url: must be a postgres:\/\//);
    expect(bad).not.toThrow(/s3cret-pw/);
  });

  it('fills defaults and resolves the key from the environment', () => {
    const c = buildConfig(base, env);
    expect(c.api).toEqual({
      host: '127.0.0.1',
      port: 4000,
      rateLimit: {
        perKeyPerMinute: 6000,
        pricedPerKeyPerMinute: 1200,
        unauthenticatedPerMinute: 600,
        anonymousQuotesPerMinute: 60,
        anonymousQuotesPerMinuteTotal: 600,
        signatureChecksPerMinute: 20,
        signatureChecksPerMinuteTotal: 600,
        probesPerMinute: 600,
        wsConnectionsPerIp: 20,
        wsMessagesPerConnectionPerMinute: 120,
        wsMessagesPerIpPerMinute: 600,
      },
      listing: {
        workers: 2,
        timeoutMs: 10_000,
        perCaller: 1,
        workerNice: 10,
        maxGroups: 5,
        maxValuesPerField: 20,
        maxFilterValues: 100,
        maxFiltersLength: 4096,
      },
      trustProxy: false,
      headersTimeoutMs: 15_000,
      requestTimeoutMs: 30_000,
      connectionsPerIp: 256,
    });
    expect(c.chains[0]).toMatchObject({ kind: 'evm', confirmations: 1 });
    expect(c.solverSigner.address).toBe(privateKeyToAccount(KEY).address);
    expect(c.allocatorSigner.address).toBe(privateKeyToAccount(KEY).address);
  });

  it("takes a fee-cap policy per EVM chain ('wait' when absent)", () => {
    const c = buildConfig(
      { ...base, chains: [{ ...chain, maxFeePerGas: '100', feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 4, cancelMaxFeePerGas: '150' }] },
      env,
    );
    expect(c.chains[0]).toMatchObject({ feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 4, cancelMaxFeePerGas: '150' });
    expect(buildConfig(base, env).chains[0]).not.toHaveProperty('feeCapPolicy');
  });

  it('refuses a maxCallGas over what one transaction may carry (EIP-7825: 2^24)', () => {
    expect(buildConfig({ ...base, chains: [{ ...chain, maxCallGas: 16_777_216 }] }, env).chains[0]).toMatchObject({ maxCallGas: 16_777_216 });
    expect(() => buildConfig({ ...base, chains: [{ ...chain, maxCallGas: 16_777_217 }] }, env)).toThrow(/chains\.0\.maxCallGas: .*16,?777,?216/);
  });

  it('refuses a quote life (ttlSeconds) not shorter than the fill deadline: a deposit at its end would be refunded at once', () => {
    expect(buildConfig({ ...base, quote: { ttlSeconds: 600, fillDeadlineSeconds: 601 } }, env).quote).toMatchObject({ ttlSeconds: 600 });
    expect(() => buildConfig({ ...base, quote: { ttlSeconds: 3600, fillDeadlineSeconds: 3600 } }, env)).toThrow(/quote\.ttlSeconds: .*fillDeadlineSeconds/);
    expect(() => buildConfig({ ...base, quote: { ttlSeconds: 7200 } }, env)).toThrow(/quote\.ttlSeconds/);
  });

  it('never prints a key', () => {
    const c = buildConfig(base, env);
    expect(JSON.stringify(c)).not.toContain(KEY.slice(2));
    expect(inspect(c, { depth: 10 })).not.toContain(KEY.slice(2));
    expect(inspect(c.solverSigner, { depth: 10, showHidden: true })).not.toContain(KEY.slice(2));
  });

  it.each([
    [{ ...base, chains: [{ ...chain, rpcUrl: 'not a url' }] }, /chains\.0\.rpcUrl/],
    [{ ...base, chains: [{ ...chain, depository: '0x1234' }] }, /chains\.0\.depository: must be a 0x-prefixed 20-byte hex address/],
    [{ ...base, chains: [chain, chain] }, /chains\.1\.id: duplicate chain id 8453/],
    [{ ...base, chains: [] }, /chains: must list at least one chain/],
    [{ ...base, api: { port: 99999 } }, /api\.port/],
    [{ ...base, chains: [{ ...chain, confirmations: 0 }] }, /chains\.0\.confirmations/],
    [{ ...base, chains: [{ ...chain, nativeCurrency: { ...chain.nativeCurrency, usdPrice: 3000 } }] }, /chains\.0\.nativeCurrency\.usdPrice/],
    [{ ...base, fees: { relayerServiceBps: 1.5 } }, /fees\.relayerServiceBps/],
    [{ ...base, typo: true }, /Unrecognized key.*typo/],
    [{ ...base, solverKey: { env: 'K', file: 'x' } }, /solverKey: give exactly one of "env" or "file"/],
    [{ ...base, chains: [{ ...chain, feeCapPolicy: 'drop' }] }, /chains\.0\.feeCapPolicy/],
    [{ ...base, chains: [{ ...chain, feeCapPolicy: 'cancel' }] }, /chains\.0\.feeCapPolicy: "cancel" needs maxFeePerGas or maxReplacements/],
    [
      { ...base, chains: [{ ...chain, maxFeePerGas: '100', feeCapPolicy: 'cancel', cancelMaxFeePerGas: '100' }] },
      /chains\.0\.cancelMaxFeePerGas: must be above maxFeePerGas \(100\)/,
    ],
    [
      { ...base, chains: [{ ...chain, maxFeePerGas: '100', feeCapCancelAfterBlocks: 5 }] },
      /chains\.0\.feeCapCancelAfterBlocks: applies only with feeCapPolicy "cancel"/,
    ],
    [{ ...base, chains: [{ ...chain, maxFeePerGas: '100', feeCapPolicy: 'cancel', feeCapCancelAfterBlocks: 0 }] }, /chains\.0\.feeCapCancelAfterBlocks/],
  ])('rejects a bad value and names the key (%#)', (raw, message) => {
    expect(() => buildConfig(raw, env)).toThrow(message);
  });

  it('names a missing key variable and never echoes a malformed key', () => {
    expect(() => buildConfig(base, {})).toThrow('solverKey.env: environment variable K is not set');
    const bad = 'deadbeef'.repeat(7);
    try {
      buildConfig(base, { K: bad });
      expect.unreachable();
    } catch (e) {
      expect((e as Error).message).toMatch(/solverKey: the key is not a 0x-prefixed 32-byte hex string/);
      expect((e as Error).message).not.toContain(bad);
    }
  });

  it('loads the annotated example, comments and all', () => {
    const c = loadConfigFile('config/example.json', { RELAY_SOLVER_KEY: KEY, RELAY_ALLOCATOR_KEY: KEY });
    expect(c.chains.map((x) => x.id)).toEqual([8453, 10, 1337]);
    expect(c.chains[2]).toMatchObject({
      kind: 'exchange',
      exchangeChain: 'Mainnet',
      signatureChainId: 42161,
      currencies: [{ address: '0x0d01dc56dcaaca66ad901c959b4011ec' }],
    });
    // The active/standby variant (docker/compose.postgres.yml): the same chains, the ledger URL from the environment.
    const ha = loadConfigFile('docker/config.ha.json', {
      RELAY_SOLVER_KEY: KEY,
      RELAY_ALLOCATOR_KEY: KEY,
      RELAY_LEDGER_URL: 'postgres://relay:pw@postgres:5432/relay',
    });
    expect(ha.chains).toEqual(c.chains);
    expect(ha.ha).toMatchObject({ enabled: true });
    expect(ha.ledger.url?.reveal()).toBe('postgres://relay:pw@postgres:5432/relay');
  });

  it('takes a quorum for an SVM chain as for an EVM one, never more than its providers that can read', () => {
    const svm = {
      kind: 'svm',
      id: 792703809,
      name: 'Solana',
      vault: Keypair.generate().publicKey.toBase58(),
      nativeCurrency: { symbol: 'SOL', name: 'Solana', decimals: 9, usdPrice: '150' },
      rpc: [
        { url: 'http://127.0.0.1:8899', name: 'a' },
        { url: 'http://127.0.0.1:8900', name: 'b' },
        { url: 'http://127.0.0.1:8901', name: 'c', role: 'send' },
      ],
    };
    const svmEnv = { ...env, S: base58Encode(Keypair.generate().secretKey) };
    const withSvm = (c: Record<string, unknown>) => ({ ...base, svmSolverKey: { env: 'S' }, chains: [chain, c] });
    expect(buildConfig(withSvm({ ...svm, quorum: 2 }), svmEnv).chains[1]).toMatchObject({ kind: 'svm', quorum: 2 });
    // Three providers, one of them send-only: two can read, a quorum of three could never be met.
    expect(() => buildConfig(withSvm({ ...svm, quorum: 3 }), svmEnv)).toThrow(/chains\.1\.quorum: is 3, more than the 2 providers that can read/);
    expect(() => buildConfig(withSvm({ ...svm, quorum: 0 }), svmEnv)).toThrow(/chains\.1\.quorum/);
    // The same rule on an EVM chain; a single rpcUrl is one provider.
    expect(() => buildConfig({ ...base, chains: [{ ...chain, quorum: 2 }] }, env)).toThrow(/chains\.0\.quorum: is 2, more than the 1 provider that can read/);
  });

  it('takes http(s):// and ws(s):// providers on an EVM chain, http(s):// only on an SVM chain, with a clear error otherwise', () => {
    const withRpc = (rpc: unknown[]) => ({ ...base, chains: [{ ...chain, rpcUrl: undefined, rpc }] });
    const c = buildConfig(withRpc([{ url: 'wss://ws.example/v3/SECRETKEY', name: 'ws' }, { url: 'https://rpc.example/v3/SECRETKEY' }]), env);
    expect(c.chains[0]!.rpc!.map((p) => p.url)).toEqual(['wss://ws.example/v3/SECRETKEY', 'https://rpc.example/v3/SECRETKEY']);
    // The single rpcUrl (read over HTTP by the audit and the price feeds) is the first HTTP provider.
    expect(c.chains[0]!.rpcUrl).toBe('https://rpc.example/v3/SECRETKEY');
    expect(buildConfig(withRpc([{ url: 'ws://127.0.0.1:8545' }]), env).chains[0]!.rpcUrl).toBe('ws://127.0.0.1:8545');
    expect(buildConfig({ ...base, chains: [{ ...chain, rpcUrl: 'ws://127.0.0.1:8545' }] }, env).chains[0]!.rpc![0]!.url).toBe('ws://127.0.0.1:8545');
    for (const bad of ['ftp://rpc.example/SECRETKEY', 'mailto:SECRETKEY@example.com']) {
      let err: unknown;
      try {
        buildConfig(withRpc([{ url: bad }]), env);
      } catch (e) {
        err = e;
      }
      expect(String(err)).toMatch(/chains\.0\.rpc\.0\.url: must be an http:\/\/, https:\/\/, ws:\/\/ or wss:\/\/ URL/);
      expect(String(err)).not.toContain('SECRETKEY');
    }
    expect(() => buildConfig({ ...base, chains: [{ ...chain, rpcUrl: 'ftp://rpc.example' }] }, env)).toThrow(/chains\.0\.rpcUrl: must be an http/);
    const svm = {
      kind: 'svm',
      id: 792703809,
      name: 'Solana',
      vault: Keypair.generate().publicKey.toBase58(),
      nativeCurrency: { symbol: 'SOL', name: 'Solana', decimals: 9, usdPrice: '150' },
      rpc: [{ url: 'ws://127.0.0.1:8900', name: 'a' }],
    };
    const svmEnv = { ...env, S: base58Encode(Keypair.generate().secretKey) };
    expect(() => buildConfig({ ...base, svmSolverKey: { env: 'S' }, chains: [chain, svm] }, svmEnv)).toThrow(
      /chains\.1\.rpc\.0\.url: must be an http:\/\/ or https:\/\/ URL/,
    );
  });

  it('reports a file that is not JSON', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-config-'));
    writeFileSync(join(dir, 'c.json'), '{ nope');
    expect(() => loadConfigFile(join(dir, 'c.json'))).toThrow(/is not valid JSON/);
    expect(() => loadConfigFile(join(dir, 'missing.json'))).toThrow(/cannot read config file .*ENOENT/);
  });
});
