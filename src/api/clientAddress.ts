import { isIPv6 } from 'node:net';

/**
 * The address per-IP limits count a client by: an IPv4 address as it is (also when written IPv4-mapped),
 * an IPv6 address by its /64, which one host commonly holds whole: keyed on the full address, such a
 * client had a bucket per address it chose.
 */
export function clientOf(ip: string): string {
  if (!isIPv6(ip)) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = ip.split('::');
  const groups = (part: string) => (part ? part.split(':') : []);
  const left = groups(head);
  // An embedded IPv4 tail (x:x::1.2.3.4) is two groups, all in the host half.
  const right = tail === undefined ? [] : groups(tail).flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  const full = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  return `${full
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
