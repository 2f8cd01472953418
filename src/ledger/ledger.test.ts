// The node depends on the Ledger interface (ledger.ts), not on its SQLite implementation: only
// index.ts (where Ledger.open chooses it) imports sqlite.ts, and outside src/ledger/ the stores are
// imported as types only, so a second implementation can take their place.
import { describe, expect, it } from 'vitest';
import { sourceFiles } from '../../test/helpers/sources.ts';

const STORES = ['apiKeys', 'balances', 'deposits', 'events', 'exchangeNonces', 'funding', 'indexerState', 'operations', 'payouts', 'relays', 'requests'].concat(
  ['leases', 'signatureNonces', 'usedPermits', 'withdrawals', 'sqlite'],
);

// Value imports still to go: the solver derives child request ids with Requests.derivedId (a pure
// static function, to become a free function of requests.ts).
const KNOWN: Record<string, string[]> = { 'solver/solver.ts': ['Requests'] };

describe('the ledger behind an interface', () => {
  it('is opened in one place; elsewhere its stores are types', () => {
    const offenders: string[] = [];
    for (const { rel, text } of sourceFiles()) {
      for (const m of text.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'([^']*ledger\/|\.\/)([A-Za-z]+)\.ts'/g)) {
        const [, typeOnly, names, dir, mod] = m;
        const inLedger = rel.startsWith('ledger/');
        if (!inLedger && !dir!.includes('ledger/')) continue;
        if (mod === 'sqlite' && rel !== 'ledger/index.ts') offenders.push(`${rel} imports sqlite.ts`);
        const values = names!
          .split(',')
          .map((n) => n.trim())
          .filter((n) => n && !n.startsWith('type ') && !KNOWN[rel]?.includes(n));
        // Outside the ledger: a store module is imported for its types only (row types, the store's shape).
        if (!inLedger && STORES.includes(mod!) && !typeOnly && values.some((n) => /^[A-Z]/.test(n) && !/Row$|Error$/.test(n))) {
          offenders.push(`${rel} imports ${values.join(', ')} from ${mod}.ts as values`);
        }
      }
    }
    expect(offenders).toEqual([]);
  });

  it('is reached through its stores: outside src/ledger/ no source touches the SQLite connection', () => {
    const offenders: string[] = [];
    for (const { rel, text } of sourceFiles()) {
      if (rel.startsWith('ledger/')) continue;
      text.split('\n').forEach((line, i) => {
        if (/ledger\.db\b|\.db\s*\.\s*(prepare|exec|transaction|pragma)\b/.test(line)) offenders.push(`${rel}:${i + 1}`);
      });
    }
    expect(offenders).toEqual([]);
  });
});
