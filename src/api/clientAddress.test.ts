import { describe, expect, it } from 'vitest';
import { clientOf } from './clientAddress.ts';

describe('clientOf (the address per-IP limits count)', () => {
  it('keeps an IPv4 address, also written IPv4-mapped', () => {
    expect(clientOf('203.0.113.7')).toBe('203.0.113.7');
    expect(clientOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
  });

  it('counts an IPv6 address by its /64, however it is written', () => {
    const one = ['2001:db8:1:2::a', '2001:0db8:0001:0002:0:0:0:c', '2001:db8:1:2:3:4:5:6', '2001:DB8:1:2:ffff::', '2001:db8:1:2:3:4:1.2.3.4'];
    expect(new Set(one.map(clientOf))).toEqual(new Set(['2001:db8:1:2::/64']));
    expect(clientOf('2001:db8:1:3::a')).toBe('2001:db8:1:3::/64');
    expect(clientOf('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientOf('::1')).toBe('0:0:0:0::/64');
  });
});
