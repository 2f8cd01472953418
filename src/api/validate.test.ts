// The API's shared parameter checks: what they accept, what they make of it, and the message naming
// what is wrong (answered as a 400).
import { describe, expect, it } from 'vitest';
import { z, ZodError } from 'zod';
import { statusRequestId } from './routes/status.ts';
import { amountParam, chainIdParam, hashParam } from './validate.ts';

const message = (r: { success: boolean; error?: { issues: { message: string }[] } }) => (r.success ? undefined : r.error!.issues[0]!.message);

describe('hashParam', () => {
  it('accepts a 32-byte hex hash in any case and lower-cases it', () => {
    expect(hashParam.parse(`0x${'AB'.repeat(32)}`)).toBe(`0x${'ab'.repeat(32)}`);
  });
  it('refuses what is not a 32-byte hash, naming the form', () => {
    for (const bad of [`0x${'ab'.repeat(31)}`, 'ab'.repeat(32), `0x${'zz'.repeat(32)}`]) {
      expect(message(hashParam.safeParse(bad))).toBe('must be a 0x-prefixed 32-byte hex string');
    }
    expect(message(hashParam.safeParse(undefined))).toBe('is required');
    expect(message(hashParam.safeParse(5))).toBe('must be a string');
  });
});

describe('chainIdParam', () => {
  it('reads a chain id from a path or query string', () => {
    expect(chainIdParam.parse('8453')).toBe(8453);
    expect(chainIdParam.parse(10)).toBe(10);
  });
  it('refuses zero, negatives, fractions, words and ids beyond a safe integer', () => {
    expect(message(chainIdParam.safeParse('0'))).toBe('must be positive');
    expect(message(chainIdParam.safeParse('-1'))).toBe('must be positive');
    expect(message(chainIdParam.safeParse('1.5'))).toBe('must be an integer');
    expect(message(chainIdParam.safeParse('base'))).toBe('must be a chain id number');
    expect(chainIdParam.safeParse(String(Number.MAX_SAFE_INTEGER + 2)).success).toBe(false);
  });
});

describe('amountParam', () => {
  it('reads digits into a bigint of the smallest unit, up to uint256', () => {
    expect(amountParam.parse('1')).toBe(1n);
    expect(amountParam.parse((2n ** 256n - 1n).toString())).toBe(2n ** 256n - 1n);
  });
  it('refuses zero, signs, decimals, exponents and what does not fit in uint256', () => {
    expect(message(amountParam.safeParse('0'))).toBe('must be greater than zero');
    for (const bad of ['-1', '1.5', '1e6', ' 1', '0x10', '']) {
      expect(message(amountParam.safeParse(bad))).toBe('must be a positive integer in the smallest unit, as a string of digits');
    }
    expect(message(amountParam.safeParse((2n ** 256n).toString()))).toBe('must fit in uint256');
    expect(message(amountParam.safeParse(1000))).toBe('must be a string of digits');
  });
});

describe('statusRequestId (the status routes: a regular expression first, the schema for everything else)', () => {
  it('answers what the schema answers: the lower-cased id, or a 400 naming what is wrong', () => {
    const schema = z.object({ requestId: hashParam });
    const cases: unknown[] = [
      { requestId: `0x${'AB'.repeat(32)}` },
      { requestId: `0x${'ab'.repeat(32)}`, other: 'ignored' },
      { requestId: `0x${'ab'.repeat(31)}` },
      { requestId: `0x${'ab'.repeat(33)}` },
      { requestId: `0x${'zz'.repeat(32)}` },
      { requestId: ` 0x${'ab'.repeat(32)}` },
      { requestId: `0x${'ab'.repeat(32)}\n` },
      { requestId: [`0x${'ab'.repeat(32)}`, `0x${'cd'.repeat(32)}`] },
      { requestId: 5 },
      {},
      undefined,
    ];
    for (const q of cases) {
      const expected = schema.safeParse(q ?? {});
      if (expected.success) expect(statusRequestId(q)).toBe(expected.data.requestId);
      else expect(() => statusRequestId(q)).toThrow(ZodError);
    }
    expect(statusRequestId({ requestId: `0x${'AB'.repeat(32)}` })).toBe(`0x${'ab'.repeat(32)}`);
  });
});
