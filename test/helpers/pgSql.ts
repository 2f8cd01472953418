// A test's own translation of the stores' placeholders to PostgreSQL's: `?` in order and `@name`
// (one number per name), outside quoted strings and identifiers. The node's translator is the
// engine's (src/ledger/postgres); this one only lets tests hand SQLite-style text to `pg`.

/** `?` and `@name` → `$1…$n`; returns the text and the parameter names in order (`?` for positional ones). */
export function toPgPlaceholders(sql: string): { text: string; params: string[] } {
  const params: string[] = [];
  const named = new Map<string, number>();
  let out = '';
  let quote: string | undefined;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    if (quote) {
      out += c;
      if (c === quote) quote = undefined;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      out += c;
    } else if (c === '?') {
      params.push('?');
      out += `$${params.length}`;
    } else if (c === '@' && /[A-Za-z_]/.test(sql[i + 1] ?? '')) {
      const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1))![0];
      let n = named.get(name);
      if (n === undefined) {
        params.push(name);
        n = params.length;
        named.set(name, n);
      }
      out += `$${n}`;
      i += name.length;
    } else {
      out += c;
    }
  }
  return { text: out, params };
}

/** Positional arguments (or one object of named ones) in the order toPgPlaceholders numbered them. */
export function pgArgs(params: string[], args: unknown[]): unknown[] {
  if (params.some((p) => p !== '?')) {
    const o = args[0] as Record<string, unknown>;
    return params.map((p) => o[p]);
  }
  return args;
}
