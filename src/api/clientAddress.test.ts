import { describe, expect, it } from 'vitest';
import { clientOf, networkOf } from './clientAddress.ts';

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

describe('networkOf (the network a connection cap counts)', () => {
  it('counts an IPv4 address by its /24, also written IPv4-mapped', () => {
    expect(networkOf('203.0.113.7')).toBe('203.0.113.0/24');
    expect(networkOf('::ffff:203.0.113.200')).toBe('203.0.113.0/24');
    expect(networkOf('203.0.114.7')).toBe('203.0.114.0/24');
  });

  it('counts an IPv6 address by its /48: every /64 of a site is one network', () => {
    const one = ['2001:db8:1:2::a', '2001:db8:1:ffff::1', '2001:0db8:0001::', '2001:db8:1:2:3:4:1.2.3.4'];
    expect(new Set(one.map(networkOf))).toEqual(new Set(['2001:db8:1::/48']));
    expect(networkOf('2001:db8:2::1')).toBe('2001:db8:2::/48');
    expect(networkOf('::1')).toBe('0:0:0::/48');
  });
});
