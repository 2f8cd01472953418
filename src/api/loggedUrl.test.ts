import { describe, expect, it } from 'vitest';
import { loggedUrl } from './loggedUrl.ts';

describe('loggedUrl', () => {
  it('censors credential-named parameters however spelled, and anything shaped like an API key', () => {
    const key = 'rn_Zs9fy2qd2ghZ31l1dTbFjkNyT-2-BDKb';
    expect(loggedUrl(`/metrics/usage?apiKey=${key}&granularity=daily`)).toBe('/metrics/usage?apiKey=[secret]&granularity=daily');
    expect(loggedUrl(`/metrics/usage?api%4Bey=${key}`)).toBe('/metrics/usage?api%4Bey=[secret]');
    expect(loggedUrl(`/requests/v3?filters=${encodeURIComponent(JSON.stringify([{ term: key }]))}`)).not.toContain(key);
    expect(loggedUrl(`/x/${key}`)).toBe('/x/[secret]');
    expect(loggedUrl('/requests/v3?apiKey=key_0123&limit=5&%E0%A4%A=1')).toBe('/requests/v3?apiKey=[secret]&limit=5&%E0%A4%A=1');
    expect(loggedUrl('/chains?includeChains=1,2')).toBe('/chains?includeChains=1,2');
  });
});
