// What a chain says must agree with the node's config of it before the node acts on it: a provider that serves
// another chain (its deposits would be indexed as this chain's, its answers would decide this chain's payouts), or a
// token whose decimals are not the configured ones (every amount of it priced off by a power of ten: an 18-decimal
// token configured with 6 had each of its units paid as 10^12). The node refuses to start, naming what disagrees.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConfigWithKeys } from '../src/config/load.ts';
import { startDevnet, type Devnet } from '../src/devnet/devnet.ts';
import { createLogger } from '../src/log.ts';
import { RelayNode } from '../src/node.ts';

let devnet: Devnet;
beforeAll(async () => {
  devnet = await startDevnet({ dataDir: mkdtempSync(join(tmpdir(), 'relay-mismatch-')), exchange: false, svm: true });
});
afterAll(async () => {
  await devnet?.stop();
});

// Starts a node whose chain `id` config (10 unless named) is changed by `change`; returns the start's error (undefined: it started).
async function startWith(change: (c: Record<string, any>) => Record<string, any>, id = 10): Promise<Error | undefined> {
  const raw = devnet.nodeConfig({ port: 0, dataDir: mkdtempSync(join(tmpdir(), 'relay-mismatch-node-')) });
  const chains = (raw.chains as Record<string, any>[]).map((c) => (c.id === id ? change(c) : c));
  const node = new RelayNode(buildConfigWithKeys({ ...raw, chains }, devnet.keys), { log: createLogger('silent') });
  try {
    await node.start();
    return undefined;
  } catch (e) {
    return e as Error;
  } finally {
    await node.stop();
  }
}

describe('chain facts against the config at start', () => {
  it('refuses a provider that serves another chain, naming it (never its URL) and the chain it serves', async () => {
    const other = devnet.chains.find((c) => c.id === 8453)!.rpcUrl;
    const err = await startWith((c) => ({ ...c, rpcUrl: other, rpc: [{ name: 'misrouted', url: other }] }));
    expect(err?.name).toBe('ChainConfigMismatch');
    expect(err?.message).toMatch(/chain 10: misrouted serves chain 8453/);
    expect(err?.message).not.toContain(other);
  });

  it('refuses a token whose decimals are not the configured ones, or an address that is no token', async () => {
    const usdc = devnet.chains.find((c) => c.id === 10)!.contracts.stablecoin;
    const wrongDecimals = await startWith((c) => ({ ...c, currencies: c.currencies.map((x: any) => (x.address === usdc ? { ...x, decimals: 18 } : x)) }));
    expect(wrongDecimals?.name).toBe('ChainConfigMismatch');
    expect(wrongDecimals?.message).toContain(`USDC (${usdc}) has 6 decimals, configured 18`);

    const nobody = '0x000000000000000000000000000000000000dEaD';
    const noToken = await startWith((c) => ({
      ...c,
      currencies: [...c.currencies, { address: nobody, symbol: 'NOPE', name: 'Not a token', decimals: 18, usdPrice: '1' }],
    }));
    expect(noToken?.message).toContain(`NOPE (${nobody}) answers no decimals()`);
  });

  it('refuses an SVM mint whose decimals are not the configured ones', async () => {
    const svm = devnet.svm!;
    const err = await startWith((c) => ({ ...c, currencies: c.currencies.map((x: any) => ({ ...x, decimals: 9 })) }), svm.id);
    expect(err?.name).toBe('ChainConfigMismatch');
    expect(err?.message).toMatch(/USDC \(\w+\) has 6 decimals, configured 9/);
  });

  it('refuses a deposit address factory that is none, or not one for the configured depository', async () => {
    const b = devnet.chains.find((c) => c.id === 10)!;
    // Every address quoted on it would be paid and never swept.
    const none = await startWith((c) => ({ ...c, depositAddressFactory: b.contracts.filler }));
    expect(none?.name).toBe('ChainConfigMismatch');
    expect(none?.message).toContain(`depositAddressFactory ${b.contracts.filler} answers no depository()`);
    const otherDepository = '0x000000000000000000000000000000000000dEaD';
    const other = await startWith((c) => ({ ...c, depository: otherDepository }));
    expect(other?.message).toContain(`not the configured depository ${otherDepository}`);
  });

  it('starts with a factory another key sweeps (a rotated solver key), and quotes no deposit address on it', async () => {
    const raw = devnet.nodeConfig({ port: 0, dataDir: mkdtempSync(join(tmpdir(), 'relay-mismatch-node-')) });
    const node = new RelayNode(buildConfigWithKeys(raw, { ...devnet.keys, solver: devnet.accounts[4]!.privateKey }), { log: createLogger('silent') });
    try {
      await node.start();
      const usdc = devnet.chains.find((c) => c.id === 8453)!.contracts.stablecoin;
      const r = await fetch(`${node.url}/quote/v2`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          user: devnet.accounts[1]!.address,
          recipient: devnet.accounts[2]!.address,
          refundTo: devnet.accounts[3]!.address,
          originChainId: 8453,
          destinationChainId: 10,
          originCurrency: usdc,
          destinationCurrency: devnet.chains.find((c) => c.id === 10)!.contracts.stablecoin,
          amount: '10000000',
          tradeType: 'EXACT_INPUT',
          useDepositAddress: true,
        }),
      });
      expect([r.status, ((await r.json()) as { message: string }).message]).toEqual([400, expect.stringMatching(/chain 8453 offers no deposit addresses/)]);
    } finally {
      await node.stop();
    }
  });

  it('starts when they agree', async () => {
    expect(await startWith((c) => c)).toBeUndefined();
  });
});
