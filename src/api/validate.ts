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

/** Amounts are strings of base-10 digits in the smallest unit; at most uint256. */
export const amountParam = z
  .string({ required_error: 'is required', invalid_type_error: 'must be a string of digits' })
  .regex(/^[0-9]+$/, 'must be a positive integer in the smallest unit, as a string of digits')
  .transform((s) => BigInt(s))
  .refine((n) => n > 0n, 'must be greater than zero')
  .refine((n) => n < 2n ** 256n, 'must fit in uint256');
