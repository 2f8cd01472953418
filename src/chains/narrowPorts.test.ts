import { describe, expect, it } from 'vitest';
import { sourcesOutside } from '../../test/helpers/sources.ts';

// The rest of the node reaches chains through the registry's narrow ports (ports.ts): a module
// outside src/chains/ that names the whole adapter, or a concrete adapter class (to test
// `instanceof`), would depend on every member of every kind again.

describe('chains are reached through narrow ports', () => {
  it('no module outside src/chains/ names ChainAdapter', () => {
    expect(sourcesOutside('chains/', /\bChainAdapter\b/)).toEqual([]);
  });

  it('no module outside src/chains/ names a concrete adapter class', () => {
    expect(sourcesOutside('chains/', /\b(Evm|Svm|Exchange)Adapter\b/)).toEqual([]);
  });
});
