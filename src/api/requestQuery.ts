import { getAddress, isAddress } from 'viem';
import { STATUSES } from '../ledger/types.ts';
import { FILTER_FIELDS, type FieldFilter, type FilterField, type RequestQuery, type SortBy } from '../ledger/requestSearch.ts';
import { parseDecimal } from '../lib/money.ts';
import { FAIL_REASONS, REFUND_FAIL_REASONS, REQUEST_TYPES } from './enums.ts';
import { ApiError } from './errors.ts';

// GET /requests/v3 query string → RequestQuery. Every value is checked and normalised here
// (addresses to the ledger's spelling, hashes to lower case, symbols to upper case), once.

const MAX_LIMIT = 50;
const DEFAULT_LIMIT = 20;

/** The cost bound of a listing query (config api.listing): beyond it, a 400 naming the bound. */
export interface ListingBounds {
  maxGroups: number;
  maxValuesPerField: number;
  maxFilterValues: number;
  maxFiltersLength: number;
}

/** Who asks, and what the listing may cost. */
export interface RequestQueryContext {
  /** The caller's API key id: the only value an apiKey filter may take. */
  callerKeyId: string | undefined;
  privateChains: number[];
  bounds: ListingBounds;
}

const bad = (param: string, what: string) => new ApiError(400, 'INVALID_INPUT_PARAMETERS', `invalid request: ${param}: ${what}`);

// The ledger's spelling: EVM addresses checksummed, other hex lower case, base58 as given.
function address(v: string): string {
  if (isAddress(v, { strict: false })) return getAddress(v);
  if (/^0x[0-9a-fA-F]+$/.test(v)) return v.toLowerCase();
  return v;
}
const hash = (v: string) => (/^0x[0-9a-fA-F]+$/.test(v) ? v.toLowerCase() : v);

function oneOf(values: readonly string[]) {
  const set = new Set(values);
  return (v: string, param: string) => {
    if (!set.has(v)) throw bad(param, `must be one of ${values.join(', ')}`);
    return v;
  };
}

function chainId(v: string | number, param: string): number {
  const n = typeof v === 'number' ? v : /^[0-9]{1,15}$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) throw bad(param, 'must be a positive integer chain id');
  return n;
}

function text(max: number) {
  return (v: string, param: string) => {
    if (v.length === 0 || v.length > max) throw bad(param, `must be 1 to ${max} characters`);
    return v;
  };
}

// How each field's values are checked and normalised.
const NORMALISE: Record<FilterField, (v: string | number, param: string) => string | number> = {
  term: (v, p) => {
    const s = text(200)(String(v), p);
    return /^0x[0-9a-fA-F]{40}$/.test(s) ? getAddress(s) : hash(s);
  },
  id: (v, p) => hash(text(100)(String(v), p)),
  orderId: (v, p) => hash(text(100)(String(v), p)),
  depositTxHash: (v, p) => hash(text(100)(String(v), p)),
  fillTxHash: (v, p) => hash(text(100)(String(v), p)),
  refundTxHash: (v, p) => hash(text(100)(String(v), p)),
  originChainId: chainId,
  destinationChainId: chainId,
  chainId,
  currencyInChainId: chainId,
  currencyOutChainId: chainId,
  user: (v, p) => address(text(100)(String(v), p)),
  depositAddress: (v, p) => address(text(100)(String(v), p)),
  recipient: (v, p) => address(text(100)(String(v), p)),
  currencyInAddress: (v, p) => address(text(100)(String(v), p)),
  currencyOutAddress: (v, p) => address(text(100)(String(v), p)),
  status: (v, p) => oneOf(STATUSES)(String(v), p),
  failReason: (v, p) => oneOf(FAIL_REASONS)(String(v), p),
  refundFailReason: (v, p) => oneOf(REFUND_FAIL_REASONS)(String(v), p),
  requestType: (v, p) => oneOf(REQUEST_TYPES)(String(v), p),
  apiKey: (v, p) => text(100)(String(v), p),
  currencyInSymbol: (v, p) => text(30)(String(v), p).toUpperCase(),
  currencyOutSymbol: (v, p) => text(30)(String(v), p).toUpperCase(),
};

const RANGES = {
  startTimestamp: ['createdAt', 'min'],
  endTimestamp: ['createdAt', 'max'],
  startBlock: ['depositBlock', 'min'],
  endBlock: ['depositBlock', 'max'],
  amountUsdMin: ['amountUsd', 'min'],
  amountUsdMax: ['amountUsd', 'max'],
  appFeesAmountUsdMin: ['appFeesUsd', 'min'],
  appFeesAmountUsdMax: ['appFeesUsd', 'max'],
  fillTimeMin: ['fillTimeMs', 'min'],
  fillTimeMax: ['fillTimeMs', 'max'],
} as const;

