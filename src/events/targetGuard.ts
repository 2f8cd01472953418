import { AsyncLocalStorage } from 'node:async_hooks';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { RelayNodeError } from '../lib/errors.ts';

// Webhook targets must be on the public internet: a key holder must not make the node POST to its
// own loopback, the operator's private network or a cloud metadata service (SSRF). The check runs
// on the addresses the connection actually uses (the agent's DNS lookup), so a name that resolves
// to a private address, or re-resolves there after registration (DNS rebinding), is refused too.

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT (also Alibaba's metadata service, 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata services at 169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b:1::', 48], // NAT64 for local use (RFC 8215): it reaches IPv4 hosts of the operator's own network
  ['::ffff:0:0:0', 96], // IPv4-translated (SIIT, RFC 2765): an IPv4 host behind a translator, no legitimate webhook target
  ['100::', 64], // discard
  ['2001::', 32], // Teredo: an IPv4 address behind a relay, no legitimate webhook target
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: an IPv4 address behind a relay, likewise
  ['fc00::', 7], // unique-local (AWS metadata over IPv6: fd00:ec2::254)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated, still routed privately)
  ['ff00::', 8], // multicast
] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

// The 8 16-bit groups of an IPv6 address (with an embedded dotted IPv4 tail), or undefined.
function ipv6Groups(ip: string): number[] | undefined {
  let s = ip.toLowerCase();
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(s);
  if (v4) {
    const b = v4.slice(1).map(Number);
    s = `${s.slice(0, v4.index)}${((b[0]! << 8) | b[1]!).toString(16)}:${((b[2]! << 8) | b[3]!).toString(16)}`;
  }
  const [head, tail] = s.includes('::') ? s.split('::') : [s, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  if (groups.length !== 8) return undefined;
  return groups.map((g) => parseInt(g, 16));
}

// The IPv4 address an IPv6 address carries (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d,
// NAT64 64:ff9b::a.b.c.d): such an address reaches that IPv4 host, so it is judged as it.
function embeddedIpv4(ip: string): string | undefined {
  const g = ipv6Groups(ip);
  if (!g) return undefined;
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0);
  const mapped = zeros(5) && g[5] === 0xffff;
  const compatible = zeros(6) && (g[6] !== 0 || g[7]! > 1);
  const nat64 = g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0);
  if (!mapped && !compatible && !nat64) return undefined;
  return [g[6]! >> 8, g[6]! & 0xff, g[7]! >> 8, g[7]! & 0xff].join('.');
}

/** Whether an IP address (v4 or v6) is loopback, private, link-local, unique-local, CGNAT, metadata or otherwise not public. */
export function isNonPublicAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return blocked.check(ip, 'ipv4');
  if (family !== 6) return true; // not an address: never connect to it
  const v4 = embeddedIpv4(ip);
  if (v4 !== undefined) return blocked.check(v4, 'ipv4');
  return blocked.check(ip.split('%')[0]!, 'ipv6');
}

/** The host of a URL as an IP literal (brackets removed), or undefined when it is a name. */
export function ipLiteralHost(hostname: string): string | undefined {
  const h = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return isIP(h) ? h : undefined;
}

/** The error a refused target fails with; its message names no address. */
export class BlockedTargetError extends RelayNodeError {
  override name = 'BlockedTargetError';
  readonly code = 'ERR_WEBHOOK_TARGET_BLOCKED';
  constructor() {
    super('the target resolves to a private, loopback or link-local address');
  }
}

// Webhook hosts are resolved by dns.lookup (getaddrinfo: /etc/hosts, then the system's resolver), which runs on libuv's
// thread pool: 4 threads by default, shared with the node's own lookups (its providers' names), its asynchronous file
// writes (the logs) and crypto. A target whose DNS never answers holds a thread for the resolver's whole timeout, and one
// key's deliveries (4 at once) could hold them all. At most this many webhook lookups run at once; the others wait.
export const WEBHOOK_LOOKUPS = 2;

/** Whose delivery a lookup is for (its API key's id): the waiting lookups are taken in turn by owner. */
export const lookupOwner = new AsyncLocalStorage<string>();

