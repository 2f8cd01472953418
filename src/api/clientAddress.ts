import { isIPv6 } from 'node:net';

/**
 * The address per-IP limits count a client by: an IPv4 address as it is (also when written IPv4-mapped),
 * an IPv6 address by its /64, which one host commonly holds whole: keyed on the full address, such a
 * client had a bucket per address it chose.
 */
export function clientOf(ip: string): string {
  return prefixOf(ip, 4, 4);
}

/**
 * The network a client address belongs to: an IPv4 /24, an IPv6 /48 (one site's allocation). A client holding a
 * network holds every address in it, each a client of its own to `clientOf`: what is capped per client is capped per
 * network too.
 */
export function networkOf(ip: string): string {
  return prefixOf(ip, 3, 3);
}

// The first `v6Groups` 16-bit groups of an IPv6 address (its /(16 × v6Groups)), or the first `v4Bytes` bytes of an
// IPv4 one (also when written IPv4-mapped; all four: the address itself).
function prefixOf(ip: string, v6Groups: number, v4Bytes: number): string {
  const mapped = isIPv6(ip) ? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1] : ip;
  if (mapped !== undefined) {
    if (v4Bytes === 4) return mapped;
    return `${mapped.split('.').slice(0, v4Bytes).join('.')}.0/${8 * v4Bytes}`;
  }
  const [head = '', tail] = ip.split('::');
  const groups = (part: string) => (part ? part.split(':') : []);
  const left = groups(head);
  // An embedded IPv4 tail (x:x::1.2.3.4) is two groups, all in the host half.
  const right = tail === undefined ? [] : groups(tail).flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  const full = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  return `${full
    .slice(0, v6Groups)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/${16 * v6Groups}`;
}
