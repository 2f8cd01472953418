// App fee claims as an attacker: fees owed in one currency are paid in "the same currency on another chain" (same
// symbol, same nativeness), so what a claim pays is the same amount of that asset in the target's decimals, whatever
// configured USD price each chain's entry carries (with a price feed, the configured one is only a fallback
// description, and nothing keeps two chains' copies equal).
import { describe, expect, it } from 'vitest';
import { buildConfig } from '../../src/config/load.ts';
import { Registry } from '../../src/config/registry.ts';
import { Ledger } from '../../src/ledger/index.ts';
import { claimAppFees } from '../../src/solver/claims.ts';
import { mulRatioFloor } from '../../src/lib/money.ts';
import { sameAssetRate } from '../../src/quote/pricing.ts';
import { MINIMAL_CHAIN } from '../helpers/minimalConfig.ts';

const KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const WALLET = '0x00000000000000000000000000000000000a9901';

describe('app fee claims across chains', () => {
  it('fees of 0.01 ETH owed on 8453 (configured at 3000 USD) claimed as ETH on 10 (configured at 2000 USD) pay 0.01 ETH less the gas, not 0.015', () => {
    const feed = { chainId: 8453, aggregator: '0x00000000000000000000000000000000000000fe', maxAgeSeconds: 600 };
    const config = buildConfig(
      {
        solverKey: { env: 'K' },
        chains: [
          MINIMAL_CHAIN,
          {
            ...MINIMAL_CHAIN,
            id: 10,
            name: 'OP',
            // Priced by a feed; the configured price is the fallback an operator wrote on the day.
            nativeCurrency: { ...MINIMAL_CHAIN.nativeCurrency, usdPrice: '2000', priceFeed: feed },
          },
        ],
      },
      { K: KEY },
    );
    const registry = new Registry(config.chains);
    const ledger = Ledger.open(':memory:');
    try {
      ledger.appFees.post({
        recipient: WALLET,
        chain_id: 8453,
        currency: registry.native(8453).address,
        amount: 10n ** 16n,
        kind: 'accrual',
        request_id: '0x01',
        ref: 'app_fee:test:0',
      });
      const gas = 10n ** 12n;
      const payout = claimAppFees(ledger, registry, { wallet: WALLET, target: registry.native(10), recipient: WALLET }, gas);
      expect(BigInt(payout.amount)).toBe(10n ** 16n - gas);
    } finally {
      ledger.close();
    }
  });
});

describe('sameAssetRate', () => {
  it('moves one asset at most one for one (in the decimals of each side), and at less when the input reads cheaper', () => {
    // USDC with 6 decimals to USDC with 8: one for one.
    expect(sameAssetRate({ decimals: 6 }, '1', { decimals: 8 }, '1')).toEqual({ num: 100_000_000n, den: 1_000_000n });
    // The input read dearer than the output (two readings of one price): still one for one, never more.
    const dearer = sameAssetRate({ decimals: 18 }, '3000', { decimals: 18 }, '2000');
    expect(mulRatioFloor(10n ** 16n, dearer)).toBe(10n ** 16n);
    // The input read cheaper (a depeg): no more than its worth.
    const cheaper = sameAssetRate({ decimals: 6 }, '0.9', { decimals: 6 }, '1');
    expect(mulRatioFloor(1_000_000n, cheaper)).toBe(900_000n);
  });
});
