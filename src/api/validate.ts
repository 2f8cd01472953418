import { isHash, type Hex } from 'viem';
import { z } from 'zod';

export const hashParam = z
  .string({ required_error: 'is required', invalid_type_error: 'must be a string' })
  .refine((s) => isHash(s), 'must be a 0x-prefixed 32-byte hex string')
  .transform((s) => s.toLowerCase() as Hex);

export const chainIdParam = z.coerce
  .number({ invalid_type_error: 'must be a chain id number' })
  .int('must be an integer')
  .positive('must be positive')
  .max(Number.MAX_SAFE_INTEGER);

/** The most digits of a uint256 (2^256 - 1 has 78). */
export const UINT256_DIGITS = 78;

/** Amounts are strings of base-10 digits in the smallest unit; at most uint256. */
export const amountParam = z
  .string({ required_error: 'is required', invalid_type_error: 'must be a string of digits' })
  .regex(/^[0-9]+$/, 'must be a positive integer in the smallest unit, as a string of digits')
  // A uint256 has at most 78 digits: a longer string (leading zeros aside) is refused before BigInt reads it. A body
  // limit's worth of digits (60,000) cost 3.5 ms of the node's event loop to parse, on every quote and price.
  .refine((s) => s.length <= UINT256_DIGITS || !/^[0-9]+$/.test(s) || s.replace(/^0+/, '').length <= UINT256_DIGITS, 'must fit in uint256')
  .transform((s) => BigInt(s))
  .refine((n) => n > 0n, 'must be greater than zero')
  .refine((n) => n < 2n ** 256n, 'must fit in uint256');

/**
 * An array of at most `max` items, its length checked before any item is parsed. zod's own `.max()` adds its issue
 * and still parses every item, one issue per bad item: a 64 KB body of `[{},{},…]` was 21,000 items parsed and an
 * error message of up to 1.8 MB, half a second of the node's event loop per request. Past `max`, the one issue
 * names the bound and no item is read.
 */
export function boundedArray<T extends z.ZodTypeAny>(item: T, max: number, message = `must have at most ${max} items`) {
  return z
    .unknown()
    .superRefine((v, ctx) => {
      if (Array.isArray(v) && v.length > max)
        ctx.addIssue({ code: z.ZodIssueCode.too_big, type: 'array', maximum: max, inclusive: true, message, fatal: true });
    })
    .pipe(z.array(item).max(max, message));
}
