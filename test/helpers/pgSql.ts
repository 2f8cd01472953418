import { withPostgres } from '../../src/ledger/pgUrl.ts';
import { translate } from '../../src/ledger/postgres/pgDb.ts';

// Tests that hand the stores' SQLite-style text to `pg` directly translate it with the engine's own translator.

/** `?` and `@name` → `$1…$n`; returns the text and the parameter names in order (`?` for positional ones). */
export function toPgPlaceholders(sql: string): { text: string; params: string[] } {
  const t = translate(sql);
  return { text: t.text, params: t.sources.map((s) => ('name' in s ? s.name : '?')) };
}

/** Positional arguments (or one object of named ones) in the order toPgPlaceholders numbered them. */
export function pgArgs(params: string[], args: unknown[]): unknown[] {
  if (params.some((p) => p !== '?')) {
    const o = args[0] as Record<string, unknown>;
    return params.map((p) => o[p]);
  }
  return args;
}

/** One statement on its own connection (opened and closed around it): the rows. */
export async function pgQuery<T = Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  return withPostgres(url, async (client) => (await client.query(sql, params)).rows as T[]);
}