const OTHER = new Set([
  'features',
  'includeChildRequests',
  'filters',
  'sortBy',
  'sortDirection',
  'includeAuthenticatedData',
  'includeTotal',
  'limit',
  'continuation',
  'privateChainsToInclude',
]);

function single(query: Record<string, unknown>, param: string): string | undefined {
  const v = query[param];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) throw bad(param, 'must be given once');
  return String(v);
}

function bool(query: Record<string, unknown>, param: string): boolean {
  const v = single(query, param);
  if (v === undefined || v === 'false') return false;
  if (v === 'true') return true;
  throw bad(param, 'must be true or false');
}

function rangeValue(param: keyof typeof RANGES, v: string): number {
  switch (RANGES[param][0]) {
    case 'createdAt':
    case 'fillTimeMs':
      // Seconds, as the interface's timestamps.
      if (!/^[0-9]{1,12}$/.test(v)) throw bad(param, 'must be a whole number of seconds');
      return Number(v) * 1000;
    case 'depositBlock':
      if (!/^[0-9]{1,15}$/.test(v)) throw bad(param, 'must be a block number');
      return Number(v);
    default: {
      if (!/^[0-9]{1,12}(\.[0-9]{1,6})?$/.test(v)) throw bad(param, 'must be a USD amount (a decimal with at most 6 places)');
      const r = parseDecimal(v);
      return Number((r.num * 1_000_000n) / r.den);
    }
  }
}

// A list from a query parameter: repeated, or comma-separated.
function list(v: unknown): string[] {
  return (Array.isArray(v) ? v.map(String) : [String(v)]).flatMap((s) => s.split(',')).filter((s) => s.length > 0);
}

function filterGroup(group: unknown, index: number, ctx: RequestQueryContext): FieldFilter[] {
  const where = `filters[${index}]`;
  if (!group || typeof group !== 'object' || Array.isArray(group)) throw bad('filters', `${where} must be an object of field: value`);
  const out: FieldFilter[] = [];
  for (const [rawKey, raw] of Object.entries(group)) {
    const negate = rawKey.startsWith('not:');
    const key = negate ? rawKey.slice(4) : rawKey;
    const param = `filters[${index}].${rawKey}`;
    if (key in RANGES || key === 'features') throw bad('filters', `${key} is a top-level parameter only, not a filters field`);
    if (!(FILTER_FIELDS as readonly string[]).includes(key)) throw bad('filters', `unknown field ${rawKey} in ${where}`);
    const field = key as FilterField;
    const values = Array.isArray(raw) ? raw : [raw];
    const max = ctx.bounds.maxValuesPerField;
    if (values.length === 0 || values.length > max) throw bad(param, `must have 1 to ${max} values (the listing's bound on values per field)`);
    const nulls = values.filter((x) => x === null).length;
    if (nulls && nulls < values.length) throw bad(param, 'null cannot be mixed with values in one array');
    if (nulls) {
      out.push({ field, negate, values: null });
      continue;
    }
    for (const x of values) if (typeof x !== 'string' && typeof x !== 'number') throw bad(param, 'values must be strings, numbers or null');
    out.push({ field, negate, values: values.map((x) => ownKeyOnly(field, NORMALISE[field](x as string | number, param), param, ctx)) });
  }
  return out;
}

// An apiKey filter names the caller's own key, by its id: another key's flow is not the caller's
// to read, and a raw key as a filter value would be a key-validity oracle.
function ownKeyOnly(field: FilterField, v: string | number, param: string, ctx: RequestQueryContext): string | number {
  if (field !== 'apiKey') return v;
  if (typeof v === 'string' && v.startsWith('rn_')) throw bad(param, 'takes an API key id (key_…), never the key itself');
  if (ctx.callerKeyId === undefined) throw bad(param, "needs an API key: it filters by the caller's own key only");
  if (v !== ctx.callerKeyId) throw bad(param, "may only name the caller's own API key id");
  return v;
}

interface Cursor {
  s: SortBy;
  d: 'asc' | 'desc';
  k: number;
  i: string;
}

export function encodeContinuation(c: Cursor): string {
  return Buffer.from(JSON.stringify(c)).toString('base64url');
}

function decodeContinuation(v: string, sortBy: SortBy, dir: 'asc' | 'desc'): { key: number; id: string } {
  let c: Cursor;
  try {
    c = JSON.parse(Buffer.from(v, 'base64url').toString('utf8'));
  } catch {
    throw bad('continuation', 'is not a continuation this API returned');
  }
  // Every sort key (createdAt, updatedAt, amountUsd) is an integer column: a forged fraction or a
  // number past 2^53 would reach PostgreSQL's BIGINT compare and fail there (a 500).
  if (!c || typeof c !== 'object' || !Number.isSafeInteger(c.k) || typeof c.i !== 'string' || c.i.length > 100)
    throw bad('continuation', 'is not a continuation this API returned');
  if (c.s !== sortBy || c.d !== dir) throw bad('continuation', 'belongs to a different sortBy or sortDirection');
  return { key: c.k, id: c.i };
}

