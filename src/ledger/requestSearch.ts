import type { SqlDb as Db } from './sqlDb.ts';
import { dialectOf, type Dialect } from './dialect.ts';
import type { RequestRow } from './types.ts';

// The request listing's query, validated by the API and trusted here. Every value reaches SQLite
// as a bound parameter; the SQL text is assembled only from the fixed fragments below, valid in
// SQLite and PostgreSQL alike (booleans TRUE/FALSE, COALESCE, "user" quoted: PostgreSQL reserves it).

/**
 * Fields that can be matched for equality (a list is OR) or null-checked, at top level or in a
 * `filters` group.
 */
export const FILTER_FIELDS = [
  'term',
  'id',
  'orderId',
  'depositTxHash',
  'fillTxHash',
  'refundTxHash',
  'originChainId',
  'destinationChainId',
  'chainId',
  'user',
  'depositAddress',
  'recipient',
  'status',
  'failReason',
  'refundFailReason',
  'apiKey',
  'requestType',
  'currencyInChainId',
  'currencyOutChainId',
  'currencyInAddress',
  'currencyOutAddress',
  'currencyInSymbol',
  'currencyOutSymbol',
] as const;
export type FilterField = (typeof FILTER_FIELDS)[number];

export interface FieldFilter {
  field: FilterField;
  negate: boolean;
  /** null: a null-check (empty; not empty when negated) */
  values: (string | number)[] | null;
}

export type SortBy = 'createdAt' | 'updatedAt' | 'amountUsd';

export interface RequestQuery {
  where: FieldFilter[];
  /** OR of groups, each an AND of its filters. */
  groups: FieldFilter[][];
  /** Inclusive bounds: milliseconds, block numbers, micro-USD. */
  ranges: Partial<Record<'createdAt' | 'depositBlock' | 'amountUsd' | 'appFeesUsd' | 'fillTimeMs', { min?: number; max?: number }>>;
  features: string[];
  includeChildRequests: boolean;
  excludedChains: number[];
  sortBy: SortBy;
  sortDirection: 'asc' | 'desc';
  limit: number;
  after?: { key: number; id: string };
  includeTotal: boolean;
  /** GET /requests/v2 only: the referrer the quote named, among the requests quoted under the caller's key. */
  referrer?: { referrer: string; apiKeyId: string };
}

const TX_OF_KIND = (kind: string, list: string) =>
  `r.id IN (SELECT p.request_id FROM transactions t JOIN payouts p ON p.id = t.payout_id WHERE p.kind = '${kind}' AND t.hash IN (${list}))`;
const HAS_TX_OF_KIND = (kind: string) => `EXISTS (SELECT 1 FROM payouts p WHERE p.request_id = r.id AND p.kind = '${kind}' AND p.tx_hash IS NOT NULL)`;

