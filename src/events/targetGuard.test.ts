import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { guardedLookup, WEBHOOK_LOOKUPS } from './targetGuard.ts';

describe("webhook targets' DNS lookups", () => {
  // dns.lookup runs on libuv's thread pool (4 threads), which the node's own lookups, file writes and crypto share. A
  // key's targets whose DNS never answers each held a thread for the resolver's timeout: the key's 4 deliveries at once
  // took the whole pool.
  it('run at most WEBHOOK_LOOKUPS at once, whatever the deliveries waiting: the others wait for one to return', async () => {
    const pending: ((err: Error | null, addresses: LookupAddress[]) => void)[] = [];
    const hungDns = ((_host: string, _opts: object, cb: (err: Error | null, addresses: LookupAddress[]) => void) => {
      pending.push(cb);
    }) as never;
    const lookup = guardedLookup(() => false, hungDns);
    const answers: (string | Error)[] = [];
    for (let i = 0; i < 8; i++)
      lookup(`h${i}.example`, {}, (err, address) => {
        answers.push(err ?? (address as string));
      });
    expect(WEBHOOK_LOOKUPS).toBeLessThan(4);
    expect(pending).toHaveLength(WEBHOOK_LOOKUPS);
    // One returns: the next waiting lookup starts, and the answer is judged as before (a public address passes).
    pending[0]!(null, [{ address: '93.184.215.14', family: 4 }]);
    expect(answers).toEqual(['93.184.215.14']);
    expect(pending).toHaveLength(WEBHOOK_LOOKUPS + 1);
    // A private answer is still refused.
    pending[1]!(null, [{ address: '10.0.0.1', family: 4 }]);
    expect(String(answers[1])).toMatch(/private, loopback or link-local/);
    expect(pending).toHaveLength(WEBHOOK_LOOKUPS + 2);
  });
});