export interface ParsedRequestQuery extends RequestQuery {
  includeAuthenticatedData: boolean;
}

/** Validates and normalises a listing's query string, within the context's cost bound (400 naming what is wrong). */
export function parseRequestQuery(query: Record<string, unknown>, ctx: RequestQueryContext): ParsedRequestQuery {
  const { bounds, privateChains } = ctx;
  for (const k of Object.keys(query)) {
    if (!(FILTER_FIELDS as readonly string[]).includes(k) && !(k in RANGES) && !OTHER.has(k)) throw bad(k, 'is not a parameter of this endpoint');
  }
  const where: FieldFilter[] = [];
  for (const field of FILTER_FIELDS) {
    const v = single(query, field);
    if (v !== undefined) where.push({ field, negate: false, values: [ownKeyOnly(field, NORMALISE[field](v, field), field, ctx)] });
  }
  const ranges: RequestQuery['ranges'] = {};
  for (const param of Object.keys(RANGES) as (keyof typeof RANGES)[]) {
    const v = single(query, param);
    if (v === undefined) continue;
    const [name, bound] = RANGES[param];
    (ranges[name] ??= {})[bound] = rangeValue(param, v);
  }

  let groups: FieldFilter[][] = [];
  const filters = single(query, 'filters');
  if (filters !== undefined) {
    if (filters.length > bounds.maxFiltersLength) throw bad('filters', `must be at most ${bounds.maxFiltersLength} characters (the listing's cost bound)`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(filters);
    } catch {
      throw bad('filters', 'must be a JSON array of filter groups');
    }
    if (!Array.isArray(parsed)) throw bad('filters', 'must be a JSON array of filter groups');
    if (parsed.length > bounds.maxGroups) throw bad('filters', `at most ${bounds.maxGroups} groups (the listing's cost bound)`);
    groups = parsed.map((g, i) => filterGroup(g, i, ctx));
  }
  const values = [...where, ...groups.flat()].reduce((n, f) => n + (f.values?.length ?? 1), 0);
  if (values > bounds.maxFilterValues)
    throw bad('filters', `at most ${bounds.maxFilterValues} filter values in all (the listing's cost bound); this query has ${values}`);

  // Each distinct feature is one more condition (an EXISTS over the request's features): they count
  // toward the same bound, or a long list would make a query too large to run, or run for seconds.
  const features = query.features === undefined ? [] : [...new Set(list(query.features))];
  for (const f of features) if (!/^[a-z0-9_]{1,40}$/.test(f)) throw bad('features', `${f} is not a feature name`);
  if (values + features.length > bounds.maxFilterValues)
    throw bad(
      'features',
      `at most ${bounds.maxFilterValues} filter values in all, each distinct feature counted (the listing's cost bound); this query has ${values + features.length}`,
    );

  const sortBy = (single(query, 'sortBy') ?? 'createdAt') as SortBy;
  if (!['createdAt', 'updatedAt', 'amountUsd'].includes(sortBy)) throw bad('sortBy', 'must be createdAt, updatedAt or amountUsd');
  const sortDirection = (single(query, 'sortDirection') ?? (sortBy === 'amountUsd' ? 'asc' : 'desc')) as 'asc' | 'desc';
  if (sortDirection !== 'asc' && sortDirection !== 'desc') throw bad('sortDirection', 'must be asc or desc');

  const limitRaw = single(query, 'limit');
  const limit = limitRaw === undefined ? DEFAULT_LIMIT : Number(limitRaw);
  if (!/^[0-9]{1,6}$/.test(limitRaw ?? '1') || limit < 1 || limit > MAX_LIMIT) throw bad('limit', `must be an integer from 1 to ${MAX_LIMIT}`);

  const include = query.privateChainsToInclude === undefined ? [] : list(query.privateChainsToInclude).map((v) => chainId(v, 'privateChainsToInclude'));
  const continuation = single(query, 'continuation');

  return {
    where,
    groups,
    ranges,
    features,
    includeChildRequests: bool(query, 'includeChildRequests'),
    excludedChains: privateChains.filter((c) => !include.includes(c)),
    sortBy,
    sortDirection,
    limit,
    after: continuation === undefined ? undefined : decodeContinuation(continuation, sortBy, sortDirection),
    includeTotal: bool(query, 'includeTotal'),
    includeAuthenticatedData: bool(query, 'includeAuthenticatedData'),
  };
}