// For each field: the condition for a list of n values (the values are bound n times per `?`
// group), how many times the list is bound, and the null-check.
const FIELD_SQL: Record<FilterField, { match: (list: string) => string; binds: number; isNull: string }> = {
  term: {
    match: (l) =>
      `r.id IN (SELECT id FROM requests WHERE id IN (${l}) UNION ALL SELECT id FROM requests WHERE "user" IN (${l})
        UNION ALL SELECT id FROM requests WHERE sender IN (${l}) UNION ALL SELECT id FROM requests WHERE recipient IN (${l})
        UNION ALL SELECT id FROM requests WHERE deposit_address IN (${l})
        UNION ALL SELECT request_id FROM deposits WHERE tx_hash IN (${l})
        UNION ALL SELECT p.request_id FROM transactions t JOIN payouts p ON p.id = t.payout_id WHERE t.hash IN (${l}))`,
    binds: 7,
    isNull: 'FALSE',
  },
  id: { match: (l) => `r.id IN (${l})`, binds: 1, isNull: 'FALSE' },
  orderId: { match: (l) => `(r.kind = 'order' AND r.id IN (${l}))`, binds: 1, isNull: `r.kind != 'order'` },
  depositTxHash: {
    match: (l) => `r.id IN (SELECT request_id FROM deposits WHERE tx_hash IN (${l}))`,
    binds: 1,
    isNull: 'NOT EXISTS (SELECT 1 FROM deposits d WHERE d.request_id = r.id)',
  },
  fillTxHash: { match: (l) => TX_OF_KIND('fill', l), binds: 1, isNull: `NOT ${HAS_TX_OF_KIND('fill')}` },
  refundTxHash: { match: (l) => TX_OF_KIND('refund', l), binds: 1, isNull: `NOT ${HAS_TX_OF_KIND('refund')}` },
  originChainId: { match: (l) => `r.origin_chain_id IN (${l})`, binds: 1, isNull: 'FALSE' },
  destinationChainId: { match: (l) => `r.destination_chain_id IN (${l})`, binds: 1, isNull: 'FALSE' },
  chainId: { match: (l) => `(r.origin_chain_id IN (${l}) OR r.destination_chain_id IN (${l}))`, binds: 2, isNull: 'FALSE' },
  // The composite wallet: the one that quoted, or the one that sent the deposit.
  user: {
    match: (l) => `r.id IN (SELECT id FROM requests WHERE "user" IN (${l}) UNION ALL SELECT id FROM requests WHERE sender IN (${l}))`,
    binds: 2,
    isNull: '(r."user" IS NULL AND r.sender IS NULL)',
  },
  depositAddress: { match: (l) => `r.deposit_address IN (${l})`, binds: 1, isNull: 'r.deposit_address IS NULL' },
  recipient: { match: (l) => `r.recipient IN (${l})`, binds: 1, isNull: 'r.recipient IS NULL' },
  status: { match: (l) => `r.status IN (${l})`, binds: 1, isNull: 'FALSE' },
  failReason: { match: (l) => `r.fail_reason IN (${l})`, binds: 1, isNull: 'r.fail_reason IS NULL' },
  refundFailReason: { match: (l) => `r.refund_fail_reason IN (${l})`, binds: 1, isNull: 'r.refund_fail_reason IS NULL' },
  apiKey: { match: (l) => `r.api_key_id IN (${l})`, binds: 1, isNull: 'r.api_key_id IS NULL' },
  requestType: { match: (l) => `r.request_type IN (${l})`, binds: 1, isNull: 'FALSE' },
  currencyInChainId: { match: (l) => `r.origin_chain_id IN (${l})`, binds: 1, isNull: 'FALSE' },
  currencyOutChainId: { match: (l) => `r.destination_chain_id IN (${l})`, binds: 1, isNull: 'FALSE' },
  currencyInAddress: { match: (l) => `r.origin_currency IN (${l})`, binds: 1, isNull: 'FALSE' },
  currencyOutAddress: { match: (l) => `r.destination_currency IN (${l})`, binds: 1, isNull: 'FALSE' },
  currencyInSymbol: { match: (l) => `r.currency_in_symbol IN (${l})`, binds: 1, isNull: 'r.currency_in_symbol IS NULL' },
  currencyOutSymbol: { match: (l) => `r.currency_out_symbol IN (${l})`, binds: 1, isNull: 'r.currency_out_symbol IS NULL' },
};

// The request's features (a JSON array of strings) include the bound one.
const HAS_FEATURE: Record<Dialect, string> = {
  sqlite: 'EXISTS (SELECT 1 FROM json_each(r.features) WHERE value = ?)',
  postgres: 'EXISTS (SELECT 1 FROM jsonb_array_elements_text(CAST(r.features AS JSONB)) AS f(value) WHERE f.value = ?)',
};

const RANGE_COLUMN: Record<keyof RequestQuery['ranges'], string> = {
  createdAt: 'r.created_at',
  depositBlock: 'r.deposit_block',
  amountUsd: 'r.amount_usd',
  appFeesUsd: 'r.app_fees_usd',
  fillTimeMs: 'r.fill_time_ms',
};

export const SORT_KEY: Record<SortBy, { expr: string; column: (r: RequestRow) => number }> = {
  createdAt: { expr: 'r.created_at', column: (r) => r.created_at },
  updatedAt: { expr: 'r.updated_at', column: (r) => r.updated_at },
  // Unpriced requests sort as -1: the expression matches the index on it (requests_amount_usd).
  amountUsd: { expr: 'COALESCE(r.amount_usd, -1)', column: (r) => r.amount_usd ?? -1 },
};

