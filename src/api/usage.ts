import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ApiUsage } from '../ledger/apiUsage.ts';
import type { Store } from '../ledger/index.ts';
import { ApiError } from './errors.ts';

interface UsageRow {
  apiKey: string;
  timestamp: string;
  endpoint: string;
  statusCode: number;
  errorCode?: string;
  count: number;
}

const MINUTE = 60_000;
const BUCKET = { minutely: MINUTE, hourly: 60 * MINUTE, daily: 24 * 60 * MINUTE } as const;
export type Granularity = keyof typeof BUCKET;

/**
 * The longest span one read covers, per granularity: a read is a synchronous scan of the key's
 * rows on the node's event loop, so its size is bounded (a minutely read of all time would stall
 * every other request). Longer spans take a coarser granularity.
 */
export const MAX_USAGE_SPAN_DAYS: Record<Granularity, number> = { minutely: 1, hourly: 31, daily: 366 };
/** The most rows one usage read answers (each a bucket, route, status and error code): past it, a 400 asks for less. */
export const MAX_USAGE_ROWS = 10_000;
export const tooManyUsageRows = () =>
  new ApiError(
    400,
    'INVALID_INPUT_PARAMETERS',
    `invalid request: startTimestamp: the span holds more than ${MAX_USAGE_ROWS} counts at this granularity; ask for a shorter span or a coarser granularity`,
  );
/** A usage read as a listing worker runs it (listing/run.ts). */
export interface UsageJob {
  kind: 'usage';
  apiKeyId: string;
  size: number;
  from: number;
  to: number;
  maxRows: number;
}
/** The last second of 9999-12-31: timestamps past it are no time a usage row has, and overflow in ms arithmetic stays far away. */
export const MAX_UNIX_SECONDS = 253_402_300_799;

/**
 * The window (ms, [from, to)) of a usage read from the query's Unix-second bounds: by default the
 * last day up to the current minute. 400 naming the bound when the span exceeds the granularity's
 * MAX_USAGE_SPAN_DAYS, or when it starts after it ends.
 */
export function usageWindow(granularity: Granularity, startS: number | undefined, endS: number | undefined, now: number): { from: number; to: number } {
  const end = endS !== undefined ? endS * 1000 : now;
  const from = startS !== undefined ? startS * 1000 : end - 24 * 3600_000;
  if (from > end) throw new ApiError(400, 'INVALID_INPUT_PARAMETERS', 'invalid request: startTimestamp: must not be after endTimestamp');
  const days = MAX_USAGE_SPAN_DAYS[granularity];
  if (end - from > days * 86_400_000) {
    throw new ApiError(
      400,
      'INVALID_INPUT_PARAMETERS',
      `invalid request: granularity: ${granularity}: at most ${days} ${days === 1 ? 'day' : 'days'} from startTimestamp to endTimestamp (the usage read's bound); ask for a shorter span or a coarser granularity`,
    );
  }
  // Without an end, the read includes the current minute's counts.
  return { from, to: endS !== undefined ? end : end + MINUTE };
}

/**
 * Counts the API calls of each key per minute, route, status and error code, in memory, and adds
 * the counts to the ledger's api_usage table on flush (every few seconds, and before each read),
 * so that counting costs a call no database write.
 */
export class UsageRecorder {
  #pending = new Map<string, number>();
  #timer: NodeJS.Timeout;
  constructor(
    private usage: Store<ApiUsage>,
    flushMs = 5_000,
  ) {
    this.#timer = setInterval(() => {
      try {
        this.flush();
      } catch {
        // The ledger did not answer (PostgreSQL unreachable): the counts stay pending for the next flush.
      }
    }, flushMs);
    this.#timer.unref();
  }

  /** Counts one call (`endpoint` is the route's pattern, e.g. `GET /requests/v3`). */
  record(apiKeyId: string, at: number, endpoint: string, statusCode: number, errorCode: string | undefined): void {
    const k = JSON.stringify([apiKeyId, Math.floor(at / MINUTE) * MINUTE, endpoint, statusCode, errorCode ?? '']);
    this.#pending.set(k, (this.#pending.get(k) ?? 0) + 1);
  }

  flush(): void {
    // A read-only replica counts nothing of its own: the writing node's table is what it reads.
    if (!this.#pending.size || !this.usage.writable) return;
    const rows = [...this.#pending];
    this.#pending.clear();
    try {
      this.usage.add(
        rows.map(([k, count]) => {
          const [apiKeyId, minute, endpoint, statusCode, errorCode] = JSON.parse(k) as [string, number, string, number, string];
          return { apiKeyId, minute, endpoint, statusCode, errorCode, count };
        }),
      );
    } catch (e) {
      // Not written: the counts go back, added to what was counted meanwhile.
      for (const [k, count] of rows) this.#pending.set(k, (this.#pending.get(k) ?? 0) + count);
      throw e;
    }
  }

  /**
   * The key's counts between two times (ms), summed per bucket of the granularity. The read scans every minute row of
   * the span: `buckets` runs it (the API gives a listing worker's, off the node's event loop; by default this
   * connection's), and refuses more than MAX_USAGE_ROWS rows (400), which would be built into one answer on the loop.
   */
  async read(
    apiKeyId: string,
    granularity: Granularity,
    from: number,
    to: number,
    buckets: (job: UsageJob) => Promise<unknown[]> = async (job) => this.usage.buckets(job.apiKeyId, job.size, job.from, job.to),
  ): Promise<UsageRow[]> {
    this.flush();
    const size = BUCKET[granularity];
    const job = { kind: 'usage' as const, apiKeyId, size, from: Math.floor(from / size) * size, to, maxRows: MAX_USAGE_ROWS };
    const rows = (await buckets(job)) as ReturnType<ApiUsage['buckets']>;
    if (rows.length > MAX_USAGE_ROWS) throw tooManyUsageRows();
    return rows.map((r) => ({
      apiKey: apiKeyId,
      timestamp: new Date(r.bucket).toISOString(),
      endpoint: r.endpoint,
      statusCode: r.status_code,
      ...(r.error_code ? { errorCode: r.error_code } : {}),
      count: r.n,
    }));
  }

  stop(): void {
    clearInterval(this.#timer);
    try {
      this.flush();
    } catch {
      // Stopping with the ledger unreachable: the last few seconds of counts are lost, the stop goes on.
    }
  }
}

/** Counts every call made with an API key (after its answer), under the route's pattern. */
export function usageHooks(app: FastifyInstance, usage: UsageRecorder): void {
  const errorCodes = new WeakMap<FastifyRequest, string>();
  app.addHook('onSend', async (req, reply, payload) => {
    if (req.apiCaller && reply.statusCode >= 400 && typeof payload === 'string') {
      const m = /"errorCode":"([A-Za-z0-9_]{1,64})"/.exec(payload);
      if (m) errorCodes.set(req, m[1]!);
    }
    return payload;
  });
  app.addHook('onResponse', async (req, reply) => {
    if (!req.apiCaller) return;
    usage.record(req.apiCaller.id, Date.now(), `${req.method} ${req.routeOptions.url ?? 'unmatched'}`, reply.statusCode, errorCodes.get(req));
  });
  app.addHook('onClose', async () => usage.stop());
}
