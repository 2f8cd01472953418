import type { LookupAddress } from 'node:dns';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { guardedLookup, lookupOwner, WEBHOOK_LOOKUPS } from './targetGuard.ts';

// A resolver whose lookups of *.attacker.example never answer (their callbacks kept in `hung`, to fail them by hand),
// and whose other lookups answer a public address at once; `asked` lists every name it was asked.
function attackerResolver() {
  const hung: ((err: Error | null, addresses: LookupAddress[]) => void)[] = [];
  const asked: string[] = [];
  const resolve = ((host: string, _opts: object, cb: (err: Error | null, addresses: LookupAddress[]) => void) => {
    asked.push(host);
    if (host.endsWith('.attacker.example')) hung.push(cb);
    else cb(null, [{ address: '93.184.215.14', family: 4 }]);
  }) as never;
  return { hung, asked, resolve };
}

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

  // 7bbd891 left each delivery's lookup queued after its delivery gave up (review-today-4): one key's timed-out
  // deliveries to a name that never resolves piled up faster than the slots freed.
  it("an honest key's lookup waits for at most one resolver timeout, however many of the attacker's deliveries gave up", () => {
    const { hung, asked, resolve } = attackerResolver();
    const lookup = guardedLookup(() => false, resolve);
    // The attacker's key: 4 deliveries at once (perKeyConcurrency) to its webhook, each timed out after 10 s and the
    // next 4 started, five times over (50 s): each left its lookup queued.
    for (let i = 0; i < 20; i++) lookup('hook.attacker.example', {}, () => undefined);
    // Another key's delivery.
    let honest: string | Error | undefined;
    lookup('hooks.honest.example', {}, (err, address) => (honest = err ?? (address as string)));
    // The OS resolver gives up on the lookups running (a resolver timeout), once.
    for (const cb of hung.splice(0)) cb(Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' }), []);
    expect(asked.filter((h) => h === 'hooks.honest.example')).toHaveLength(1);
    expect(honest).toBe('93.184.215.14');
  });

  // 4073e2d left one key's lookups of many names first in line: its 10 webhooks on 10 names that never resolve each
  // queued a lookup of its own, and another key's waited behind all of them, a resolver timeout per WEBHOOK_LOOKUPS.
  it("an honest key's lookup waits for at most one resolver timeout, however many names the attacker's webhooks use", () => {
    const { hung, asked, resolve } = attackerResolver();
    const lookup = guardedLookup(() => false, resolve);
    lookupOwner.run('attacker-key', () => {
      for (let i = 0; i < 10; i++) lookup(`hook${i}.attacker.example`, {}, () => undefined);
    });
    let honest: string | Error | undefined;
    lookupOwner.run('honest-key', () => lookup('hooks.honest.example', {}, (err, address) => (honest = err ?? (address as string))));
    expect(hung).toHaveLength(WEBHOOK_LOOKUPS);
    // The resolver gives up on the lookups running, once: the honest key's goes next, before the attacker's other names.
    for (const cb of hung.splice(0)) cb(Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' }), []);
    expect(honest).toBe('93.184.215.14');
    expect(asked.indexOf('hooks.honest.example')).toBe(WEBHOOK_LOOKUPS);
    // The attacker's other names still run, WEBHOOK_LOOKUPS at a time.
    expect(hung).toHaveLength(WEBHOOK_LOOKUPS);
    expect(asked.filter((h) => h.endsWith('.attacker.example'))).toHaveLength(2 * WEBHOOK_LOOKUPS);
  });

  // 4b71cb7: a lookup waiting in one key's queue was joined by every other caller of the same name: another key's delivery to a
  // name the attacker also named waited at the back of the attacker's queue, behind each of its names that never
  // resolve (a resolver timeout per WEBHOOK_LOOKUPS of them), never in its own turn.
  it("an honest key's lookup of a name the attacker's webhook also names runs in the honest key's turn", () => {
    const { hung, asked, resolve } = attackerResolver();
    const lookup = guardedLookup(() => false, resolve);
    // The attacker's key: 10 webhooks on names that never resolve, then one on the honest receiver's host.
    lookupOwner.run('attacker-key', () => {
      for (let i = 0; i < 10; i++) lookup(`hook${i}.attacker.example`, {}, () => undefined);
      lookup('hooks.honest.example', {}, () => undefined);
    });
    let honest: string | Error | undefined;
    lookupOwner.run('honest-key', () => lookup('hooks.honest.example', {}, (err, address) => (honest = err ?? (address as string))));
    expect(hung).toHaveLength(WEBHOOK_LOOKUPS);
    // The resolver gives up on the lookups running, once: the honest key's turn comes at the first slot freed.
    for (const cb of hung.splice(0)) cb(Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' }), []);
    expect(honest).toBe('93.184.215.14');
    // One lookup of the shared name, whoever's turn started it.
    expect(asked.filter((h) => h === 'hooks.honest.example')).toHaveLength(1);
    // The attacker's names still run, WEBHOOK_LOOKUPS at a time, and its join of the shared name is answered too.
    expect(hung).toHaveLength(WEBHOOK_LOOKUPS);
  });

  it("knows whose delivery a lookup is for through node:http's agent", async () => {
    const server = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const owners: (string | undefined)[] = [];
      const resolve = ((_host: string, _opts: object, cb: (err: Error | null, addresses: LookupAddress[]) => void) => {
        owners.push(lookupOwner.getStore());
        cb(null, [{ address: '127.0.0.1', family: 4 }]);
      }) as never;
      const agent = new Agent({ lookup: guardedLookup(() => true, resolve) } as object);
      const status = await new Promise<number>((done, fail) => {
        const req = lookupOwner.run('key-1', () =>
          request(`http://hooks.test:${(server.address() as AddressInfo).port}/`, { agent }, (res) => {
            res.resume();
            done(res.statusCode ?? 0);
          }),
        );
        req.on('error', fail);
        req.end();
      });
      expect(status).toBe(200);
      expect(owners).toEqual(['key-1']);
      agent.destroy();
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