function fieldCondition(f: FieldFilter, params: unknown[]): string {
  const sql = FIELD_SQL[f.field];
  let cond: string;
  if (f.values === null) {
    cond = sql.isNull;
  } else {
    const list = f.values.map(() => '?').join(', ');
    for (let i = 0; i < sql.binds; i++) params.push(...f.values);
    cond = sql.match(list);
  }
  // COALESCE: a negated comparison against a null column counts as "not equal", not unknown.
  return f.negate ? `NOT COALESCE((${cond}), FALSE)` : `(${cond})`;
}

function whereClause(q: RequestQuery, params: unknown[], dialect: Dialect): string {
  const parts: string[] = [];
  if (!q.includeChildRequests) parts.push('r.parent_id IS NULL');
  if (q.excludedChains.length) {
    const list = q.excludedChains.map(() => '?').join(', ');
    parts.push(`r.origin_chain_id NOT IN (${list}) AND r.destination_chain_id NOT IN (${list})`);
    params.push(...q.excludedChains, ...q.excludedChains);
  }
  for (const f of q.where) parts.push(fieldCondition(f, params));
  if (q.groups.length) {
    parts.push(`(${q.groups.map((g) => (g.length ? `(${g.map((f) => fieldCondition(f, params)).join(' AND ')})` : 'TRUE')).join(' OR ')})`);
  }
  for (const [name, range] of Object.entries(q.ranges) as [keyof RequestQuery['ranges'], { min?: number; max?: number }][]) {
    if (range.min !== undefined) {
      parts.push(`${RANGE_COLUMN[name]} >= ?`);
      params.push(range.min);
    }
    if (range.max !== undefined) {
      parts.push(`${RANGE_COLUMN[name]} <= ?`);
      params.push(range.max);
    }
  }
  if (q.referrer !== undefined) {
    parts.push('r.referrer = ?', 'r.api_key_id = ?');
    params.push(q.referrer.referrer, q.referrer.apiKeyId);
  }
  for (const feature of q.features) {
    parts.push(HAS_FEATURE[dialect]);
    params.push(feature);
  }
  return parts.length ? `WHERE ${parts.join(' AND ')}` : '';
}

/** A request the listing found, with the quote it was given (request_quotes; null for a request no quote made). */
export type FoundRequest = RequestRow & { quote: string | null };

export interface SearchResult {
  rows: FoundRequest[];
  /** The sort key and id of the last row, when there may be more. */
  next?: { key: number; id: string };
  total?: number;
}

export function searchRequests(db: Db, q: RequestQuery): SearchResult {
  const params: unknown[] = [];
  const where = whereClause(q, params, dialectOf(db));
  const key = SORT_KEY[q.sortBy].expr;
  const dir = q.sortDirection === 'asc' ? 'ASC' : 'DESC';
  const pageParams = [...params];
  let page = where;
  if (q.after) {
    // Keyset pagination: (key, id) strictly past the last row seen, so rows inserted meanwhile
    // neither shift the page nor repeat.
    page = `${where ? `${where} AND` : 'WHERE'} (${key}, r.id) ${dir === 'ASC' ? '>' : '<'} (?, ?)`;
    pageParams.push(q.after.key, q.after.id);
  }
  const rows = db
    .prepare(
      `SELECT r.*, (SELECT rq.quote FROM request_quotes rq WHERE rq.request_id = r.id) AS quote FROM requests r ${page} ORDER BY ${key} ${dir}, r.id ${dir} LIMIT ?`,
    )
    .all(...pageParams, q.limit + 1) as FoundRequest[];
  const more = rows.length > q.limit;
  if (more) rows.length = q.limit;
  const last = rows[rows.length - 1];
  const result: SearchResult = { rows };
  if (more && last) result.next = { key: SORT_KEY[q.sortBy].column(last), id: last.id };
  if (q.includeTotal) result.total = (db.prepare(`SELECT COUNT(*) AS n FROM requests r ${where}`).get(...params) as { n: number }).n;
  return result;
}