/**
 * A DNS lookup for an HTTP agent that refuses private targets: every address the name resolves to
 * must be public, or the connection fails with BlockedTargetError before a byte is sent.
 * `allowPrivate` is read at every lookup (the devnet and tests turn it on). At most WEBHOOK_LOOKUPS
 * run at once (above), taken in turn by owner (`lookupOwner`), and callers of the same name and options share one;
 * `resolve` is dns.lookup but in tests.
 */
export function guardedLookup(allowPrivate: () => boolean, resolve: typeof dnsLookup = dnsLookup): LookupFunction {
  // Lookups running and waiting, by owner. A slot freed goes to the waiting owner with the fewest lookups running
  // (the first to wait among equals): one key's webhooks on many names that never resolve hold at most the slots
  // they have, and another key's lookup starts at the next one freed. A lookup waits in the queue of every owner whose
  // caller joined it, and starts at the first of their turns: joined only in its first caller's queue, another key's
  // lookup of a name the attacker's webhook also named waited behind every one of the attacker's names.
  interface Job {
    run: () => void;
    /** Whose turn started it (its slot is counted as theirs), once started. */
    owner?: string;
    queuedBy: Set<string>;
  }
  const running = new Map<string, number>();
  let runningTotal = 0;
  const waiting = new Map<string, Job[]>();
  const start = (owner: string, job: Job) => {
    job.owner = owner;
    running.set(owner, (running.get(owner) ?? 0) + 1);
    runningTotal++;
    job.run();
  };
  const enqueue = (owner: string, job: Job) => {
    if (job.owner !== undefined || job.queuedBy.has(owner)) return;
    job.queuedBy.add(owner);
    const queue = waiting.get(owner);
    if (queue) queue.push(job);
    else waiting.set(owner, [job]);
  };
  const slot = (owner: string, job: Job) => {
    if (runningTotal < WEBHOOK_LOOKUPS) return start(owner, job);
    enqueue(owner, job);
  };
  // Freed when the lookup itself returns, not when its caller gave up: only then is its thread free again.
  const free = (owner: string) => {
    runningTotal--;
    const n = running.get(owner)! - 1;
    if (n === 0) running.delete(owner);
    else running.set(owner, n);
    for (;;) {
      let next: string | undefined;
      for (const o of waiting.keys()) if (next === undefined || (running.get(o) ?? 0) < (running.get(next) ?? 0)) next = o;
      if (next === undefined) return;
      const queue = waiting.get(next)!;
      // Jobs another owner's turn started already are dropped from this queue.
      let job: Job | undefined;
      while (job === undefined && queue.length > 0) {
        const j = queue.shift()!;
        if (j.owner === undefined) job = j;
      }
      if (queue.length === 0) waiting.delete(next);
      if (job) return start(next, job);
    }
  };
  // Callers of a lookup running or waiting, by name and options: one key's deliveries to a name that never resolves
  // (4 at once, each timed out and followed by the next) share one lookup and one slot. Each had its own queued before,
  // still run after its delivery gave up: they piled up faster than the slots freed, and another key's lookup waited
  // behind every one of them, a resolver's timeout per two.
  const joined = new Map<string, { answers: ((err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void)[]; job: Job }>();
  return ((hostname: string, options: object, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    const answer = (err: NodeJS.ErrnoException | null, list: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      if (!allowPrivate() && (list.length === 0 || list.some((a) => isNonPublicAddress(a.address)))) return callback(new BlockedTargetError(), '', 0);
      if ((options as { all?: boolean }).all) return callback(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    };
    const { family, hints } = options as { family?: unknown; hints?: unknown };
    const key = `${hostname}|${String(family ?? '')}|${String(hints ?? '')}`;
    const owner = lookupOwner.getStore() ?? '';
    const shared = joined.get(key);
    if (shared) {
      shared.answers.push(answer);
      // Waiting still: it waits in this caller's owner's turn too.
      return enqueue(owner, shared.job);
    }
    const entry = {
      answers: [answer],
      job: {
        queuedBy: new Set<string>(),
        run: () =>
          resolve(hostname, { ...options, all: true }, (err, addresses) => {
            joined.delete(key);
            free(entry.job.owner!);
            for (const a of entry.answers) a(err, addresses as LookupAddress[]);
          }),
      } as Job,
    };
    joined.set(key, entry);
    slot(owner, entry.job);
  }) as LookupFunction;
}
