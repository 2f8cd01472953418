import type { SqlDb as Db } from './sqlDb.ts';

/** One count to add: calls of an API key in one minute, on one route, with one status and error code ('' for none). */
export interface UsageCount {
  apiKeyId: string;
  minute: number;
  endpoint: string;
  statusCode: number;
  errorCode: string;
  count: number;
}

/** The API calls of each key, counted per minute, route, status and error code (the api_usage table). */
export class ApiUsage {
  #upsert;
  #buckets;
  #add;
  constructor(private db: Db) {
    this.#upsert = db.prepare(`INSERT INTO api_usage (api_key_id, minute, endpoint, status_code, error_code, count) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (api_key_id, minute, endpoint, status_code, error_code) DO UPDATE SET count = api_usage.count + excluded.count`);
    // The size as an integer: SQLite binds a JS number as a REAL, and minute / 3600000.0 is no bucket (every minute
    // stayed its own row, whatever the granularity).
    this.#buckets = db.prepare(`SELECT (minute / CAST(@size AS BIGINT)) * CAST(@size AS BIGINT) AS bucket, endpoint, status_code, error_code,
        SUM(count) AS n FROM api_usage
        WHERE api_key_id = @key AND minute >= @from AND minute < @to
        GROUP BY bucket, endpoint, status_code, error_code ORDER BY bucket, endpoint, status_code`);
    this.#add = db.transaction((counts: UsageCount[]) => {
      for (const c of counts) this.#upsert.run(c.apiKeyId, c.minute, c.endpoint, c.statusCode, c.errorCode, c.count);
    });
  }

  /** Whether this connection may write: a read-only replica counts nothing of its own (the writing node's table is what it reads). */
  get writable(): boolean {
    return !this.db.readonly;
  }
  /** Adds the counts to the table, in one transaction. */
  add(counts: UsageCount[]): void {
    this.#add(counts);
  }
  /** A key's counts in minutes [from, to) (ms), summed per bucket of `size` ms, route, status and error code. */
  buckets(
    apiKeyId: string,
    size: number,
    from: number,
    to: number,
  ): { bucket: number; endpoint: string; status_code: number; error_code: string; n: number }[] {
    return this.#buckets.all({ size, key: apiKeyId, from, to }) as { bucket: number; endpoint: string; status_code: number; error_code: string; n: number }[];
  }
}
